"""Gathers shared by the torch_scatter mirror and the graph layer: CSR ids, guarded takes.

Invalid ids (negative, or past the end) never wrap around: they gather a
fill value. float16/bfloat16 gather through float32 (exact), so that the
gradient, a scatter-add, accumulates in float32 as torch's does.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import jax
import jax.numpy as jnp

from .. import _dtypes

__all__ = ["csr_ids", "gather_along", "take_groups", "take_rows", "slot_sum", "stream_block",
           "streamed_sum", "STREAM_ELEMENTS", "STREAM_BLOCK_ELEMENTS"]

#: gathered elements (rows x features) from which :func:`stream_block` picks the loop.
#: Measured 2026-11-26 (N = 50k, random ids), each op alone: one pass was faster at 3.2M
#: and 6.4M elements (14 vs 18-22 ms, 23 vs 26-31 ms), the loop from 9.6M on (600k x 16:
#: 24 vs 10-13 ms; 1M x 64: 241 vs 115 ms). In the hetero benchmark's step, where every
#: buffer adds to the temporaries allocated per call, thresholds of 2**20 to 2**23 gave the
#: same time (316-321 ms in one A/B run, 352 ms without the loop): 2**22 lies between
STREAM_ELEMENTS = 1 << 22
#: elements per block of :func:`streamed_sum`'s loop: 8 MB of float32 messages, reused.
#: Blocks of 2**19..2**22 elements were within 15% of each other at 1M x 64 and 1.2M x 16;
#: 2**21 was the fastest of them at both
STREAM_BLOCK_ELEMENTS = 1 << 21


def csr_ids(indptr: jax.Array, length: int) -> jax.Array:
    """Segment id of each of ``length`` positions: shape ``indptr.shape[:-1] + (length,)``.

    Position e belongs to segment i when ``indptr[i] <= e < indptr[i + 1]``
    (the last such i for empty segments in between); positions before
    ``indptr[0]`` get -1 and positions from ``indptr[-1]`` on get the number of
    segments: both are invalid ids that reach no group. O(length + segments).
    """
    lead, points = indptr.shape[:-1], indptr.shape[-1]
    flat = indptr.reshape(-1, points).astype(jnp.int32)
    marks = jnp.zeros((flat.shape[0], length + 1), jnp.int32)
    marks = marks.at[jnp.arange(flat.shape[0])[:, None], flat].add(1, mode="drop")
    ids = jnp.cumsum(marks[:, :length], axis=-1, dtype=jnp.int32) - 1
    return ids.reshape(lead + (length,))


def gather_along(src: jax.Array, ids: jax.Array, dim: int, fill: Any = 0) -> jax.Array:
    """``src`` gathered along ``dim`` at ``ids``; invalid ids (<0 or >= size) give ``fill``.

    ``ids`` has shape ``lead + (n,)`` with ``lead`` broadcastable to
    ``src.shape[:dim]``; the result is src's shape with ``n`` at ``dim``.
    float16/bfloat16 gather through float32 (exact), so that the gradient, a
    scatter-add, accumulates in float32 as torch's does.
    """
    acc = _dtypes.accumulation_dtype(src.dtype)
    if acc != src.dtype:
        return gather_along(src.astype(acc), ids, dim, fill).astype(src.dtype)
    size = src.shape[dim]
    ids = jnp.where(ids < 0, size, ids)  # jnp.take wraps negative ids even in "fill" mode
    if size == 0:
        return jnp.full(src.shape[:dim] + ids.shape[-1:] + src.shape[dim + 1:], fill, src.dtype)
    lead = ids.shape[:-1]
    if math.prod(lead) == 1:  # one index for all leading axes: a plain row gather
        return jnp.take(src, ids.reshape(-1), axis=dim, mode="fill", fill_value=fill)
    ids = jnp.broadcast_to(ids, src.shape[:dim] + ids.shape[-1:])
    batch = math.prod(src.shape[:dim])
    flat_src = src.reshape((batch,) + src.shape[dim:])
    flat_ids = ids.reshape(batch, -1)
    taken = jax.vmap(lambda s, i: jnp.take(s, i, axis=0, mode="fill", fill_value=fill))(
        flat_src, flat_ids)
    return taken.reshape(src.shape[:dim] + ids.shape[-1:] + src.shape[dim + 1:])


def take_groups(per_group: jax.Array, ids: jax.Array, fill: Any = 0) -> jax.Array:
    """Each row's group value: (num_segments, ...) -> (len(ids), ...).

    Ids outside ``[0, num_segments)`` (invalid rows) get ``fill``; works with
    zero groups too. float16/bfloat16 go through float32 (exact), so that the
    gradient, a scatter-add, accumulates in float32 as torch's does.
    """
    acc = _dtypes.accumulation_dtype(per_group.dtype)
    if acc != per_group.dtype:
        return take_groups(per_group.astype(acc), ids, fill).astype(per_group.dtype)
    count = per_group.shape[0]
    if count == 0:
        return jnp.full(ids.shape + per_group.shape[1:], fill, per_group.dtype)
    # jnp.take wraps negative ids even in "fill" mode: send them out of range.
    return jnp.take(per_group, jnp.where(ids < 0, count, ids), axis=0, mode="fill",
                    fill_value=fill)


def take_rows(per_group: jax.Array, ids: jax.Array, fill: Any = 0) -> jax.Array:
    """:func:`take_groups` as a plain gather: invalid ids read a fill row appended to
    ``per_group``, so no mask follows the gather (same values, same gradient).

    Which form XLA:CPU runs faster depends on the consumers: gathered rows read
    by a reduction (attention scores, ``(q_i * k_j).sum(-1)``) are copied once
    more after a masked gather (TransformerConv x2 at 1M edges: 10% less time
    with this form), while rows read by several elementwise consumers are
    re-gathered inside each after a masked gather but stored once after this
    one (PNAConv's messages: 25% more time with this form).
    """
    acc = _dtypes.accumulation_dtype(per_group.dtype)
    if acc != per_group.dtype:
        return take_rows(per_group.astype(acc), ids, fill).astype(per_group.dtype)
    count = per_group.shape[0]
    safe = jnp.where((ids >= 0) & (ids < count), ids, count)
    table = jnp.concatenate([per_group, jnp.full((1,) + per_group.shape[1:], fill,
                                                 per_group.dtype)])
    dims = jax.lax.GatherDimensionNumbers(
        offset_dims=tuple(range(ids.ndim, ids.ndim + table.ndim - 1)),
        collapsed_slice_dims=(0,), start_index_map=(0,))
    return jax.lax.gather(table, safe[..., None], dims, (1,) + table.shape[1:],
                          mode=jax.lax.GatherScatterMode.PROMISE_IN_BOUNDS)


def slot_sum(rows: jax.Array, ids: jax.Array, num_segments: int) -> jax.Array:
    """``jax.ops.segment_sum(rows, ids, num_segments)``: rows with ids outside
    ``[0, num_segments)`` reach no segment. ``rows [R, *F]``, ``ids [R]`` ->
    ``[num_segments, *F]``.

    Invalid ids go to one extra slot, cut off after the sum, so the scatter and
    its transpose (the gradient's gather) are promised in bounds: jax's default
    mode masks the gathered cotangent after the gather, which XLA:CPU copies
    once more wherever a reduction reads it.
    """
    slot = jnp.where((ids >= 0) & (ids < num_segments), ids, num_segments)
    return jax.ops.segment_sum(rows, slot, num_segments + 1,
                               mode=jax.lax.GatherScatterMode.PROMISE_IN_BOUNDS)[:num_segments]


def stream_block(table_shape: tuple, edges: int) -> Optional[int]:
    """Edges per block of :func:`streamed_sum` for ``edges`` rows gathered from a table of
    ``table_shape``, or None where one pass is the better form: below
    :data:`STREAM_ELEMENTS` gathered elements, or in a process with several devices (the
    edge arrays may be sharded there, and the loop would slice them block by block).
    The caller picks the loop on the CPU only (``jax.lax.platform_dependent``)."""
    per_row = max(1, math.prod(table_shape[1:]))
    block = max(1, STREAM_BLOCK_ELEMENTS // per_row)
    if edges * per_row < STREAM_ELEMENTS or edges <= block or jax.device_count() > 1:
        return None
    return block


def streamed_sum(table: jax.Array, src: jax.Array, dst: jax.Array, num_segments: int,
                 indices_sorted: bool, block: int) -> jax.Array:
    """``segment_sum(table[src], dst, num_segments)`` as a loop over blocks of ``block`` edges.

    ``table [M, *F]``, ``src [E]``, ``dst [E]`` -> ``[num_segments, *F]`` in the
    table's dtype (cast it to the accumulation dtype first). An edge with an id
    outside ``[0, M)`` or ``[0, num_segments)`` is dropped, which is what its zero
    message would add (:func:`take_rows` and :func:`slot_sum`'s rules; negative ids
    never wrap around). ``indices_sorted`` promises a non-decreasing ``dst``.

    Each block's rows are gathered into a buffer that stays in cache and is
    reused, instead of one ``[E, *F]`` buffer that XLA:CPU allocates afresh on
    every call (its page faults cost more than the gather). The scatter-adds
    run in the same order as one pass's, so the sum is the same to the bit; the
    gradient, a loop too, is JAX's transpose of this one (it visits the blocks in
    reverse, so its sums may differ from one pass's in the last bits). The last
    partial block runs after the loop: no E-sized temporary at all.
    """
    count, edges = table.shape[0], src.shape[0]
    dims = jax.lax.ScatterDimensionNumbers(
        update_window_dims=tuple(range(1, table.ndim)), inserted_window_dims=(0,),
        scatter_dims_to_operand_dims=(0,))

    def add(acc: jax.Array, s: jax.Array, d: jax.Array) -> jax.Array:
        ok = (s >= 0) & (s < count) & (d >= 0) & (d < num_segments)
        rows = table.at[jnp.where(ok, s, 0)].get(mode="promise_in_bounds")
        # past the end, never negative: the scatter drops it (jnp's .at would first
        # wrap negative ids)
        return jax.lax.scatter_add(acc, jnp.where(ok, d, num_segments)[:, None], rows, dims,
                                   indices_are_sorted=indices_sorted,
                                   mode=jax.lax.GatherScatterMode.FILL_OR_DROP)

    def body(step: jax.Array, acc: jax.Array) -> jax.Array:
        first = step * block
        return add(acc, jax.lax.dynamic_slice_in_dim(src, first, block),
                   jax.lax.dynamic_slice_in_dim(dst, first, block))

    steps = edges // block
    acc = jnp.zeros((num_segments,) + table.shape[1:], table.dtype)
    acc = jax.lax.fori_loop(0, steps, body, acc)
    if steps * block < edges:
        acc = add(acc, src[steps * block:], dst[steps * block:])
    return acc
