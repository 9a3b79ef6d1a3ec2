"""PyG's convs on a sparse ``adj_t`` and on ``EdgeIndex`` against the ports.

The graph: 6 nodes, 11 stored entries with values far from 1 (a layer that ignored
the values where PyG uses them, or used them where PyG does not, would differ), two
of them on the diagonal (GCN's sparse branch adds ``I`` on top of them; its
``edge_index`` branch keeps them: the rules give different numbers). Every conv is
compared on a torch sparse CSR and COO ``adj_t`` (forward, gradients w.r.t. ``x`` and
w.r.t. the stored values where PyG's reach them), in float32 and float64, eagerly and
under ``jax.jit``; ``torch_sparse.SparseTensor`` only where torch_sparse imports.
"""
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch_geometric
import torch_geometric.nn as pnn
from jax.experimental import sparse as jsparse
from torch_geometric import EdgeIndex as PyGEdgeIndex
from torch_geometric.utils import spmm as pyg_spmm

from testkit.pyg_fused import pyg
import torch2jax_ops.geometric as G
from torch2jax_ops import dtypes, to_jax
from torch2jax_ops.dlpack import register_tensor_type
from torch2jax_ops.geometric._core._adjacency import with_values
from torch2jax_ops.nn import from_torch

pytestmark = [pytest.mark.filterwarnings("ignore:Converting sparse tensor to CSR format"),
              pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta"),
              pytest.mark.filterwarnings("ignore:Sparse invariant checks")]

N = 6
ROWS = [0, 0, 1, 1, 2, 2, 3, 3, 4, 5, 5]  # adj_t's rows: the targets
COLS = [1, 2, 0, 1, 2, 3, 0, 4, 5, 0, 3]  # its columns: the sources
VALUES = [0.5, 2.0, 1.5, 2.5, 3.0, -1.0, 1.1, 0.7, 1.2, 2.0, 0.3]  # (1, 1) and (2, 2) diagonal
LAYOUTS = ["csr", "coo"]
DTYPES = ["float32", "float64"]


def tol(dtype):
    return (1e-5, 1e-5) if dtype == "float32" else (1e-9, 1e-9)


def adjacency(layout, dtype="float32", values=None, shape=(N, N), rows=ROWS, cols=COLS):
    """A fresh torch sparse adj_t and its values leaf (requires grad for CSR; a COO
    adj_t's values cannot: PyG's to_edge_index calls ``_coalesced_``, which has no
    derivative, so its leaf is None)."""
    tdt = dtypes.torch_dtype(dtype)
    vals = torch.tensor(VALUES if values is None else values, dtype=tdt)
    coo = torch.sparse_coo_tensor(torch.tensor([rows, cols]), vals, shape).coalesce()
    leaf = coo.values().detach().clone().requires_grad_(layout == "csr")
    if layout == "coo":
        return torch.sparse_coo_tensor(coo.indices(), leaf, shape, is_coalesced=True), None
    csr = coo.detach().to_sparse_csr()
    return torch.sparse_csr_tensor(csr.crow_indices(), csr.col_indices(), leaf, shape), leaf


def features(dtype, n=N, f=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, f, generator=g, dtype=dtypes.torch_dtype(dtype))


def edge_list():
    """The same graph as an edge_index (sources first)."""
    return torch.tensor([COLS, ROWS])


#: name -> (factory, whether PyG's gradient reaches the adj_t's values)
CORE = {
    "GCNConv": (lambda: pnn.GCNConv(8, 4), True),
    "GCNConv-improved": (lambda: pnn.GCNConv(8, 4, improved=True), True),
    "GCNConv-no-loops": (lambda: pnn.GCNConv(8, 4, add_self_loops=False), True),
    "GCNConv-raw": (lambda: pnn.GCNConv(8, 4, normalize=False, add_self_loops=False), True),
    "SAGEConv-mean": (lambda: pnn.SAGEConv(8, 4), True),
    "SAGEConv-max": (lambda: pnn.SAGEConv(8, 4, aggr="max"), True),
    "SAGEConv-sum": (lambda: pnn.SAGEConv(8, 4, aggr="sum", normalize=True), True),
    "SAGEConv-mul": (lambda: pnn.SAGEConv(8, 4, aggr="mul"), False),  # not fused: no values
    "GraphConv": (lambda: pnn.GraphConv(8, 4), True),
    "GraphConv-mean": (lambda: pnn.GraphConv(8, 4, aggr="mean"), True),
    "GINConv": (lambda: pnn.GINConv(torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(),
                                                        torch.nn.Linear(4, 4)),
                                    train_eps=True, eps=0.3), True),
    "GATConv": (lambda: pnn.GATConv(8, 4, heads=2), False),
    "GATConv-no-loops": (lambda: pnn.GATConv(8, 4, heads=2, add_self_loops=False), False),
    "GATv2Conv": (lambda: pnn.GATv2Conv(8, 4, heads=2), False),
    "TransformerConv": (lambda: pnn.TransformerConv(8, 4, heads=2, beta=True), False),
}


