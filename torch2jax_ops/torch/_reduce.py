"""The one reduction core of torch's native scatter API, on the shared ``Groups`` planner.

``scatter_reduce``, ``scatter_add``, ``scatter`` (with ``reduce``),
``index_add`` and ``index_reduce`` all end in :func:`reduce_into`: ``src``
reduced into the rows of ``input`` (``include_self`` decides whether
``input``'s element takes part), with torch's numerics and gradient rules,
each written once here:

* **sum / prod** accumulate float16/bfloat16 in float32 and round once
  (torch's ``scatter_add``/``scatter_reduce`` CPU kernels) -- or, with
  ``sequential=True``, step by step in the narrow type, each partial result
  rounded, in index order (torch's ``index_add`` on a 1-d input or with
  ``alpha != 1``, and ``index_reduce``); the gradient is then the exact one
  of the float32 path (torch's autograd formulas do not follow the rounding).
* **mean**: the sum (self included) rounded to the dtype, divided by the
  count held in the dtype (a float16 count of 3001 is 3000; counted step by
  step it stops at 2048, bfloat16 at 256, as torch's counts do); integers
  floor. The gradient is ``grad / count``.
* **prod**'s gradient is torch's formula: the product of the other elements at a lone
  zero (and for ``input``'s element, which is masked to 1 when 0), else
  ``grad * result / src`` -- so an inf or NaN element gives NaN where torch does.
* **amax / amin** (:func:`_extremum`): NaN propagates; the gradient is
  torch's ``scatter_reduce_backward`` rule: it is split evenly among every
  element equal to the result, ``input``'s element counted *even with
  include_self=False* (then its own share is dropped: torch loses that part
  of the gradient, e.g. PyG's max aggregation into zeros where the max is 0);
  a group whose result is NaN gives NaN gradients to all its members.
* **assign** (``scatter`` without ``reduce``): where several elements write
  the same position the last along ``dim`` wins (torch's CPU order; torch
  documents it as undefined); the gradient is torch's: every writer gets the
  gradient of its target, ``input`` keeps it where nothing was written.

``include_self=False`` leaves the positions no index reaches equal to ``input``.
"""
from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from .. import _dtypes
from ..torch_scatter._gather import take_groups
from ..torch_scatter._groups import Groups

__all__ = ["plan_scatter", "plan_index", "reduce_into", "assign"]

_HALF = (jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16))
#: where counting up by 1.0 stops in the narrow types (2049 rounds to 2048, 257 to 256)
_COUNT_STALL = {jnp.dtype(jnp.float16): 2048, jnp.dtype(jnp.bfloat16): 256}


# ----------------------------------------------------------------------------- plans

def plan_scatter(input: jax.Array, dim: int, index: jax.Array, src: jax.Array, *,
                 op: str) -> tuple[Groups, jax.Array]:
    """torch's scatter layout as a ``Groups`` plan: ``(groups, src_block)``.

    ``input``, ``index`` and ``src`` have the same number (>= 1) of dims and a
    non-empty ``index`` (validated). Only the index-shaped leading block of
    ``src`` is read; where ``index`` is smaller than ``input`` in a dim other
    than ``dim``, block and index are padded to ``input``'s size with an id
    that reaches no group, so that the plan's groups are exactly ``input``'s
    elements (``groups.to_groups(input)`` is the ``self`` of every group).
    """
    size = input.shape[dim]
    index_shape = index.shape
    if src.shape != index_shape:
        src = src[tuple(slice(0, n) for n in index_shape)]
    index = index.astype(_dtypes.index_dtype())
    pad = [(0, 0 if d == dim else input.shape[d] - n) for d, n in enumerate(index_shape)]
    if any(after for _, after in pad):
        src = jnp.pad(src, pad)
        index = jnp.pad(index, pad, constant_values=size)
    return Groups(src, index, dim, size, tuple(index.shape), op=op), src


def plan_index(input: jax.Array, dim: int, index: jax.Array, source: jax.Array, *,
               op: str) -> Groups:
    """The index ops' layout: a vector ``index`` picks the ``input`` slice of each ``source``
    slice along ``dim`` (``input``, ``source`` >= 1-d with equal shapes but at ``dim``)."""
    aligned = (1,) * dim + (index.size,) + (1,) * (source.ndim - dim - 1)
    return Groups(source, index.reshape(-1).astype(_dtypes.index_dtype()), dim,
                  input.shape[dim], aligned, op=op)


# ----------------------------------------------------------------------------- reductions

