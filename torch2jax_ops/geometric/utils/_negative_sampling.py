"""``negative_sampling``: node pairs that are not edges, drawn with an explicit key.

PyG numbers the candidate pairs (``edge_index_to_vector``): all ``(i, j)`` with
``i != j`` (self-loops are never sampled), the pairs ``i < j`` with
``force_undirected`` (returned in both directions), or every ``(i, j)`` of a
bipartite ``(N_src, N_dst)``. It over-samples ``int(1.1 * k / prob)``
candidates without replacement (``prob``: the share of pairs that are not
edges), drops the existing edges, tries three times and keeps at most ``k``.

Here, with static shapes: the ``k`` output slots are filled, in a random
order, with distinct non-edges (uniform over the ``k``-subsets, PyG's
distribution); slots left unfilled are the dropped edge ``(N, N)``
(``(N_src, N_dst)`` bipartite). When PyG's over-sample covers every pair
(``population <= int(1.1 * k / prob)``) PyG's answer is deterministic, the
first ``k`` non-edges in pair order, and so is this one. Where PyG's three
tries run short it returns fewer pairs; this never stops short while
candidates remain (small populations are enumerated).
"""
from __future__ import annotations

import functools
import math
from typing import Any, Optional, Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ... import _dtypes
from ..._checking import static_int
from ..._sharding import OutSharding, sharding_aware
from .._core._edges import check_ids, edge_array, node_count
from ._coalesce import require_concrete
from ._dropout import check_key
from ._subgraph import check_flag

__all__ = ["negative_sampling", "negative_sampling_static"]

METHODS = ("sparse", "dense")
#: populations up to this size are enumerated (a random permutation of every pair)
_ENUMERATE = 1 << 16
_INT32_MAX = 2 ** 31 - 1


def _sizes(edge_index: jax.Array, num_nodes: Any, *, op: str) -> tuple[int, int, bool]:
    if isinstance(num_nodes, (tuple, list)):
        if len(num_nodes) != 2:
            raise ValueError(f"{op}: a bipartite `num_nodes` is a pair (num_src, num_dst), got "
                             f"{num_nodes!r}")
        rows = node_count(num_nodes[0], edge_index[0], "num_nodes[0]", op=op)
        cols = node_count(num_nodes[1], edge_index[1], "num_nodes[1]", op=op)
        return rows, cols, True
    n = node_count(num_nodes, edge_index, op=op)
    return n, n, False


def _sample_count(num_neg_samples: Any, num_edges: int, *, op: str) -> int:
    if num_neg_samples is None:
        return num_edges
    if isinstance(num_neg_samples, float):
        if num_neg_samples < 0:
            raise ValueError(f"{op}: `num_neg_samples` must be >= 0, got {num_neg_samples}")
        return int(num_neg_samples * num_edges)  # PyG: a float is a share of E
    return static_int(num_neg_samples, "num_neg_samples", op=op)


def _positives(edge_index: jax.Array, rows: int, cols: int, bipartite: bool,
               undirected: bool) -> tuple[jax.Array, jax.Array, int]:
    """PyG's ``edge_index_to_vector``: (pair number per edge, counted, population)."""
    row, col = edge_index[0], edge_index[1]
    real = (row < rows) & (col < cols)
    if bipartite:
        return row * cols + col, real, rows * cols
    n = rows
    if undirected:
        offset = jnp.cumsum(jnp.arange(1, max(n, 2), dtype=row.dtype))
        shift = offset[jnp.clip(row, 0, max(n - 2, 0))]
        return row * n + col - shift, real & (row < col), (n * (n + 1)) // 2 - n
    col = col - (row < col).astype(col.dtype)
    return row * (n - 1) + col, real & (row != edge_index[1]), n * n - n


