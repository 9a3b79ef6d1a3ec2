"""torch_scatter's CSR ops on JAX: segment_csr, segment_{sum,add,mean,min,max}_csr, gather_csr.

Signatures are torch_scatter 2.1's::

    segment_csr(src, indptr, out=None, reduce="sum") -> out
    segment_max_csr(src, indptr, out=None) -> (out, argmax)
    gather_csr(src, indptr, out=None) -> out

Shapes: ``indptr`` [*B, S + 1] (a CSR pointer: segment i spans
``indptr[..., i]:indptr[..., i + 1]``); ``src`` [*B, E, *F]: the reduced axis
is ``indptr.ndim - 1``, leading axes of size 1 in ``indptr`` broadcast
against ``src``, trailing axes ``F`` ride along. ``segment_csr`` gives
[*B, S, *F]; ``gather_csr`` maps [*B, S, *F] back to [*B, indptr[-1], *F].

The number of segments comes from ``indptr``'s static shape, so these ops
need no size argument under ``jax.jit`` (``gather_csr`` does: its output
length ``indptr[-1]`` is data; pass ``out=`` or ``dim_size=``).

``out=`` is only a destination here (torch_scatter overwrites it): the result
does not depend on it, except that an empty ``src`` returns ``out`` and
``gather_csr`` keeps ``out`` outside ``[indptr[0], indptr[-1])``.
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from .. import _dtypes
from .._checking import (
    SEGMENT_REDUCTIONS,
    Reduction,
    as_array,
    check_index,
    check_reduce,
    is_traced,
    static_int,
)
from .._sharding import OutSharding, sharding_aware
from ._gather import csr_ids, gather_along
from ._groups import Groups
from ._scatter import extreme, extreme_values
from ._validate import check_indptr, check_leading_axes, check_out

__all__ = ["segment_csr", "segment_sum_csr", "segment_add_csr", "segment_mean_csr",
           "segment_min_csr", "segment_max_csr", "gather_csr"]


def _arrays(src: Any, indptr: Any, *, op: str) -> tuple[jax.Array, jax.Array, int]:
    """Validate ``src``/``indptr``; returns them as arrays and the reduced axis."""
    src = as_array(src, "src", op=op)
    indptr = as_array(indptr, "indptr", op=op)
    check_index(indptr, "indptr", op=op)
    dim = check_leading_axes(src, indptr, "indptr", op=op)
    if indptr.shape[-1] == 0 and src.size:
        # torch_scatter accepts an empty indptr only with an empty src (and returns it);
        # with data it dies (SIGFPE): say what a CSR pointer is instead
        raise ValueError(f"{op}: `indptr` needs at least one entry along its last axis "
                         f"(a CSR pointer of S segments has S + 1 entries), got shape "
                         f"{tuple(indptr.shape)} for a non-empty `src` {tuple(src.shape)}")
    if src.dtype == jnp.bool_:
        raise TypeError(f"{op}: `src` of dtype bool is not supported; cast it to an "
                        f"integer or floating dtype")
    return src, indptr, dim


def _plan(src: Any, indptr: Any, out: Any, *,
          op: str) -> tuple[Optional[Groups], jax.Array, Optional[jax.Array]]:
    """(groups, src, out, early) for a reduction; ``early`` is the result when src is empty."""
    src, indptr, dim = _arrays(src, indptr, op=op)
    if indptr.shape[-1] == 0:  # empty src (checked): torch_scatter returns it as it is
        out = check_out(out, src, dim, op=op)
        return None, src, out if out is not None else jnp.zeros(src.shape, src.dtype)
    segments = indptr.shape[-1] - 1
    out = check_out(out, src, dim, op=op)
    if out is not None and src.size and out.shape[dim] != segments:
        raise ValueError(f"{op}: `out` has {out.shape[dim]} rows along axis {dim}, but "
                         f"`indptr` describes {segments} segments (len(indptr) - 1)")
    check_indptr(indptr, src.shape[dim], op=op)
    ids = csr_ids(indptr, src.shape[dim])
    aligned = ids.shape + (1,) * (src.ndim - ids.ndim)
    # csr ids never decrease, whatever indptr holds
    groups = Groups(src, ids, dim, segments, aligned, op=op, indices_sorted=True)
    early = out if (out is not None and src.size == 0) else None
    return groups, src, early


@sharding_aware
def segment_sum_csr(src: ArrayLike, indptr: ArrayLike,
                    out: Optional[ArrayLike] = None,
                    *, out_sharding: OutSharding = None) -> jax.Array:
    """Sum of each segment ``src[..., indptr[i]:indptr[i + 1], ...]``; empty segments give 0."""
    groups, src, early = _plan(src, indptr, out, op="segment_sum_csr")
    if early is not None:
        return early
    assert groups is not None  # _plan plans the groups whenever there is no early result
    return groups.from_groups(groups.sum(src))


@sharding_aware
def segment_add_csr(src: ArrayLike, indptr: ArrayLike,
                    out: Optional[ArrayLike] = None,
                    *, out_sharding: OutSharding = None) -> jax.Array:
    """Alias of :func:`segment_sum_csr`."""
    return segment_sum_csr(src, indptr, out)


@sharding_aware
def segment_mean_csr(src: ArrayLike, indptr: ArrayLike,
                     out: Optional[ArrayLike] = None,
                     *, out_sharding: OutSharding = None) -> jax.Array:
    """Mean of each segment; empty segments give 0; integers truncate toward zero."""
    groups, src, early = _plan(src, indptr, out, op="segment_mean_csr")
    if early is not None:
        return early
    assert groups is not None  # _plan plans the groups whenever there is no early result
    return groups.from_groups(groups.mean(src, rounding="trunc"))


@sharding_aware
def segment_min_csr(src: ArrayLike, indptr: ArrayLike,
                    out: Optional[ArrayLike] = None,
                    *, out_sharding: OutSharding = None) -> tuple[jax.Array, jax.Array]:
    """``(min, argmin)`` of each segment; see :func:`segment_max_csr`."""
    return _extreme_csr("min", src, indptr, out, op="segment_min_csr")


@sharding_aware
def segment_max_csr(src: ArrayLike, indptr: ArrayLike,
                    out: Optional[ArrayLike] = None,
                    *, out_sharding: OutSharding = None) -> tuple[jax.Array, jax.Array]:
    """``(max, argmax)`` of each segment.

    argmax is the position along the reduced axis of the first maximal
    element; empty segments give 0 and ``src.shape[dim]``; NaN never wins.
    A segment that is all -inf (or whose max is the lowest finite value)
    gives 0 and ``src.shape[dim]``, like segment_coo and scatter_max
    (torch_scatter's CSR kernel returns the lowest finite value with a stale
    argmax there: a documented deviation).
    """
    return _extreme_csr("max", src, indptr, out, op="segment_max_csr")


def _extreme_csr(kind: str, src: ArrayLike, indptr: ArrayLike, out: Optional[ArrayLike], *,
                 op: str) -> tuple[jax.Array, jax.Array]:
    groups, src, early = _plan(src, indptr, out, op=op)
    if early is not None:
        length = 0 if groups is None else src.shape[groups.dim]
        return early, jnp.full(early.shape, length, dtype=_dtypes.index_dtype())
    assert groups is not None  # _plan plans the groups whenever there is no early result
    return extreme(groups, src, None, kind, op=op)


@sharding_aware
def segment_csr(src: ArrayLike, indptr: ArrayLike, out: Optional[ArrayLike] = None,
                reduce: Reduction = "sum", *, out_sharding: OutSharding = None) -> jax.Array:
    """torch_scatter.segment_csr: dispatch on ``reduce`` (sum|add|mean|min|max).

    For "min"/"max" only the values are returned. There is no "mul" (as in
    torch_scatter); use ``scatter(..., reduce="mul")``.
    """
    kind = check_reduce(reduce, SEGMENT_REDUCTIONS, op="segment_csr",
                        hints={"mul": "for a product use scatter(..., reduce='mul')"})
    if kind in ("min", "max"):  # values only: the arg is never computed in the forward
        op = f"segment_{kind}_csr"
        groups, src, early = _plan(src, indptr, out, op=op)
        if early is not None:
            return early
        assert groups is not None  # _plan plans the groups whenever there is no early result
        return extreme_values(groups, src, None, kind, op=op)
    return (segment_sum_csr if kind == "sum" else segment_mean_csr)(src, indptr, out)


@sharding_aware
def gather_csr(src: ArrayLike, indptr: ArrayLike, out: Optional[ArrayLike] = None,
               dim_size: Optional[int] = None, *, out_sharding: OutSharding = None) -> jax.Array:
    """Repeat each segment's value over its range: ``out[..., e, ...] = src[..., i, ...]``
    for ``indptr[i] <= e < indptr[i + 1]``.

    ``src`` [*B, S, *F] with S = len(indptr) - 1 (or 0); the result is
    [*B, L, *F] with L = ``out.shape[dim]``, else ``dim_size``, else
    ``indptr[..., -1]`` (which needs a concrete indptr: pass ``dim_size`` under
    jit). Positions outside ``[indptr[0], indptr[-1])`` keep ``out``, or are 0
    (torch_scatter leaves uninitialised memory there).

    ``dim_size`` is an addition to torch_scatter's signature: the static output
    length JAX needs.
    """
    op = "gather_csr"
    src, indptr, dim = _arrays(src, indptr, op=op)
    if indptr.shape[-1] == 0:  # empty src (checked): torch_scatter returns it as it is
        out = check_out(out, src, dim, op=op)
        return out if out is not None else jnp.zeros(src.shape, src.dtype)
    segments = indptr.shape[-1] - 1
    if src.shape[dim] not in (0, segments):
        raise ValueError(f"{op}: `src` has {src.shape[dim]} rows along axis {dim} but `indptr` "
                         f"describes {segments} segments; they must agree")
    dim_size = static_int(dim_size, "dim_size", op=op)
    out = check_out(out, src, dim, op=op)
    if out is not None:
        if dim_size is not None and dim_size != out.shape[dim]:
            raise ValueError(f"{op}: `dim_size`={dim_size} disagrees with "
                             f"`out`.shape[{dim}]={out.shape[dim]}; pass one of them")
        length = out.shape[dim]
    elif dim_size is not None:
        length = dim_size
    elif src.size == 0:
        length = 0
    elif is_traced(indptr):
        raise ValueError(
            f"{op}: `dim_size` is required when `indptr` is traced (under jax.jit or "
            f"jax.vmap): the output length would be indptr[-1], a value JAX cannot turn into "
            f"a static shape. Pass dim_size=<output length> as a Python int, or pass out=")
    else:
        length = int(np.asarray(indptr)[..., -1].max())
    if src.size == 0:
        if out is not None:
            return out
        return jnp.zeros(src.shape[:dim] + (length,) + src.shape[dim + 1:], src.dtype)
    check_indptr(indptr, length, op=op)
    ids = csr_ids(indptr, length)
    values = gather_along(src, ids, dim)
    if out is None:
        return values
    valid = ((ids >= 0) & (ids < segments)).reshape(ids.shape + (1,) * (src.ndim - ids.ndim))
    return jnp.where(valid, values, out)