def reduce_into(groups: Groups, src: jax.Array, input: jax.Array, reduce: str,
                include_self: bool, *, sequential: bool = False,
                sequential_count: bool = False, alpha: Any = None, op: str) -> jax.Array:
    """``src`` (Groups' src layout) reduced into ``input`` (its out layout); input's shape.

    ``reduce`` is "sum", "prod", "mean", "amax" or "amin". ``sequential``:
    float16/bfloat16 sums and products round at every step, in index order;
    ``sequential_count``: so does mean's count. ``alpha`` scales ``src``
    first (``index_add``; torch rounds ``src * alpha`` to the dtype).
    """
    dtype = jnp.dtype(src.dtype)
    if dtype == jnp.bool_:
        return _reduce_bool(groups, src, input, reduce, include_self, alpha, op=op)
    if jnp.issubdtype(dtype, jnp.complexfloating) and reduce not in ("sum", "mean"):
        raise TypeError(f"{op}: reduce={reduce!r} is not supported for complex dtype {dtype} "
                        f"(complex numbers have no order; a complex product has no "
                        f"gradient rule here); use 'sum' or 'mean'")
    sequential = sequential and dtype in _HALF
    base = groups.to_groups(input)
    count = groups.counts()
    touched = count > 0
    if reduce in ("amax", "amin"):
        rows = groups.to_rows(src)
        if jnp.issubdtype(dtype, jnp.floating):
            result = _extremum(rows, base, groups.ids, groups.num_segments, reduce,
                               include_self)
        else:
            result = _extremum_value(rows, base, groups.ids, groups.num_segments, reduce,
                                     include_self)
        return groups.from_groups(result)
    scaled = src if alpha is None else _scale(src, alpha, sequential)
    if reduce == "mean":
        total = _accumulate("sum", groups, scaled, input, base, include_self, sequential)
        divisor = _count(count + int(include_self), dtype, sequential_count)
        result = _divide(total, jnp.maximum(divisor, jnp.ones((), divisor.dtype)))
    else:
        result = _accumulate(reduce, groups, scaled, input, base, include_self, sequential)
    if not include_self and reduce != "prod":
        result = jnp.where(touched, result, base)
    return groups.from_groups(result)


def _scale(src: jax.Array, alpha: Any, sequential: bool) -> jax.Array:
    if isinstance(alpha, bool) or alpha == 1:
        return src
    if sequential:  # torch's 1-d kernel: alpha in the dtype, src * alpha rounded to the dtype
        a = jnp.asarray(alpha, src.dtype).astype(jnp.float32)
        return (src.astype(jnp.float32) * a).astype(src.dtype)
    return src * jnp.asarray(alpha, src.dtype)


def _accumulate(kind: str, groups: Groups, src: jax.Array, input: jax.Array, base: jax.Array,
                include_self: bool, sequential: bool) -> jax.Array:
    """Sum or product per group (self included with ``include_self``), in the dtype.

    Without ``include_self`` the untouched groups are left to the caller (sum)
    or already hold ``base`` (product)."""
    if kind == "prod":
        rows = groups.to_rows(src)
        args = (rows, base, groups.ids, groups.num_segments, include_self, sequential)
        if jnp.issubdtype(src.dtype, jnp.floating):
            return _product(*args)
        return _product_value(*args)
    reference = groups.sum(src, input if include_self else None)  # float32 for half types
    if not sequential:
        return reference
    start = base if include_self else jnp.zeros(base.shape, src.dtype)
    exact = _sequential(kind, jax.lax.stop_gradient(groups.to_rows(src)), groups.ids,
                        jax.lax.stop_gradient(start))
    return _value_of(reference, exact)


# ----------------------------------------------------------------------------- prod

def _touched(ids: jax.Array, num_segments: int, ndim: int) -> jax.Array:
    count = jax.ops.segment_sum(jnp.ones(ids.shape, jnp.int32), ids, num_segments)
    return count.reshape(count.shape + (1,) * (ndim - 1)) > 0


def _product_value(rows, base, ids, num_segments, include_self, sequential):
    """torch's prod reduction in group layout; untouched groups keep ``base`` without
    include_self. float16/bfloat16: float32 and one rounding, or step by step."""
    dtype = rows.dtype
    if sequential and dtype in _HALF:
        start = base if include_self else jnp.ones(base.shape, dtype)
        value = _sequential("prod", rows, ids, start)
    else:
        acc = _dtypes.accumulation_dtype(dtype)
        value = jax.ops.segment_prod(rows.astype(acc), ids, num_segments)
        if include_self:
            value = base.astype(acc) * value
        value = value.astype(dtype)
    if not include_self:
        value = jnp.where(_touched(ids, num_segments, rows.ndim), value, base)
    return value


@partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def _product(rows, base, ids, num_segments, include_self, sequential):
    return _product_value(rows, base, ids, num_segments, include_self, sequential)


def _product_fwd(rows, base, ids, num_segments, include_self, sequential):
    value = _product_value(rows, base, ids, num_segments, include_self, sequential)
    return value, (rows, base, ids, value)


