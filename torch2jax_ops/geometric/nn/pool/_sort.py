"""PyG's ``global_sort_pool`` (``aggr.SortAggregation``, DGCNN's SortPooling) with static shapes."""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ...._batch_vector import graph_count
from ...._checking import as_array, is_traced, static_int
from ..._core._edges import check_ids, gather, node_count
from ..._core._torch_sort import torch_cpu_argsort

__all__ = ["global_sort_pool"]


def _torch_slots(keys: np.ndarray, index: np.ndarray, fill: np.ndarray, num_graphs: int,
                 k: int) -> np.ndarray:
    """The node of every output slot ``[B, k]`` (``N``: a filled slot), as PyG picks them.

    PyG writes the last channel into a dense ``[B, N_max]`` batch padded with
    ``fill`` and sorts each row descending with torch's (unstable) CPU sort;
    the padding takes part in the sort, so the rows are rebuilt as PyG's.
    """
    n = keys.shape[0]
    real = index < num_graphs
    ids = index[real].astype(np.int64)
    nodes = np.nonzero(real)[0]
    counts = np.bincount(ids, minlength=num_graphs)
    nmax = int(counts.max()) if num_graphs and ids.size else 0
    first = np.concatenate([[0], np.cumsum(counts)])[:-1]
    order = np.argsort(ids, kind="stable")  # PyG assumes a sorted index: position in the graph
    pos = np.empty_like(ids)
    pos[order] = np.arange(ids.size) - first[ids[order]]
    dense = np.full((num_graphs, nmax), fill, keys.dtype)
    owner = np.full((num_graphs, nmax), n, np.int64)
    dense[ids, pos] = keys[nodes]
    owner[ids, pos] = nodes
    perm = torch_cpu_argsort(dense, descending=True, axis=-1) if nmax else owner
    ranked = np.take_along_axis(owner, perm, axis=-1)
    out = np.full((num_graphs, k), n, np.int32)
    out[:, :min(k, nmax)] = ranked[:, :k]
    return out


def _stable_slots(keys: jax.Array, index: jax.Array, num_graphs: int, k: int) -> jax.Array:
    """The slots with ties by position (pure JAX): graph, then key descending, NaN first."""
    n = keys.shape[0]
    iota = jnp.arange(n, dtype=jnp.int32)
    nan = jnp.isnan(keys)
    value = jnp.where(nan, jnp.zeros((), keys.dtype), keys) + jnp.zeros((), keys.dtype)
    graph = jnp.minimum(index.astype(jnp.int32), num_graphs)
    sorted_graph, _, _, node = jax.lax.sort(
        (graph, (~nan).astype(jnp.int8), -value, iota), num_keys=4)
    counts = jnp.zeros((num_graphs + 1,), jnp.int32).at[graph].add(1)
    ptr = jnp.concatenate([jnp.zeros((1,), jnp.int32), jnp.cumsum(counts)])
    rank = iota - ptr[sorted_graph]
    keep = (sorted_graph < num_graphs) & (rank < k)
    slot = jnp.where(keep, sorted_graph * k + rank, num_graphs * k)
    out = jnp.full((num_graphs * k,), n, jnp.int32).at[slot].set(node, mode="drop")
    return out.reshape(num_graphs, k)


def global_sort_pool(x: Any, index: Any, k: int, size: Optional[int] = None, *,
                     tie_break: str = "torch") -> jax.Array:
    """PyG's ``global_sort_pool(x, index, k)``: ``x [N, D]``, ``index [N]`` -> ``[B, k * D]``.

    Per graph, the nodes sorted by their LAST feature channel, descending; the
    first ``k`` rows, flattened; graphs with fewer than ``k`` nodes are padded
    with zero rows. PyG's quirks, mirrored: it pads with ``fill = x.min() - 1``
    and then zeroes EVERY entry equal to ``fill`` -- also a real entry that
    rounds to it (float32 ``x.min() = 1e8``) -- which gets no gradient; ``index``
    must be sorted (PyG's ``to_dense_batch`` assumes it); ties of the last
    channel come out in torch's CPU ``sort`` order (``tie_break="torch"``, a
    host callback under ``jax.jit``) or by position (``"stable"``, pure JAX;
    identical unless two nodes of a graph tie in a graph of more than 16 nodes).

    ``index=None`` is one graph. ``size`` (the number of graphs B) is needed
    under ``jax.jit``; graph id ``size`` marks padding nodes, which are left out.
    """
    op = "global_sort_pool"
    if tie_break not in ("torch", "stable"):
        raise ValueError(f"{op}: `tie_break` must be 'torch' or 'stable', got {tie_break!r}")
    x = as_array(x, "x", op=op)
    if x.ndim != 2:
        raise ValueError(f"{op}: `x` must be 2-D [num_nodes, channels], got shape "
                         f"{tuple(x.shape)}")
    kept = static_int(k, "k", op=op)
    if kept is None:
        raise ValueError(f"{op}: `k` (the number of nodes kept per graph) must be an int")
    k = kept
    n = x.shape[0]
    b: int
    if index is None:
        index = jnp.zeros((n,), jnp.int32)
        b = 1 if size is None else (static_int(size, "size", op=op) or 0)
    else:
        size = graph_count(index, size)
        index = as_array(index, "index", op=op)
        if index.shape != (n,) or not jnp.issubdtype(index.dtype, jnp.integer):
            raise ValueError(f"{op}: `index` must be a 1-D integer array with one graph id per "
                             f"node ({n}), got shape {tuple(index.shape)}, dtype {index.dtype}")
        b = node_count(size, index, name="size", index_name="index",
                       hint="the number of graphs; graph id `size` marks padding nodes", op=op)
        check_ids(index, b, "index", op=op)
    real = index < b
    plain = jax.lax.stop_gradient(x)
    big = jnp.asarray(jnp.inf, x.dtype)
    fill = jnp.min(jnp.where(real[:, None], plain, big)) - jnp.asarray(1, x.dtype)
    keys = plain[:, -1]
    if tie_break == "stable":
        slots = _stable_slots(keys, index, b, k)
    elif is_traced(keys) or is_traced(index) or is_traced(fill):
        slots = jax.pure_callback(
            lambda kk, ii, ff: _torch_slots(np.asarray(kk), np.asarray(ii), np.asarray(ff), b, k),
            jax.ShapeDtypeStruct((b, k), jnp.int32), keys, index, fill, vmap_method="sequential")
    else:
        slots = jnp.asarray(_torch_slots(np.asarray(keys), np.asarray(index), np.asarray(fill),
                                         b, k))
    rows = gather(x, slots.reshape(-1))
    filled = (slots.reshape(-1) >= n)[:, None] | (rows == fill)
    rows = jnp.where(filled, jnp.zeros((), x.dtype), rows)
    return rows.reshape(b, k * x.shape[1])
