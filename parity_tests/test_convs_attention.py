"""The attention and gating convs beyond the parity matrix (torch2jax_ops/parity/cases/convs_attention.py):
jit vs eager, user models converted in one call, refused settings and call errors, the
dropped slot, training-mode randomness, SuperGAT's attention loss, returned attention weights,
and a test per PyG quirk the ports mirror."""
import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torch_geometric.nn as tnn

from torch2jax_ops import dtypes
from torch2jax_ops.nn import UnsupportedModuleError, from_torch, state_dict
from torch2jax_ops.parity import assert_modules_parity, compare_arrays, compare_modules
from torch2jax_ops.parity.cases.convs_attention import layers
from torch2jax_ops.parity.cases.geometric import _perturbed, graph


def jx(t):
    return jnp.asarray(t.detach().numpy())


def small_graph(dtype="float32"):
    """loops-and-repeats: 8 nodes, self-loops, repeated edges, isolated nodes."""
    return graph("loops-and-repeats", dtype, features=6, edge_dim=3)


def to_jax_args(args):
    def one(a):
        if isinstance(a, tuple):
            return tuple(one(b) for b in a)
        return jx(a) if isinstance(a, torch.Tensor) else a
    return tuple(one(a) for a in args)


#: one representative per layer (label of convs_attention.layers())
REPRESENTATIVES = ["GATv2Conv-4-heads-edge-features", "TransformerConv-heads-edge-beta",
                   "SuperGATConv-MX", "AGNNConv", "GeneralConv-additive-edge-undirected-l2",
                   "ResGatedGraphConv-edge-tanh", "GatedGraphConv", "FiLMConv-3-relations"]


def built(label, dtype="float32", name="loops-and-repeats"):
    make, inputs = layers()[label]
    torch.manual_seed(0)
    layer = _perturbed(make(), 1).to(dtypes.torch_dtype(dtype))
    return layer, inputs(graph(name, dtype, features=6, edge_dim=3))


# ------------------------------------------------------------------ names and jit

def test_state_dict_names_match_pyg_for_every_variant():
    """Buffers included (GeneralConv's scaler, AGNNConv's beta buffer), both names of
    GATv2Conv's shared lin_l / lin_r, FiLMConv's ModuleLists, lin_skip without root_weight."""
    for label in layers():
        layer, _ = built(label)
        assert set(state_dict(from_torch(layer))) == set(layer.state_dict()), label


@pytest.mark.parametrize("label", REPRESENTATIVES)
def test_jit_equals_eager(label):
    layer, args = built(label)
    port = from_torch(layer)
    args = to_jax_args(args)
    eager = port(*args)
    jitted = eqx.filter_jit(lambda m, *a: m(*a))(port, *args)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(eager), rtol=2e-6, atol=2e-6)


# ------------------------------------------------------------- user models, one call

class AttentionNet(torch.nn.Module):
    """A user's model: GATv2 (edge features) -> ELU -> Transformer -> SuperGAT -> AGNN."""

    def __init__(self, features=6, edge_dim=3):
        super().__init__()
        self.conv1 = tnn.GATv2Conv(features, 4, heads=2, edge_dim=edge_dim)
        self.conv2 = tnn.TransformerConv(8, 4, heads=2, edge_dim=edge_dim, beta=True)
        self.conv3 = tnn.SuperGATConv(8, 3, heads=2, concat=False)
        self.prop = tnn.AGNNConv()
        self.head = torch.nn.Linear(3, 2)

    def forward(self, x, edge_index, edge_attr):
        h = F.elu(self.conv1(x, edge_index, edge_attr))
        h = F.relu(self.conv2(h, edge_index, edge_attr))
        h = self.prop(self.conv3(h, edge_index), edge_index)
        return self.head(h).log_softmax(dim=-1)


class GatingNet(torch.nn.Module):
    """A user's model: ResGated -> GatedGraph -> FiLM (relations) -> GeneralConv, residual."""

    def __init__(self, features=6):
        super().__init__()
        self.conv1 = tnn.ResGatedGraphConv(features, 8)
        self.conv2 = tnn.GatedGraphConv(8, num_layers=2)
        self.conv3 = tnn.FiLMConv(8, 8, num_relations=2)
        self.conv4 = tnn.GeneralConv(8, 4, heads=2, attention=True)

    def forward(self, x, edge_index, edge_type):
        h = torch.tanh(self.conv1(x, edge_index))
        h = h + self.conv2(h, edge_index)
        h = self.conv3(h, edge_index, edge_type)
        return self.conv4(F.relu(h), edge_index)