def _pairs(idx: jax.Array, ok: jax.Array, rows: int, cols: int, bipartite: bool,
           undirected: bool) -> jax.Array:
    """PyG's ``vector_to_edge_index``; slots not ``ok`` become the dropped pair."""
    dtype = idx.dtype
    if bipartite:
        row, col = idx // max(cols, 1), idx % max(cols, 1)
    elif undirected:
        n = rows
        offset = jnp.cumsum(jnp.arange(1, max(n, 2), dtype=dtype))[:max(n - 1, 1)]
        end = jnp.arange(n, max(n * n, n + 1), n, dtype=dtype)[:max(n - 1, 1)] - offset
        row = jnp.searchsorted(end, idx, side="right").astype(dtype)  # torch.bucketize(right)
        col = (offset[jnp.clip(row, 0, offset.shape[0] - 1)] + idx) % max(n, 1)
    else:
        n1 = max(rows - 1, 1)
        row, col = idx // n1, idx % n1
        col = col + (row <= col).astype(dtype)
    row = jnp.where(ok, row, rows).astype(dtype)
    col = jnp.where(ok, col, cols).astype(dtype)
    if undirected:
        return jnp.stack([jnp.concatenate([row, col]), jnp.concatenate([col, row])])
    return jnp.stack([row, col])


def _member(values: jax.Array, sorted_set: jax.Array) -> jax.Array:
    if sorted_set.shape[0] == 0:
        return jnp.zeros(values.shape, bool)
    at = jnp.clip(jnp.searchsorted(sorted_set, values), 0, sorted_set.shape[0] - 1)
    return sorted_set[at] == values


def _sample(edge_index: jax.Array, num_nodes: Any, num_neg_samples: Any, method: Any,
            force_undirected: Any, key: Any, *, op: str) -> tuple[jax.Array, jax.Array]:
    """(the static ``[2, k']`` sample, its slots that hold a pair ``[k']``)."""
    if method not in METHODS:
        raise ValueError(f"{op}: `method` must be one of {', '.join(map(repr, METHODS))}, got "
                         f"{method!r}")
    undirected = check_flag(force_undirected, "force_undirected", op=op)
    rows, cols, bipartite = _sizes(edge_index, num_nodes, op=op)
    if bipartite:
        undirected = False  # PyG ignores force_undirected for bipartite graphs
        check_ids(edge_index[0], rows, "edge_index[0]", op=op)
        check_ids(edge_index[1], cols, "edge_index[1]", op=op)
    else:
        edge_array(edge_index, rows, op=op)
    k = _sample_count(num_neg_samples, edge_index.shape[1], op=op)
    if undirected:
        k = k // 2
    population = (rows * cols if bipartite else
                  (rows * (rows + 1)) // 2 - rows if undirected else rows * rows - rows)
    if not _dtypes.x64_enabled() and max(population, rows * cols) > _INT32_MAX:
        raise ValueError(f"{op}: {rows} x {cols} node pairs do not fit int32 pair numbers: "
                         f"enable 64-bit mode (jax.config.update('jax_enable_x64', True)) or "
                         f"pass a smaller `num_nodes`")
    return _sample_core(edge_index, check_key(key, op=op), rows, cols, bipartite, undirected, k)


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5, 6))
def _sample_core(edge_index: jax.Array, key: jax.Array, rows: int, cols: int, bipartite: bool,
                 undirected: bool, k: int) -> tuple[jax.Array, jax.Array]:
    idx, counted, population = _positives(edge_index, rows, cols, bipartite, undirected)
    dtype = idx.dtype
    count = jnp.sum(counted)  # PyG counts repeated edges too
    positives = jnp.sort(jnp.where(counted, idx, population))  # population: no pair
    # candidate pair numbers, in the order they are tried
    estimate = 1.0 - min(edge_index.shape[1], population) / max(population, 1)
    draws = math.ceil(3.3 * k / estimate) + 32 if estimate > 0 else population
    if population <= max(draws, _ENUMERATE):
        order = jax.random.permutation(key, population).astype(dtype)
        # PyG's over-sample covers the population: arange order, deterministic.
        # int(1.1 * k / prob) >= population  <=>  population - count <= 1.1 * k
        every = 10 * (population - count) <= 11 * k
        candidates = jnp.where(every, jnp.arange(population, dtype=dtype), order)
        fresh = jnp.ones((population,), bool)
    else:
        draws = min(draws, 1 << 24)
        candidates = jax.random.randint(key, (draws,), 0, population, dtype=dtype)
        # the first draw of each pair is fresh (stable: ties keep draw order)
        iota = jnp.arange(draws, dtype=jnp.int32)
        value, where = jax.lax.sort((candidates, iota), num_keys=2)
        first = jnp.concatenate([jnp.ones((1,), bool), value[1:] != value[:-1]])
        fresh = jnp.zeros((draws,), bool).at[where].set(first)
    usable = fresh & ~_member(candidates, positives) & (count < population)
    slot = jnp.cumsum(usable.astype(jnp.int32)) - 1
    picked = jnp.full((k,), population, dtype).at[jnp.where(usable, slot, k)].set(
        candidates, mode="drop")
    ok = picked < population
    out = _pairs(jnp.where(ok, picked, 0), ok, rows, cols, bipartite, undirected)
    return out, jnp.concatenate([ok, ok]) if undirected else ok


