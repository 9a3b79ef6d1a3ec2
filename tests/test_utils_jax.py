"""The edge utilities without torch: static forms under jit, the dropped slot, and the errors
(each names the argument, the valid range and the fix)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from torch2jax_ops.geometric import utils as G

EDGES = jnp.array([[0, 1, 1, 2, 3, 3, 1, 4], [1, 0, 2, 2, 1, 0, 0, 4]], jnp.int32)
W = jnp.array([0.5, 1.0, 2.0, 3.0, 1.5, 0.3, 4.0, 0.7])
N = 6
KEY = jax.random.key(0)


# ------------------------------------------------------------------- static forms

def test_coalesce_static_puts_distinct_edges_first_and_dropped_slots_last():
    index, w = jax.jit(lambda e, w: G.coalesce_static(e, w, N))(EDGES, W)
    assert index.tolist() == [[0, 1, 1, 2, 3, 3, 4, 6], [1, 0, 2, 2, 0, 1, 4, 6]]
    assert w.tolist()[1] == pytest.approx(5.0) and w.tolist()[-1] == 0.0  # (1,0) twice
    exact, exact_w = G.coalesce(EDGES, W, N)
    count = int((index[0] < N).sum())
    assert exact.tolist() == index[:, :count].tolist()
    np.testing.assert_allclose(exact_w, w[:count])
    mul = G.coalesce_static(EDGES, W, N, "mul")[1]
    assert float(mul[-1]) == 1.0  # the empty value of a product


def test_a_dropped_input_edge_stays_dropped():
    routed = EDGES.at[:, 2].set(N)
    index = G.coalesce_static(routed, num_nodes=N)
    assert int((index[0] < N).sum()) == 6  # 8 slots: (1, 0) merged, (1, 2) was dropped
    assert [1, 2] not in index.T.tolist()
    assert G.subgraph_static(jnp.ones(N, bool), routed)[0][:, 2].tolist() == [N, N]
    assert not bool(G.k_hop_subgraph_static(1, 2, routed, num_nodes=N)[3][2])


def test_sort_edge_index_needs_no_num_nodes_under_jit_and_is_stable():
    edges = jnp.array([[2, 0, 2, 0], [1, 3, 1, 3]], jnp.int32)
    attr = jnp.array([1.0, 2.0, 3.0, 4.0])
    index, out = jax.jit(G.sort_edge_index)(edges, attr)
    assert index.tolist() == [[0, 0, 2, 2], [3, 3, 1, 1]]
    assert out.tolist() == [2.0, 4.0, 1.0, 3.0]
    assert G.sort_edge_index(edges, None)[1] is None  # None: a pair; omitted: edges alone


def test_subgraph_static_dropped_ids():
    index = jnp.array([4, 1, 0])
    out, _ = G.subgraph_static(index, EDGES, relabel_nodes=True, num_nodes=N)
    kept = [c for c in out.T.tolist() if c != [3, 3]]  # dropped id: len(subset)
    assert kept == [[2, 1], [1, 2], [1, 2], [0, 0]]
    mask = jnp.array([True, True, False, True, False, False])
    out, _, edge_mask = jax.jit(lambda m, e: G.subgraph_static(
        m, e, relabel_nodes=True, return_edge_mask=True))(mask, EDGES)
    assert out[:, edge_mask].tolist() == [[0, 1, 2, 2, 1], [1, 0, 1, 0, 0]]
    assert bool((out[:, ~edge_mask] == N).all())


def test_k_hop_static_masks():
    node_mask, out, mapping, edge_mask = jax.jit(
        lambda e: G.k_hop_subgraph_static([2], 1, e, True, N, directed=True))(EDGES)
    assert jnp.flatnonzero(node_mask).tolist() == [1, 2]
    assert mapping.tolist() == [1]
    assert out[:, edge_mask].tolist() == [[0, 1], [1, 1]]


def test_dropout_identity_without_a_key():
    assert G.dropout_edge(EDGES, 0.5, training=False)[0] is EDGES
    assert G.dropout_edge_static(EDGES, 0.0)[1].all()
    out, edge_mask, node_mask = G.dropout_node(EDGES, 0.5, N, training=False)
    assert out is EDGES and edge_mask.all() and node_mask.shape == (N,)


def test_dropout_edge_static_under_jit():
    out, mask = jax.jit(lambda e, k: G.dropout_edge_static(e, 0.5, num_nodes=N, key=k))(
        EDGES, KEY)
    assert out[:, mask].tolist() == EDGES[:, mask].tolist()
    assert bool((out[:, ~mask] == N).all())
    again = G.dropout_edge(EDGES, 0.5, key=KEY)
    assert again[0].tolist() == EDGES[:, mask].tolist()  # same key, same draw


def test_negative_sampling_static_under_jit():
    out = jax.jit(lambda e, k: G.negative_sampling_static(e, N, 5, key=k))(EDGES, KEY)
    assert out.shape == (2, 5)
    pairs = [tuple(p) for p in np.asarray(out).T.tolist() if p[0] < N]
    assert len(set(pairs)) == len(pairs) == 5
    assert not set(pairs) & set(map(tuple, np.asarray(EDGES).T.tolist()))
    assert all(a != b for a, b in pairs)
    out = G.negative_sampling_static(EDGES, N, 2.0, force_undirected=True, key=KEY)
    assert out.shape == (2, 16)  # float: a share of E; undirected: k // 2 pairs, both ways


def test_to_dense_adj_truncates_and_sums_repeats():
    adj = G.to_dense_adj(EDGES, None, W, max_num_nodes=3)
    assert adj.shape == (1, 3, 3)
    assert float(adj[0, 1, 0]) == pytest.approx(5.0) and float(adj[0, 2, 2]) == 3.0
    batch = jnp.array([0, 0, 0, 1, 1, 1])
    adj = jax.jit(lambda e, b: G.to_dense_adj(e, b, max_num_nodes=3, batch_size=3))(EDGES, batch)
    assert adj.shape == (3, 3, 3) and float(adj[1, 1, 1]) == 1.0 and float(adj[2].sum()) == 0


def test_scatter_takes_pyg_names():
    a = G.scatter(W, EDGES[1], 0, N, "amax")
    np.testing.assert_array_equal(a, G.scatter(W, EDGES[1], 0, N, "max"))
    mean = G.scatter(jnp.array([1, 2, 4]), jnp.array([0, 0, 1]), 0, 2, "mean")
    assert mean.dtype == jnp.float32 and mean.tolist() == [1.5, 4.0]


# ------------------------------------------------------------------------- errors

def _traced(fn, *args):
    return jax.jit(fn)(*args)


@pytest.mark.parametrize("fn, fix", [
    (lambda e: G.coalesce(e, num_nodes=N), "coalesce_static"),
    (lambda e: G.to_undirected(e, num_nodes=N), "to_undirected_static"),
    (lambda e: G.subgraph(jnp.ones(N, bool), e), "subgraph_static"),
    (lambda e: G.k_hop_subgraph(0, 1, e, num_nodes=N), "k_hop_subgraph_static"),
    (lambda e: G.dropout_edge(e, key=KEY), "dropout_edge_static"),
    (lambda e: G.dropout_node(e, num_nodes=N, key=KEY), "dropout_node_static"),
    (lambda e: G.negative_sampling(e, N, key=KEY), "negative_sampling_static"),
])
def test_exact_forms_under_jit_name_their_static_form(fn, fix):
    with pytest.raises(TypeError, match=fix):
        _traced(fn, EDGES)


@pytest.mark.parametrize("fn", [
    lambda e: G.coalesce_static(e),
    lambda e: G.to_undirected_static(e),
    lambda e: G.subgraph_static(jnp.array([0, 1]), e),
    lambda e: G.k_hop_subgraph_static(0, 1, e),
    lambda e: G.dropout_edge_static(e, key=KEY),
    lambda e: G.dropout_node_static(e, key=KEY),
    lambda e: G.negative_sampling_static(e, key=KEY),
])
def test_num_nodes_missing_under_jit_is_named(fn):
    with pytest.raises(ValueError, match="`num_nodes` is required under jax.jit"):
        _traced(fn, EDGES)


def test_to_dense_adj_sizes_missing_under_jit_are_named():
    batch = jnp.zeros(N, jnp.int32)
    with pytest.raises(ValueError, match="`max_num_nodes` is required"):
        _traced(lambda e: G.to_dense_adj(e), EDGES)
    with pytest.raises(ValueError, match="`batch_size` is required"):
        _traced(lambda e, b: G.to_dense_adj(e, b, max_num_nodes=3), EDGES, batch)
    with pytest.raises(ValueError, match="`max_num_nodes` is required"):
        _traced(lambda e, b: G.to_dense_adj(e, b, batch_size=1), EDGES, batch)


def test_bad_arguments_name_the_argument_and_the_range():
    with pytest.raises(IndexError, match="negative id -1.*never wrap"):
        G.coalesce(EDGES.at[0, 0].set(-1))
    with pytest.raises(IndexError, match="node id 9"):
        G.sort_edge_index(EDGES.at[1, 0].set(9), num_nodes=N)
    with pytest.raises(ValueError, match="`reduce` must be one of .*'amax'.*got 'any'.*not ported"):
        G.coalesce(EDGES, W, N, "any")
    with pytest.raises(ValueError, match="`reduce` must be one of"):
        G.scatter(W, EDGES[1], 0, N, "prod")
    with pytest.raises(ValueError, match=r"`p` \(the dropout probability\) must lie in \[0, 1\]"):
        G.dropout_edge(EDGES, 1.5, key=KEY)
    with pytest.raises(ValueError, match="needs a PRNG key: pass key=jax.random.key"):
        G.dropout_edge(EDGES, 0.5)
    with pytest.raises(ValueError, match="needs a PRNG key"):
        G.negative_sampling(EDGES, N)
    with pytest.raises(ValueError, match="`method` must be one of 'sparse', 'dense'"):
        G.negative_sampling(EDGES, N, method="fast", key=KEY)
    with pytest.raises(ValueError, match="`flow` must be one of"):
        G.k_hop_subgraph(0, 1, EDGES, flow="both")
    with pytest.raises(IndexError, match="`node_idx`"):
        G.k_hop_subgraph(-2, 1, EDGES)
    with pytest.raises(TypeError, match="`num_hops` must be"):
        G.k_hop_subgraph(0, None, EDGES)
    with pytest.raises(ValueError, match="`edge_attr` must have one row per edge"):
        G.coalesce(EDGES, W[:3])
    with pytest.raises(ValueError, match=r"`edge_index` must have shape \[2, num_edges\]"):
        G.to_undirected(EDGES[0])
    with pytest.raises(TypeError, match="`subset` must be a boolean node mask"):
        G.subgraph(jnp.array([0.5]), EDGES)
    with pytest.raises(ValueError, match="`reduce` must be one of .*got 'mul'.*scatter"):
        G.segment(W, jnp.array([0, 8]), "mul")
    with pytest.raises(TypeError, match="`relabel_nodes` must be a Python bool"):
        G.subgraph(jnp.array([0]), EDGES, relabel_nodes="yes")
    with pytest.raises(TypeError, match="`edge_index` is a torch tensor|must be an array"):
        G.coalesce(object())