def _product_bwd(num_segments, include_self, sequential, residuals, g):
    # torch's scatter_reduce_backward / index_reduce_backward for "prod", step by step in
    # g's dtype (each op rounded), products of the other elements without dividing by 0:
    #   grad_self = g * prod(masked_self, src) / masked_self      masked_self: 0 -> 1
    #   grad_src  = (g * prod(self, src with its single zero -> 1))[index]   at a lone zero
    #             = (g * result)[index] / src                              elsewhere (0 -> 1)
    rows, base, ids, value = residuals
    dtype = g.dtype
    wide = _dtypes.accumulation_dtype(dtype)

    def rounded(x):
        return x.astype(dtype).astype(wide)

    def product(r, b):
        return _product_value(r, b, ids, num_segments, include_self, sequential).astype(wide)

    gw = g.astype(wide)
    masked_self = jnp.where(base == 0, jnp.ones((), dtype), base)
    grad_base = rounded(rounded(gw * product(rows, masked_self)) / masked_self.astype(wide))
    if not include_self:
        grad_base = jnp.where(_touched(ids, num_segments, rows.ndim), 0, grad_base)
    is_zero = rows == 0
    zeros = jax.ops.segment_sum(is_zero.astype(jnp.int32), ids, num_segments)
    single = is_zero & (take_groups(zeros, ids, 0) == 1)
    at_zero = take_groups(rounded(gw * product(jnp.where(single, jnp.ones((), dtype), rows),
                                               base)), ids, 0)
    divided = take_groups(rounded(gw * value.astype(wide)), ids, 0) / \
        jnp.where(is_zero, jnp.ones((), dtype), rows).astype(wide)
    valid = ((ids >= 0) & (ids < num_segments)).reshape((-1,) + (1,) * (rows.ndim - 1))
    grad_rows = jnp.where(valid, jnp.where(single, at_zero, divided), 0)
    return grad_rows.astype(dtype), grad_base.astype(dtype), None


_product.defvjp(_product_fwd, _product_bwd)


def _sequential(kind: str, rows: jax.Array, ids: jax.Array, start: jax.Array) -> jax.Array:
    """torch's index loop in a narrow float type: ``acc[ids[i]] = round(acc[ids[i]] op rows[i])``
    for i in order (computed in float32 and rounded, as c10::Half / BFloat16 arithmetic is).
    Ids outside ``[0, len(start))`` are skipped."""
    n, m = start.shape[0], rows.shape[0]
    if n == 0 or m == 0:
        return start

    def step(i, acc):
        j = ids[i]
        ok = (j >= 0) & (j < n)
        j = jnp.clip(j, 0, n - 1)
        current = jax.lax.dynamic_index_in_dim(acc, j, 0, keepdims=False)
        x = jax.lax.dynamic_index_in_dim(rows, i, 0, keepdims=False).astype(jnp.float32)
        value = current.astype(jnp.float32)
        value = (value + x) if kind == "sum" else (value * x)
        value = jnp.where(ok, value.astype(acc.dtype), current)
        return jax.lax.dynamic_update_index_in_dim(acc, value, j, 0)

    return jax.lax.fori_loop(0, m, step, start)


@jax.custom_jvp
def _value_of(reference: jax.Array, exact: jax.Array) -> jax.Array:
    """``exact``'s value with ``reference``'s derivative (the rounding-faithful forward of a
    sum or product whose gradient is the exact one)."""
    return exact


@_value_of.defjvp
def _value_of_jvp(primals, tangents):
    return primals[1], tangents[0]


def _count(count: jax.Array, dtype: Any, sequential: bool) -> jax.Array:
    """torch's count tensor: ``count`` held in ``dtype`` (rounded; counted step by step in
    float16/bfloat16 it stops at 2048/256)."""
    dtype = jnp.dtype(dtype)
    if sequential and dtype in _COUNT_STALL:
        count = jnp.minimum(count, _COUNT_STALL[dtype])
    return count.astype(dtype)


def _divide(total: jax.Array, count: jax.Array) -> jax.Array:
    """torch's ``div_(count)`` (floating: one rounding) / ``div_(count, rounding_mode="floor")``."""
    if jnp.issubdtype(total.dtype, jnp.integer):
        return jnp.floor_divide(total, count)
    if total.dtype in _HALF:
        return (total.astype(jnp.float32) / count.astype(jnp.float32)).astype(total.dtype)
    return total / count


