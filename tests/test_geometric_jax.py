"""torch2jax_ops.geometric without torch: static shapes under jit, padding, and the error paths."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from torch2jax_ops import checked
from torch2jax_ops import geometric as G
from torch2jax_ops.geometric._core._edges import aggregate, gather
from torch2jax_ops.geometric.nn import GCNConv
from torch2jax_ops.nn import Linear

EDGES = jnp.array([[0, 1, 1, 2, 3, 3, 4], [1, 0, 1, 3, 3, 2, 0]], jnp.int32)
W = jnp.array([0.5, 1.0, 2.0, 1.5, 3.0, 0.7, 0.2])
X = jnp.arange(18.0).reshape(6, 3) / 10


def propagate(edge_index, weight, x, n):
    return aggregate(weight[:, None] * gather(x, edge_index[0]), edge_index[1], n)


def test_static_forms_give_the_eager_results_under_jit():
    eager = propagate(*G.gcn_norm(EDGES, W, 6, improved=True), X, 6)
    static = jax.jit(lambda e, w, x: propagate(
        *G.gcn_norm_static(e, w, num_nodes=6, improved=True), x, 6))(EDGES, W, X)
    np.testing.assert_allclose(static, eager, rtol=1e-6)
    kept, _ = G.remove_self_loops(EDGES, W)
    routed, _ = jax.jit(lambda e: G.remove_self_loops_static(e, num_nodes=6))(EDGES)
    np.testing.assert_array_equal(routed[:, np.asarray(EDGES[0] != EDGES[1])], kept)
    assert np.all(np.asarray(routed[:, np.asarray(EDGES[0] == EDGES[1])]) == 6)
    ones = jnp.ones(EDGES.shape[1])
    np.testing.assert_allclose(propagate(routed, ones, X, 6), propagate(kept, jnp.ones(5), X, 6))


def test_loops_keep_the_weight_of_an_existing_loop():
    index, weight = G.add_remaining_self_loops(EDGES, W, fill_value=9.0, num_nodes=6)
    loops = dict(zip(np.asarray(index[0, -6:]).tolist(), np.asarray(weight[-6:]).tolist()))
    assert loops == {0: 9.0, 1: 2.0, 2: 9.0, 3: 3.0, 4: 9.0, 5: 9.0}


def test_dropped_slot_is_ignored_by_every_op():
    routed = jnp.array([[0, 6, 2], [1, 6, 6]], jnp.int32)
    assert G.degree(routed[1], 6).tolist() == [0, 1, 0, 0, 0, 0]
    sm = G.softmax(jnp.array([1.0, 50.0, 2.0]), routed[1], num_nodes=6)
    assert sm.tolist() == [1.0, 0.0, 0.0]
    grad = jax.grad(lambda s: G.softmax(s, routed[1], num_nodes=6).sum())(jnp.array([1., 1e4, 2.]))
    assert np.all(np.isfinite(grad))


@pytest.mark.parametrize("call, argument", [
    (lambda b: G.global_add_pool(X, b), "`size`"),
    (lambda b: G.global_max_pool(X, b), "`size`"),
    (lambda b: G.degree(b), "`num_nodes`"),
    (lambda b: G.softmax(X, b), "`num_nodes`"),
    (lambda b: G.to_dense_batch(X, b), "`batch_size`"),
    (lambda b: G.to_dense_batch(X, b, batch_size=2), "`max_num_nodes`"),
    (lambda b: G.add_self_loops(jnp.stack([b, b])), "`num_nodes`"),
])
def test_missing_static_size_under_jit_names_the_argument(call, argument):
    batch = jnp.array([0, 0, 1, 1, 1, 1], jnp.int32)
    with pytest.raises(ValueError, match=argument):
        jax.jit(call)(batch)
    call(batch)  # eagerly the size is read off the data, as in PyG


@pytest.mark.parametrize("fn, static", [
    (lambda e: G.remove_self_loops(e), "remove_self_loops_static"),
    (lambda e: G.add_remaining_self_loops(e, num_nodes=6), "add_remaining_self_loops_static"),
    (lambda e: G.gcn_norm(e, num_nodes=6), "add_remaining_self_loops_static"),
])
def test_data_dependent_shapes_under_jit_point_to_the_static_form(fn, static):
    with pytest.raises(TypeError, match=static):
        jax.jit(fn)(EDGES)


def test_bad_indices_raise_and_never_wrap():
    with pytest.raises(IndexError, match="negative"):
        G.degree(jnp.array([0, -1]), 3)
    with pytest.raises(IndexError, match="only 3 nodes"):
        G.add_self_loops(jnp.array([[0, 1], [1, 4]]), num_nodes=3)
    conv = GCNConv(Linear(jnp.ones((2, 3))), None)
    with pytest.raises(IndexError, match="node id 9"):
        conv(X, jnp.array([[0, 9], [1, 2]]))
    with pytest.raises(ValueError, match=r"shape \[2, num_edges\]"):
        conv(X, jnp.array([0, 1, 2]))
    with pytest.raises(ValueError, match="one row per edge"):
        conv(X, EDGES, jnp.ones(3))
    with pytest.raises(ValueError, match="sorted"):
        G.to_dense_batch(X, jnp.array([1, 0, 0, 1, 1, 1]))
    # under jit a bad id is dropped, and checked() reports it
    with pytest.raises(Exception, match="outside"):
        checked(jax.jit(lambda e: conv(X, e)))(jnp.array([[0, -1], [1, 2]], jnp.int32))


def test_padding_leaves_the_real_part_exact_and_marks_the_rest():
    padded = G.pad_graph(X, EDGES, num_nodes=8, num_edges=10, edge_attr=W)
    assert padded.x.shape == (8, 3) and padded.edge_index.shape == (2, 10)
    assert padded.node_mask.tolist() == [True] * 6 + [False] * 2
    assert padded.edge_mask.tolist() == [True] * 7 + [False] * 3
    assert padded.graph_mask.tolist() == [True, False]
    assert padded.edge_index[:, 7:].tolist() == [[6, 6, 6], [6, 6, 6]]  # first padding node
    assert padded.batch.tolist() == [0] * 6 + [1] * 2
    conv = GCNConv(Linear(jnp.arange(6.0).reshape(2, 3) / 7), jnp.array([0.1, -0.2]))
    full = conv(X, EDGES, W)
    np.testing.assert_allclose(conv(padded.x, padded.edge_index, padded.edge_attr)[:6], full,
                               rtol=1e-6)
    pooled = G.global_mean_pool(padded.x, padded.batch, padded.num_graphs)
    np.testing.assert_allclose(pooled[0], X.mean(0), rtol=1e-6)


def test_bucket_ladder_bounds_the_shapes():
    ladder = G.BucketLadder.geometric(max_nodes=10_000, max_edges=40_000, levels=8)
    assert ladder.levels == 8 and ladder.nodes[-1] > 10_000 and ladder.edges[-1] >= 40_000
    sizes = {ladder.pick(n, 4 * n) for n in range(10, 10_001, 37)}
    assert sizes <= set(range(8))
    with pytest.raises(ValueError, match="largest level"):
        ladder.pick(20_000, 10)
    with pytest.raises(ValueError, match="room for the padding node"):
        G.pad_graph(X, EDGES, num_nodes=6, num_edges=10)


def test_convs_vmap_over_feature_batches_and_differentiate_under_jit():
    conv = GCNConv(Linear(jnp.arange(6.0).reshape(2, 3) / 7), jnp.array([0.1, -0.2]))
    xs = jnp.stack([X, 2 * X, X ** 2])
    batched = jax.vmap(lambda x: conv(x, EDGES, W))(xs)
    for i in range(3):
        np.testing.assert_allclose(batched[i], conv(xs[i], EDGES, W), rtol=1e-6)
    g = jax.jit(jax.grad(lambda c, x: c(x, EDGES, W).sum()))(conv, X)
    assert g.lin.weight.shape == (2, 3) and np.all(np.isfinite(g.lin.weight))


def test_softmax_aggregate_is_the_softmax_weighted_sum():
    """GATConv's fused step: the normalisation after the sum, as PyG's before it (to rounding)."""
    from torch2jax_ops.geometric.utils._softmax import segment_softmax, softmax_aggregate

    rng = np.random.default_rng(0)
    scores = jnp.asarray(rng.standard_normal((7, 2)) * 30)  # large: the max shift matters
    messages = jnp.asarray(rng.standard_normal((7, 2, 3)))
    dst = jnp.array([0, 0, 2, 2, 2, 6, 6], jnp.int32)  # node 1 empty; 6 is the dropped slot
    reference = aggregate(segment_softmax(scores, dst, 6)[..., None] * messages, dst, 6)
    fused = softmax_aggregate(scores, messages, dst, 6)
    np.testing.assert_allclose(fused, reference, rtol=1e-5, atol=1e-6)
    assert np.all(np.asarray(fused[1]) == 0) and np.all(np.isfinite(np.asarray(fused)))
    grads = jax.grad(lambda s, m: jnp.sum(jnp.sin(softmax_aggregate(s, m, dst, 6))), (0, 1))
    g_ref = jax.grad(lambda s, m: jnp.sum(jnp.sin(
        aggregate(segment_softmax(s, dst, 6)[..., None] * m, dst, 6))), (0, 1))
    for ours, theirs in zip(grads(scores, messages), g_ref(scores, messages)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
        assert np.all(np.asarray(ours[5:]) == 0)  # dropped edges get no gradient
    one_head = softmax_aggregate(scores[:, :1], messages[:, :1], dst, 6)  # the squeezed path
    assert one_head.shape == (6, 1, 3)
    np.testing.assert_allclose(one_head, fused[:, :1], rtol=1e-6, atol=1e-7)


def test_gat_drops_an_edge_whose_source_is_the_dropped_slot():
    from torch2jax_ops.geometric.nn import GATConv

    conv = GATConv(lin=Linear(jnp.ones((4, 3)) / 3), lin_src=None, lin_dst=None,
                   att_src=jnp.ones((1, 2, 2)), att_dst=jnp.ones((1, 2, 2)), att_edge=None,
                   lin_edge=None, res=None, bias=None, heads=2, out_channels=2, concat=True,
                   negative_slope=0.2, add_self_loops=False, fill_value="mean")
    with_dropped = jnp.concatenate([EDGES, jnp.array([[6], [1]], jnp.int32)], axis=1)
    np.testing.assert_array_equal(conv(X, with_dropped), conv(X, EDGES))
