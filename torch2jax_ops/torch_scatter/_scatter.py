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

from .._checking import REDUCTIONS, check_reduce
from ._gather import take_groups
from ._groups import Groups

__all__ = ["scatter", "scatter_sum", "scatter_add", "scatter_mul", "scatter_mean",
           "scatter_min", "scatter_max", "extreme", "extreme_init"]


def scatter_sum(src, index, dim: int = -1, out=None, dim_size: Optional[int] = None):
    """Sum of ``src`` entries per group; empty groups give 0 (``out`` + sum with ``out``)."""
    groups, src, out = Groups.build(src, index, dim, out, dim_size, op="scatter_sum")
    return groups.from_groups(groups.sum(src, out))


def scatter_add(src, index, dim: int = -1, out=None, dim_size: Optional[int] = None):
    """Alias of :func:`scatter_sum`."""
    return scatter_sum(src, index, dim, out, dim_size)


def scatter_mean(src, index, dim: int = -1, out=None, dim_size: Optional[int] = None):
    """Mean per group; empty groups give 0 (keep ``out``); integers use floor division.

    With ``out``: ``(out + sum) / max(count, 1)``, as torch_scatter computes it.
    The count is exact (int32); float16/bfloat16 sums accumulate in float32
    and divide in float32, rounding like torch.
    """
    groups, src, out = Groups.build(src, index, dim, out, dim_size, op="scatter_mean")
    return groups.from_groups(groups.mean(src, out, rounding="floor"))


def scatter_mul(src, index, dim: int = -1, out=None, dim_size: Optional[int] = None):
    """Product per group; empty groups give 1 (``out`` * product with ``out``).

    The gradient is the product of the other elements of the group, also when
    an element is 0 (torch_scatter divides by the element and gives 0 there).
    """
    groups, src, out = Groups.build(src, index, dim, out, dim_size, op="scatter_mul")
    _reject_complex(src, op="scatter_mul")
    return groups.from_groups(groups.prod(src, out))


def scatter_min(src, index, dim: int = -1, out=None, dim_size: Optional[int] = None):
    """``(min, argmin)`` per group; see :func:`scatter_max` for the rules."""
    return _scatter_extreme("min", src, index, dim, out, dim_size, op="scatter_min")


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
    return _scatter_extreme("max", src, index, dim, out, dim_size, op="scatter_max")


def scatter(src, index, dim: int = -1, out=None, dim_size: Optional[int] = None,
            reduce: str = "sum"):
    """torch_scatter.scatter: dispatch on ``reduce`` (sum|add|mul|mean|min|max).

    For "min"/"max" only the values are returned, as in torch_scatter.
    """
    kind = check_reduce(reduce, REDUCTIONS, op="scatter")
    if kind in ("min", "max"):
        return (scatter_min if kind == "min" else scatter_max)(src, index, dim, out, dim_size)[0]
    reduction = {"sum": scatter_sum, "mul": scatter_mul, "mean": scatter_mean}[kind]
    return reduction(src, index, dim, out, dim_size)


# --------------------------------------------------------------------------- min / max

def _reject_complex(src: jax.Array, *, op: str) -> None:
    if jnp.issubdtype(src.dtype, jnp.complexfloating):
        raise TypeError(f"{op}: `src` of dtype {src.dtype} is not supported "
                        f"(complex numbers have no order / torch_scatter has no kernel)")


def _scatter_extreme(kind, src, index, dim, out, dim_size, *, op):
    groups, src, out = Groups.build(src, index, dim, out, dim_size, op=op)
    return extreme(groups, src, out, kind, op=op)


def extreme(groups: Groups, src: jax.Array, out: Optional[jax.Array], kind: str, *, op: str):
    """``(values, arg)`` of the groups planned in ``groups``: min or max (``kind``).

    The rules of :func:`scatter_max`; shared by scatter_min/max and the
    segment_{min,max}_{csr,coo} ops.
    """
    _reject_complex(src, op=op)
    rows = groups.to_rows(src)
    out_groups = None if out is None else groups.to_groups(out)
    args = (rows, out_groups, groups.ids, groups.positions(), groups.num_segments,
            groups.length, kind)
    if jnp.issubdtype(src.dtype, jnp.floating):
        value, arg = _extreme(*args)
    else:
        value, arg, _ = _extreme_impl(*args)
    return groups.from_groups(value), groups.from_groups(arg)


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
