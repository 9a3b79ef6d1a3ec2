"""torch_scatter's COO ops on JAX: segment_coo, segment_{sum,add,mean,min,max}_coo, gather_coo.

Signatures are torch_scatter 2.1's::

    segment_coo(src, index, out=None, dim_size=None, reduce="sum") -> out
    segment_max_coo(src, index, out=None, dim_size=None) -> (out, argmax)
    gather_coo(src, index, out=None) -> out

Shapes: ``index`` [*B, E], sorted (non-decreasing) along its last axis;
``src`` [*B, E, *F]: the reduced axis is ``index.ndim - 1``, leading axes of
size 1 in ``index`` broadcast, trailing axes ``F`` ride along. The result is
[*B, N, *F] with N = ``out.shape[dim]``, else ``dim_size``, else
``index.max() + 1`` (a Python int under jit: pass ``dim_size``).

``segment_coo`` is ``scatter`` along ``index.ndim - 1`` with a sorted index:
``out=`` takes part as in scatter (sum/mean accumulate into it, min/max
compare with it). A concrete unsorted index raises; under jit the grouping is
still right (nothing relies on the order) and :func:`torch2jax_ops.checked`
turns the order check into an error. Integer means truncate toward zero (the
scatter family floors).
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp

from .core import (Groups, as_array, check_bounds, check_index, check_leading_axes, check_out,
                   gather_along)
from .scatter_reduce import extreme

__all__ = ["segment_coo", "segment_sum_coo", "segment_add_coo", "segment_mean_coo",
           "segment_min_coo", "segment_max_coo", "gather_coo", "COO_REDUCTIONS"]

COO_REDUCTIONS = ("sum", "add", "mean", "min", "max")


def _plan(fn: str, src: Any, index: Any, out: Any, dim_size: Any):
    index = as_array(index, "index", fn)
    if index.ndim == 0:  # Groups.build checks the rest (the scatter family's rules)
        raise ValueError(f"{fn}: `index` must have at least one dimension, got a 0-d array")
    return Groups.build(fn, src, index, index.ndim - 1, out, dim_size, sorted_index=True)


def segment_sum_coo(src, index, out=None, dim_size: Optional[int] = None):
    """Sum per (sorted) group; empty groups give 0 (``out`` + sum with ``out``)."""
    groups, src, out = _plan("segment_sum_coo", src, index, out, dim_size)
    return groups.restore(groups.sum(src, out))


def segment_add_coo(src, index, out=None, dim_size: Optional[int] = None):
    """Alias of :func:`segment_sum_coo`."""
    return segment_sum_coo(src, index, out, dim_size)


def segment_mean_coo(src, index, out=None, dim_size: Optional[int] = None):
    """Mean per group, ``(out + sum) / max(count, 1)``; integers truncate toward zero."""
    groups, src, out = _plan("segment_mean_coo", src, index, out, dim_size)
    return groups.restore(groups.mean(src, out, rounding="trunc"))


def segment_min_coo(src, index, out=None, dim_size: Optional[int] = None):
    """``(min, argmin)`` per group, with :func:`torch2jax_ops.scatter_min`'s rules."""
    groups, src, out = _plan("segment_min_coo", src, index, out, dim_size)
    return extreme(groups, src, out, "min", "segment_min_coo")


def segment_max_coo(src, index, out=None, dim_size: Optional[int] = None):
    """``(max, argmax)`` per group, with :func:`torch2jax_ops.scatter_max`'s rules."""
    groups, src, out = _plan("segment_max_coo", src, index, out, dim_size)
    return extreme(groups, src, out, "max", "segment_max_coo")


def segment_coo(src, index, out=None, dim_size: Optional[int] = None, reduce: str = "sum"):
    """torch_scatter.segment_coo: dispatch on ``reduce`` (sum|add|mean|min|max)."""
    if reduce in ("sum", "add"):
        return segment_sum_coo(src, index, out, dim_size)
    if reduce == "mean":
        return segment_mean_coo(src, index, out, dim_size)
    if reduce == "min":
        return segment_min_coo(src, index, out, dim_size)[0]
    if reduce == "max":
        return segment_max_coo(src, index, out, dim_size)[0]
    raise ValueError(f"segment_coo: `reduce` must be one of "
                     f"{', '.join(map(repr, COO_REDUCTIONS))}, got {reduce!r}"
                     + (" (for a product use scatter(..., reduce='mul'))" if reduce == "mul"
                        else ""))


def gather_coo(src, index, out=None):
    """``out[..., e, ...] = src[..., index[..., e], ...]`` along ``index.ndim - 1``.

    ``src`` [*B, N, *F], ``index`` [*B, E] -> [*B, E, *F]. An index outside
    ``[0, N)`` raises (concrete) or gives 0 (traced; see
    :func:`torch2jax_ops.checked`). ``out``, if given, must have E rows along
    the axis and is overwritten. Unlike torch_scatter, the index need not be
    sorted here: a gather does not depend on the order.
    """
    fn = "gather_coo"
    src = as_array(src, "src", fn)
    index = as_array(index, "index", fn)
    check_index(index, fn)
    dim = check_leading_axes(src, index, fn, "index")
    out = check_out(out, src, dim, fn)
    length = index.shape[-1]
    if out is not None and out.shape[dim] != length:
        raise ValueError(f"{fn}: `out` has {out.shape[dim]} rows along axis {dim}, but "
                         f"`index` has {length} entries along its last axis; they must agree")
    if src.size == 0:
        if out is not None:
            return out
        return jnp.zeros(src.shape[:dim] + (length,) + src.shape[dim + 1:], src.dtype)
    check_bounds(index, src.shape[dim], fn, target=f"`src`'s axis {dim}",
                 fix="fix the index")
    return gather_along(src, index, dim)