def build(factory, dtype, seed=0):
    torch.manual_seed(seed)
    layer = factory().to(dtypes.torch_dtype(dtype))
    return layer.eval()


def torch_run(layer, x, adj, leaf, weight):
    x = x.clone().requires_grad_()
    out = pyg(layer, x, adj)
    (out * weight).sum().backward()
    grad = None if leaf is None or leaf.grad is None else leaf.grad.numpy()
    return out.detach().numpy(), x.grad.numpy(), grad


def port_run(port, x, adj, weight, jit):
    def loss(xx, data):
        return (port(xx, with_values(adj, data)) * weight).sum()

    forward = jax.jit(lambda m, xx, a: m(xx, a)) if jit else (lambda m, xx, a: m(xx, a))
    grads = jax.jit(jax.grad(loss, argnums=(0, 1))) if jit else jax.grad(loss, argnums=(0, 1))
    out = forward(port, x, adj)
    g_x, g_values = grads(x, adj.data)
    return np.asarray(out), np.asarray(g_x), np.asarray(g_values)


def check_layer(factory, values_grad, layout, dtype, jit=False):
    with dtypes.x64(dtype == "float64"):
        layer = build(factory, dtype)
        x = features(dtype)
        adj, leaf = adjacency(layout, dtype)
        weight = torch.linspace(-1.0, 2.0, N * pyg(layer, x, adj).shape[-1],
                                dtype=x.dtype).reshape(N, -1)
        adj, leaf = adjacency(layout, dtype)
        want, want_gx, want_gv = torch_run(layer, x, adj, leaf, weight)
        if layout == "coo" and values_grad:
            # torch cannot differentiate a COO adj_t's values through PyG (_coalesced_ has no
            # derivative): take them from the CSR case, same entries, same (row-major) order
            csr, csr_leaf = adjacency("csr", dtype)
            want_gv = torch_run(layer, x, csr, csr_leaf, weight)[2]
        port = from_torch(layer)
        got, got_gx, got_gv = port_run(port, to_jax(x), to_jax(adj.detach()), to_jax(weight),
                                       jit)
        rtol, atol = tol(dtype)
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
        np.testing.assert_allclose(got_gx, want_gx, rtol=rtol, atol=atol)
        if values_grad:
            assert want_gv is not None and np.abs(want_gv).sum() > 0
            np.testing.assert_allclose(got_gv, want_gv, rtol=rtol, atol=atol)
        else:  # PyG never reads the values: no gradient reaches them
            assert want_gv is None or not np.any(want_gv)
            assert not np.any(got_gv)
    return got


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", list(CORE))
def test_conv_on_sparse_adj_t_matches_pyg(name, layout, dtype):
    factory, values_grad = CORE[name]
    check_layer(factory, values_grad, layout, dtype)


@pytest.mark.parametrize("name", ["GCNConv", "SAGEConv-max", "GraphConv", "GINConv", "GATConv",
                                  "GATv2Conv", "TransformerConv"])
def test_conv_on_sparse_adj_t_under_jit(name):
    factory, values_grad = CORE[name]
    check_layer(factory, values_grad, "csr", "float32", jit=True)


@pytest.mark.parametrize("name", ["GCNConv", "GCNConv-improved", "SAGEConv-mean", "GraphConv",
                                  "GINConv"])
def test_the_values_change_the_result(name):
    """The layers that read the values differ from the same matrix with all-ones values:
    the weighted case above really tests that they are used."""
    layer = build(CORE[name][0], "float32")
    port = from_torch(layer)
    x = to_jax(features("float32"))
    weighted = to_jax(adjacency("csr")[0].detach())
    ones = with_values(weighted, jnp.ones_like(weighted.data))
    assert not np.allclose(np.asarray(port(x, weighted)), np.asarray(port(x, ones)), atol=1e-3)


def test_gcn_self_loop_rule_of_the_sparse_branch():
    """PyG adds I on top of a diagonal entry for a sparse adj_t, and keeps the entry for an
    edge_index: the two differ on this graph, and the port follows each."""
    layer = build(CORE["GCNConv"][0], "float32")
    port = from_torch(layer)
    x = features("float32")
    adj = adjacency("csr")[0].detach()
    ei, ew = edge_list(), torch.tensor(VALUES)
    sparse_want = pyg(layer, x, adj).detach().numpy()
    list_want = pyg(layer, x, ei, ew).detach().numpy()
    assert not np.allclose(sparse_want, list_want, atol=1e-3)
    np.testing.assert_allclose(np.asarray(port(to_jax(x), to_jax(adj))), sparse_want,
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        np.asarray(port(to_jax(x), to_jax(ei, allow_downcast=True), to_jax(ew))), list_want,
        rtol=1e-5, atol=1e-5)


