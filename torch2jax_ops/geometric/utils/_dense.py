"""``to_dense_batch``: a mini-batch of node rows as a padded ``[B, Nmax, F]`` tensor and a mask."""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ..._batch_vector import dense_size, graph_count
from ..._checking import as_array, debug_check, is_traced, static_int
from ..._sharding import OutSharding, sharding_aware
from .._core._edges import check_ids, node_count

__all__ = ["to_dense_batch"]


@sharding_aware
def to_dense_batch(x: ArrayLike, batch: Optional[ArrayLike] = None, fill_value: float = 0.0,
                   max_num_nodes: Optional[int] = None,
                   batch_size: Optional[int] = None,
                   *, out_sharding: OutSharding = None) -> tuple[jax.Array, jax.Array]:
    """PyG's ``to_dense_batch``: ``x [N, *F]`` -> ``(out [B, Nmax, *F], mask [B, Nmax])``.

    ``batch`` must be sorted (nodes of a graph are contiguous, as in every PyG
    mini-batch); it is checked. ``B`` is ``batch_size`` or ``batch.max() + 1``,
    ``Nmax`` is ``max_num_nodes`` or the largest graph; nodes past
    ``max_num_nodes`` are dropped, as are nodes of the dropped graph id
    ``batch_size`` (padding). Under jit both sizes must be given: the error
    names the missing one.
    """
    op = "to_dense_batch"
    x = as_array(x, "x", op=op)
    if x.ndim == 0:
        raise ValueError(f"{op}: `x` must have a node axis, got a 0-d array")
    max_num_nodes = dense_size(batch, static_int(max_num_nodes, "max_num_nodes", op=op))
    batch_size = graph_count(batch, batch_size)
    if batch is None and max_num_nodes is None:
        return x[None], jnp.ones((1, x.shape[0]), bool)
    num = x.shape[0]
    if batch is None:
        batch = jnp.zeros((num,), jnp.int32)
    batch = as_array(batch, "batch", op=op)
    if batch.shape != (num,) or not jnp.issubdtype(batch.dtype, jnp.integer):
        raise ValueError(f"{op}: `batch` must be a 1-D integer array with one graph id per row "
                         f"of x ({num}), got shape {tuple(batch.shape)}, dtype {batch.dtype}")
    b = node_count(batch_size, batch, name="batch_size", index_name="batch",
                   hint="the number of graphs in the batch", op=op)
    check_ids(batch, b, "batch", op=op)
    if is_traced(batch):
        if num > 1:
            debug_check(jnp.all(batch[1:] >= batch[:-1]), f"{op}: `batch` must be sorted")
    elif num > 1 and (np.diff(np.asarray(batch)) < 0).any():
        raise ValueError(f"{op}: `batch` must be sorted (non-decreasing): PyG's mini-batches "
                         f"keep each graph's nodes together; sort x and batch by batch first")
    counts = jnp.zeros((b + 1,), jnp.int32).at[batch].add(1, mode="drop")[:b]
    if max_num_nodes is None:
        if is_traced(batch):
            raise ValueError(f"{op}: `max_num_nodes` is required under jax.jit / jax.vmap: PyG "
                             f"uses the largest graph's size, a value that cannot become a "
                             f"static shape. Pass max_num_nodes=<int>")
        max_num_nodes = _largest(batch, b)
    starts = jnp.concatenate([jnp.zeros((1,), jnp.int32), jnp.cumsum(counts)])
    position = jnp.arange(num, dtype=jnp.int32) - starts[jnp.minimum(batch, b)]
    keep = (batch < b) & (position < max_num_nodes)
    slot = jnp.where(keep, batch * max_num_nodes + position, b * max_num_nodes)
    size = b * max_num_nodes
    out = jnp.full((size,) + x.shape[1:], fill_value, x.dtype).at[slot].set(x, mode="drop")
    mask = jnp.zeros((size,), bool).at[slot].set(True, mode="drop")
    return out.reshape((b, max_num_nodes) + x.shape[1:]), mask.reshape(b, max_num_nodes)


def mask_row_count(args: tuple, kwargs: dict) -> Optional[int]:
    """How many entries of ``to_dense_batch(*args, **kwargs)``'s mask are set, when it is
    known without the data: every row of ``x`` when no ``max_num_nodes`` cuts a graph
    (``None`` otherwise). A traced forward reads it, so ``h[mask]`` (PyG's GPSConv) keeps
    a static row count under jit."""
    if (len(args) > 3 and args[3] is not None) or kwargs.get("max_num_nodes") is not None:
        return None
    x = args[0] if args else kwargs.get("x")
    return int(np.shape(x)[0]) if x is not None and np.ndim(x) else None


to_dense_batch.mask_row_count = mask_row_count  # type: ignore[attr-defined]


def _largest(batch: jax.Array, b: int) -> int:
    """The largest graph of a concrete ``batch`` (ids ``b`` and above dropped), on the host:
    a count computed with jnp would be traced inside a jitted caller even for a constant."""
    ids = np.asarray(batch)
    ids = ids[(ids >= 0) & (ids < b)]
    return int(np.bincount(ids, minlength=b).max()) if b else 0
