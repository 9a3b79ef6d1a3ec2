"""The pooling layers beyond the parity matrix (torch2jax_ops/parity/cases/pools.py): TopKPooling,
SAGPooling, JumpingKnowledge, global_sort_pool, torch.nn.Embedding and PyG's lazy Linear --
jit vs eager, the static layout (kept first, padding after), padded inputs, user models
converted in one call, refused settings, and a test per PyG quirk the ports mirror."""
import dataclasses
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch_geometric.nn as tnn
from torch_geometric.nn import global_add_pool

from torch2jax_ops.parity.cases.geometric import _perturbed
from torch2jax_ops.parity.cases.pools import build_pool, pool_call, pool_graph, sort_inputs
from torch2jax_ops import _dtypes
from torch2jax_ops.geometric.nn.pool import (
    JumpingKnowledge,
    SAGPooling,
    TopKPooling,
    global_sort_pool,
)
from torch2jax_ops.nn import UnsupportedModuleError, from_torch, state_dict
from torch2jax_ops.parity import compare_modules


def jx(t):
    return None if t is None else jnp.asarray(t.detach().numpy())


def pyg_sort_pool(x, batch, k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tnn.global_sort_pool(x, batch, k)


def run_port(label, gname, dtype="float32", jit=False, tie_break=None):
    """(PyG's outputs, the port's outputs, N) for the case ``label`` on ``gname``."""
    pool = build_pool(label, dtype)
    args, kwargs = pool_call(label, gname, dtype)
    with torch.no_grad():
        ref = pool(*args)
    port = from_torch(pool)
    if tie_break is not None:
        port = dataclasses.replace(port, tie_break=tie_break)
    call = (lambda *a: port(*a, num_graphs=kwargs["num_graphs"]))
    if jit:
        call = jax.jit(call)
    return ref, call(*[jx(a) for a in args]), args[0].shape[0]


def assert_matches_pyg(ref, out, n):
    k, e = ref[0].shape[0], ref[1].shape[1]
    np.testing.assert_allclose(np.asarray(out[0][:k]), ref[0].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(out[1][:, :e]), ref[1].numpy())
    if ref[2] is not None:
        np.testing.assert_allclose(np.asarray(out[2][:e]), ref[2].numpy(), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(out[3][:k]), ref[3].numpy())
    np.testing.assert_array_equal(np.asarray(out[4][:k]), ref[4].numpy())
    np.testing.assert_allclose(np.asarray(out[5][:k]), ref[5].numpy(), rtol=1e-5, atol=1e-7)


# ------------------------------------------------------------------ jit, layout, padding

@pytest.mark.parametrize("label,gname", [("TopKPooling", "ties"), ("SAGPooling", "fake"),
                                         ("TopKPooling-min-score", "ratio25"),
                                         ("TopKPooling-no-batch", "karate")])
@pytest.mark.parametrize("tie_break", ["torch", "stable"])
def test_jit_equals_eager(label, gname, tie_break):
    _, eager, _ = run_port(label, gname, tie_break=tie_break)
    _, jitted, _ = run_port(label, gname, jit=True, tie_break=tie_break)
    for a, b in zip(eager, jitted):  # indices exactly; values up to XLA's fusion rounding
        if a is None:
            continue
        # without num_graphs (no batch) eager calls return PyG's sizes, jit the static layout
        b = b[tuple(slice(0, d) for d in a.shape)]
        if jnp.issubdtype(a.dtype, jnp.integer):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        else:
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)


def test_static_layout_kept_first_padding_after():
    ref, out, n = run_port("TopKPooling", "fake")
    x, ei, ea, batch, perm, score = (np.asarray(o) for o in out)
    k, e, b = ref[0].shape[0], ref[1].shape[1], int(ref[3].max()) + 1
    assert x.shape[0] == perm.shape[0] == batch.shape[0] == score.shape[0] == n
    assert (perm[k:] == n).all() and (batch[k:] == b).all()
    assert (x[k:] == 0).all() and (score[k:] == 0).all()
    assert (ei[:, e:] == n).all() and (ea[e:] == 0).all()
    assert int((perm < n).sum()) == k and int((ei[0] < n).sum()) == e
    assert_matches_pyg(ref, out, n)


