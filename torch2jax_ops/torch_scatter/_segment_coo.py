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
from jax.typing import ArrayLike

from .._batch_vector import graph_count
from .._checking import SEGMENT_REDUCTIONS, Reduction, as_array, check_index, check_reduce
from .._sharding import OutSharding, sharding_aware
from ._gather import gather_along
from ._groups import Groups
from ._scatter import extreme, extreme_values
from ._validate import check_bounds, check_leading_axes, check_out

__all__ = ["segment_coo", "segment_sum_coo", "segment_add_coo", "segment_mean_coo",
           "segment_min_coo", "segment_max_coo", "gather_coo"]


def _plan(src: Any, index: Any, out: Any, dim_size: Any, *,
          op: str) -> tuple[Groups, jax.Array, Optional[jax.Array]]:
    if out is None:  # a BatchVector index knows its group count
        dim_size = graph_count(index, dim_size)
    index = as_array(index, "index", op=op)
    if index.ndim == 0:  # Groups.build checks the rest (the scatter family's rules)
        raise ValueError(f"{op}: `index` must have at least one dimension, got a 0-d array")
    return Groups.build(src, index, index.ndim - 1, out, dim_size, sorted_index=True, op=op)


@sharding_aware
def segment_sum_coo(src: ArrayLike, index: ArrayLike, out: Optional[ArrayLike] = None,
                    dim_size: Optional[int] = None,
                    *, out_sharding: OutSharding = None) -> jax.Array:
    """Sum per (sorted) group; empty groups give 0 (``out`` + sum with ``out``)."""
    groups, src, out = _plan(src, index, out, dim_size, op="segment_sum_coo")
    return groups.from_groups(groups.sum(src, out))


@sharding_aware
def segment_add_coo(src: ArrayLike, index: ArrayLike, out: Optional[ArrayLike] = None,
                    dim_size: Optional[int] = None,
                    *, out_sharding: OutSharding = None) -> jax.Array:
    """Alias of :func:`segment_sum_coo`."""
    return segment_sum_coo(src, index, out, dim_size)


@sharding_aware
def segment_mean_coo(src: ArrayLike, index: ArrayLike, out: Optional[ArrayLike] = None,
                     dim_size: Optional[int] = None,
                     *, out_sharding: OutSharding = None) -> jax.Array:
    """Mean per group, ``(out + sum) / max(count, 1)``; integers truncate toward zero."""
    groups, src, out = _plan(src, index, out, dim_size, op="segment_mean_coo")
    return groups.from_groups(groups.mean(src, out, rounding="trunc"))


@sharding_aware
def segment_min_coo(src: ArrayLike, index: ArrayLike, out: Optional[ArrayLike] = None,
                    dim_size: Optional[int] = None,
                    *, out_sharding: OutSharding = None) -> tuple[jax.Array, jax.Array]:
    """``(min, argmin)`` per group, with :func:`torch2jax_ops.scatter_min`'s rules."""
    groups, src, out = _plan(src, index, out, dim_size, op="segment_min_coo")
    return extreme(groups, src, out, "min", op="segment_min_coo")


@sharding_aware
def segment_max_coo(src: ArrayLike, index: ArrayLike, out: Optional[ArrayLike] = None,
                    dim_size: Optional[int] = None,
                    *, out_sharding: OutSharding = None) -> tuple[jax.Array, jax.Array]:
    """``(max, argmax)`` per group, with :func:`torch2jax_ops.scatter_max`'s rules."""
    groups, src, out = _plan(src, index, out, dim_size, op="segment_max_coo")
    return extreme(groups, src, out, "max", op="segment_max_coo")


@sharding_aware
def segment_coo(src: ArrayLike, index: ArrayLike, out: Optional[ArrayLike] = None,
                dim_size: Optional[int] = None, reduce: Reduction = "sum",
                *, out_sharding: OutSharding = None) -> jax.Array:
    """torch_scatter.segment_coo: dispatch on ``reduce`` (sum|add|mean|min|max)."""
    kind = check_reduce(reduce, SEGMENT_REDUCTIONS, op="segment_coo",
                        hints={"mul": "for a product use scatter(..., reduce='mul')"})
    if kind in ("min", "max"):  # values only: the arg is never computed in the forward
        op = f"segment_{kind}_coo"
        groups, src, out = _plan(src, index, out, dim_size, op=op)
        return extreme_values(groups, src, out, kind, op=op)
    return (segment_sum_coo if kind == "sum" else segment_mean_coo)(src, index, out, dim_size)


@sharding_aware
def gather_coo(src: ArrayLike, index: ArrayLike,
               out: Optional[ArrayLike] = None, *, out_sharding: OutSharding = None) -> jax.Array:
    """``out[..., e, ...] = src[..., index[..., e], ...]`` along ``index.ndim - 1``.

    ``src`` [*B, N, *F], ``index`` [*B, E] -> [*B, E, *F]. An index outside
    ``[0, N)`` raises (concrete) or gives 0 (traced; see
    :func:`torch2jax_ops.checked`). ``out``, if given, must have E rows along
    the axis and is overwritten. Unlike torch_scatter, the index need not be
    sorted here: a gather does not depend on the order.
    """
    op = "gather_coo"
    src = as_array(src, "src", op=op)
    index = as_array(index, "index", op=op)
    check_index(index, op=op)
    dim = check_leading_axes(src, index, "index", op=op)
    out = check_out(out, src, dim, op=op)
    length = index.shape[-1]
    if out is not None and out.shape[dim] != length:
        raise ValueError(f"{op}: `out` has {out.shape[dim]} rows along axis {dim}, but "
                         f"`index` has {length} entries along its last axis; they must agree")
    if src.size == 0:
        if out is not None:
            return out
        return jnp.zeros(src.shape[:dim] + (length,) + src.shape[dim + 1:], src.dtype)
    check_bounds(index, src.shape[dim], target=f"`src`'s axis {dim}",
                 fix="fix the index", op=op)
    return gather_along(src, index, dim)
