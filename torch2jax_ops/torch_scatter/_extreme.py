"""Per-group min/max with torch_scatter's rules, fast: the kernels behind scatter_max/min,
``scatter(reduce="max"|"min")`` and segment_{max,min}_{csr,coo}.

torch_scatter compares strictly from a start value (``if (x > cur) cur = x``): NaN
never wins, ties keep the first element (and ``out``), and without ``out`` a group
whose result is still the start value (empty, all -inf, or holding only the lowest
finite value) gives 0. Here, on the flat layout of :class:`._groups.Groups`:

* values: ``jax.ops.segment_max`` of the rows as they are. IEEE max propagates NaN,
  so a NaN in the result marks exactly the groups holding a NaN; only then (a
  ``lax.cond``) is the reduction rerun on a copy with NaN replaced by -inf (+inf
  for min). No E-sized temporary in the common case: on XLA:CPU each fresh E-sized
  buffer costs page faults, more than the reduction itself.
* arg (the first position equal to the value, beating the start value / ``out``):
  a second pass, a ``segment_min`` over candidate positions. On the CPU it runs
  over blocks of rows in a loop (temporaries of a few MB, reused), elsewhere in
  one pass (``lax.platform_dependent``).
* gradient: the whole cotangent to the arg element, ``out`` where it wins. The
  values-only forward saves its inputs and result; the backward finds the
  winners from them (:func:`values`'s ``custom_vjp``), so a values-only call
  never pays for the arg.

Positions come from ``broadcasted_iota`` (never an E-sized literal or a
constant-folded scan: XLA's GPU compiler folded the old ``jnp.repeat`` into
an E-sized constant, 40 s to compile at E = 1M).
"""
from __future__ import annotations

from functools import partial
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import _dtypes
from ._gather import take_groups

__all__ = ["extreme_init", "values", "values_impl", "pair", "pair_impl", "row_positions"]

#: elements per block of the CPU arg pass: a few MB of temporaries, reused across blocks.
#: 2**20 (4 MB per float32 temporary): at E = 1M rows the arg pass took 5-15% less than
#: with 2**19 for F = 16..256 (2026-11-25; 2**21 was no better; float32 positions
#: instead of int32 were tried: faster at F <= 16, slower at F = 64)
BLOCK_ELEMENTS = 1 << 20


def extreme_init(dtype, kind: str):
    """torch_scatter's start value: lowest finite (max) or largest finite (min)."""
    info = jnp.finfo(dtype) if jnp.issubdtype(dtype, jnp.floating) else jnp.iinfo(dtype)
    return np.array(info.min if kind == "max" else info.max, dtype=dtype)


def _better(kind: str):
    return jnp.greater if kind == "max" else jnp.less


def _expand(x: jax.Array, ndim: int) -> jax.Array:
    return x.reshape((-1,) + (1,) * (ndim - 1))


def row_positions(first, count: int, fold: int, carried: tuple) -> jax.Array:
    """(count * fold, *carried) positions along dim of the rows of positions
    ``first .. first + count`` (flat row r is position r // fold).

    An iota along the position axis of (count, fold, *carried), plus ``first``
    when it is traced: never a constant expression (no division, no constant
    offset) that a compiler could fold into an E-sized literal.
    """
    dtype = _dtypes.index_dtype()
    pos = lax.broadcasted_iota(dtype, (count, fold) + tuple(carried), 0)
    pos = pos.reshape((count * fold,) + tuple(carried))
    if isinstance(first, int) and first == 0:
        return pos
    return pos + jnp.asarray(first, dtype)


# ------------------------------------------------------------------------------ values

def _best(rows, ids, num_segments, kind, sorted_ids):
    """Per-group max/min with NaN skipped; -inf/+inf (float) or the dtype's extreme
    (integer) for empty groups."""
    segment = jax.ops.segment_max if kind == "max" else jax.ops.segment_min
    best = segment(rows, ids, num_segments, indices_are_sorted=sorted_ids)
    if not jnp.issubdtype(rows.dtype, jnp.floating) or best.size == 0 or rows.size == 0:
        return best
    skip = jnp.asarray(-jnp.inf if kind == "max" else jnp.inf, rows.dtype)

    def cleaned(rows, best):  # only when some group holds a NaN
        return segment(jnp.where(jnp.isnan(rows), skip, rows), ids, num_segments,
                       indices_are_sorted=sorted_ids)

    return lax.cond(jnp.any(jnp.isnan(best)), cleaned, lambda rows, best: best, rows, best)


def values_impl(rows, out_groups, ids, num_segments, kind, sorted_ids=False):
    """torch_scatter's min/max values of the flat rows, (num_segments, *carried)."""
    best = _best(rows, ids, num_segments, kind, sorted_ids)
    better = _better(kind)
    if out_groups is None:
        init = extreme_init(rows.dtype, kind)
        return jnp.where(better(best, init), best, jnp.zeros_like(best))
    return jnp.where(better(best, out_groups), best, out_groups)


@partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5, 6, 7))
def values(rows, out_groups, ids, num_segments, length, fold, kind, sorted_ids):
    """:func:`values_impl` with torch_scatter's gradient (to the first winner; ``out``
    where it wins), computed in the backward only."""
    return values_impl(rows, out_groups, ids, num_segments, kind, sorted_ids)


