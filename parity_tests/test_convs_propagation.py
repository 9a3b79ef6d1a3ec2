"""The propagation and spectral convs beyond the parity matrix (cases/convs_propagation.py, run
by test_convs_parity.py and test_geometric_parity.py): jit equals eager, the layers inside user
models converted with one ``from_torch`` call, the refused settings, each of PyG's quirks that the
ports mirror pinned by an input where dropping it would change the result, and training-mode
dropout replayed mask for mask against PyG."""
from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torch_geometric.nn as tnn

from testkit.devices import assert_bitwise_on_cpu
from torch2jax_ops import checked, dtypes
from torch2jax_ops.geometric import nn as gnn
from torch2jax_ops.geometric.utils import get_laplacian, get_laplacian_static
from torch2jax_ops.nn import UnsupportedModuleError, from_torch, named_arrays, state_dict
from torch2jax_ops.parity import compare_modules
from torch2jax_ops.parity.cases import convs_propagation as cases

CLASSES = ("SGConv", "TAGConv", "ChebConv", "APPNP", "GCN2Conv", "ARMAConv", "MixHopConv",
           "DNAConv", "LEConv", "ClusterGCNConv")
#: one variant per layer with its richest options
REPRESENTATIVES = ("SGConv-K3-no-self-loops-no-bias", "TAGConv", "ChebConv-lambda-max-batch",
                   "APPNP", "GCN2Conv-theta-unshared", "ARMAConv", "MixHopConv-powers-unordered",
                   "DNAConv-groups", "LEConv-bipartite", "ClusterGCNConv-no-self-loops")


def _jax(a):
    if isinstance(a, torch.Tensor):
        return jnp.asarray(a.detach().numpy())
    if isinstance(a, tuple):
        return tuple(_jax(v) for v in a)
    return a


def _np(a):
    return a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)