def test_gcn_ignores_edge_weight_with_a_sparse_adj_t():
    layer = build(CORE["GCNConv"][0], "float32")
    x, adj = features("float32"), adjacency("csr")[0].detach()
    w = torch.full((len(VALUES),), 7.0)
    want = pyg(layer, x, adj, w).detach().numpy()
    np.testing.assert_allclose(want, pyg(layer, x, adj).detach().numpy())
    got = from_torch(layer)(to_jax(x), to_jax(adj), to_jax(w))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


#: the other convs whose PyG version takes a sparse adj_t: name -> (factory, args builder)
FAMILY = {
    "AGNNConv": (lambda: pnn.AGNNConv(), lambda x, a: (x, a)),
    "APPNP": (lambda: pnn.APPNP(2, 0.1), lambda x, a: (x, a)),
    "APPNP-mean": (lambda: pnn.APPNP(2, 0.1, aggr="mean"), lambda x, a: (x, a)),
    "CGConv": (lambda: pnn.CGConv(8), lambda x, a: (x, a)),
    "ClusterGCNConv": (lambda: pnn.ClusterGCNConv(8, 4, diag_lambda=0.3), lambda x, a: (x, a)),
    "DNAConv": (lambda: pnn.DNAConv(8, 2), lambda x, a: (x.reshape(N, 1, 8), a)),
    "EdgeConv": (lambda: pnn.EdgeConv(torch.nn.Linear(16, 4), aggr="max"), lambda x, a: (x, a)),
    "FiLMConv": (lambda: pnn.FiLMConv(8, 4), lambda x, a: (x, a)),
    "GatedGraphConv": (lambda: pnn.GatedGraphConv(8, 2), lambda x, a: (x, a)),
    "GatedGraphConv-max": (lambda: pnn.GatedGraphConv(8, 2, aggr="max"), lambda x, a: (x, a)),
    "GCN2Conv": (lambda: pnn.GCN2Conv(8, 0.1, 0.5, 1), lambda x, a: (x, x, a)),
    "GENConv": (lambda: pnn.GENConv(8, 4), lambda x, a: (x, a)),
    "GeneralConv": (lambda: pnn.GeneralConv(8, 4, attention=True), lambda x, a: (x, a)),
    "LEConv": (lambda: pnn.LEConv(8, 4), lambda x, a: (x, a)),
    "MixHopConv": (lambda: pnn.MixHopConv(8, 4), lambda x, a: (x, a)),
    "PNAConv": (lambda: pnn.PNAConv(8, 4, ["mean", "max"], ["identity", "amplification"],
                                    torch.tensor([0, 1, 2, 3])), lambda x, a: (x, a)),
    "PointNetConv": (lambda: pnn.PointNetConv(torch.nn.Linear(11, 4)),
                     lambda x, a: (x, x[:, :3], a)),
    "ResGatedGraphConv": (lambda: pnn.ResGatedGraphConv(8, 4), lambda x, a: (x, a)),
    "SGConv": (lambda: pnn.SGConv(8, 4, K=2), lambda x, a: (x, a)),
    "SGConv-mean": (lambda: pnn.SGConv(8, 4, K=2, aggr="mean"), lambda x, a: (x, a)),
    "SuperGATConv": (lambda: pnn.SuperGATConv(8, 4, heads=2), lambda x, a: (x, a)),
    "TAGConv": (lambda: pnn.TAGConv(8, 4), lambda x, a: (x, a)),
    "TAGConv-raw": (lambda: pnn.TAGConv(8, 4, normalize=False), lambda x, a: (x, a)),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", list(FAMILY))
def test_other_convs_on_sparse_adj_t_match_pyg(name, layout):
    factory, args = FAMILY[name]
    layer = build(factory, "float32")
    x = features("float32")
    adj = adjacency(layout)[0].detach()
    xt = x.clone().requires_grad_()
    out = pyg(layer, *args(xt, adj))
    out = out[0] if isinstance(out, tuple) else out
    weight = torch.linspace(-1.0, 2.0, out.numel()).reshape(out.shape)
    (out * weight).sum().backward()
    port, a = from_torch(layer), to_jax(adj)

    def loss(xx):
        got = port(*[to_jax(t) if isinstance(t, torch.Tensor) else t for t in args(xx, a)])
        return ((got[0] if isinstance(got, tuple) else got) * to_jax(weight)).sum()

    def call(xx):
        got = port(*args(xx, a))
        return got[0] if isinstance(got, tuple) else got

    xj = to_jax(x)
    np.testing.assert_allclose(np.asarray(call(xj)), out.detach().numpy(), rtol=1e-5,
                               atol=1e-5)
    g = jax.grad(lambda xx: (call(xx) * to_jax(weight)).sum())(xj)
    np.testing.assert_allclose(np.asarray(g), xt.grad.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["GINEConv", "GATConv", "TransformerConv", "GENConv"])
def test_edge_attr_rows_follow_the_stored_entries(name):
    """PyG reads edge_attr per stored entry, in the adj_t's storage order (CSR: row-major)."""
    factory = {"GINEConv": lambda: pnn.GINEConv(torch.nn.Linear(8, 4), edge_dim=3),
               "GATConv": lambda: pnn.GATConv(8, 4, heads=2, edge_dim=3, add_self_loops=False),
               "TransformerConv": lambda: pnn.TransformerConv(8, 4, heads=2, edge_dim=3),
               "GENConv": lambda: pnn.GENConv(8, 8, edge_dim=3)}[name]
    layer = build(factory, "float32")
    x, adj = features("float32"), adjacency("csr")[0].detach()
    edge_attr = features("float32", len(VALUES), 3, seed=2)
    want = pyg(layer, x, adj, edge_attr).detach().numpy()
    got = from_torch(layer)(to_jax(x), to_jax(adj), to_jax(edge_attr))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["ChebConv", "ARMAConv", "RGCNConv"])
