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

from typing import Optional

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from .._checking import REDUCTIONS, Reduction, check_reduce
from .._sharding import OutSharding, sharding_aware
from . import _extreme
from ._groups import Groups

__all__ = ["scatter", "scatter_sum", "scatter_add", "scatter_mul", "scatter_mean",
           "scatter_min", "scatter_max", "extreme", "extreme_values", "extreme_init"]


@sharding_aware
def scatter_sum(src: ArrayLike, index: ArrayLike, dim: int = -1, out: Optional[ArrayLike] = None,
                dim_size: Optional[int] = None, *, deterministic: bool = False,
                out_sharding: OutSharding = None) -> jax.Array:
    """Sum of ``src`` entries per group; empty groups give 0 (``out`` + sum with ``out``).

    ``deterministic=True`` (an addition to torch_scatter's signature) sums in an
    order fixed by the data: the index is sorted (stably) and a sorted segment
    sum runs over the permuted ``src``. The default adds in whatever order the
    scatter runs in, which on a GPU varies from run to run (float sums may differ
    in the last bits). Values agree with the default up to that rounding;
    gradients are plain gathers either way.
    """
    groups, src, out = Groups.build(src, index, dim, out, dim_size, op="scatter_sum")
    return groups.from_groups(groups.sum(src, out, deterministic=deterministic))


@sharding_aware
def scatter_add(src: ArrayLike, index: ArrayLike, dim: int = -1, out: Optional[ArrayLike] = None,
                dim_size: Optional[int] = None, *, deterministic: bool = False,
                out_sharding: OutSharding = None) -> jax.Array:
    """Alias of :func:`scatter_sum`."""
    return scatter_sum(src, index, dim, out, dim_size, deterministic=deterministic)


@sharding_aware
def scatter_mean(src: ArrayLike, index: ArrayLike, dim: int = -1, out: Optional[ArrayLike] = None,
                 dim_size: Optional[int] = None, *, deterministic: bool = False,
                 out_sharding: OutSharding = None) -> jax.Array:
    """Mean per group; empty groups give 0 (keep ``out``); integers use floor division.

    With ``out``: ``(out + sum) / max(count, 1)``, as torch_scatter computes it.
    The count is exact (int32); float16/bfloat16 sums accumulate in float32
    and divide in float32, rounding like torch. ``deterministic``: as in
    :func:`scatter_sum`.
    """
    groups, src, out = Groups.build(src, index, dim, out, dim_size, op="scatter_mean")
    return groups.from_groups(groups.mean(src, out, rounding="floor",
                                          deterministic=deterministic))


@sharding_aware
def scatter_mul(src: ArrayLike, index: ArrayLike, dim: int = -1, out: Optional[ArrayLike] = None,
                dim_size: Optional[int] = None, *, out_sharding: OutSharding = None) -> jax.Array:
    """Product per group; empty groups give 1 (``out`` * product with ``out``).

    The gradient is the product of the other elements of the group, also when
    an element is 0 (torch_scatter divides by the element and gives 0 there).
    """
    groups, src, out = Groups.build(src, index, dim, out, dim_size, op="scatter_mul")
    _reject_complex(src, op="scatter_mul")
    return groups.from_groups(groups.prod(src, out))


@sharding_aware
def scatter_min(src: ArrayLike, index: ArrayLike, dim: int = -1, out: Optional[ArrayLike] = None,
                dim_size: Optional[int] = None,
                *, out_sharding: OutSharding = None) -> tuple[jax.Array, jax.Array]:
    """``(min, argmin)`` per group; see :func:`scatter_max` for the rules."""
    return _scatter_extreme("min", src, index, dim, out, dim_size, op="scatter_min")


@sharding_aware
def scatter_max(src: ArrayLike, index: ArrayLike, dim: int = -1, out: Optional[ArrayLike] = None,
                dim_size: Optional[int] = None,
                *, out_sharding: OutSharding = None) -> tuple[jax.Array, jax.Array]:
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


