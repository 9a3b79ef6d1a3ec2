"""torch_scatter's scatter family on JAX: scatter, scatter_{sum,add,mul,mean,min,max}.

Signatures, defaults and numerics are torch_scatter 2.1's::

    scatter_sum(src, index, dim=-1, out=None, dim_size=None) -> out
    scatter_max(src, index, dim=-1, out=None, dim_size=None) -> (out, argmax)
    scatter(src, index, dim=-1, out=None, dim_size=None, reduce="sum") -> out

Shapes: ``src`` [..., D (at dim), ...]; ``index`` broadcasts to ``src`` (a
1-D index of length D lines up with ``dim``; a k-D index with src's leading k
axes); the output is ``src``'s shape with ``dim_size`` at ``dim``.

JAX arrays are immutable, so ``out=`` is never written to: the result that
torch_scatter would leave in ``out`` is returned.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .core import Groups, take_groups

__all__ = ["scatter", "scatter_sum", "scatter_add", "scatter_mul", "scatter_mean",
           "scatter_min", "scatter_max", "REDUCTIONS", "extreme", "extreme_init"]

REDUCTIONS = ("sum", "add", "mul", "mean", "min", "max")


def scatter_sum(src, index, dim: int = -1, out=None, dim_size: Optional[int] = None):
    """Sum of ``src`` entries per group; empty groups give 0 (``out`` + sum with ``out``)."""
    groups, src, out = Groups.build("scatter_sum", src, index, dim, out, dim_size)
    return groups.restore(groups.sum(src, out))


def scatter_add(src, index, dim: int = -1, out=None, dim_size: Optional[int] = None):
    """Alias of :func:`scatter_sum`."""
    return scatter_sum(src, index, dim, out, dim_size)


def scatter_mean(src, index, dim: int = -1, out=None, dim_size: Optional[int] = None):
    """Mean per group; empty groups give 0 (keep ``out``); integers use floor division.

    With ``out``: ``(out + sum) / max(count, 1)``, as torch_scatter computes it.
    The count is exact (int32); float16/bfloat16 sums accumulate in float32
    and divide in float32, rounding like torch.
    """
    groups, src, out = Groups.build("scatter_mean", src, index, dim, out, dim_size)
    return groups.restore(groups.mean(src, out, rounding="floor"))


def scatter_mul(src, index, dim: int = -1, out=None, dim_size: Optional[int] = None):
    """Product per group; empty groups give 1 (``out`` * product with ``out``).

    The gradient is the product of the other elements of the group, also when
    an element is 0 (torch_scatter divides by the element and gives 0 there).
    """
    groups, src, out = Groups.build("scatter_mul", src, index, dim, out, dim_size)
    _reject_complex(src, "scatter_mul")
    rows = groups.rows(src)
    out_groups = None if out is None else groups.groups(out)
    if jnp.issubdtype(src.dtype, jnp.inexact):
        result = _product(rows, out_groups, groups.ids, groups.num_segments)
    else:
        result = _product_impl(rows, out_groups, groups.ids, groups.num_segments)
    return groups.restore(result)


def scatter_min(src, index, dim: int = -1, out=None, dim_size: Optional[int] = None):
    """``(min, argmin)`` per group; see :func:`scatter_max` for the rules."""
    return _scatter_extreme("scatter_min", "min", src, index, dim, out, dim_size)


def scatter_max(src, index, dim: int = -1, out=None, dim_size: Optional[int] = None):
    """``(max, argmax)`` per group, with torch_scatter's CPU rules.

    * argmax is the position along ``dim`` of the first maximal element;
      empty groups give 0 and ``src.shape[dim]`` as argmax;
    * NaN never wins (it is skipped);
    * without ``out``, a group whose max is the dtype's lowest finite value or
      -inf counts as empty (value 0, argmax ``src.shape[dim]``);
    * with ``out``, ``out`` takes part: result ``max(out, max(group))``, argmax
      stays ``src.shape[dim]`` where ``out`` wins (ties go to ``out``);
    * the gradient sends the whole cotangent to the argmax element (JAX's own
      segment_max would split it among ties); ``out`` gets the cotangent where
      it wins.

    argmax has JAX's default integer dtype (int32, or int64 in x64 mode).
    """
    return _scatter_extreme("scatter_max", "max", src, index, dim, out, dim_size)


def scatter(src, index, dim: int = -1, out=None, dim_size: Optional[int] = None,
            reduce: str = "sum"):
    """torch_scatter.scatter: dispatch on ``reduce`` (sum|add|mul|mean|min|max).

    For "min"/"max" only the values are returned, as in torch_scatter.
    """
    if reduce in ("sum", "add"):
        return scatter_sum(src, index, dim, out, dim_size)
    if reduce == "mul":
        return scatter_mul(src, index, dim, out, dim_size)
    if reduce == "mean":
        return scatter_mean(src, index, dim, out, dim_size)
    if reduce == "min":
        return scatter_min(src, index, dim, out, dim_size)[0]
    if reduce == "max":
        return scatter_max(src, index, dim, out, dim_size)[0]
    raise ValueError(f"scatter: `reduce` must be one of {', '.join(map(repr, REDUCTIONS))}, "
                     f"got {reduce!r}")


# --------------------------------------------------------------------------- min / max

def _reject_complex(src: jax.Array, fn: str) -> None:
    if jnp.issubdtype(src.dtype, jnp.complexfloating):
        raise TypeError(f"{fn}: `src` of dtype {src.dtype} is not supported "
                        f"(complex numbers have no order / torch_scatter has no kernel)")


def _scatter_extreme(fn, kind, src, index, dim, out, dim_size):
    groups, src, out = Groups.build(fn, src, index, dim, out, dim_size)
    return extreme(groups, src, out, kind, fn)


def extreme(groups: Groups, src: jax.Array, out: Optional[jax.Array], kind: str, fn: str):
    """``(values, arg)`` of the groups planned in ``groups``: min or max (``kind``).

    The rules of :func:`scatter_max`; shared by scatter_min/max and the
    segment_{min,max}_{csr,coo} ops.
    """
    _reject_complex(src, fn)
    rows = groups.rows(src)
    out_groups = None if out is None else groups.groups(out)
    args = (rows, out_groups, groups.ids, groups.positions(), groups.num_segments,
            groups.length, kind)
    if jnp.issubdtype(src.dtype, jnp.floating):
        value, arg = _extreme(*args)
    else:
        value, arg, _ = _extreme_impl(*args)
    return groups.restore(value), groups.restore(arg)


def extreme_init(dtype, kind: str):
    """torch_scatter's start value: lowest finite (max) or largest finite (min)."""
    info = jnp.finfo(dtype) if jnp.issubdtype(dtype, jnp.floating) else jnp.iinfo(dtype)
    return np.array(info.min if kind == "max" else info.max, dtype=dtype)


