"""PyG ports beyond the parity matrix: from_torch (zero-copy, errors, old checkpoints), padded
graph streams under jit against unpadded PyG, and random graphs from hypothesis."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch_geometric.nn as tnn
from hypothesis import given
from hypothesis import strategies as st

from torch2jax_ops import dtypes, geometric as G, shares_memory
from torch2jax_ops.geometric.nn import GATConv, GCNConv
from torch2jax_ops.nn import UnsupportedModuleError, from_torch, state_dict
from torch2jax_ops.parity import assert_modules_parity, compare_arrays
from torch2jax_ops.parity.cases.geometric import _perturbed


def jx(t):
    return jnp.asarray(t.detach().numpy())


def random_graph(rng, n, e, features=6):
    x = torch.tensor(rng.standard_normal((n, features)), dtype=torch.float32)
    edge_index = torch.tensor(rng.integers(0, n, (2, e)))
    return x, edge_index


# ------------------------------------------------------------------------------ from_torch

def test_from_torch_shares_weights_and_keeps_state_dict_names(on_host):
    mlp = tnn.MLP([6, 16, 4]).eval()
    port = from_torch(mlp)
    assert shares_memory(mlp.lins[0].weight, port.lins[0].weight)
    names = set(state_dict(port))
    assert names == set(mlp.state_dict())  # num_batches_tracked included
    assert_modules_parity(mlp, port, torch.randn(5, 6))
    copied = from_torch(mlp, copy=True)
    assert not shares_memory(mlp.lins[0].weight, copied.lins[0].weight)


def test_from_torch_converts_generic_module_trees():
    model = torch.nn.Sequential(
        torch.nn.Linear(6, 8), torch.nn.LayerNorm(8), torch.nn.GELU(), torch.nn.Dropout(0.3),
        torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8), torch.nn.LeakyReLU(0.2),
        torch.nn.Identity(),
        torch.nn.Linear(8, 3), torch.nn.Tanh())
    model(torch.randn(32, 6))  # moves the BatchNorm statistics
    model = _perturbed(model, 3)
    port = from_torch(model)
    assert_modules_parity(model, port, torch.randn(7, 6), rtol=1e-5, atol=1e-6)


def test_unsupported_submodule_is_named_by_its_path():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4),
                                torch.nn.Sequential(torch.nn.ReLU(),
                                                    torch.nn.PixelShuffle(2)))
    with pytest.raises(UnsupportedModuleError,
                       match=r"`1\.1` \(torch\.nn\.modules\.pixelshuffle\.PixelShuffle\)"):
        from_torch(model)
    with pytest.raises(UnsupportedModuleError, match="aggr"):
        from_torch(tnn.SAGEConv(4, 4, aggr="lstm"))


def test_training_mode_converts_and_dropout_asks_for_a_key():
    port = from_torch(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5)))
    x = jnp.ones((3, 4))
    with pytest.raises(ValueError, match=r"needs a PRNG key.*key=jax\.random\.key.*training mode"):
        port(x)
    from torch2jax_ops.nn import key_scope
    with key_scope(jax.random.key(0)):
        a = port(x)
    with key_scope(jax.random.key(0)):
        b = port(x)
    assert jnp.array_equal(a, b) and bool(jnp.any(a == 0))  # same key, same mask
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5)).eval()
    linear = model[0](torch.ones(3, 4)).detach().numpy()
    assert np.allclose(from_torch(model)(x), linear, atol=1e-6)  # eval: identity, no key


def test_float64_weights_need_x64_and_say_so():
    with pytest.raises(TypeError, match="jax_enable_x64"):
        from_torch(torch.nn.Linear(3, 2).double())
    with dtypes.x64(True):
        assert from_torch(torch.nn.Linear(3, 2).double()).weight.dtype == jnp.float64


# ------------------------------------------------------------------ checkpoints of old PyG

def test_pre_2_0_gcn_checkpoint_loads():
    conv = _perturbed(tnn.GCNConv(6, 4), 0)
    old = {"weight": conv.lin.weight.detach().T.contiguous(), "bias": conv.bias.detach()}
    port = GCNConv.from_state_dict(old)
    x, edge_index = random_graph(np.random.default_rng(0), 10, 30)
    assert_modules_parity(conv, port, x, edge_index)  # by today's names: lin.weight, bias


@pytest.mark.parametrize("layout", ["pyg-1.x: att_l/att_r, lin_l/lin_r",
                                    "pyg-2.0-2.5: lin_src/lin_dst"])
def test_old_gat_checkpoints_load(layout):
    conv = _perturbed(tnn.GATConv(6, 4, heads=3), 0)
    new = conv.state_dict()
    if layout.startswith("pyg-1"):
        old = {"att_l": new["att_src"], "att_r": new["att_dst"], "bias": new["bias"],
               "lin_l.weight": new["lin.weight"], "lin_r.weight": new["lin.weight"]}
    else:
        old = {"att_src": new["att_src"], "att_dst": new["att_dst"], "bias": new["bias"],
               "lin_src.weight": new["lin.weight"], "lin_dst.weight": new["lin.weight"]}
    port = GATConv.from_state_dict(old, heads=3)
    assert port.lin is not None and set(state_dict(port)) == set(new)
    x, edge_index = random_graph(np.random.default_rng(1), 10, 30)
    assert_modules_parity(conv, port, x, edge_index)
    with pytest.raises(ValueError, match="heads"):
        GATConv.from_state_dict(old, heads=2)


# ------------------------------------------------------------- padded streams under jit

def test_200_graphs_of_10_to_10000_nodes_compile_at_most_8_times():
    from torch2jax_ops.parity.cases.geometric import port, torch_models

    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    model = _perturbed(torch_models()["GCN"](16, 5), 1)
    jax_model = port(model)
    sizes = np.unique(np.round(10 ** rng.uniform(1, 4, 200)).astype(int))
    sizes = np.concatenate([[10, 10_000], rng.choice(sizes, 198)])
    ladder = G.BucketLadder.geometric(max_nodes=10_000, max_edges=40_000, levels=8)
    traces = []

    @jax.jit
    def forward(m, x, edge_index):
        traces.append(x.shape)
        return m(x, edge_index)

    worst = 0.0
    for n in sizes:
        x = torch.tensor(rng.standard_normal((n, 16)), dtype=torch.float32)
        edge_index = torch.tensor(rng.integers(0, n, (2, 4 * n)))
        expected = model(x, edge_index).detach()
        padded = G.pad_to_bucket(ladder, jx(x), jx(edge_index).astype(jnp.int32))
        leaf = compare_arrays(expected, forward(jax_model, padded.x, padded.edge_index)[:n])
        assert leaf.passed, leaf
        worst = max(worst, leaf.max_abs)
    assert len(sizes) == 200 and len(traces) <= 8, traces
    assert worst < 1e-5


# ------------------------------------------------------------------- random graphs

LAYERS = {
    "GCNConv": lambda: tnn.GCNConv(6, 5),
    "GraphConv": lambda: tnn.GraphConv(6, 5, aggr="max"),
    "SAGEConv": lambda: tnn.SAGEConv(6, 5, project=True),
    "GINConv": lambda: tnn.GINConv(tnn.MLP([6, 8, 5], norm=None), train_eps=True),
    "GATConv": lambda: tnn.GATConv(6, 5, heads=2),
}


@jax.jit
def _value_and_input_grad(port, x, edge_index, cotangent):
    out, vjp = jax.vjp(lambda v: port(v, edge_index), x)
    return out, vjp(cotangent)[0]


@pytest.mark.parametrize("name", sorted(LAYERS))
@given(n=st.integers(1, 30), density=st.floats(0, 4), seed=st.integers(0, 2**16))
def test_layers_match_pyg_on_random_graphs(name, n, density, seed):
    """Each random graph is padded to 32 nodes / 128 edges, so one compilation serves all."""
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    layer = _perturbed(LAYERS[name](), seed).double()
    x, edge_index = random_graph(rng, n, int(density * n))
    x = x.double().requires_grad_(True)
    out = layer(x, edge_index)
    cot = torch.tensor(rng.standard_normal(out.shape))
    (gx,) = torch.autograd.grad(out, x, cot)
    with dtypes.x64(True):
        padded = G.pad_graph(jx(x), jx(edge_index), num_nodes=32, num_edges=128)
        cotangent = jnp.zeros((32, out.shape[1])).at[:n].set(jnp.asarray(cot.numpy()))
        ours, ours_gx = _value_and_input_grad(from_torch(layer), padded.x, padded.edge_index,
                                              cotangent)
    for theirs, mine in ((out.detach(), ours[:n]), (gx, ours_gx[:n])):
        leaf = compare_arrays(theirs, mine, rtol=1e-9, atol=1e-10)
        assert leaf.passed, leaf


@pytest.mark.parametrize("n_src, n_dst", [(7, 4), (6, 6)])
def test_bipartite_gat_with_self_loops_matches_pyg(n_src, n_dst):
    """min(N_src, N_dst) loops, entering the softmax node-wise; fill "mean" from kept edges.
    (PyG itself fails with an IndexError when N_src < N_dst.)"""
    rng = np.random.default_rng(n_src)
    torch.manual_seed(0)
    conv = _perturbed(tnn.GATConv((5, 6), 3, heads=2, edge_dim=2), 0)
    x_src = torch.tensor(rng.standard_normal((n_src, 5)), dtype=torch.float32)
    x_dst = torch.tensor(rng.standard_normal((n_dst, 6)), dtype=torch.float32)
    edge_index = torch.stack([torch.tensor(rng.integers(0, n_src, 20)),
                              torch.tensor(rng.integers(0, n_dst, 20))])
    edge_index[:, :2] = torch.tensor([[1, 2], [1, 2]])  # existing loops: PyG removes them
    edge_attr = torch.tensor(rng.standard_normal((20, 2)), dtype=torch.float32)
    assert_modules_parity(conv, from_torch(conv), (x_src, x_dst), edge_index, edge_attr)
