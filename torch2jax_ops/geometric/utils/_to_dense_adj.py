"""``to_dense_adj``: a batch of dense adjacency matrices ``[B, M, M(, *F)]``.

The output shape is static once ``batch_size`` and ``max_num_nodes`` are
known: under ``jax.jit`` they must be given (PyG reads them off ``batch`` and
``edge_index``). As in PyG, repeated edges add up, a node past
``max_num_nodes`` in its graph loses its edges, and the graph of an edge is
its source's. Dropped edges (an id equal to ``len(batch)``) are left out.
"""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ... import _dtypes
from ..._batch_vector import dense_size, graph_count
from ..._checking import as_array, check_index, is_traced, static_int
from ..._sharding import OutSharding, sharding_aware
from .._core._edges import aggregate, check_ids, edge_array
from ._dense import _largest

__all__ = ["to_dense_adj"]


def _needed(name: str, what: str, *, op: str) -> ValueError:
    return ValueError(f"{op}: `{name}` is required under jax.jit / jax.vmap: PyG reads it as "
                      f"{what}, a value that cannot become a static shape. Pass {name}=<int>")


@sharding_aware
def to_dense_adj(edge_index: ArrayLike, batch: Optional[ArrayLike] = None,
                 edge_attr: Optional[ArrayLike] = None, max_num_nodes: Optional[int] = None,
                 batch_size: Optional[int] = None,
                 *, out_sharding: OutSharding = None) -> jax.Array:
    """``torch_geometric.utils.to_dense_adj``: ``adj[b, i, j] = sum of the attributes of i -> j``.

    Args:
      edge_index: ``[2, E]`` (global node ids of the batch).
      batch: ``None`` (one graph) or ``[N]`` graph ids, sorted (PyG's assumption).
      edge_attr: ``None`` (weight 1, float32) or ``[E, *F]``; gradients flow to it.
      max_num_nodes: ``M``; default: the largest graph (``edge_index.max() + 1``
        without ``batch``); required under ``jax.jit``. Nodes past ``M`` within
        their graph lose their edges.
      batch_size: ``B``; default ``batch.max() + 1`` (1 without ``batch``); required
        under ``jax.jit`` when ``batch`` is given.

    Returns:
      ``[B, M, M, *F]`` of ``edge_attr``'s dtype.
    """
    op = "to_dense_adj"
    edge_index = edge_array(edge_index, op=op)
    num_edges = edge_index.shape[1]
    if edge_attr is None:
        edge_attr = jnp.ones((num_edges,), jnp.float32)
    else:
        edge_attr = as_array(edge_attr, "edge_attr", op=op)
        if edge_attr.ndim == 0 or edge_attr.shape[0] != num_edges:
            raise ValueError(f"{op}: `edge_attr` must have one row per edge ({num_edges}), "
                             f"got shape {tuple(edge_attr.shape)}")
    max_num_nodes = dense_size(batch, static_int(max_num_nodes, "max_num_nodes", op=op))
    batch_size = graph_count(batch, static_int(batch_size, "batch_size", op=op))
    row, col = edge_index[0], edge_index[1]
    if batch is None:
        b = 1 if batch_size is None else batch_size
        if max_num_nodes is None:
            if is_traced(edge_index):
                raise _needed("max_num_nodes", "edge_index.max() + 1", op=op)
            max_num_nodes = int(np.asarray(edge_index).max()) + 1 if num_edges else 0
        m = max_num_nodes
        check_ids(edge_index, 2 ** 31 - 2, "edge_index", op=op)  # no negative ids
        graph = jnp.zeros(row.shape, row.dtype)
        i1, i2 = row, col
        valid = jnp.ones(row.shape, bool)
    else:
        batch = as_array(batch, "batch", op=op)
        check_index(batch, "batch", op=op)
        if batch.ndim != 1:
            raise ValueError(f"{op}: `batch` must be one-dimensional [num_nodes], got shape "
                             f"{tuple(batch.shape)}")
        n = batch.shape[0]
        check_ids(edge_index, n, "edge_index", op=op)  # id n: a dropped edge
        if batch_size is None:
            if is_traced(batch):
                raise _needed("batch_size", "batch.max() + 1", op=op)
            batch_size = int(np.asarray(batch).max()) + 1 if n else 1
        b = batch_size
        check_ids(batch, b, "batch", op=op)
        count = aggregate(jnp.ones((n,), jnp.int32), batch, b, "sum", op=op)
        if max_num_nodes is None:
            if is_traced(batch):
                raise _needed("max_num_nodes", "the size of the largest graph", op=op)
            max_num_nodes = _largest(batch, b)
        m = max_num_nodes
        start = jnp.concatenate([jnp.zeros((1,), jnp.int32), jnp.cumsum(count)[:-1]])
        node_start = jnp.concatenate([start[jnp.clip(batch, 0, max(b - 1, 0))],
                                      jnp.zeros((1,), jnp.int32)]) if b else \
            jnp.zeros((n + 1,), jnp.int32)
        padded_batch = jnp.concatenate([batch, jnp.full((1,), b, batch.dtype)])
        valid = (row < n) & (col < n)
        graph = padded_batch[jnp.clip(row, 0, n)]
        i1 = row - node_start[jnp.clip(row, 0, n)].astype(row.dtype)
        i2 = col - node_start[jnp.clip(col, 0, n)].astype(col.dtype)
        valid = valid & (graph < b)
    if b * m * m > 2 ** 31 - 1 and not _dtypes.x64_enabled():
        raise ValueError(f"{op}: {b} x {m} x {m} entries overflow int32 positions: enable "
                         f"64-bit mode or pass a smaller max_num_nodes / batch_size")
    valid = valid & (i1 >= 0) & (i2 >= 0) & (i1 < m) & (i2 < m)
    size = b * m * m
    flat = jnp.where(valid, (graph * m + i1) * m + i2, size)
    adj = aggregate(edge_attr, flat, size, "sum", op=op)
    return adj.reshape((b, m, m) + edge_attr.shape[1:])