@sharding_aware
def scatter(src: ArrayLike, index: ArrayLike, dim: int = -1, out: Optional[ArrayLike] = None,
            dim_size: Optional[int] = None, reduce: Reduction = "sum", *,
            deterministic: bool = False, out_sharding: OutSharding = None) -> jax.Array:
    """torch_scatter.scatter: dispatch on ``reduce`` (sum|add|mul|mean|min|max).

    For "min"/"max" only the values are returned, as in torch_scatter.
    ``deterministic=True``: see :func:`scatter_sum`; "min"/"max" are
    deterministic anyway (a selection, ties to the lowest position); "mul"
    has no deterministic path and raises.
    """
    kind = check_reduce(reduce, REDUCTIONS, op="scatter")
    if deterministic and kind == "mul":
        raise NotImplementedError(
            "scatter: deterministic=True is available for reduce='sum'/'add'/'mean' (and "
            "'min'/'max', which are order-independent), not for 'mul'")
    if kind in ("min", "max"):  # values only: the arg is never computed in the forward
        op = f"scatter_{kind}"
        groups, src, out = Groups.build(src, index, dim, out, dim_size, op=op)
        return extreme_values(groups, src, out, kind, op=op)
    if kind == "mul":
        return scatter_mul(src, index, dim, out, dim_size)
    reduction = scatter_sum if kind == "sum" else scatter_mean
    return reduction(src, index, dim, out, dim_size, deterministic=deterministic)


# --------------------------------------------------------------------------- min / max

def _reject_complex(src: jax.Array, *, op: str) -> None:
    if jnp.issubdtype(src.dtype, jnp.complexfloating):
        raise TypeError(f"{op}: `src` of dtype {src.dtype} is not supported "
                        f"(complex numbers have no order / torch_scatter has no kernel)")


def _scatter_extreme(kind: str, src: ArrayLike, index: ArrayLike, dim: int,
                     out: Optional[ArrayLike], dim_size: Optional[int], *,
                     op: str) -> tuple[jax.Array, jax.Array]:
    groups, src, out = Groups.build(src, index, dim, out, dim_size, op=op)
    return extreme(groups, src, out, kind, op=op)


def _extreme_args(groups: Groups, src: jax.Array, out: Optional[jax.Array]) -> tuple:
    out_groups = None if out is None else groups.to_groups(out)
    return (groups.to_rows(src), out_groups, groups.ids, groups.num_segments, groups.length,
            groups.fold)


def extreme(groups: Groups, src: jax.Array, out: Optional[jax.Array], kind: str, *,
            op: str) -> tuple[jax.Array, jax.Array]:
    """``(values, arg)`` of the groups planned in ``groups``: min or max (``kind``).

    The rules of :func:`scatter_max`; shared by scatter_min/max and the
    segment_{min,max}_{csr,coo} ops (see :mod:`._extreme` for how).
    """
    _reject_complex(src, op=op)
    args = _extreme_args(groups, src, out) + (kind, groups.indices_sorted)
    if jnp.issubdtype(src.dtype, jnp.floating):
        value, arg = _extreme.pair(*args)
    else:
        value, arg = _extreme.pair_impl(*args)
    return groups.from_groups(value), groups.from_groups(arg)


def extreme_values(groups: Groups, src: jax.Array, out: Optional[jax.Array], kind: str, *,
                   op: str) -> jax.Array:
    """The values of :func:`extreme` without computing the arg (``scatter(reduce="max")``,
    ``segment_*(reduce="max")``); the gradient still goes to the first winner only."""
    _reject_complex(src, op=op)
    rows, out_groups, ids, num_segments, length, fold = _extreme_args(groups, src, out)
    if jnp.issubdtype(src.dtype, jnp.floating):
        value = _extreme.values(rows, out_groups, ids, num_segments, length, fold, kind,
                                groups.indices_sorted)
    else:
        value = _extreme.values_impl(rows, out_groups, ids, num_segments, kind,
                                     groups.indices_sorted)
    return groups.from_groups(value)


extreme_init = _extreme.extreme_init