def test_convs_pyg_cannot_run_on_a_sparse_adj_t_refuse_it(name):
    layer = {"ChebConv": lambda: pnn.ChebConv(8, 4, 2), "ARMAConv": lambda: pnn.ARMAConv(8, 4),
             "RGCNConv": lambda: pnn.RGCNConv(8, 4, 2)}[name]()
    port = from_torch(layer)
    adj = to_jax(adjacency("csr")[0].detach())
    with pytest.raises((ValueError, TypeError), match="sparse"):
        if name == "RGCNConv":
            port(to_jax(features("float32")), adj, jnp.zeros(len(VALUES), jnp.int32))
        else:
            port(to_jax(features("float32")), adj)


# ------------------------------------------------------------------ storage details

def test_repeated_coo_entries_are_summed_where_pyg_coalesces():
    """An uncoalesced COO adj_t with (3, 4) stored twice (0.7 + 0.25): where PyG coalesces
    (spmm's CSR conversion, the loops GAT adds) the port sums the copies first, so SAGEConv's
    mean counts one entry and GATConv attends to one edge; the sums of GCN, GraphConv and GIN
    are the same either way. PyG's own result on such a tensor depends on its code path (its
    to_edge_index flags the tensor coalesced in place, after which torch's CSR conversion keeps
    the copies apart), so the reference is PyG on the coalesced tensor."""
    x = features("float32")
    indices = torch.tensor([ROWS + [3], COLS + [4]])
    repeated = torch.sparse_coo_tensor(indices, torch.tensor(VALUES + [0.25]), (N, N))
    a = to_jax(repeated)
    assert isinstance(a, jsparse.BCOO) and not a.unique_indices
    coalesced = torch.sparse_coo_tensor(indices, torch.tensor(VALUES + [0.25]), (N, N)).coalesce()
    assert coalesced.values().numel() == len(VALUES)
    for name in ["GCNConv", "GraphConv", "SAGEConv-mean", "SAGEConv-max", "GATConv",
                 "GINConv"]:
        layer = build(CORE[name][0], "float32")
        want = pyg(layer, x, coalesced).detach().numpy()
        got = np.asarray(from_torch(layer)(to_jax(x), a))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)
    # kept apart, the copies would count twice in the mean: the rule changes the result (a
    # false unique_indices promise is what keeps them apart)
    sage = build(CORE["SAGEConv-mean"][0], "float32")
    spread = jsparse.BCOO((a.data, a.indices), shape=a.shape, unique_indices=True)
    assert not np.allclose(np.asarray(from_torch(sage)(to_jax(x), spread)),
                           np.asarray(from_torch(sage)(to_jax(x), a)), atol=1e-3)


@pytest.mark.parametrize("name", ["GCNConv", "SAGEConv-mean", "GATConv"])
def test_padding_slots_reach_no_node(name):
    """JAX's padded matrices (fromdense(nse=k)) give the unpadded result."""
    layer = build(CORE[name][0], "float32")
    port = from_torch(layer)
    x = to_jax(features("float32"))
    dense = jnp.asarray(adjacency("coo")[0].detach().to_dense().numpy())
    want = np.asarray(port(x, jsparse.BCSR.fromdense(dense)))
    for padded in (jsparse.BCOO.fromdense(dense, nse=15), jsparse.BCSR.fromdense(dense, nse=15)):
        np.testing.assert_allclose(np.asarray(port(x, padded)), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["SAGEConv", "GraphConv", "GATConv", "TransformerConv"])