def _reduce_bool(groups: Groups, src: jax.Array, input: jax.Array, reduce: str,
                 include_self: bool, alpha: Any, *, op: str) -> jax.Array:
    """torch on bool tensors: sum/amax are "any", prod/amin are "all"; no mean."""
    if reduce == "mean":
        raise TypeError(f"{op}: reduce='mean' is not defined for bool tensors (torch has no "
                        f"kernel); cast to a float dtype first")
    as_int = src.astype(jnp.int32)
    if alpha is not None and not alpha:
        as_int = jnp.zeros_like(as_int)
    kind = {"sum": "amax", "amax": "amax", "prod": "amin", "amin": "amin"}[reduce]
    out = reduce_into(groups, as_int, input.astype(jnp.int32), kind, include_self, op=op)
    return out.astype(jnp.bool_)


# ----------------------------------------------------------------------------- amax / amin

def _extremum_value(rows, base, ids, num_segments, kind, include_self):
    segment = jax.ops.segment_max if kind == "amax" else jax.ops.segment_min
    best = segment(rows, ids, num_segments)  # NaN propagates; empty groups: -inf / +inf
    if include_self:
        return (jnp.maximum if kind == "amax" else jnp.minimum)(base, best)
    count = jax.ops.segment_sum(jnp.ones(ids.shape, jnp.int32), ids, num_segments)
    touched = count.reshape(count.shape + (1,) * (rows.ndim - 1)) > 0
    return jnp.where(touched, best, base)


@partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def _extremum(rows, base, ids, num_segments, kind, include_self):
    return _extremum_value(rows, base, ids, num_segments, kind, include_self)


def _extremum_fwd(rows, base, ids, num_segments, kind, include_self):
    value = _extremum_value(rows, base, ids, num_segments, kind, include_self)
    return value, (rows, base, ids, value)


def _extremum_bwd(num_segments, kind, include_self, residuals, g):
    # torch's scatter_reduce_backward / index_reduce_backward for amax/amin, in g's dtype:
    #   N = (self == result) + scatter_add(src == result[index]);  share = g / N
    #   grad_self = (self == result) * share  (0 where scattered to, without include_self)
    #   grad_src  = (src == result[index]) * share[index]
    rows, base, ids, value = residuals
    self_is = base == value
    rows_is = rows == take_groups(value, ids, 0)
    hits = jax.ops.segment_sum(rows_is.astype(jnp.float32), ids, num_segments)
    n = (self_is.astype(jnp.float32) + hits).astype(g.dtype)
    share = (g.astype(jnp.float32) / n.astype(jnp.float32)).astype(g.dtype)
    grad_base = _mask_times(self_is, share)  # 0 * inf = NaN where the result is NaN
    if not include_self:
        count = jax.ops.segment_sum(jnp.ones(ids.shape, jnp.int32), ids, num_segments)
        touched = count.reshape(count.shape + (1,) * (g.ndim - 1)) > 0
        grad_base = jnp.where(touched, jnp.zeros((), g.dtype), grad_base)
    valid = ((ids >= 0) & (ids < num_segments)).reshape((-1,) + (1,) * (rows.ndim - 1))
    grad_rows = jnp.where(valid, _mask_times(rows_is, take_groups(share, ids, 0)),
                          jnp.zeros((), g.dtype))
    return grad_rows, grad_base, None


def _mask_times(mask: jax.Array, x: jax.Array) -> jax.Array:
    """``mask.astype(x.dtype) * x`` as IEEE and torch compute it: ``0 * inf`` and ``0 * NaN``
    are NaN. Written out because XLA rewrites ``convert(pred) * x`` into
    ``select(pred, x, 0)`` under jit, which gives 0 there (eager gives NaN)."""
    zero_times = jnp.where(jnp.isfinite(x), jnp.zeros((), x.dtype), jnp.full((), jnp.nan, x.dtype))
    return jnp.where(mask, x, zero_times)


_extremum.defvjp(_extremum_fwd, _extremum_bwd)


# ----------------------------------------------------------------------------- assign

def assign(groups: Groups, src: jax.Array, input: jax.Array) -> jax.Array:
    """``scatter`` without ``reduce``: each written position takes its last writer along
    ``dim``; the rest keep ``input``. Gradient: torch's (every writer gets its target's)."""
    rows = groups.to_rows(src)
    base = groups.to_groups(input)
    touched = groups.counts() > 0
    last = jax.ops.segment_max(jnp.arange(groups.num_rows, dtype=groups.ids.dtype),
                               groups.ids, groups.num_segments)
    picked = jnp.take(rows, jnp.clip(last, 0, max(groups.num_rows - 1, 0)), axis=0)
    exact = jnp.where(touched, picked, base)
    if not jnp.issubdtype(src.dtype, jnp.inexact):
        return groups.from_groups(exact)
    # d(out)/d(src) of torch's scatter is gather(grad): the derivative of a sum into the
    # written positions; d(out)/d(input) is grad where nothing was written.
    reference = jnp.where(touched, groups.sum_rows(rows), base)
    return groups.from_groups(_value_of(reference, jax.lax.stop_gradient(exact)))