def test_padded_input_matches_unpadded_pyg():
    """Padding nodes (graph id B, zero rows) and dropped edges (N, N) are never kept."""
    g = pool_graph("fake", "float32")
    pool = build_pool("TopKPooling", "float32")
    with torch.no_grad():
        ref = pool(g["x"], g["edge_index"], g["edge_attr"], g["batch"])
    n, b, pad = g["x"].shape[0], g["num_graphs"], 7
    x = jnp.concatenate([jx(g["x"]), jnp.zeros((pad, g["x"].shape[1]))])
    batch = jnp.concatenate([jx(g["batch"]).astype(jnp.int32), jnp.full((pad,), b, jnp.int32)])
    ei = jnp.concatenate([jx(g["edge_index"]).astype(jnp.int32),
                          jnp.full((2, 5), n + pad, jnp.int32)], axis=1)
    ea = jnp.concatenate([jx(g["edge_attr"]), jnp.ones((5, g["edge_attr"].shape[1]))])
    out = jax.jit(lambda *a: from_torch(pool)(*a, num_graphs=b))(x, ei, ea, batch)
    assert_matches_pyg(ref, out, n + pad)


def test_hierarchical_pooling_stacks_on_its_own_outputs():
    """TopKPooling then SAGPooling on the static outputs equals PyG's two layers."""
    g = pool_graph("fake", "float32")
    p1, p2 = build_pool("TopKPooling", "float32"), build_pool("SAGPooling", "float32")
    args = (g["x"], g["edge_index"], g["edge_attr"], g["batch"])
    with torch.no_grad():
        ref = p2(*p1(*args)[:4])
    b = g["num_graphs"]

    @jax.jit
    def ours(*a):
        return from_torch(p2)(*from_torch(p1)(*a, num_graphs=b)[:4], num_graphs=b)
    assert_matches_pyg(ref, ours(*[jx(a) for a in args]), g["x"].shape[0])


def test_jit_without_num_graphs_names_it():
    g = pool_graph("fake", "float32")
    port = from_torch(build_pool("TopKPooling", "float32"))
    with pytest.raises(ValueError, match="num_graphs"):
        jax.jit(lambda x, ei, b: port(x, ei, None, b))(jx(g["x"]), jx(g["edge_index"]),
                                                       jx(g["batch"]))


def test_state_dict_names_match_pyg():
    for label in ("TopKPooling", "SAGPooling", "SAGPooling-gat-min-score"):
        pool = build_pool(label, "float32")
        assert sorted(state_dict(from_torch(pool))) == sorted(pool.state_dict())
    jk = tnn.JumpingKnowledge("lstm", 4, 3)
    assert list(state_dict(from_torch(jk))) == list(jk.state_dict())
    emb = torch.nn.Embedding(5, 3, padding_idx=1)
    assert list(state_dict(from_torch(emb))) == list(emb.state_dict())


# ------------------------------------------------------------------ quirks, pinned

def test_ties_follow_torchs_unstable_cpu_sort():
    """40 nodes with 3 distinct rows: torch's introsort orders the tied scores; "stable"
    (ties by position) picks a different order, so this input pins the replay."""
    ref, exact, n = run_port("TopKPooling", "ties", jit=True)
    assert_matches_pyg(ref, exact, n)
    _, stable, _ = run_port("TopKPooling", "ties", tie_break="stable")
    k = ref[0].shape[0]
    assert not np.array_equal(np.asarray(stable[4][:k]), ref[4].numpy())


@pytest.mark.parametrize("dtype,kept", [("float32", 5 + 16 + 1), ("float64", 5 + 15 + 1)])
def test_k_is_computed_in_the_scores_dtype(dtype, kept):
    """ceil(0.6 * 25): 16 in float32 (0.6f * 25 rounds up to 15.000001), 15 in float64."""
    with _dtypes.x64(dtype == "float64"):
        ref, out, n = run_port("TopKPooling-ratio-0.6", "ratio25", dtype)
    assert ref[0].shape[0] == kept == int((np.asarray(out[4]) < n).sum())
    assert_matches_pyg(ref, out, n)


def test_ratio_one_point_zero_keeps_one_node_per_graph():
    ref, out, n = run_port("TopKPooling-ratio-1.0", "fake")
    b = int(ref[3].max()) + 1
    assert ref[0].shape[0] == b == int((np.asarray(out[4]) < n).sum())


def test_min_score_keeps_in_node_order_not_score_order():
    ref, out, n = run_port("TopKPooling-min-score", "ratio25")
    perm = np.asarray(out[4])
    k = ref[0].shape[0]
    assert (np.diff(perm[:k]) > 0).all()
    assert_matches_pyg(ref, out, n)