def test_bipartite_adj_t_matches_pyg(name):
    """adj_t [N_dst=4, N_src=6] with (x_src, x_dst)."""
    rows = [0, 0, 1, 2, 2, 3, 3]
    cols = [1, 5, 0, 2, 4, 3, 0]
    vals = [0.5, 2.0, 1.5, 3.0, -1.0, 0.7, 1.2]
    factory = {"SAGEConv": lambda: pnn.SAGEConv((8, 5), 4),
               "GraphConv": lambda: pnn.GraphConv((8, 5), 4),
               "GATConv": lambda: pnn.GATConv((8, 5), 4, heads=2, add_self_loops=False),
               "TransformerConv": lambda: pnn.TransformerConv((8, 5), 4, heads=2)}[name]
    layer = build(factory, "float32")
    x_src, x_dst = features("float32", 6, 8), features("float32", 4, 5, seed=1)
    port = from_torch(layer)
    for layout in LAYOUTS:
        adj = adjacency(layout, values=vals, shape=(4, 6), rows=rows, cols=cols)[0].detach()
        want = pyg(layer, (x_src, x_dst), adj).detach().numpy()
        got = port((to_jax(x_src), to_jax(x_dst)), to_jax(adj))
        assert got.shape == (4, want.shape[1])
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def test_attention_weights_on_a_sparse_adj_t():
    x = features("float32")
    adj = adjacency("csr")[0].detach()
    gat = build(lambda: pnn.GATv2Conv(8, 4, heads=2), "float32")
    out, (matrix, alpha) = pyg(gat, x, adj, return_attention_weights=True)
    got, (got_matrix, got_alpha) = from_torch(gat)(to_jax(x), to_jax(adj),
                                                   return_attention_weights=True)
    assert isinstance(got_matrix, jsparse.BCOO) and got_matrix.shape == (N, N, 2)
    np.testing.assert_allclose(np.asarray(got), out.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(got_matrix.todense()),
                               matrix.detach().to_dense().numpy(), rtol=1e-5, atol=1e-6)
    tr = build(lambda: pnn.TransformerConv(8, 4, heads=2), "float32")
    out, (same, alpha) = pyg(tr, x, adj, return_attention_weights=True)
    got, (got_same, got_alpha) = from_torch(tr)(to_jax(x), to_jax(adj),
                                                return_attention_weights=True)
    assert same is adj and isinstance(got_same, jsparse.BCSR)
    np.testing.assert_allclose(np.asarray(got_alpha), alpha.detach().numpy(), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("name", ["GCNConv", "SAGEConv-mean", "GraphConv", "GINConv", "GATConv",
                                  "TransformerConv"])
def test_sparse_tensor_adj_t(name):
    """A torch_sparse.SparseTensor goes over as the torch sparse tensor it converts to. PyG's
    SparseTensor branches differ from its torch-sparse ones on weights (SAGEConv and GINConv
    drop them) and diagonal entries (GCNConv's fill_diag replaces them): a graph without
    either gives one result for all (see the guide)."""
    sparse = pytest.importorskip("torch_sparse", reason="no torch_sparse: no SparseTensor")
    keep = [k for k, (r, c) in enumerate(zip(ROWS, COLS)) if r != c]
    adj = sparse.SparseTensor(row=torch.tensor([ROWS[k] for k in keep]),
                              col=torch.tensor([COLS[k] for k in keep]), sparse_sizes=(N, N))
    layer = build(CORE[name][0], "float32")
    x = features("float32")
    want = pyg(layer, x, adj).detach().numpy()
    for converted in (adj.to_torch_sparse_csr_tensor(), adj.to_torch_sparse_coo_tensor()):
        got = from_torch(layer)(to_jax(x), to_jax(converted))
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    # the SparseTensor itself: read with PyG's SparseTensor rules where the port has them
    # (parity_tests/test_sparse_tensor_parity.py), refused with the list elsewhere
    if name.split("-")[0] in ("GCNConv", "SAGEConv", "GraphConv", "GINConv"):
        got = from_torch(layer)(to_jax(x), to_jax(adj))
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    else:
        with pytest.raises(TypeError, match=r"SparseTensor.*GCNConv, GCN2Conv, GINConv, SAGEConv"):
            from_torch(layer)(to_jax(x), to_jax(adj))


# ------------------------------------------------------------------ EdgeIndex

def pyg_edge_index(order):
    ei = PyGEdgeIndex(edge_list(), sparse_size=(N, N))
    return ei if order is None else ei.sort_by(order)[0]


EDGE_INDEX_CONVS = ["GCNConv", "GCNConv-raw", "SAGEConv-mean", "SAGEConv-max", "GraphConv",
                    "GraphConv-mean", "GINConv", "GATConv", "GATv2Conv", "TransformerConv"]


@pytest.mark.parametrize("order", ["col", "row", None])
@pytest.mark.parametrize("name", EDGE_INDEX_CONVS)
def test_conv_on_edge_index_matches_pyg(name, order):
    layer = build(CORE[name][0], "float32")
    x = features("float32")
    ei = pyg_edge_index(order)
    want = pyg(layer, x, ei).detach().numpy()
    ours = to_jax(ei, allow_downcast=True)
    assert isinstance(ours, G.EdgeIndex) and ours.sort_order == order
    port = from_torch(layer)
    got = jax.jit(lambda m, xx, e: m(xx, e))(port, to_jax(x), ours)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def sorted_scatters(fn, *args):
    text = str(jax.make_jaxpr(fn)(*args))
    return text.count("indices_are_sorted=True")


@pytest.mark.parametrize("name", ["SAGEConv-mean", "SAGEConv-max", "GraphConv", "GINConv",
                                  "GCNConv-raw"])
def test_edge_index_sorted_by_col_takes_the_sorted_path(name):
    port = from_torch(build(CORE[name][0], "float32"))
    x = to_jax(features("float32"))
    by_col = to_jax(pyg_edge_index("col"), allow_downcast=True)
    by_row = to_jax(pyg_edge_index("row"), allow_downcast=True)
    plain = G.EdgeIndex(by_col.index)  # the same sorted ids, no promise

    def call(m, xx, e):
        return m(xx, e)

    assert sorted_scatters(call, port, x, by_col) >= 1
    assert sorted_scatters(call, port, x, by_row) == 0
    assert sorted_scatters(call, port, x, plain) == 0
    assert sorted_scatters(call, port, x, by_col.index) == 0
    np.testing.assert_allclose(np.asarray(port(x, by_col)), np.asarray(port(x, by_row)),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(port(x, by_col)), np.asarray(port(x, plain)),
                               rtol=1e-6, atol=1e-6)


def test_csr_adj_t_aggregates_on_the_sorted_path():
    """A CSR adj_t's rows are sorted: the fused sum needs no unsorted scatter."""
    port = from_torch(build(CORE["GINConv"][0], "float32"))
    x = to_jax(features("float32"))
    csr, coo = to_jax(adjacency("csr")[0].detach()), to_jax(adjacency("coo")[0].detach())
    unsorted = jsparse.BCOO((coo.data, coo.indices), shape=coo.shape)
    assert sorted_scatters(lambda m, xx, a: m(xx, a), port, x, csr) >= 1
    assert sorted_scatters(lambda m, xx, a: m(xx, a), port, x, unsorted) == 0


def test_to_jax_keeps_the_edge_index_metadata():
    ei = PyGEdgeIndex(edge_list(), sparse_size=(N, N), sort_order=None, is_undirected=False)
    ei = ei.sort_by("col")[0]
    ours = to_jax(ei, allow_downcast=True)
    assert isinstance(ours, G.EdgeIndex)
    assert ours.sparse_size == (N, N) and ours.sort_order == "col" and not ours.is_undirected
    assert ours.is_sorted_by_col and not ours.is_sorted_by_row
    np.testing.assert_array_equal(np.asarray(ours.index), ei.as_tensor().numpy())
    with pytest.raises(TypeError, match="64-bit mode"):  # the index is an int64 tensor
        to_jax(ei)
    tree = __import__("torch2jax_ops").tree_to_jax({"edge_index": ei}, allow_downcast=True)
    assert isinstance(tree["edge_index"], G.EdgeIndex)
    # a pytree: jit and tree_map see the index as its one leaf
    leaves = jax.tree_util.tree_leaves(ours)
    assert len(leaves) == 1 and leaves[0].shape == (2, len(VALUES))


def test_registered_tensor_subclass_converts():
    class Tagged(torch.Tensor):
        pass

    path = f"{Tagged.__module__}.{Tagged.__qualname__}"
    register_tensor_type(path, lambda t, plain: ("tagged", plain(t.as_subclass(torch.Tensor))))
    tagged = torch.arange(4.0).as_subclass(Tagged)
    tag, array = to_jax(tagged)
    assert tag == "tagged" and isinstance(array, jax.Array)
    np.testing.assert_array_equal(np.asarray(array), [0.0, 1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="dotted class path"):
        register_tensor_type("EdgeIndex", lambda t, plain: t)


# ------------------------------------------------------------------ models and MessagePassing

class Net(torch.nn.Module):
    """A user's model on adj_t, as PyG's docs write one."""

    def __init__(self):
        super().__init__()
        self.conv1 = pnn.GCNConv(8, 16)
        self.conv2 = pnn.SAGEConv(16, 4)

    def forward(self, x, adj_t):
        return self.conv2(self.conv1(x, adj_t).relu(), adj_t)


def test_a_user_model_on_adj_t_converts_with_one_call():
    torch.manual_seed(0)
    model = Net().eval()
    port = from_torch(model)
    x = features("float32")
    for layout in LAYOUTS:
        adj = adjacency(layout)[0].detach()
        want = pyg(model, x, adj).detach().numpy()
        got = jax.jit(lambda m, xx, a: m(xx, a))(port, to_jax(x), to_jax(adj))
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
        ei = to_jax(pyg_edge_index("col"), allow_downcast=True)
        np.testing.assert_allclose(np.asarray(port(to_jax(x), ei)),
                                   pyg(model, x, pyg_edge_index("col")).detach().numpy(),
                                   rtol=1e-5, atol=1e-5)


class WeightedConv(torch_geometric.nn.MessagePassing):
    """A user's layer: weighted messages (edge_weight=None: PyG passes the values)."""

    def __init__(self, aggr="add"):
        super().__init__(aggr=aggr)
        self.lin = torch.nn.Linear(8, 4)

    def forward(self, x, edge_index):
        return self.propagate(edge_index, x=self.lin(x), edge_weight=None)

    def message(self, x_j, edge_weight):
        return x_j if edge_weight is None else edge_weight.view(-1, 1) * x_j


class FusedConv(WeightedConv):
    def message_and_aggregate(self, adj_t, x):
        return pyg_spmm(adj_t, x, reduce=self.aggr)


@pytest.mark.parametrize("aggr", ["add", "mean", "max", "mul"])
@pytest.mark.parametrize("cls", [WeightedConv, FusedConv])
def test_user_message_passing_on_adj_t_and_edge_index(cls, aggr):
    torch.manual_seed(0)
    layer = cls(aggr)
    port = from_torch(layer)
    x = features("float32")
    for layout in LAYOUTS:
        adj = adjacency(layout)[0].detach()
        np.testing.assert_allclose(np.asarray(port(to_jax(x), to_jax(adj))),
                                   pyg(layer, x, adj).detach().numpy(), rtol=1e-5, atol=1e-5)
    for order in ("col", None):
        ei = pyg_edge_index(order)
        ours = to_jax(ei, allow_downcast=True)
        np.testing.assert_allclose(np.asarray(port(to_jax(x), ours)),
                                   pyg(layer, x, ei).detach().numpy(), rtol=1e-5, atol=1e-5)
    if aggr != "mul":  # the traced port aggregates on the sorted path for a col-sorted index
        ours = to_jax(pyg_edge_index("col"), allow_downcast=True)
        assert sorted_scatters(lambda m, xx, e: m(xx, e), port, to_jax(x), ours) >= 1


class JaxWeighted(G.nn.MessagePassing):
    """The same layer written on the equinox base."""
    weight: jax.Array
    aggr: str = eqx.field(static=True, default="add")

    def __call__(self, x, edge_index):
        return self.propagate(edge_index, x=x @ self.weight.T, edge_weight=None)

    def message(self, x_j, edge_weight):
        return x_j if edge_weight is None else edge_weight.reshape(-1, 1) * x_j


class JaxFused(JaxWeighted):
    def message_and_aggregate(self, adj_t, x):
        return G.utils.spmm(adj_t, x, reduce=self.aggr)


@pytest.mark.parametrize("aggr", ["add", "mean", "max"])
@pytest.mark.parametrize("cls", [JaxWeighted, JaxFused])
def test_equinox_message_passing_on_adj_t_and_edge_index(cls, aggr):
    torch.manual_seed(0)
    ref = (FusedConv if cls is JaxFused else WeightedConv)(aggr)
    ref.lin.bias.data.zero_()
    layer = cls(to_jax(ref.lin.weight.detach()), aggr)
    x = features("float32")
    for layout in LAYOUTS:
        adj = adjacency(layout)[0].detach()
        got = jax.jit(lambda m, xx, a: m(xx, a))(layer, to_jax(x), to_jax(adj))
        np.testing.assert_allclose(np.asarray(got), pyg(ref, x, adj).detach().numpy(), rtol=1e-5,
                                   atol=1e-5)
    for order in ("col", "row", None):
        ei = pyg_edge_index(order)
        ours = to_jax(ei, allow_downcast=True)
        np.testing.assert_allclose(np.asarray(layer(to_jax(x), ours)),
                                   pyg(ref, x, ei).detach().numpy(), rtol=1e-5, atol=1e-5)
        count = sorted_scatters(lambda m, xx, e: m(xx, e), layer, to_jax(x), ours)
        assert (count >= 1) == (order == "col")


def test_equinox_message_passing_sees_pygs_arguments_on_adj_t():
    seen = {}

    class Spy(G.nn.MessagePassing):
        def __call__(self, x, adj):
            return self.propagate(adj, x=x, edge_weight=None)

        def message(self, x_j, edge_weight, edge_index, adj_t, edge_index_i, edge_index_j):
            seen.update(edge_index=edge_index, adj_t=adj_t, i=edge_index_i, j=edge_index_j,
                        w=edge_weight)
            return x_j

    adj = to_jax(adjacency("csr")[0].detach())
    Spy()(to_jax(features("float32")), adj)
    assert seen["edge_index"] is None and seen["adj_t"] is adj
    np.testing.assert_array_equal(np.asarray(seen["i"]), ROWS)  # CSR: row-major, as PyG's
    np.testing.assert_array_equal(np.asarray(seen["j"]), COLS)
    np.testing.assert_allclose(np.asarray(seen["w"]), VALUES)


# ------------------------------------------------------------------ errors

def test_errors_name_the_argument():
    x = to_jax(features("float32"))
    gcn = from_torch(build(CORE["GCNConv"][0], "float32"))
    sage = from_torch(build(CORE["SAGEConv-mean"][0], "float32"))
    batched = jsparse.BCOO.fromdense(jnp.ones((2, N, N)), n_batch=1)
    with pytest.raises(ValueError, match=r"`edge_index` must be a 2-D sparse adj_t .* 1 batch"):
        gcn(x, batched)
    with pytest.raises(ValueError, match=r"`edge_index` must be a 2-D sparse adj_t .* 1 dense"):
        gcn(x, jsparse.BCOO.fromdense(jnp.ones((N, N, 3)), n_dense=1))
    adj = to_jax(adjacency("csr")[0].detach())
    with pytest.raises(ValueError, match=r"`edge_index` is a sparse adj_t of shape \(6, 6\).*"
                                         r"`x` \(the sources\) must have 6 rows, got 5"):
        sage(x[:5], adj)
    wide = jsparse.BCSR.fromdense(jnp.ones((4, N)))
    with pytest.raises(ValueError, match=r"`edge_index` must be a square adj_t \[N, N\].*"
                                         r"\(4, 6\)"):
        gcn(x, wide)
    with pytest.raises(ValueError, match=r"non-square adj_t of shape \(4, 6\).*pass a pair"):
        sage(x, wide)
    with pytest.raises(TypeError, match=r"`edge_index` is a sparse matrix \(BCSR\).*"
                                        r"to_edge_index"):
        G.utils.remove_self_loops(adj)
    gat = from_torch(build(lambda: pnn.GATConv(8, 4, edge_dim=2), "float32"))
    with pytest.raises(ValueError, match="`edge_attr` with a sparse adj_t and add_self_loops"):
        gat(x, adj, jnp.ones((len(VALUES), 2)))

    class Reverse(G.nn.MessagePassing):
        flow = "target_to_source"

        def __call__(self, x, adj):
            return self.propagate(adj, x=x)

    with pytest.raises(ValueError, match="target_to_source.*transposed"):
        Reverse()(x, adj)


def test_edge_index_errors():
    with pytest.raises(ValueError, match="sort_order='col' but `index\\[1\\]` is not sorted"):
        G.EdgeIndex(jnp.array([[0, 1], [1, 0]]), sort_order="col")
    with pytest.raises(ValueError, match="`sort_order` must be 'row', 'col' or None"):
        G.EdgeIndex(jnp.array([[0, 1], [1, 0]]), sort_order="target")
    with pytest.raises(IndexError, match="sparse_size says num_cols=2"):
        G.EdgeIndex(jnp.array([[0, 1], [1, 2]]), sparse_size=(3, 2))
    with pytest.raises(ValueError, match=r"`index` must have shape \[2, num_edges\]"):
        G.EdgeIndex(jnp.zeros((3, 4), jnp.int32))
    sage = from_torch(build(CORE["SAGEConv-mean"][0], "float32"))
    ei = G.EdgeIndex(jnp.array([[0, 1], [1, 0]]), sparse_size=(5, 5))
    with pytest.raises(ValueError, match=r"`edge_index` is an EdgeIndex with sparse_size "
                                         r"\(5, 5\).*6 rows"):
        sage(to_jax(features("float32")), ei)


def test_egconv_on_a_sparse_adj_t_is_refused_not_wrong():
    """EGConv's forward normalises a torch sparse adj_t in a branch the trace does not take;
    the port computed un-normalised sums (output off by 2.5) without an error. It refuses."""
    from torch2jax_ops.nn import UnsupportedModuleError

    torch.manual_seed(0)
    layer = pnn.EGConv(4, 4, aggregators=["symnorm"], num_heads=2, num_bases=2).eval()
    port = from_torch(layer)
    adj = torch.sparse_coo_tensor(torch.tensor([ROWS, COLS]), torch.tensor(VALUES),
                                  (N, N)).to_sparse_csr()
    x = torch.randn(N, 4)
    with pytest.raises(UnsupportedModuleError, match="EGConv with a sparse adj_t is not ported"):
        port(to_jax(x), to_jax(adj))
    edge_index = torch.tensor([COLS, ROWS])
    expected = layer(x, edge_index).detach().numpy()
    np.testing.assert_allclose(np.asarray(port(to_jax(x), to_jax(edge_index, allow_downcast=True))),
                               expected, rtol=1e-5, atol=1e-5)