def _close(ours, theirs, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(_np(ours), _np(theirs), rtol=rtol, atol=atol)


def test_every_layer_is_exported_and_covered():
    assert set(CLASSES) <= set(gnn.conv.__all__) and set(CLASSES) <= set(gnn.__all__)
    labels = cases.layers()
    assert {label.split("-")[0] for label in labels} == set(CLASSES)
    for label in labels:  # the matrix holds both dtypes on at least two graphs
        assert len(cases.graphs_of(label)) >= 2


@pytest.mark.parametrize("label", list(cases.layers()))
def test_state_dict_names_match_pyg(label):
    layer, port, _ = cases.build_layer(label, "float32", "loops-and-repeats")
    assert sorted(state_dict(port)) == sorted(layer.state_dict())
    for name, value in layer.state_dict().items():
        assert tuple(state_dict(port)[name].shape) == tuple(value.shape), name


@pytest.mark.parametrize("label", REPRESENTATIVES)
def test_jit_equals_eager(label):
    layer, port, args = cases.build_layer(label, "float32", "loops-and-repeats")
    args = _jax(args)
    eager = port(*args)
    jitted = eqx.filter_jit(lambda m, *a: m(*a))(port, *args)
    _close(jitted, eager)
    _close(eager, layer(*cases.build_layer(label, "float32", "loops-and-repeats")[2]))


# ----------------------------------------------------------------- inside user models

class APPNPNet(torch.nn.Module):
    def __init__(self, f, c):
        super().__init__()
        self.lin1, self.lin2 = torch.nn.Linear(f, 16), torch.nn.Linear(16, c)
        self.prop = tnn.APPNP(K=5, alpha=0.1, dropout=0.2)

    def forward(self, x, edge_index, edge_weight):
        x = self.lin2(F.relu(self.lin1(x)))
        return F.log_softmax(self.prop(x, edge_index, edge_weight), dim=-1)


class GCNII(torch.nn.Module):
    def __init__(self, f, c, hidden=8, layers=3):
        super().__init__()
        self.lin_in, self.lin_out = torch.nn.Linear(f, hidden), torch.nn.Linear(hidden, c)
        self.convs = torch.nn.ModuleList(
            tnn.GCN2Conv(hidden, alpha=0.1, theta=0.5, layer=i + 1, shared_weights=i % 2 == 0)
            for i in range(layers))

    def forward(self, x, edge_index):
        x = x_0 = F.relu(self.lin_in(x))
        for conv in self.convs:
            x = F.relu(conv(x, x_0, edge_index))
        return self.lin_out(x)


class SpectralNet(torch.nn.Module):  # ChebConv + TAGConv + SGConv
    def __init__(self, f, c):
        super().__init__()
        self.cheb = tnn.ChebConv(f, 8, K=3)
        self.tag = tnn.TAGConv(8, 8, K=2)
        self.sg = tnn.SGConv(8, c, K=2)

    def forward(self, x, edge_index, edge_weight):
        x = F.elu(self.cheb(x, edge_index, edge_weight))
        x = F.relu(self.tag(x, edge_index, edge_weight))
        return self.sg(x, edge_index)


class ARMANet(torch.nn.Module):
    def __init__(self, f, c):
        super().__init__()
        self.conv1 = tnn.ARMAConv(f, 8, num_stacks=3, num_layers=2, shared_weights=True)
        self.conv2 = tnn.ARMAConv(8, c, num_stacks=2, num_layers=2, act=None)

    def forward(self, x, edge_index, edge_weight):
        return self.conv2(F.relu(self.conv1(x, edge_index, edge_weight)), edge_index, edge_weight)


class MixHopNet(torch.nn.Module):
    def __init__(self, f, c):
        super().__init__()
        self.conv = tnn.MixHopConv(f, 4, powers=[0, 1, 2])
        self.norm = torch.nn.LayerNorm(12)
        self.head = torch.nn.Linear(12, c)

    def forward(self, x, edge_index):
        return self.head(torch.tanh(self.norm(self.conv(x, edge_index))))


class DNANet(torch.nn.Module):  # as PyG's examples/dna.py: each layer sees the whole history
    def __init__(self, f, c, hidden=6, layers=2):
        super().__init__()
        self.lin1 = torch.nn.Linear(f, hidden)
        self.convs = torch.nn.ModuleList(tnn.DNAConv(hidden, heads=2, groups=2)
                                         for _ in range(layers))
        self.lin2 = torch.nn.Linear(hidden, c)

    def forward(self, x, edge_index):
        x = F.relu(self.lin1(x))
        x_all = x.view(-1, 1, x.size(-1))
        for conv in self.convs:
            x = F.relu(conv(x_all, edge_index))
            x_all = torch.cat([x_all, x.view(-1, 1, x.size(-1))], dim=1)
        return self.lin2(x_all[:, -1])


class LocalNet(torch.nn.Module):  # LEConv + ClusterGCNConv, pooled per graph
    def __init__(self, f, c):
        super().__init__()
        self.le = tnn.LEConv(f, 8)
        self.cluster = tnn.ClusterGCNConv(8, c, diag_lambda=0.5)

    def forward(self, x, edge_index, edge_weight, batch):
        x = F.relu(self.le(x, edge_index, edge_weight))
        return tnn.global_mean_pool(self.cluster(x, edge_index), batch, 2)


USER_MODELS = {  # model -> inputs after x, edge_index
    "APPNPNet": (APPNPNet, ("edge_weight",)), "GCNII": (GCNII, ()),
    "SpectralNet": (SpectralNet, ("edge_weight",)), "ARMANet": (ARMANet, ("edge_weight",)),
    "MixHopNet": (MixHopNet, ()), "DNANet": (DNANet, ()),
    "LocalNet": (LocalNet, ("edge_weight", "batch")),
}


# every model in float32; two of them in float64 too (keeps the file fast)
USER_CASES = [(n, "float32") for n in USER_MODELS] + [("GCNII", "float64"), ("DNANet", "float64")]


@pytest.mark.parametrize("name, dtype", USER_CASES, ids=[f"{n}-{d}" for n, d in USER_CASES])
def test_user_model_converts_in_one_call(name, dtype):
    cls, inputs = USER_MODELS[name]
    torch.manual_seed(0)
    model = cases._perturbed(cls(cases.F_IN, 3), 2).to(getattr(torch, dtype))
    g = cases._graph("loops-and-repeats", dtype)
    g["batch"] = torch.arange(g["num_nodes"]) * 2 // g["num_nodes"]
    args = (g["x"], g["edge_index"]) + tuple(g[k] for k in inputs)
    with dtypes.x64(dtype == "float64"):
        port = from_torch(model, copy=True)
        result = compare_modules(model, port, *args, name=name)
    assert result.passed, str(result)


# --------------------------------------------------------------------- refused settings

def _x_ei():
    g = cases._graph("loops-and-repeats", "float32")
    return g["x"], g["edge_index"], g["edge_weight"]


@pytest.mark.parametrize("make", [
    lambda: tnn.APPNP(2, 0.1, cached=True),
    lambda: tnn.GCN2Conv(6, 0.1, cached=True), lambda: tnn.DNAConv(6, cached=True)],
    ids=["APPNP", "GCN2Conv", "DNAConv"])
def test_cached_layers(make):
    x, ei, w = _x_ei()
    layer = make().eval()
    if isinstance(layer, tnn.DNAConv):
        x = x.view(-1, 1, 6).repeat(1, 2, 1)
    args = (x, x, ei, w) if isinstance(layer, tnn.GCN2Conv) else (x, ei, w)
    port = from_torch(layer)  # cached=True, nothing cached yet: converts, recomputes each call
    first = layer(*args)
    _close(port(*_jax(args)), first)
    _close(layer(*args), port(*_jax(args)))  # PyG now replays its cache: same graph, same result
    with pytest.raises(UnsupportedModuleError, match="cached=True with a filled cache"):
        from_torch(layer)


def test_a_filled_sgconv_cache_is_kept_and_replayed():
    """SGConv(cached=True) after one forward returns lin(cache) for any input (no gradient
    to x): the port keeps the cache as a constant and does the same; an x of another node
    count is an error (PyG would return the cached graph's rows)."""
    x, ei, w = _x_ei()
    layer = tnn.SGConv(6, 4, K=2, cached=True).eval()
    empty_port = from_torch(layer)
    first = layer(x, ei, w)
    port = from_torch(layer)
    assert "cached_x" not in dict(named_arrays(port))          # a constant, not a parameter
    other = (x * 3.0, ei[:, :2], None)
    _close(port(*_jax(other)), layer(*other))                  # PyG replays its cache
    _close(port(*_jax(other)), first)
    assert not np.allclose(np.asarray(empty_port(*_jax(other))), first.detach().numpy())
    with pytest.raises(ValueError, match="cache .* graph of 8 nodes, but `x` has 3"):
        port(jnp.zeros((3, 6)), jnp.asarray(ei.numpy()))


@pytest.mark.parametrize("make, why", [
    (lambda: tnn.LEConv(6, 4, flow="target_to_source"), "flow='target_to_source'"),
    (lambda: tnn.LEConv(6, 4, aggr=tnn.aggr.LSTMAggregation(4, 4)), "aggr="),
    (lambda: tnn.TAGConv(6, 4, decomposed_layers=2), "decomposed_layers=2"),
    (lambda: tnn.ARMAConv(-1, 4), "not sized yet"),
], ids=["flow", "aggr-lstm", "decomposed-layers", "lazy"])  # (a lambda act is replayed now)
def test_refused_settings_name_the_setting(make, why):
    with pytest.raises(UnsupportedModuleError, match=why.replace("(", r"\(")):
        from_torch(make())


def test_call_time_errors_match_pyg():
    x, ei, w = _x_ei()
    xj, eij = _jax(x), _jax(ei)
    # APPNP edge dropout needs edge weights (PyG asserts)
    layer = tnn.APPNP(2, 0.1, dropout=0.5, normalize=False).train()
    with pytest.raises(AssertionError):
        layer(x, ei)
    with pytest.raises(ValueError, match="edge_weight"):
        from_torch(layer)(xj, eij, key=jax.random.key(0))
    # DNAConv: normalize=False needs edge_weight; x must be [N, L, C]
    layer = tnn.DNAConv(6, normalize=False).eval()
    with pytest.raises(AttributeError):
        layer(x.view(-1, 1, 6), ei)
    with pytest.raises(ValueError, match="edge_weight"):
        from_torch(layer)(xj.reshape(-1, 1, 6), eij)
    with pytest.raises(ValueError, match="num_layers"):
        from_torch(tnn.DNAConv(6))(xj, eij)
    # ClusterGCNConv without add_self_loops needs exactly N self-loops (torch broadcasting)
    layer = tnn.ClusterGCNConv(6, 4, add_self_loops=False).eval()
    with pytest.raises(RuntimeError, match="must match"):
        layer(x, ei)
    port = from_torch(layer)
    with pytest.raises(ValueError, match="exactly num_nodes=8 self-loops"):
        port(xj, eij)
    with pytest.raises(Exception, match="exactly num_nodes=8 self-loops"):
        checked(eqx.filter_jit(lambda m, a, b: m(a, b)))(port, xj, eij)
    # ChebConv's normalization, as PyG's get_laplacian asserts: when the port is built
    # (its call trusts it: an unknown value would be read as 'rw')
    with pytest.raises(ValueError, match=r"ChebConv: `normalization` must be None, 'sym' or"):
        dataclasses.replace(from_torch(tnn.ChebConv(6, 4, K=2)), normalization="both")
    # get_laplacian's edge count depends on the data: the static form under jit
    with pytest.raises(TypeError, match="get_laplacian_static"):
        jax.jit(lambda e: get_laplacian(e, num_nodes=8))(eij)
    # training-mode dropout without a key
    with pytest.raises(ValueError, match="key"):
        from_torch(tnn.APPNP(2, 0.1, dropout=0.5).train())(xj, eij)


# -------------------------------------------------------------------- PyG's quirks pinned

def test_get_laplacian_uses_out_degrees():
    """Degrees at the source (``gcn_norm`` uses the target's): visible on a directed graph."""
    from torch_geometric.utils import get_laplacian as t_laplacian

    g = cases._graph("erdos_renyi", "float64")
    ei, w, n = g["edge_index"], g["edge_weight"], g["num_nodes"]
    t_index, t_weight = t_laplacian(ei, w, "sym", num_nodes=n)
    with dtypes.x64(True):
        index, weight = get_laplacian(_jax(ei), _jax(w), "sym", num_nodes=n)
        _close(weight, t_weight, rtol=1e-12, atol=1e-14)
        np.testing.assert_array_equal(np.asarray(index), t_index.numpy())
        in_deg = np.bincount(ei[1].numpy(), weights=w.numpy(), minlength=n)
        d = np.where(in_deg > 0, in_deg, np.inf) ** -0.5
        e = ei.shape[1]
        with_in_degrees = -d[ei[0].numpy()] * w.numpy() * d[ei[1].numpy()]
        assert np.abs(with_in_degrees - np.asarray(weight[:e])).max() > 1e-2


def test_get_laplacian_counts_nodes_after_removing_loops():
    """``num_nodes=None``: a node that only has a self-loop (and the largest id) is not counted."""
    from torch_geometric.utils import get_laplacian as t_laplacian

    ei = torch.tensor([[0, 1, 2], [1, 0, 2]])
    t_index, t_weight = t_laplacian(ei, normalization="sym")
    index, weight = get_laplacian(_jax(ei), normalization="sym")
    assert t_index.shape[1] == 4  # 2 edges + 2 diagonal entries: node 2 is gone
    np.testing.assert_array_equal(np.asarray(index), t_index.numpy())
    _close(weight, t_weight)
    # the static form takes num_nodes from the caller: node 2 keeps its diagonal
    s_index, s_weight = jax.jit(lambda e: get_laplacian_static(e, normalization="sym",
                                                               num_nodes=3))(_jax(ei))
    assert s_index.shape == (2, 6) and float(s_weight[2]) == 0.0  # the loop is dropped


def _cheb(normalization, **call):
    torch.manual_seed(0)
    layer = cases._perturbed(tnn.ChebConv(6, 4, K=3, normalization=normalization), 1)
    return layer, from_torch(layer, copy=True)


def test_cheb_lambda_max_default_is_twice_the_largest_entry():
    """normalization=None: lambda_max=None means 2 * max degree, not 2 (nor the eigenvalue)."""
    x, ei, w = _x_ei()
    layer, port = _cheb(None)
    ours = port(*_jax((x, ei, w)))
    _close(ours, layer(x, ei, w), rtol=1e-5, atol=1e-5)
    other = port(*_jax((x, ei, w)), lambda_max=2.0)
    assert np.abs(np.asarray(ours) - np.asarray(other)).max() > 1e-2


def test_cheb_masks_plus_infinity_only():
    """lambda_max=0 on a graph without edges: 2 * 1 / 0 = inf -> 0 on the diagonal (then -1);
    without the mask the output would be infinite."""
    g = cases._graph("no-edges", "float32")
    x, ei = g["x"], g["edge_index"]
    layer, port = _cheb("sym")
    theirs = layer(x, ei, lambda_max=0.0)
    assert torch.isfinite(theirs).all()
    _close(port(*_jax((x, ei)), lambda_max=0.0), theirs)


def test_cheb_per_graph_lambda_max_is_read_at_the_source():
    layer, port, args = cases.build_layer("ChebConv-lambda-max-batch", "float32",
                                          "loops-and-repeats")
    _, ei, _, batch, lam = args
    assert (batch[ei[0]] != batch[ei[1]]).any()  # crossing edges: source != target graph
    _close(port(*_jax(args)), layer(*args), rtol=1e-5, atol=1e-5)


def test_cluster_gcn_pairs_loops_by_edge_order():
    """add_self_loops=False: the k-th loop in edge order gets deg_inv[k] (PyG's quirk)."""
    layer, port, (x, ei) = cases.build_layer("ClusterGCNConv-no-self-loops", "float32",
                                             "loops-and-repeats")
    n = x.shape[0]
    ordered = torch.cat([ei[:, ei[0] != ei[1]], torch.arange(n).repeat(2, 1)], dim=1)
    shuffled_out = port(*_jax((x, ei)))
    _close(shuffled_out, layer(x, ei))
    _close(port(*_jax((x, ordered))), layer(x, ordered))
    # the same graph, only the loops' order differs: the quirk changes the result
    assert np.abs(np.asarray(shuffled_out) - np.asarray(port(*_jax((x, ordered))))).max() > 1e-3


def test_gcn2_slices_a_longer_x0():
    layer, port, args = cases.build_layer("GCN2Conv-no-self-loops-longer-x0", "float32",
                                          "karate")
    assert args[1].shape[0] > args[0].shape[0]
    _close(port(*_jax(args)), layer(*args))


def test_appnp_adds_no_loops_without_normalize():
    """normalize=False skips gcn_norm entirely: add_self_loops=True then adds nothing."""
    x, ei, w = _x_ei()
    layer = tnn.APPNP(K=2, alpha=0.3, normalize=False, add_self_loops=True)
    port = from_torch(layer)
    _close(port(*_jax((x, ei, w))), layer(x, ei, w))
    loops = torch.arange(x.shape[0]).repeat(2, 1)
    with_loops = layer(x, torch.cat([ei, loops], 1), torch.cat([w, torch.ones(x.shape[0])]))
    assert (with_loops - layer(x, ei, w)).abs().max() > 1e-2


# ------------------------------------------------------ training-mode dropout, mask for mask

def _replay(monkeypatch, masks):
    """torch's F.dropout replaced by one that applies the port's masks in order."""
    masks = list(masks)

    def fake(input, p=0.5, training=True, inplace=False):
        if not training or p == 0:
            return input
        keep = torch.from_numpy(np.array(masks.pop(0)))
        assert tuple(keep.shape) == tuple(input.shape)
        return torch.where(keep, input / (1 - p), torch.zeros((), dtype=input.dtype))

    monkeypatch.setattr(torch.nn.functional, "dropout", fake)
    return masks


def _pyg_slots(mask, ei):
    """The port's E + N edge slots -> PyG's edges (non-loop edges in order, then N loops)."""
    e = ei.shape[1]
    nonloop = (ei[0] != ei[1]).numpy()
    return np.concatenate([np.asarray(mask[:e])[nonloop], np.asarray(mask[e:])], axis=0)


def test_appnp_edge_dropout_replays(monkeypatch):
    """PyG overwrites edge_weight with each hop's dropped-out weights: the masks compound
    (a fresh mask on the unmasked weights per hop would give another result)."""
    x, ei, w = _x_ei()
    p, hops, key = 0.4, 3, jax.random.key(3)
    layer = tnn.APPNP(K=hops, alpha=0.1, dropout=p).train()
    port = from_torch(layer)
    ours = port(*_jax((x, ei, w)), key=key)
    slots = ei.shape[1] + x.shape[0]
    masks = [_pyg_slots(jax.random.bernoulli(jax.random.fold_in(key, k), 1 - p, (slots,)), ei)
             for k in range(hops)]
    left = _replay(monkeypatch, list(masks))
    _close(ours, layer(x, ei, w))
    assert not left
    # an edge kept by the last mask but dropped by an earlier one: compounding shows
    assert (masks[-1] & ~np.logical_and.reduce(masks[:-1])).any()
    again = port(*_jax((x, ei, w)), key=key)
    # same key, same masks: the same bits on the CPU; a GPU's scatter-adds may sum them in
    # another order (1 ulp), float32's tolerance there
    assert_bitwise_on_cpu(again, ours)
    assert np.abs(np.asarray(port(*_jax((x, ei, w)), key=jax.random.key(4)))
                  - np.asarray(ours)).max() > 1e-3


def test_arma_root_dropout_replays(monkeypatch):
    x, ei, w = _x_ei()
    p, key = 0.3, jax.random.key(5)
    torch.manual_seed(0)
    layer = cases._perturbed(tnn.ARMAConv(6, 4, num_stacks=2, num_layers=3, dropout=p), 1).train()
    port = from_torch(layer, copy=True)
    ours = port(*_jax((x, ei, w)), key=key)
    masks = [jax.random.bernoulli(jax.random.fold_in(key, t), 1 - p, (1,) + tuple(x.shape))
             for t in range(3)]
    left = _replay(monkeypatch, masks)
    _close(ours, layer(x, ei, w))
    assert not left


def test_dna_attention_dropout_replays(monkeypatch):
    x, ei, w = _x_ei()
    p, key = 0.5, jax.random.key(7)
    torch.manual_seed(0)
    layer = cases._perturbed(tnn.DNAConv(6, heads=2, groups=2, dropout=p), 1).train()
    port = from_torch(layer, copy=True)
    history = torch.stack([x, 0.5 * x + 1, -x], dim=1)
    ours = port(*_jax((history, ei, w)), key=key)
    slots = ei.shape[1] + x.shape[0]
    mask = jax.random.bernoulli(key, 1 - p, (slots, 2, 1, 3))
    left = _replay(monkeypatch, [_pyg_slots(mask, ei)])
    _close(ours, layer(history, ei, w))
    assert not left
