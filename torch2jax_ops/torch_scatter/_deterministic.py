"""Per-group sums of rows in group order whose bits do not depend on the schedule.

``scatter_sum(..., deterministic=True)`` first puts the rows in group order (a
stable sort of the ids); this module sums them:

* on the CPU, by XLA's sorted segment sum: a sequential loop there, the same
  bits on every run;
* elsewhere (GPU, TPU), where XLA's scatter-add may combine partial sums of a
  long group with atomics in the order the hardware schedules them, by a
  *segmented scan*: ``lax.associative_scan`` over ``(starts a group, value)``
  pairs, whose every addition is within one group and in a tree order fixed
  by the shape. Each group's sum is then read from its last row (found from
  the integer counts, exact in any order). No float scatter-add: the same
  bits on every run, and its gradient is a sum's gradient.

:func:`scan_sum` is the scan path itself (tested on the CPU too).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["sorted_sum", "scan_sum"]


def _combine(a: tuple, b: tuple) -> tuple:
    """The segmented-sum monoid: a row that starts a group drops what came before it."""
    starts_a, value_a = a
    starts_b, value_b = b
    return starts_a | starts_b, jnp.where(starts_b, value_b, value_a + value_b)


def scan_sum(rows: jax.Array, ids: jax.Array, num_segments: int) -> jax.Array:
    """``segment_sum(rows, ids, num_segments)`` for ids sorted ascending, by a segmented scan.

    ``rows`` [E, *F], ``ids`` [E] (ids outside ``[0, num_segments)`` reach no group)
    -> [num_segments, *F]; empty groups give 0. Plain JAX, so every transformation
    applies (``jvp`` too); the gradient is the scan's transpose, which gives each row
    its group's cotangent plus zeros: exactly a sum's gradient, and no float scatter
    but the final read's, whose indices are unique (an empty group reads a row of
    its own past the end).
    """
    length = rows.shape[0]
    if length == 0 or num_segments == 0:
        return jnp.zeros((num_segments,) + rows.shape[1:], rows.dtype)
    starts = jnp.concatenate([jnp.ones((1,), jnp.bool_), ids[1:] != ids[:-1]])
    starts = starts.reshape((-1,) + (1,) * (rows.ndim - 1))  # broadcast over the features
    _, running = lax.associative_scan(_combine, (starts, rows))
    valid = (ids >= 0) & (ids < num_segments)
    counts = jax.ops.segment_sum(valid.astype(jnp.int32), jnp.where(valid, ids, 0),
                                 num_segments)  # integers: exact in any order
    before = jnp.sum(ids < 0, dtype=jnp.int32)  # invalid negative ids sort first
    last = before + jnp.cumsum(counts) - 1
    # each empty group reads its own row past the end (unique, filled with 0); counted from
    # the data, not an iota: no group-sized constant for a compiler to fold
    past_end = length + jnp.cumsum(counts == 0, dtype=last.dtype)
    return running.at[jnp.where(counts > 0, last, past_end)].get(
        mode="fill", fill_value=0, unique_indices=True)


def sorted_sum(rows: jax.Array, ids: jax.Array, num_segments: int) -> jax.Array:
    """Per-group sums of rows whose ids are sorted ascending, the same bits on every run:
    XLA's sorted segment sum on the CPU, :func:`scan_sum` elsewhere (module docstring)."""
    def on_cpu(rows, ids):
        return jax.ops.segment_sum(rows, ids, num_segments, indices_are_sorted=True)

    return lax.platform_dependent(rows, ids, cpu=on_cpu,
                                  default=lambda rows, ids: scan_sum(rows, ids, num_segments))
