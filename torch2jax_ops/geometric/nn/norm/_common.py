"""What the graph-wise norms share: the graph id of every node, and per-graph reductions."""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp

from ...._batch_vector import graph_count
from ...._checking import as_array
from ..._core._edges import aggregate, check_ids, gather, node_count

__all__ = ["graph_ids", "per_graph", "spread"]


def graph_ids(x: jax.Array, batch: Any, batch_size: Optional[int], *, op: str,
              name: str = "batch_size") -> tuple[jax.Array, int]:
    """``(batch [N], B)``: ``batch=None`` is one graph; ``B`` is ``batch_size`` or
    ``batch.max() + 1`` (concrete ``batch`` only: under jit the error names ``batch_size``).
    The graph id ``B`` marks padding nodes (the dropped graph slot)."""
    if batch is None:
        return jnp.zeros((x.shape[0],), jnp.int32), 1
    batch_size = graph_count(batch, batch_size)
    batch = as_array(batch, "batch", op=op)
    if batch.shape != (x.shape[0],) or not jnp.issubdtype(batch.dtype, jnp.integer):
        raise ValueError(f"{op}: `batch` must be a 1-D integer array with one graph id per row "
                         f"of x ({x.shape[0]}), got shape {tuple(batch.shape)}, dtype "
                         f"{batch.dtype}")
    b = node_count(batch_size, batch, name=name, index_name="batch",
                   hint="the number of graphs in the batch", op=op)
    check_ids(batch, b, "batch", op=op)
    return batch, b


def per_graph(values: jax.Array, batch: jax.Array, num_graphs: int, reduce: str = "sum", *,
              op: str) -> jax.Array:
    """PyG's ``scatter(values, batch, dim=0, dim_size=B, reduce=reduce)``."""
    return aggregate(values, batch, num_graphs, reduce, op=op)


def spread(per: jax.Array, batch: jax.Array) -> jax.Array:
    """``per.index_select(0, batch)`` (rows of padding nodes: zeros)."""
    return gather(per, batch)
