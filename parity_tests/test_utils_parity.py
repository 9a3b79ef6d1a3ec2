"""PyG's graph utilities vs the real PyG: the matrix of section "utils"
(torch2jax_ops/parity/cases/utils.py, also run by the parity report), plus what a matrix
of deterministic comparisons cannot say: the random functions against PyG with
the same draws (torch.rand patched to JAX's uniforms) and in distribution, the
static forms under jit, and the utilities inside a user model ported with one
``from_torch`` call."""
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch_geometric.utils as U

from torch2jax_ops.geometric import utils as G
from torch2jax_ops import to_jax
from torch2jax_ops.parity import _suite as suite
from torch2jax_ops.parity import compare_arrays

CASES = suite.cases("utils")


def test_matrix_covers_every_utility():
    ops = {c.op for c in CASES}
    assert ops >= {"scatter", "segment", "sort_edge_index", "coalesce", "coalesce_static",
                   "to_undirected", "to_undirected_static", "subgraph", "subgraph_static",
                   "k_hop_subgraph", "k_hop_subgraph_static", "dropout_edge", "dropout_node",
                   "dropout_node_static", "negative_sampling", "negative_sampling_static",
                   "to_dense_adj"}
    for op in ops:
        dtypes = {c.dtype for c in CASES if c.op == op}
        assert dtypes == {"float32", "float64"}, (op, dtypes)
    for op in ("scatter", "coalesce", "sort_edge_index", "subgraph", "k_hop_subgraph",
               "to_dense_adj", "to_undirected", "segment", "negative_sampling"):
        graphs = {c.label.split("/")[1] for c in CASES if c.op == op}
        assert len(graphs) >= 2, (op, graphs)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_utility_matches_pyg(case):
    result = case.run()
    assert result.passed, str(result)
    assert result.leaves, "nothing was compared"


# ------------------------------------------------------------------ shared inputs

def _graph(n=12, e=60, seed=0, loops=True):
    rng = np.random.default_rng(seed)
    ei = rng.integers(0, n, (2, e))
    if loops:
        ei[:, :3] = [[2, 5, 7], [2, 5, 7]]
    ei[:, 3] = ei[:, 4]  # a repeated edge
    return torch.tensor(ei), jnp.asarray(ei, jnp.int32)


def _uniform_as_torch_rand(key):
    """torch.rand replaced by JAX's draws of ``key``: PyG then sees the port's randomness."""
    def rand(*size, device=None, **kwargs):
        shape = size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
        return torch.tensor(np.array(jax.random.uniform(key, tuple(shape))))
    return mock.patch("torch.rand", rand)


# ------------------------------------------------------ dropout: same draws, exact

@pytest.mark.parametrize("force_undirected", [False, True])
@pytest.mark.parametrize("p", [0.2, 0.7])
def test_dropout_edge_equals_pyg_given_the_same_draws(p, force_undirected):
    t_ei, ei = _graph()
    for seed in range(3):
        key = jax.random.key(seed)
        with _uniform_as_torch_rand(key):
            t_out, t_second = U.dropout_edge(t_ei, p, force_undirected)
        out, second = G.dropout_edge(ei, p, force_undirected, key=key)
        assert out.tolist() == t_out.tolist()
        assert second.tolist() == t_second.tolist()  # a mask, or (undirected) kept ids twice
        static, mask = jax.jit(lambda e, k: G.dropout_edge_static(
            e, p, force_undirected, num_nodes=12, key=k))(ei, key)
        keep = np.tile(np.asarray(mask), 2) if force_undirected else np.asarray(mask)
        assert static[:, keep].tolist() == t_out.tolist()
        assert bool((static[:, ~keep] == 12).all())


def test_dropout_edge_force_undirected_quirks_pinned():
    """PyG drops every row > col edge, returns kept ids (not a mask) and a loop twice."""
    t_ei, ei = _graph()
    out, ids = G.dropout_edge(ei, 0.1, True, key=jax.random.key(3))
    half = out.shape[1] // 2
    assert bool((out[0, :half] <= out[1, :half]).all())
    assert out[:, half:].tolist() == out[::-1, :half].tolist()
    assert ids.dtype != jnp.bool_ and ids.shape == (out.shape[1],)
    loops = int((out[0] == out[1]).sum())
    assert loops and loops == 2 * int((out[0, :half] == out[1, :half]).sum())


@pytest.mark.parametrize("relabel", [False, True])
def test_dropout_node_equals_pyg_given_the_same_draws(relabel):
    t_ei, ei = _graph()
    for seed in range(3):
        key = jax.random.key(seed)
        with _uniform_as_torch_rand(key):
            expected = U.dropout_node(t_ei, 0.4, 12, relabel_nodes=relabel)
        got = G.dropout_node(ei, 0.4, 12, relabel_nodes=relabel, key=key)
        for a, b in zip(got, expected):
            assert a.tolist() == b.tolist()
        static, edge_mask, node_mask = jax.jit(lambda e, k: G.dropout_node_static(
            e, 0.4, 12, relabel_nodes=relabel, key=k))(ei, key)
        assert static[:, edge_mask].tolist() == expected[0].tolist()
        assert node_mask.tolist() == expected[2].tolist()