def test_jumping_knowledge_max_ties_send_the_gradient_to_the_first_layer():
    a = torch.tensor([[1.0, 2.0], [3.0, -1.0]])
    xs = [a.clone().requires_grad_(), a.clone().requires_grad_(), (a - 5).requires_grad_()]
    tnn.JumpingKnowledge("max")(xs).sum().backward()
    port = from_torch(tnn.JumpingKnowledge("max"))
    grads = jax.grad(lambda ys: port(ys).sum())([jx(x) for x in xs])
    for t, j in zip(xs, grads):
        np.testing.assert_array_equal(np.asarray(j), t.grad.numpy())
    assert np.asarray(grads[0]).sum() == 4 and np.asarray(grads[1]).sum() == 0


def test_sort_pool_zeroes_entries_that_round_to_the_fill_value():
    x, batch, b = sort_inputs("fill-rounds", "float32")
    ref = pyg_sort_pool(x, batch, 6)
    out = np.asarray(global_sort_pool(jx(x), jx(batch), 6, size=b))
    np.testing.assert_array_equal(out, ref.numpy())
    assert (ref.numpy() == 0).any()  # the minima, zeroed by PyG's `batch_x == fill` mask


def test_sort_pool_ties_follow_torchs_sort():
    x, batch, b = sort_inputs("ties", "float32")
    ref = pyg_sort_pool(x, batch, 10).numpy()
    exact = jax.jit(lambda x, i: global_sort_pool(x, i, 10, size=b))(jx(x), jx(batch))
    np.testing.assert_array_equal(np.asarray(exact), ref)
    stable = global_sort_pool(jx(x), jx(batch), 10, size=b, tie_break="stable")
    assert not np.array_equal(np.asarray(stable), ref)


def test_sort_pool_jit_needs_size_and_equals_eager():
    x, batch, b = sort_inputs("fake", "float32")
    with pytest.raises(ValueError, match="size"):
        jax.jit(lambda x, i: global_sort_pool(x, i, 5))(jx(x), jx(batch))
    eager = global_sort_pool(jx(x), jx(batch), 5)
    for tb in ("torch", "stable"):
        jitted = jax.jit(lambda x, i, tb=tb: global_sort_pool(x, i, 5, size=b, tie_break=tb))(
            jx(x), jx(batch))
        np.testing.assert_array_equal(np.asarray(jitted), np.asarray(eager))
    x1, _, _ = sort_inputs("single", "float32")
    np.testing.assert_array_equal(np.asarray(global_sort_pool(jx(x1), None, 4)),
                                  pyg_sort_pool(x1, None, 4).numpy())


# ------------------------------------------------------------------ user models

class TopKNet(torch.nn.Module):
    """The brief's user model: conv -> TopKPooling -> global_mean_pool -> lin."""

    def __init__(self, c=5, hidden=8):
        super().__init__()
        self.conv = tnn.GraphConv(c, hidden)
        self.pool = tnn.TopKPooling(hidden, ratio=0.6)
        self.lin = torch.nn.Linear(hidden, 3)

    def forward(self, x, edge_index, batch=None, size: int = 1):
        x = self.conv(x, edge_index).relu()
        x, edge_index, _, batch, _, _ = self.pool(x, edge_index, None, batch)
        return self.lin(tnn.global_mean_pool(x, batch, size))


def test_user_model_with_topk_converts_in_one_call_and_jits():
    """One graph (batch=None): the pool needs no num_graphs under jit, its padding slots
    carry graph id 1, which global_mean_pool(size=1) drops."""
    torch.manual_seed(0)
    model = _perturbed(TopKNet(), 3)
    port = from_torch(model)
    assert type(port.pool) is TopKPooling
    g = pool_graph("karate", "float32")
    result = compare_modules(model, port, g["x"], g["edge_index"])
    assert result.passed, str(result)
    assert any(leaf.path == "grad pool.select.weight" for leaf in result.leaves)