def _values_fwd(rows, out_groups, ids, num_segments, length, fold, kind, sorted_ids):
    value = values_impl(rows, out_groups, ids, num_segments, kind, sorted_ids)
    return value, (rows, out_groups, ids, value)  # inputs and the result: no extra memory


def _values_bwd(num_segments, length, fold, kind, sorted_ids, residuals, g):
    rows, out_groups, ids, value = residuals
    arg = arg_of(rows, value, out_groups, ids, num_segments, length, fold, kind, sorted_ids)
    return (*_gradients(arg, ids, g, length, fold, out_groups is not None), None)


values.defvjp(_values_fwd, _values_bwd)


# --------------------------------------------------------------------------------- arg

def _arg_pass(rows, value, out_groups, ids, num_segments, length, fold, kind, sorted_ids,
              block: Optional[int]):
    """First position per group whose row equals ``value`` and beats the start value
    (or ``out``); ``length`` where none does. NaN never equals anything, so it never wins.
    ``block``: positions per block of a loop (None: one pass)."""
    better = _better(kind)
    dtype = _dtypes.index_dtype()
    init_threshold = extreme_init(rows.dtype, kind)
    acc = jnp.full(value.shape, length, dtype)
    carried = rows.shape[1:]
    if rows.shape[0] == 0 or num_segments == 0:
        return acc

    def candidates(first, count):  # positions first .. first + count, as flat rows
        if count == length:
            block_rows, block_ids = rows, ids
        else:
            block_rows = lax.dynamic_slice_in_dim(rows, first * fold, count * fold)
            block_ids = lax.dynamic_slice_in_dim(ids, first * fold, count * fold)
        gathered = take_groups(value, block_ids, 0)
        threshold = (init_threshold if out_groups is None
                     else take_groups(out_groups, block_ids, 0))
        valid = _expand((block_ids >= 0) & (block_ids < num_segments), rows.ndim)
        wins = valid & (block_rows == gathered) & better(block_rows, threshold)
        pos = row_positions(first, count, fold, carried)
        return block_ids, jnp.where(wins, pos, jnp.asarray(length, dtype))

    def scatter_min(acc, block_ids, cand):
        return acc.at[block_ids].min(cand, mode="drop", indices_are_sorted=sorted_ids)

    if block is None or length <= block:
        return scatter_min(acc, *candidates(0, length))
    steps = -(-length // block)

    def body(step, acc):
        # the last block is shifted back to end at `length`: positions seen twice give
        # the same candidates again, and min is idempotent
        first = jnp.minimum(step * block, length - block)
        return scatter_min(acc, *candidates(first, block))

    return lax.fori_loop(0, steps, body, acc)


def arg_of(rows, value, out_groups, ids, num_segments, length, fold, kind, sorted_ids):
    """The arg of ``value`` (the result of :func:`values_impl`): blocks of positions in a
    loop on the CPU, one pass elsewhere."""
    per_position = fold * int(np.prod(rows.shape[1:], dtype=np.int64))
    block = max(1, BLOCK_ELEMENTS // max(per_position, 1))
    run = partial(_arg_pass, rows, value, out_groups, ids, num_segments, length, fold, kind,
                  sorted_ids)
    if length <= block:
        return run(None)
    return lax.platform_dependent(cpu=lambda: run(block), default=lambda: run(None))


def _gradients(arg, ids, g, length, fold, has_out):
    """The whole cotangent to the arg element of each group; to ``out`` where it wins."""
    pos = row_positions(0, length, fold, g.shape[1:])
    winner = pos == take_groups(arg, ids, -1)
    grad_rows = jnp.where(winner, take_groups(g, ids, 0), jnp.zeros((), g.dtype))
    grad_out = jnp.where(arg == length, g, jnp.zeros((), g.dtype)) if has_out else None
    return grad_rows, grad_out


# ------------------------------------------------------------------------ value and arg

def pair_impl(rows, out_groups, ids, num_segments, length, fold, kind, sorted_ids=False):
    """``(values, arg)`` of the flat rows."""
    value = values_impl(rows, out_groups, ids, num_segments, kind, sorted_ids)
    return value, arg_of(rows, value, out_groups, ids, num_segments, length, fold, kind,
                         sorted_ids)


@partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5, 6, 7))
def pair(rows, out_groups, ids, num_segments, length, fold, kind, sorted_ids):
    """:func:`pair_impl` with torch_scatter's gradient."""
    return pair_impl(rows, out_groups, ids, num_segments, length, fold, kind, sorted_ids)


def _pair_fwd(rows, out_groups, ids, num_segments, length, fold, kind, sorted_ids):
    value, arg = pair_impl(rows, out_groups, ids, num_segments, length, fold, kind, sorted_ids)
    # None-ness of the marker is static (pytree structure): whether ``out`` takes part
    marker = None if out_groups is None else jnp.zeros((), jnp.bool_)
    return (value, arg), (arg, ids, marker)


def _pair_bwd(num_segments, length, fold, kind, sorted_ids, residuals, cotangents):
    arg, ids, marker = residuals
    return (*_gradients(arg, ids, cotangents[0], length, fold, marker is not None), None)


pair.defvjp(_pair_fwd, _pair_bwd)
