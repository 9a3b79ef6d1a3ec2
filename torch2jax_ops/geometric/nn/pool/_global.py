"""Graph-level readout: ``global_add_pool``, ``global_mean_pool``, ``global_max_pool``."""
from __future__ import annotations

from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from ...._batch_vector import graph_count
from ...._checking import as_array
from ...._sharding import OutSharding, sharding_aware
from ..._core._edges import aggregate, check_ids, node_count

__all__ = ["global_add_pool", "global_mean_pool", "global_max_pool"]


def _pool(reduce: str, x: Any, batch: Any, size: Optional[int], *, op: str) -> jax.Array:
    x = as_array(x, "x", op=op)
    if x.ndim == 0:
        raise ValueError(f"{op}: `x` must have at least one dimension (nodes), got a 0-d array")
    axis = x.ndim - 1 if x.ndim == 1 else x.ndim - 2
    if batch is None:
        keep = x.ndim <= 2
        reducers: dict[str, Callable[..., jax.Array]] = {
            "sum": jnp.sum, "mean": jnp.mean, "max": jnp.max}
        return reducers[reduce](x, axis=axis, keepdims=keep)
    size = graph_count(batch, size)
    batch = as_array(batch, "batch", op=op)
    if batch.shape != (x.shape[axis],) or not jnp.issubdtype(batch.dtype, jnp.integer):
        raise ValueError(f"{op}: `batch` must be a 1-D integer array with one graph id per node "
                         f"({x.shape[axis]}), got shape {tuple(batch.shape)}, dtype {batch.dtype}")
    b = node_count(size, batch, name="size", index_name="batch",
                   hint="the number of graphs; padded batches: PaddedGraph.num_graphs", op=op)
    check_ids(batch, b, "batch", op=op)
    out = aggregate(jnp.moveaxis(x, axis, 0), batch, b, reduce, op=op)
    return jnp.moveaxis(out, 0, axis)


@sharding_aware
def global_add_pool(x: ArrayLike, batch: Optional[ArrayLike] = None,
                    size: Optional[int] = None, *, out_sharding: OutSharding = None) -> jax.Array:
    """Per-graph sum of node features: ``x [N, F]``, ``batch [N]`` -> ``[B, F]``.

    ``batch=None`` sums all nodes into ``[1, F]``. ``size`` (the number of graphs
    B) is needed under jit; graph id ``size`` is the dropped (padding) graph.
    """
    return _pool("sum", x, batch, size, op="global_add_pool")


@sharding_aware
def global_mean_pool(x: ArrayLike, batch: Optional[ArrayLike] = None,
                     size: Optional[int] = None, *, out_sharding: OutSharding = None) -> jax.Array:
    """Per-graph mean of node features (empty graphs give 0); see :func:`global_add_pool`."""
    return _pool("mean", x, batch, size, op="global_mean_pool")


@sharding_aware
def global_max_pool(x: ArrayLike, batch: Optional[ArrayLike] = None,
                    size: Optional[int] = None, *, out_sharding: OutSharding = None) -> jax.Array:
    """Per-graph max of node features (empty graphs give 0); see :func:`global_add_pool`."""
    return _pool("max", x, batch, size, op="global_max_pool")