@pytest.mark.parametrize("net, dtype", [(AttentionNet, "float32"), (GatingNet, "float64")],
                         ids=["attention-float32", "gating-float64"])
def test_user_models_convert_in_one_call(net, dtype):
    """Outputs and the gradient of every parameter by name (the PyG convs' own included)."""
    g = small_graph(dtype)
    if net is AttentionNet:
        extra = g["edge_attr"]
    else:  # edge types of FiLMConv's two relations
        extra = torch.tensor(np.random.default_rng(2).integers(0, 2, g["edge_index"].shape[1]))
    with dtypes.x64(dtype == "float64"):
        torch.manual_seed(0)
        model = _perturbed(net(), 3).to(dtypes.torch_dtype(dtype))
        assert_modules_parity(model, from_torch(model), g["x"], g["edge_index"], extra)


# ------------------------------------------------------------------ refused settings

@pytest.mark.parametrize("make, match", [
    (lambda: tnn.GATv2Conv(6, 4, edge_dim=3, fill_value=torch.tensor([1.0, 2.0, 3.0])),
     "fill_value is a tensor"),
    (lambda: tnn.GatedGraphConv(8, 2, aggr=tnn.aggr.LSTMAggregation(8, 8)), "aggr="),
    (lambda: tnn.AGNNConv(flow="target_to_source"), "flow='target_to_source'"),
    (lambda: tnn.GeneralConv(6, 4, decomposed_layers=2), "decomposed_layers=2"),
    (lambda: tnn.ResGatedGraphConv(6, 4, act=None), "act=None"),
    (lambda: tnn.ResGatedGraphConv(6, 4, act=torch.special.erfcx), "act=.*without a JAX port"),
    (lambda: tnn.FiLMConv(6, 4, num_relations=0), "num_relations=0"),
], ids=["gatv2-fill-tensor", "gated-lstm-aggr", "agnn-flow", "general-decomposed",
        "resgated-act-none", "resgated-act-unmapped", "film-no-relations"])
def test_refused_settings_name_the_setting(make, match):
    with pytest.raises(UnsupportedModuleError, match=match):
        from_torch(make())


def test_activation_given_as_your_own_function_is_replayed():
    """act=lambda t: ... (torch code of your own) runs through the fx table (it was refused)."""
    torch.manual_seed(0)
    conv = tnn.ResGatedGraphConv(6, 4, act=lambda t: torch.tanh(t) * 2)
    g = small_graph()
    result = compare_modules(conv, from_torch(conv), g["x"], g["edge_index"])
    assert result.passed, str(result)


def test_call_errors_name_the_argument():
    g = small_graph()
    x, ei, ea = jx(g["x"]), jx(g["edge_index"]), jx(g["edge_attr"])
    gatv2 = from_torch(tnn.GATv2Conv(6, 4))
    with pytest.raises(ValueError, match="`edge_attr` was given but the layer has no edge_dim"):
        gatv2(x, ei, ea)
    with pytest.raises(ValueError, match=r"\(x_src, None\)"):
        gatv2((x, None), ei)
    with pytest.raises(ValueError, match="edge_attr` is required"):
        from_torch(tnn.TransformerConv(6, 4, edge_dim=3))(x, ei)
    with pytest.raises(ValueError, match="exactly when the layer has edge_dim"):
        from_torch(tnn.ResGatedGraphConv(6, 4, edge_dim=3))(x, ei)
    with pytest.raises(ValueError, match="not allowed to be larger"):
        from_torch(tnn.GatedGraphConv(4, 1))(x, ei)
    with pytest.raises(ValueError, match="`edge_type`"):
        from_torch(tnn.FiLMConv(6, 4, num_relations=2))(x, ei)
    with pytest.raises(TypeError, match="no bipartite form"):
        from_torch(tnn.SuperGATConv(6, 4))((x, x), ei)
    with pytest.raises(ValueError, match="needs `neg_edge_index`"):
        from_torch(tnn.SuperGATConv(6, 4).train())(x, ei, return_attention_loss=True)


# ------------------------------------------------------------------ the dropped slot