def test_dropout_rates_match_pyg_in_distribution():
    n, e, p = 400, 20000, 0.3
    rng = np.random.default_rng(0)
    t_ei = torch.tensor(rng.integers(0, n, (2, e)))
    ei = jnp.asarray(t_ei.numpy(), jnp.int32)
    torch.manual_seed(0)
    theirs = U.dropout_edge(t_ei, p)[1].float().mean().item()
    ours = float(G.dropout_edge(ei, p, key=jax.random.key(0))[1].mean())
    sigma = (p * (1 - p) / e) ** 0.5
    assert abs(ours - (1 - p)) < 4 * sigma and abs(theirs - (1 - p)) < 4 * sigma
    kept = np.mean([float(G.dropout_node(ei, p, n, key=jax.random.key(s))[2].mean())
                    for s in range(20)])
    assert abs(kept - (1 - p)) < 4 * (p * (1 - p) / (20 * n)) ** 0.5


# ------------------------------------------------------------ negative sampling

def _check_negatives(neg, ei, n, self_loops=False):
    pairs = [tuple(c) for c in np.asarray(neg).T.tolist()]
    existing = set(map(tuple, np.asarray(ei).T.tolist()))
    assert len(set(pairs)) == len(pairs), "repeated pair"
    assert not set(pairs) & existing, "an existing edge was sampled"
    if not self_loops:
        assert all(a != b for a, b in pairs)
    assert all(0 <= a < n for a, _ in pairs)


@pytest.mark.parametrize("method", ["sparse", "dense"])
def test_negative_sampling_structure_matches_pyg(method):
    t_ei, ei = _graph(n=30, e=80)
    for k in (10, 0.5, None):
        theirs = U.negative_sampling(t_ei, 30, k, method)
        ours = G.negative_sampling(ei, 30, k, method, key=jax.random.key(1))
        assert ours.shape == theirs.shape  # k (int), int(k * E) (float), E (None)
        _check_negatives(ours, ei, 30)
        _check_negatives(theirs.numpy(), ei, 30)
    undirected = G.negative_sampling(ei, 30, 11, method, True, key=jax.random.key(2))
    assert undirected.shape == U.negative_sampling(t_ei, 30, 11, method, True).shape == (2, 10)
    assert bool((undirected[0, :5] < undirected[1, :5]).all())
    assert undirected[:, 5:].tolist() == undirected[::-1, :5].tolist()
    bipartite = G.negative_sampling(ei, (30, 31), 400, key=jax.random.key(3))
    assert bipartite.shape == U.negative_sampling(t_ei, (30, 31), 400).shape
    _check_negatives(bipartite, ei, 30, self_loops=True)
    assert any(a == b for a, b in np.asarray(bipartite).T.tolist())  # allowed when bipartite


def test_negative_sampling_is_uniform_like_pyg():
    t_ei, ei = _graph(n=9, e=20, loops=False)
    draws = 300
    ours = jax.jit(jax.vmap(lambda k: G.negative_sampling_static(ei, 9, 4, key=k)))(
        jax.random.split(jax.random.key(0), draws))
    counts: dict = {}
    for sample in np.asarray(ours):
        for pair in map(tuple, sample.T.tolist()):
            counts[pair] = counts.get(pair, 0) + 1
    negatives = {(i, j) for i in range(9) for j in range(9) if i != j} - set(
        map(tuple, np.asarray(ei).T.tolist()))
    assert set(counts) == negatives
    expected = draws * 4 / len(negatives)
    chi2 = sum((c - expected) ** 2 / expected for c in counts.values())
    assert chi2 < 2 * len(negatives)  # dof ~ len(negatives); a skew would be far above
    torch.manual_seed(0)
    theirs = [tuple(p) for _ in range(draws)
              for p in U.negative_sampling(t_ei, 9, 4).T.tolist()]
    assert set(theirs) <= negatives


def test_negative_sampling_of_a_complete_graph_is_empty_like_pyg():
    full = torch.tensor([[i, j] for i in range(4) for j in range(4) if i != j]).T
    assert U.negative_sampling(full, 4).shape == (2, 0)
    ours = G.negative_sampling(jnp.asarray(full.numpy()), 4, key=jax.random.key(0))
    assert ours.shape == (2, 0)
    static = G.negative_sampling_static(jnp.asarray(full.numpy()), 4, key=jax.random.key(0))
    assert static.shape == (2, 12) and bool((static == 4).all())


# --------------------------------------------------------------- jit == eager