class HierarchicalNet(torch.nn.Module):
    """PyG's proteins_topk_pool example, shrunk: two pools, readouts without `size`."""

    def __init__(self, c=5, hidden=8):
        super().__init__()
        self.conv1 = tnn.GraphConv(c, hidden)
        self.pool1 = tnn.TopKPooling(hidden, ratio=0.8)
        self.pool2 = tnn.SAGPooling(hidden, ratio=0.5)
        self.jk = tnn.JumpingKnowledge("max")
        self.emb = torch.nn.Embedding(4, hidden)

    def forward(self, x, edge_index, batch, graph_type):
        x = self.conv1(x, edge_index).relu()
        x, edge_index, _, batch, _, _ = self.pool1(x, edge_index, None, batch)
        x1 = tnn.global_mean_pool(x, batch)
        x, edge_index, _, batch, _, _ = self.pool2(x, edge_index, None, batch)
        x2 = tnn.global_max_pool(x, batch)
        return self.jk([x1, x2]) + self.emb(graph_type)


def test_hierarchical_user_model_runs_eagerly_with_pygs_sizes():
    """PyG's model cannot pass num_graphs to its pools: called eagerly, the port's pools
    give PyG's own sizes, so readouts without `size` and a second pool work as in torch."""
    torch.manual_seed(0)
    model = _perturbed(HierarchicalNet(), 3)
    port = from_torch(model)
    g = pool_graph("fake", "float32")
    graph_type = torch.tensor([3, 1, 1, 0])
    with torch.no_grad():
        ref = model(g["x"], g["edge_index"], g["batch"], graph_type)
    out = port(jx(g["x"]), jx(g["edge_index"]), jx(g["batch"]), jx(graph_type))
    np.testing.assert_allclose(np.asarray(out), ref.numpy(), rtol=1e-5, atol=1e-6)


def test_eager_call_without_num_graphs_gives_pygs_sizes():
    pool = build_pool("TopKPooling", "float32")
    g = pool_graph("fake", "float32")
    args = (g["x"], g["edge_index"], g["edge_attr"], g["batch"])
    with torch.no_grad():
        ref = pool(*args)
    out = from_torch(pool)(*[jx(a) for a in args])
    assert [tuple(o.shape) for o in out] == [tuple(r.shape) for r in ref]
    assert_matches_pyg(ref, out, g["x"].shape[0])


# ------------------------------------------------------------------ refusals

@pytest.mark.parametrize("make,match", [
    (lambda: tnn.TopKPooling(4, nonlinearity="softmax"), "softmax"),
    (lambda: tnn.TopKPooling(4, nonlinearity=lambda s: s * 2), "nonlinearity"),
    (lambda: tnn.SAGPooling(4, nonlinearity="softmax"), "softmax"),
    (lambda: tnn.JumpingKnowledge("LSTM", 4, 2), "lower-cased"),
    (lambda: torch.nn.Embedding(5, 3, max_norm=1.0), "max_norm"),
    (lambda: tnn.Linear(-1, 4), r"not sized yet \(`weight`\).*Run one forward in torch first"),
])
def test_refused_settings_say_why(make, match):
    with pytest.raises(UnsupportedModuleError, match=match):
        from_torch(make())


def test_functional_nonlinearity_converts():
    pool = _perturbed(tnn.TopKPooling(5, 0.5, nonlinearity=torch.sigmoid), 1)
    g = pool_graph("fake", "float32")
    args = (g["x"], g["edge_index"], None, g["batch"])
    with torch.no_grad():
        ref = pool(*args)
    assert_matches_pyg(ref, from_torch(pool)(*[jx(a) for a in args]), g["x"].shape[0])


def test_initialised_lazy_linear_converts():
    lin = tnn.Linear(-1, 4)
    x = torch.randn(6, 3)
    ref = lin(x)
    out = from_torch(lin)(jx(x))
    np.testing.assert_allclose(np.asarray(out), ref.detach().numpy(), rtol=1e-6, atol=1e-6)
    assert list(state_dict(from_torch(lin))) == list(lin.state_dict())


def test_embedding_ids_out_of_range_raise_and_jit_equals_eager():
    emb = from_torch(torch.nn.Embedding(5, 3, padding_idx=0, scale_grad_by_freq=True))
    with pytest.raises(IndexError, match="num_embeddings=5"):
        emb(jnp.array([0, 5]))
    with pytest.raises(IndexError, match="-1"):
        emb(jnp.array([-1, 2]))
    ids = jnp.array([[0, 1, 1], [4, 4, 4]])
    np.testing.assert_array_equal(np.asarray(eqx.filter_jit(emb)(ids)), np.asarray(emb(ids)))
    # under jit a bad id gives a zero row, and checked() reports it (the shared bounds check)
    from torch2jax_ops import checked
    with pytest.raises(Exception, match="outside \\[0, 5\\)"):
        checked(eqx.filter_jit(emb))(jnp.array([0, 7]))