def _extreme_impl(rows, out_groups, ids, positions, num_segments, length, kind):
    is_max = kind == "max"
    better = jnp.greater if is_max else jnp.less
    if jnp.issubdtype(rows.dtype, jnp.floating):  # NaN never wins in torch_scatter (CPU)
        clean = jnp.where(jnp.isnan(rows), -jnp.inf if is_max else jnp.inf, rows)
    else:
        clean = rows
    segment = jax.ops.segment_max if is_max else jax.ops.segment_min
    best = segment(clean, ids, num_segments)
    if out_groups is None:
        init = extreme_init(rows.dtype, kind)
        value = jnp.where(better(best, init), best, jnp.zeros_like(best))
        gathered_threshold = init
    else:
        value = jnp.where(better(best, out_groups), best, out_groups)
        gathered_threshold = take_groups(out_groups, ids, 0)
    gathered = take_groups(value, ids, 0)
    valid = ((ids >= 0) & (ids < num_segments)).reshape((-1,) + (1,) * (rows.ndim - 1))
    wins = valid & (clean == gathered) & better(clean, gathered_threshold)
    pos = positions.reshape((-1,) + (1,) * (rows.ndim - 1))
    candidate = jnp.where(wins, pos, jnp.asarray(length, pos.dtype))
    arg = jnp.minimum(jax.ops.segment_min(candidate, ids, num_segments), length)
    return value, arg, wins


@partial(jax.custom_vjp, nondiff_argnums=(4, 5, 6))
def _extreme(rows, out_groups, ids, positions, num_segments, length, kind):
    value, arg, _ = _extreme_impl(rows, out_groups, ids, positions, num_segments, length, kind)
    return value, arg


def _extreme_fwd(rows, out_groups, ids, positions, num_segments, length, kind):
    value, arg, _ = _extreme_impl(rows, out_groups, ids, positions, num_segments, length, kind)
    return (value, arg), (arg, ids, positions, out_groups is not None)


def _extreme_bwd(num_segments, length, kind, residuals, cotangents):
    arg, ids, positions, has_out = residuals
    g = cotangents[0]
    pos = positions.reshape((-1,) + (1,) * (g.ndim - 1))
    winner = pos == take_groups(arg, ids, -1)
    grad_rows = jnp.where(winner, take_groups(g, ids, 0),
                          jnp.zeros((), g.dtype))
    grad_out = jnp.where(arg == length, g, jnp.zeros((), g.dtype)) if has_out else None
    return grad_rows, grad_out, None, None


_extreme.defvjp(_extreme_fwd, _extreme_bwd)


# --------------------------------------------------------------------------------- mul

def _product_impl(rows, out_groups, ids, num_segments):
    product = jax.ops.segment_prod(rows, ids, num_segments)
    return product if out_groups is None else out_groups * product


@partial(jax.custom_vjp, nondiff_argnums=(3,))
def _product(rows, out_groups, ids, num_segments):
    return _product_impl(rows, out_groups, ids, num_segments)


def _product_fwd(rows, out_groups, ids, num_segments):
    return _product_impl(rows, out_groups, ids, num_segments), (rows, out_groups, ids)


def _product_bwd(num_segments, residuals, g):
    rows, out_groups, ids = residuals
    is_zero = rows == 0
    zeros = jax.ops.segment_sum(is_zero.astype(jnp.int32), ids, num_segments)
    nonzero_product = jax.ops.segment_prod(jnp.where(is_zero, 1, rows), ids, num_segments)
    z = take_groups(zeros, ids, 2)
    p = take_groups(nonzero_product, ids, 0)
    # d(prod)/d(x_e) = product of the other elements of the group, computed
    # without dividing by a zero: a zero element gets the product of the
    # non-zeros when it is the only zero, every element gets 0 with >= 2 zeros.
    others = jnp.where(is_zero, jnp.where(z == 1, p, 0),
                       jnp.where(z == 0, p / jnp.where(is_zero, 1, rows), 0))
    scale = g if out_groups is None else g * out_groups
    grad_rows = take_groups(scale, ids, 0) * others
    grad_out = None
    if out_groups is not None:
        grad_out = g * jnp.where(zeros > 0, 0, nonzero_product)
    return grad_rows, grad_out, None


_product.defvjp(_product_fwd, _product_bwd)