@sharding_aware
def negative_sampling_static(edge_index: ArrayLike,
                             num_nodes: Union[int, Tuple[int, int], None] = None,
                             num_neg_samples: Union[int, float, None] = None,
                             method: str = "sparse", force_undirected: bool = False, *,
                             key: Optional[jax.Array] = None,
                             out_sharding: OutSharding = None) -> jax.Array:
    """:func:`negative_sampling` with a static shape: ``k`` slots, unfilled ones dropped.

    Args:
      edge_index: ``[2, E]`` (ids ``N``: dropped edges, not counted).
      num_nodes: ``N``, or ``(N_src, N_dst)`` for a bipartite graph (then
        self-pairs are allowed and ``force_undirected`` is ignored, as in PyG);
        required under ``jax.jit``.
      num_neg_samples: ``k``: an int, a float (``int(k * E)``), or ``None`` (``E``).
      method: ``"sparse"`` or ``"dense"``: PyG's two ways of finding the
        collisions (memory, not distribution); one algorithm serves both here.
      force_undirected: sample ``k // 2`` pairs ``i < j`` and return each in both
        directions.
      key: a ``jax.random`` key (required).

    Returns:
      ``[2, k]`` (``[2, 2 * (k // 2)]`` with ``force_undirected``: the pairs, then
      their reverses): distinct pairs that are no edge of ``edge_index``, no
      self-loop unless bipartite, in random order; unfilled slots hold
      ``(N, N)``. Outside jit PyG's result is ``out[:, out[0] < N]``. Draws
      differ from torch's (see the module docs).
    """
    op = "negative_sampling_static"
    edge_index = edge_array(edge_index, op=op)
    return _sample(edge_index, num_nodes, num_neg_samples, method, force_undirected, key,
                   op=op)[0]


@sharding_aware
def negative_sampling(edge_index: ArrayLike, num_nodes: Union[int, Tuple[int, int], None] = None,
                      num_neg_samples: Union[int, float, None] = None, method: str = "sparse",
                      force_undirected: bool = False, *,
                      key: Optional[jax.Array] = None,
                      out_sharding: OutSharding = None) -> jax.Array:
    """``torch_geometric.utils.negative_sampling``: up to ``k`` node pairs that are no edge.

    Returns ``[2, K]`` with ``K <= k`` (``K = 0`` when every pair is an edge), as
    PyG; the pairs are random (same distribution as PyG, not the same draws),
    except when PyG's over-sample covers every pair: then both return the first
    ``k`` non-edges in pair order. Needs a concrete ``edge_index``; under
    ``jax.jit`` use :func:`negative_sampling_static`. Arguments as there.
    """
    op = "negative_sampling"
    edge_index = edge_array(edge_index, op=op)
    require_concrete(edge_index, "negative_sampling_static",
                     "k slots, the unfilled ones holding the dropped pair (N, N)", op=op)
    out, ok = _sample(edge_index, num_nodes, num_neg_samples, method, force_undirected, key,
                      op=op)
    return out[:, np.flatnonzero(np.asarray(ok))]