def test_embedding_padding_row_gets_no_gradient():
    emb = torch.nn.Embedding(5, 3, padding_idx=2)
    port = from_torch(emb, copy=True)
    grad = jax.grad(lambda m: m(jnp.array([2, 2, 1])).sum())(port)
    assert (np.asarray(grad.weight[2]) == 0).all() and (np.asarray(grad.weight[1]) == 1).all()


def test_jumping_knowledge_jit_equals_eager():
    torch.manual_seed(0)
    port = from_torch(tnn.JumpingKnowledge("lstm", 4, 3))
    xs = [jnp.asarray(np.random.default_rng(i).standard_normal((7, 4)), jnp.float32)
          for i in range(3)]
    np.testing.assert_allclose(np.asarray(eqx.filter_jit(port)(xs)), np.asarray(port(xs)),
                               rtol=1e-6, atol=1e-6)
    for mode in ("cat", "max"):
        p = JumpingKnowledge(mode)
        np.testing.assert_array_equal(np.asarray(eqx.filter_jit(p)(xs)), np.asarray(p(xs)))


def test_ports_are_the_exported_classes():
    assert type(from_torch(tnn.TopKPooling(3))) is TopKPooling
    assert type(from_torch(tnn.SAGPooling(3))) is SAGPooling


class SortPoolNet(torch.nn.Module):
    """DGCNN's readout: global_sort_pool (through the fx mapping table) -> lin."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4 * 5, 2)

    def forward(self, x, batch):
        return self.lin(tnn.global_sort_pool(x, batch, 4))


def test_global_sort_pool_in_a_user_model():
    torch.manual_seed(0)
    model = SortPoolNet()
    x, batch, _ = sort_inputs("ties", "float32")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = model(x, batch)
    out = from_torch(model)(jx(x), jx(batch))
    np.testing.assert_allclose(np.asarray(out), ref.detach().numpy(), rtol=1e-5, atol=1e-6)


class _Ratio(torch.nn.Module):
    """colors_topk_pool.py's idiom: the share of nodes a pool keeps, read off its outputs."""

    def __init__(self, pool):
        super().__init__()
        self.pool = pool

    def forward(self, x, edge_index, batch):
        out, _, _, new_batch, perm, score = self.pool(x, edge_index, None, batch)
        ratio = out.size(0) / x.size(0)
        fewer = out.shape[0] - 1.0 + 0 * perm.size(0) + 0 * score.size()[0]
        pad = out.new_zeros(out.size(0))         # a shape: the static form's N rows
        return ratio, fewer, global_add_pool(out, new_batch).sum() + pad.sum()


@pytest.mark.parametrize("make", [
    lambda: tnn.TopKPooling(4, ratio=0.5),
    lambda: tnn.TopKPooling(4, min_score=0.2),
    lambda: tnn.SAGPooling(4, ratio=0.6)], ids=["topk-ratio", "topk-min-score", "sag"])
def test_a_pools_row_count_is_the_kept_count_under_jit(make):
    torch.manual_seed(0)
    x = torch.randn(9, 4)
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 0, 4, 5, 3, 7, 8, 6]])
    batch = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2])
    model = _Ratio(make()).eval()
    ratio, fewer, _ = model(x, edge_index, batch)
    assert ratio < 1.0 and fewer < 8.0          # the rule guarded: N / N would be 1.0
    for jit in (True, False):
        result = compare_modules(model, from_torch(model), x, edge_index, batch, jit=jit)
        assert result.passed, result


def test_a_tensor_computed_from_a_pooled_output_keeps_the_budget_rows():
    """Only the pool's own outputs count kept rows: relu(out) has the static N rows."""
    from torch2jax_ops.geometric import BatchVector

    class Derived(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.pool = tnn.TopKPooling(4, ratio=0.5)

        def forward(self, x, edge_index, batch):
            out = self.pool(x, edge_index, None, batch)[0]
            return torch.relu(out).size(0) + 0.0, out.size(0) + 0.0

    x = jnp.ones((6, 4))
    edge_index = jnp.asarray([[0, 1, 3, 4], [1, 2, 4, 5]])
    port = from_torch(Derived().eval())
    derived, kept = eqx.filter_jit(lambda m, a, e, b: m(a, e, b))(
        port, x, edge_index, BatchVector(jnp.asarray([0, 0, 0, 1, 1, 1]), 2))
    assert float(derived) == 6.0 and int(kept) == 4