def test_static_forms_under_jit_equal_eager():
    _, ei = _graph()
    w = jnp.linspace(0.1, 2.0, ei.shape[1])
    mask = jnp.arange(12) % 2 == 0
    key = jax.random.key(0)
    calls = {
        "sort_edge_index": lambda e, w: G.sort_edge_index(e, w, 12),
        "coalesce_static": lambda e, w: G.coalesce_static(e, w, 12, "max"),
        "to_undirected_static": lambda e, w: G.to_undirected_static(e, w, 12, "mean"),
        "subgraph_static": lambda e, w: G.subgraph_static(mask, e, w, True, 12),
        "k_hop_subgraph_static": lambda e, w: G.k_hop_subgraph_static([1, 2], 2, e, True, 12),
        "dropout_edge_static": lambda e, w: G.dropout_edge_static(e, 0.5, True, num_nodes=12,
                                                                  key=key),
        "dropout_node_static": lambda e, w: G.dropout_node_static(e, 0.5, 12, key=key),
        "negative_sampling_static": lambda e, w: G.negative_sampling_static(e, 12, 7, key=key),
        "to_dense_adj": lambda e, w: G.to_dense_adj(e, None, w, 12, 1),
        "scatter": lambda e, w: G.scatter(w, e[1], 0, 12, "amax"),
        "segment": lambda e, w: G.segment(w, jnp.array([0, 5, 5, 60]), "mean"),
    }
    for name, fn in calls.items():
        eager, jitted = fn(ei, w), jax.jit(fn)(ei, w)
        for a, b in zip(jax.tree_util.tree_leaves(eager), jax.tree_util.tree_leaves(jitted)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, err_msg=name)


def test_coalesce_static_gradients_match_pyg_under_jit():
    t_ei, ei = _graph()
    t_w = torch.linspace(0.1, 2.0, t_ei.shape[1], requires_grad=True)
    U.coalesce(t_ei, t_w, 12, "max")[1].pow(2).sum().backward()

    def loss(w):
        _, attr = G.coalesce_static(ei, w, 12, "max")
        return (attr ** 2).sum()

    grad = jax.jit(jax.grad(loss))(jnp.asarray(t_w.detach().numpy()))
    np.testing.assert_allclose(grad, t_w.grad.numpy(), rtol=1e-6)


# -------------------------------------------------- inside a user model, one from_torch

class _Net(torch.nn.Module):
    """The utilities between layers, as a user writes them."""

    def __init__(self):
        super().__init__()
        from torch_geometric.nn import GCNConv
        self.conv1 = GCNConv(4, 8)
        self.conv2 = GCNConv(8, 8)
        self.lin = torch.nn.Linear(8, 3)

    def forward(self, x, edge_index, edge_weight):
        n = x.size(0)
        edge_index, edge_weight = U.to_undirected(edge_index, edge_weight, n, reduce="mean")
        edge_index, edge_weight = U.coalesce(edge_index, edge_weight, n)
        edge_index, edge_weight = U.sort_edge_index(edge_index, edge_weight, n)
        h = self.conv1(x, edge_index, edge_weight).relu()
        sub, sub_weight = U.subgraph(x[:, 0] > 0, edge_index, edge_weight, num_nodes=n)
        h = self.conv2(h, sub, sub_weight).relu()
        kept, _ = U.dropout_edge(edge_index, p=0.3, training=self.training)
        h = self.conv2(h, kept).relu()
        adj = U.to_dense_adj(edge_index, edge_attr=edge_weight, max_num_nodes=n)[0]
        return self.lin(h) + adj.sum(-1, keepdim=True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_user_model_with_utilities_matches_pyg(dtype):
    from torch2jax_ops import dtypes
    from torch2jax_ops.nn import from_torch
    from torch2jax_ops.parity import compare_modules

    with dtypes.x64(dtype == "float64"):
        torch.manual_seed(0)
        model = _Net().to(getattr(torch, dtype)).eval()
        rng = np.random.default_rng(0)
        x = torch.tensor(rng.standard_normal((12, 4)), dtype=getattr(torch, dtype))
        t_ei, _ = _graph()
        w = torch.tensor(rng.uniform(0.2, 1.5, t_ei.shape[1]), dtype=getattr(torch, dtype))
        port = from_torch(model)
        result = compare_modules(model, port, x, t_ei, w)  # jit: the static forms
        assert result.passed, str(result)
        # under the user's own jit the indices are traced: the static forms, same numbers
        traced = jax.jit(lambda *a: port(*a))(
            *(to_jax(t, allow_downcast=True) for t in (x, t_ei, w)))
        assert compare_arrays(model(x, t_ei, w).detach(), traced, "out", "output").passed
        eager = compare_modules(model, port, x, t_ei, w, jit=False)  # the exact forms
        assert eager.passed, str(eager)


def test_user_model_training_mode_draws_from_the_port_key():
    from torch2jax_ops.nn import from_torch

    torch.manual_seed(0)
    model = _Net().train()
    port = from_torch(model)
    t_ei, ei = _graph()
    x = jnp.asarray(np.random.default_rng(0).standard_normal((12, 4)), jnp.float32)
    w = jnp.linspace(0.2, 1.5, ei.shape[1])
    with pytest.raises(ValueError, match="key"):
        port(x, ei, w)
    a = port(x, ei, w, key=jax.random.key(0))
    b = port(x, ei, w, key=jax.random.key(0))
    c = port(x, ei, w, key=jax.random.key(1))
    assert bool((a == b).all()) and not bool((a == c).all())