@pytest.mark.parametrize("label", REPRESENTATIVES)
def test_edges_with_a_dropped_end_change_nothing(label):
    """Padding edges (an end equal to num_nodes) are ignored, in the softmax too."""
    layer, args = built(label)
    port = from_torch(layer)
    args = to_jax_args(args)
    x, ei = args[0], args[1]
    n = x.shape[0]
    extra = jnp.array([[n, n, 0, 3], [2, 0, n, n]], ei.dtype)
    padded = [x, jnp.concatenate([ei, extra], axis=1)]
    for a in args[2:]:  # per-edge values: anything in the padding rows
        padded.append(jnp.concatenate([a, jnp.ones((4,) + a.shape[1:], a.dtype)]))
    np.testing.assert_allclose(np.asarray(port(*padded)), np.asarray(port(*args)),
                               rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------- training mode

@pytest.mark.parametrize("make", [
    lambda: tnn.GATv2Conv(6, 4, heads=2, dropout=0.5),
    lambda: tnn.TransformerConv(6, 4, heads=2, dropout=0.5),
    lambda: tnn.SuperGATConv(6, 4, heads=2, dropout=0.5),
], ids=["GATv2Conv", "TransformerConv", "SuperGATConv"])
def test_attention_dropout_needs_a_key_and_follows_it(make):
    torch.manual_seed(0)
    port = from_torch(make().train())
    g = small_graph()
    x, ei = jx(g["x"]), jx(g["edge_index"])
    with pytest.raises(ValueError, match="needs a PRNG key"):
        port(x, ei)
    a, b = port(x, ei, key=jax.random.key(0)), port(x, ei, key=jax.random.key(0))
    assert jnp.array_equal(a, b)
    assert not jnp.allclose(a, port(x, ei, key=jax.random.key(1)))


def test_returned_attention_gatv2_after_dropout_transformer_before():
    """PyG's GATv2Conv returns the dropped attention (edge_updater), TransformerConv the
    attention before dropout (its _alpha): the ports follow each."""
    g = small_graph()
    x, ei = jx(g["x"]), jx(g["edge_index"])
    n = x.shape[0]
    torch.manual_seed(0)
    gatv2 = from_torch(tnn.GATv2Conv(6, 4, heads=2, dropout=0.5).train())
    _, (edges, alpha) = gatv2(x, ei, return_attention_weights=True, key=jax.random.key(0))
    sums = jax.ops.segment_sum(alpha, jnp.where(edges[0] < n, edges[1], n), n + 1)[:n]
    assert not jnp.allclose(sums, 1.0, atol=1e-5)  # kept weights doubled, dropped ones 0
    transformer = from_torch(tnn.TransformerConv(6, 4, heads=2, dropout=0.5).train())
    _, (edges, alpha) = transformer(x, ei, return_attention_weights=True,
                                    key=jax.random.key(0))
    sums = jax.ops.segment_sum(alpha, edges[1], n)
    has_in = jax.ops.segment_sum(jnp.ones(edges.shape[1]), edges[1], n) > 0
    np.testing.assert_allclose(np.asarray(sums[has_in]), 1.0, rtol=1e-5)


# ------------------------------------------------------- returned attention weights

def test_gatv2_attention_weights_match_pyg_after_compaction():
    """PyG deletes the removed self-loops; the port keeps their slots (attention 0)."""
    g = small_graph("float64")
    torch.manual_seed(0)
    conv = _perturbed(tnn.GATv2Conv(6, 4, heads=2, edge_dim=3), 0).double()
    out, (edges, alpha) = conv(g["x"], g["edge_index"], g["edge_attr"],
                               return_attention_weights=True)
    with dtypes.x64(True):
        port = from_torch(conv)
        ours, (our_edges, our_alpha) = port(jx(g["x"]), jx(g["edge_index"]),
                                            jx(g["edge_attr"]), return_attention_weights=1)
        n = g["num_nodes"]
        kept = np.asarray(our_edges[0] < n)
        assert compare_arrays(out.detach(), ours).passed
        np.testing.assert_array_equal(np.asarray(our_edges)[:, kept], edges.numpy())
        assert compare_arrays(alpha.detach(), our_alpha[kept]).passed
        assert float(jnp.abs(our_alpha[~kept]).max()) == 0.0
        assert not isinstance(port(jx(g["x"]), jx(g["edge_index"]), jx(g["edge_attr"]),
                                   return_attention_weights=False), tuple)


def test_transformer_returns_attention_for_false_too():
    """PyG tests isinstance(return_attention_weights, bool): False returns the pair as well."""
    g = small_graph("float64")
    torch.manual_seed(0)
    conv = _perturbed(tnn.TransformerConv(6, 4, heads=3), 0).double()
    out, (edges, alpha) = conv(g["x"], g["edge_index"], return_attention_weights=False)
    with dtypes.x64(True):
        ours, (our_edges, our_alpha) = from_torch(conv)(jx(g["x"]), jx(g["edge_index"]),
                                                        return_attention_weights=False)
        assert compare_arrays(out.detach(), ours).passed
        np.testing.assert_array_equal(np.asarray(our_edges), edges.numpy())
        assert compare_arrays(alpha.detach(), our_alpha).passed


# ------------------------------------------------------- SuperGAT's attention loss

class SuperGATWithLoss(torch.nn.Module):
    """forward -> (output, conv.get_attention_loss()), as a PyG training step reads them."""

    def __init__(self, conv):
        super().__init__()
        self.conv = conv

    def forward(self, x, edge_index, neg_edge_index):
        out = self.conv(x, edge_index, neg_edge_index)
        return out, self.conv.get_attention_loss()


class PortWithLoss(eqx.Module):
    conv: eqx.Module

    def __call__(self, x, edge_index, neg_edge_index):
        return self.conv(x, edge_index, neg_edge_index, return_attention_loss=True)


@pytest.mark.parametrize("attention_type", ["MX", "SD"])
def test_supergat_attention_loss_matches_pyg_in_training_mode(attention_type):
    """dropout=0, edge_sample_ratio=1 and given negatives: PyG's training step is
    deterministic. Positives are the edges after the self-loop step (loops-and-repeats:
    existing loops removed, one per node added), so the loss pins that too."""
    g = small_graph("float64")
    neg = torch.tensor([[0, 4, 6, 7, 2], [4, 6, 1, 2, 7]])
    torch.manual_seed(0)
    conv = _perturbed(tnn.SuperGATConv(6, 4, heads=2, attention_type=attention_type), 0)
    model = SuperGATWithLoss(conv.double().train())
    with dtypes.x64(True):
        port = PortWithLoss(from_torch(conv))
        assert_modules_parity(model, port, g["x"], g["edge_index"], neg)
        assert port.conv.training
        loss = port.conv.get_attention_loss(jx(g["x"]), jx(g["edge_index"]), jx(neg))
        assert loss.shape == () and jnp.isfinite(loss)


def test_supergat_attention_loss_in_eval_mode_is_pygs_zero():
    g = small_graph()
    conv = tnn.SuperGATConv(6, 4).eval()
    conv(g["x"], g["edge_index"])
    theirs = conv.get_attention_loss()
    port = from_torch(conv)
    ours = port.get_attention_loss(jx(g["x"]), jx(g["edge_index"]))
    assert ours.shape == tuple(theirs.shape) == (1,) and int(ours[0]) == int(theirs[0]) == 0
    assert jnp.issubdtype(ours.dtype, jnp.integer)


def test_supergat_edge_sampling_draws_positives_with_the_key():
    g = small_graph()
    neg = jnp.array([[0, 4, 6], [4, 6, 1]])
    torch.manual_seed(0)
    port = from_torch(tnn.SuperGATConv(6, 4, edge_sample_ratio=0.5).train())
    x, ei = jx(g["x"]), jx(g["edge_index"])
    with pytest.raises(ValueError, match="needs a PRNG key"):
        port.get_attention_loss(x, ei, neg)
    losses = {float(port.get_attention_loss(x, ei, neg, key=jax.random.key(k))) for k in range(4)}
    assert len(losses) > 1 and all(np.isfinite(list(losses)))


# ---------------------------------------------------------------- quirks, pinned

def test_agnn_beta_buffer_gets_no_gradient():
    """requires_grad=False: PyG's beta is a buffer of ones (no gradient); a parameter else."""
    g = small_graph()
    x, ei = jx(g["x"]), jx(g["edge_index"])
    for requires_grad in (True, False):
        port = from_torch(tnn.AGNNConv(requires_grad=requires_grad))
        grads = eqx.filter_grad(lambda m: jnp.sum(m(x, ei) ** 3))(port)
        assert (float(jnp.abs(grads.beta).sum()) > 0) == requires_grad


def test_general_conv_lin_self_identity_only_for_equal_int_channels():
    """in_channels == out_channels as ints: lin_self is the identity; the same sizes as a
    tuple (bipartite form) compare unequal in PyG, so lin_self is a Linear."""
    assert "lin_self.weight" not in state_dict(from_torch(tnn.GeneralConv(6, 6)))
    torch.manual_seed(0)
    conv = _perturbed(tnn.GeneralConv((6, 6), 6), 0)
    assert "lin_self.weight" in state_dict(from_torch(conv))
    g = small_graph()
    assert_modules_parity(conv, from_torch(conv), g["x"], g["edge_index"])


def test_gatv2_shared_weights_stay_tied():
    conv = tnn.GATv2Conv(6, 4, share_weights=True)
    port = from_torch(conv)
    assert port.lin_l.weight is port.lin_r.weight
    assert set(state_dict(port)) >= {"lin_l.weight", "lin_r.weight"}


def test_film_edge_types_outside_the_relations_reach_nothing():
    """PyG masks edge_index by edge_type == r for r < R: other types are ignored."""
    g = small_graph("float64")
    e = g["edge_index"].shape[1]
    edge_type = torch.tensor(np.random.default_rng(1).integers(-1, 4, e))  # -1 and 3: none
    torch.manual_seed(0)
    conv = _perturbed(tnn.FiLMConv(6, 4, num_relations=3), 0).double()
    with dtypes.x64(True):
        assert_modules_parity(conv, from_torch(conv), g["x"], g["edge_index"], edge_type)


def test_gatv2_bipartite_with_more_sources_loops_the_first_targets():
    """PyG adds min(N_src, N_dst) loops: loop i joins source i and target i."""
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    conv = _perturbed(tnn.GATv2Conv((5, 4), 3, heads=2), 0)
    x_src = torch.tensor(rng.standard_normal((9, 5)), dtype=torch.float32)
    x_dst = torch.tensor(rng.standard_normal((4, 4)), dtype=torch.float32)
    edge_index = torch.stack([torch.tensor(rng.integers(0, 9, 15)),
                              torch.tensor(rng.integers(0, 4, 15))])
    edge_index[:, :2] = torch.tensor([[1, 2], [1, 2]])  # existing loops: removed
    assert_modules_parity(conv, from_torch(conv), (x_src, x_dst), edge_index)


@pytest.mark.parametrize("make, width", [
    (lambda: tnn.GATConv(6, 5, heads=3), 5),
    (lambda: tnn.GATConv(6, 5, heads=1), 5),
    (lambda: tnn.GATv2Conv(6, 5, heads=3), None),  # its scores need x_i + x_j per edge
    (lambda: tnn.TransformerConv(6, 5, heads=3), 5),
    (lambda: tnn.SuperGATConv(6, 5, heads=3, attention_type="MX"), 5),
    (lambda: tnn.SuperGATConv(6, 5, heads=3, attention_type="SD"), 5),
    (lambda: tnn.AGNNConv(), 6),
], ids=["GAT", "GAT-one-head", "GATv2", "Transformer", "SuperGAT-MX", "SuperGAT-SD", "AGNN"])
def test_attention_sums_run_the_cpu_kernel_pair(make, width):
    """On the CPU (one device, the kernel built), the attention convs whose messages are
    source rows take the kernel pair: the forward's weighted sum, its gradient (the same
    kernel and the edge dot), matched to PyG's value and gradient, and no ``[E, ..]``
    message rows gathered or scattered in the compiled gradient (GATv2Conv gathers them for
    its scores; migration_guide/layers.md, "Attention on the CPU")."""
    from testkit.devices import require_one_device

    require_one_device("the CPU kernel")
    torch.manual_seed(0)
    layer = make().eval()
    e = 90
    x = torch.randn(30, 6)
    edge_index = torch.randint(0, 30, (2, e))
    port = from_torch(layer)
    params, static = eqx.partition(port, eqx.is_array)
    xs, ei = jx(x), jnp.asarray(edge_index.numpy(), jnp.int32)

    def loss(p, x):
        return jnp.sum(jnp.sin(eqx.combine(p, static)(x, ei)))

    step = jax.jit(jax.grad(loss, argnums=(0, 1)))
    text = step.lower(params, xs).as_text()
    assert text.count("torch2jax_ops_weighted_gather_scatter_add") >= 2
    assert "torch2jax_ops_edge_dot" in text
    for line in text.splitlines() if width is not None else ():
        if "stablehlo.gather" in line or "stablehlo.scatter" in line:
            # per-edge scores ([E, H] or [E]) may be gathered; message rows [E, (H,) C] never
            for rows, last in re.findall(r"tensor<(\d+)(?:x\d+)*x(\d+)xf32>", line):
                assert not (int(rows) >= e and int(last) == width), line
    grads = step(params, xs)
    x.requires_grad_(True)
    torch.sin(layer(x, edge_index)).sum().backward()
    np.testing.assert_allclose(np.asarray(grads[1]), x.grad.numpy(), rtol=1e-4, atol=1e-5)
