"""The mapping table: reductions (sum, mean, max ...), norms, scans, sorting and top-k.

Torch's dtype rules: sums and products of integers and bools are int64;
mean/std/var/norm need floating tensors; float16/bfloat16 sums accumulate in
float32. ``max``/``min`` come in torch's three forms (full reduction, ``dim=``
with indices, elementwise with a tensor). Ties: ``argmax``/``max(dim)`` give
the first index; full reductions (``max()``, ``amax``) share the gradient
evenly among tied elements, ``max(dim)`` gives it to the returned index.
"""
from __future__ import annotations

import builtins
import functools
import math
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .. import _dtypes
from .._checking import is_array
from ._functions_base import (
    RETURN_TYPES,
    dim_arg,
    dims_arg,
    dtype_arg,
    is_integral,
    long_dtype,
    op,
    safe_abs,
    to_float,
)
from ._functions_math import maximum, minimum

__all__: list = []


def _axes(x: jax.Array, dim: Any, name: str) -> Optional[tuple]:
    """The reduced axes (None = all); a 0-d tensor accepts dim 0 / -1 and reduces nothing."""
    axes = dims_arg(dim, x.ndim, op=name)
    if x.ndim == 0:
        return None
    return axes


def _cast_in(x: jax.Array, dtype: Any, name: str, integers_to_long: bool = True) -> jax.Array:
    dt = dtype_arg(dtype, op=name)
    if dt is not None:
        return x.astype(dt)
    if integers_to_long and is_integral(x):
        return x.astype(long_dtype())
    return x


def _need_float(x: jax.Array, name: str) -> None:
    if is_integral(x):
        raise TypeError(f"{name}(): could not infer output dtype. Input dtype must be either a "
                        f"floating point or complex dtype. Got: {jnp.dtype(x.dtype).name} (pass "
                        f"dtype=torch.float32, or x.float())")


# ----------------------------------------------------------------------------- sums

@op("sum")
def sum(input: jax.Array, dim: Any = None, keepdim: bool = False, *,  # noqa: A001
        dtype: Any = None, out: Any = None) -> jax.Array:
    """``torch.sum(input, dim=None, keepdim=False, dtype=None)``: ints/bools sum to int64;
    ``dim`` an int or a tuple (an empty tuple reduces everything)."""
    x = _cast_in(input, dtype, "sum")
    acc = _dtypes.accumulation_dtype(x.dtype)
    return jnp.sum(x, axis=_axes(x, dim, "sum"), keepdims=keepdim, dtype=acc).astype(x.dtype)


@op("nansum")
def nansum(input: jax.Array, dim: Any = None, keepdim: bool = False, *, dtype: Any = None,
           out: Any = None) -> jax.Array:
    """``torch.nansum``: NaN counts as zero."""
    x = _cast_in(input, dtype, "nansum")
    acc = _dtypes.accumulation_dtype(x.dtype)
    return jnp.nansum(x, axis=_axes(x, dim, "nansum"), keepdims=keepdim,
                      dtype=acc).astype(x.dtype)


@op("mean")
def mean(input: jax.Array, dim: Any = None, keepdim: bool = False, *, dtype: Any = None,
         out: Any = None) -> jax.Array:
    """``torch.mean(input, dim=None, keepdim=False, dtype=None)``: floating tensors only (or
    ``dtype``), as torch."""
    x = _cast_in(input, dtype, "mean", integers_to_long=False)
    _need_float(x, "mean")
    acc = _dtypes.accumulation_dtype(x.dtype)
    return jnp.mean(x, axis=_axes(x, dim, "mean"), keepdims=keepdim, dtype=acc).astype(x.dtype)


@op("nanmean")
def nanmean(input: jax.Array, dim: Any = None, keepdim: bool = False, *, dtype: Any = None,
            out: Any = None) -> jax.Array:
    x = _cast_in(input, dtype, "nanmean", integers_to_long=False)
    _need_float(x, "nanmean")
    return jnp.nanmean(x, axis=_axes(x, dim, "nanmean"), keepdims=keepdim)


@op("prod")
def prod(input: jax.Array, dim: Any = None, keepdim: bool = False, *, dtype: Any = None,
         out: Any = None) -> jax.Array:
    """``torch.prod(input, dim=None, keepdim=False, dtype=None)``: ints/bools -> int64."""
    if dim is not None and not isinstance(dim, (int, np.integer)):
        raise TypeError(f"prod: `dim` must be an int (one dim), got {dim!r}")
    x = _cast_in(input, dtype, "prod")
    return jnp.prod(x, axis=_axes(x, dim, "prod"), keepdims=keepdim)


def _moments(input: jax.Array, dim: Any, unbiased: Any, keepdim: bool, correction: Any,
             name: str) -> tuple:
    if isinstance(dim, bool):  # torch.var(x, True): the legacy `unbiased` position
        dim, unbiased = None, dim
    _need_float(input, name)
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    elif unbiased is not None:
        raise ValueError(f"{name}: pass `unbiased` or `correction`, not both")
    axes = _axes(input, dim, name)
    n = input.size if axes is None else math.prod(input.shape[a] for a in axes)
    mean_ = jnp.mean(input, axis=axes, keepdims=True)
    sq = jnp.sum(jnp.square(jnp.abs(input - mean_)), axis=axes, keepdims=keepdim)
    var = sq / jnp.asarray(builtins.max(0, n - correction), sq.dtype)
    return var, mean_ if keepdim else jnp.squeeze(mean_, axes)


@op("var")
def var(input: jax.Array, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
        correction: Any = None, out: Any = None) -> jax.Array:
    """``torch.var(input, dim=None, *, correction=1, keepdim=False)`` (or the legacy
    ``unbiased`` flag): divides by ``max(0, N - correction)`` as torch."""
    return _moments(input, dim, unbiased, keepdim, correction, "var")[0]


@op("std")
def std(input: jax.Array, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
        correction: Any = None, out: Any = None) -> jax.Array:
    """``torch.std``: the square root of :func:`var`."""
    return jnp.sqrt(_moments(input, dim, unbiased, keepdim, correction, "std")[0])


@op("var_mean", tensor=False)
def var_mean(input: jax.Array, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
             correction: Any = None) -> tuple:
    return _moments(input, dim, unbiased, keepdim, correction, "var_mean")


@op("std_mean", tensor=False)
def std_mean(input: jax.Array, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
             correction: Any = None) -> tuple:
    v, m = _moments(input, dim, unbiased, keepdim, correction, "std_mean")
    return jnp.sqrt(v), m


# --------------------------------------------------------------------------- extrema

def _arg_extreme(x: jax.Array, axis: int, largest: bool) -> jax.Array:
    """The first index of the max (min); NaN counts as the largest and the smallest."""
    return jnp.argmax(x, axis=axis) if largest else jnp.argmin(x, axis=axis)


def _extreme_dim(input: jax.Array, dim: int, keepdim: bool, largest: bool, name: str) -> tuple:
    if input.ndim == 0:
        dim_arg(dim, 0, op=name)
        return RETURN_TYPES[name](input, jnp.zeros((), long_dtype()))
    axis = dim_arg(dim, input.ndim, op=name)
    if input.shape[axis] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {dim} to have non-zero size")
    idx = _arg_extreme(input, axis, largest)
    values = jnp.take_along_axis(input, jnp.expand_dims(idx, axis), axis=axis)
    if not keepdim:
        values = jnp.squeeze(values, axis)
    else:
        idx = jnp.expand_dims(idx, axis)
    return RETURN_TYPES[name](values, idx.astype(long_dtype()))


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _full_extreme(x: jax.Array, largest: bool) -> jax.Array:
    """``max(x)`` / ``min(x)`` of a float tensor with torch's gradient: shared evenly by the
    elements equal to the result (by the NaN elements when the result is NaN)."""
    return jnp.max(x) if largest else jnp.min(x)


@_full_extreme.defjvp
def _full_extreme_jvp(largest: bool, primals: tuple, tangents: tuple) -> tuple:
    (x,), (t,) = primals, tangents
    value = _full_extreme(x, largest)
    mask = jnp.where(jnp.isnan(value), jnp.isnan(x), x == value).astype(t.dtype)
    return value, jnp.sum(t * mask) / jnp.sum(mask)


def _extreme(input: jax.Array, dim: Any, keepdim: bool, other: Any, largest: bool,
             name: str) -> Any:
    if is_array(dim) and other is None:
        dim, other = None, dim
    if other is not None:
        return (maximum if largest else minimum)(input, other)
    if dim is None:
        if input.size == 0:
            raise ValueError(f"{name}(): Expected reduction dim to be specified for input.numel()"
                             f" == 0. Specify the reduction dim with the 'dim' argument.")
        if is_integral(input):
            return jnp.max(input) if largest else jnp.min(input)
        return _full_extreme(input, largest)
    return _extreme_dim(input, dim, keepdim, largest, name)


@op("max")
def max(input: jax.Array, dim: Any = None, keepdim: bool = False, *,  # noqa: A001
        other: Any = None, out: Any = None) -> Any:
    """``torch.max``: ``max(x)`` -> the largest element; ``max(x, dim, keepdim=False)`` ->
    ``(values, indices)`` (a named tuple; the first index among ties); ``max(x, other)`` ->
    the elementwise maximum. NaN propagates."""
    return _extreme(input, dim, keepdim, other, True, "max")


@op("min")
def min(input: jax.Array, dim: Any = None, keepdim: bool = False, *,  # noqa: A001
        other: Any = None, out: Any = None) -> Any:
    """``torch.min``: the three forms of :func:`max`."""
    return _extreme(input, dim, keepdim, other, False, "min")


@op("amax")
def amax(input: jax.Array, dim: Any = (), keepdim: bool = False, *, out: Any = None) -> jax.Array:
    """``torch.amax(input, dim=(), keepdim=False)``: ``dim=()`` reduces every dim; tied
    elements share the gradient evenly (as torch)."""
    return jnp.max(input, axis=_axes(input, dim, "amax"), keepdims=keepdim)


@op("amin")
def amin(input: jax.Array, dim: Any = (), keepdim: bool = False, *, out: Any = None) -> jax.Array:
    return jnp.min(input, axis=_axes(input, dim, "amin"), keepdims=keepdim)


@op("aminmax")
def aminmax(input: jax.Array, *, dim: Optional[int] = None, keepdim: bool = False) -> tuple:
    """``torch.aminmax``: ``(min, max)`` as a named tuple."""
    return RETURN_TYPES["aminmax"](amin(input, () if dim is None else dim, keepdim),
                                   amax(input, () if dim is None else dim, keepdim))


def _argext(input: jax.Array, dim: Any, keepdim: bool, largest: bool, name: str) -> jax.Array:
    if dim is None:
        idx = _arg_extreme(input.reshape(-1), 0, largest)
        if keepdim:
            idx = idx.reshape((1,) * input.ndim)
        return idx.astype(long_dtype())
    if input.ndim == 0:
        dim_arg(dim, 0, op=name)
        return jnp.zeros((), long_dtype())
    axis = dim_arg(dim, input.ndim, op=name)
    idx = _arg_extreme(input, axis, largest)
    return (jnp.expand_dims(idx, axis) if keepdim else idx).astype(long_dtype())


@op("argmax")
def argmax(input: jax.Array, dim: Optional[int] = None, keepdim: bool = False) -> jax.Array:
    """``torch.argmax``: the first index of the largest value (NaN counts as largest);
    ``dim=None`` indexes the flattened tensor."""
    return _argext(input, dim, keepdim, True, "argmax")


@op("argmin")
def argmin(input: jax.Array, dim: Optional[int] = None, keepdim: bool = False) -> jax.Array:
    return _argext(input, dim, keepdim, False, "argmin")


@op("logsumexp", functions=("torch.special.logsumexp",))
def logsumexp(input: jax.Array, dim: Any, keepdim: bool = False, *,
              out: Any = None) -> jax.Array:
    """``torch.logsumexp(input, dim, keepdim=False)`` (integer tensors as float32)."""
    x = to_float(input)
    return jax.nn.logsumexp(x, axis=_axes(x, dim, "logsumexp"), keepdims=keepdim)


@op("any")
def any(input: jax.Array, dim: Any = None, keepdim: bool = False, *,  # noqa: A001
        out: Any = None) -> jax.Array:
    """``torch.any``: a bool tensor (uint8 for uint8 input, as torch)."""
    r = jnp.any(input != 0, axis=_axes(input, dim, "any"), keepdims=keepdim)
    return r.astype(jnp.uint8) if input.dtype == jnp.uint8 else r


@op("all")
def all(input: jax.Array, dim: Any = None, keepdim: bool = False, *,  # noqa: A001
        out: Any = None) -> jax.Array:
    r = jnp.all(input != 0, axis=_axes(input, dim, "all"), keepdims=keepdim)
    return r.astype(jnp.uint8) if input.dtype == jnp.uint8 else r


@op("count_nonzero")
def count_nonzero(input: jax.Array, dim: Any = None) -> jax.Array:
    """``torch.count_nonzero``: int64."""
    return jnp.sum(input != 0, axis=_axes(input, dim, "count_nonzero"), dtype=long_dtype())


# ------------------------------------------------------------------------------ scans

@op("cumsum", inplace=True)
def cumsum(input: jax.Array, dim: int, *, dtype: Any = None, out: Any = None) -> jax.Array:
    """``torch.cumsum(input, dim, dtype=None)``: ints/bools -> int64."""
    x = _cast_in(input, dtype, "cumsum")
    if x.ndim == 0:
        dim_arg(dim, 0, op="cumsum")
        return x
    acc = _dtypes.accumulation_dtype(x.dtype)
    return jnp.cumsum(x, axis=dim_arg(dim, x.ndim, op="cumsum"), dtype=acc).astype(x.dtype)


@op("cumprod", inplace=True)
def cumprod(input: jax.Array, dim: int, *, dtype: Any = None, out: Any = None) -> jax.Array:
    x = _cast_in(input, dtype, "cumprod")
    if x.ndim == 0:
        dim_arg(dim, 0, op="cumprod")
        return x
    return jnp.cumprod(x, axis=dim_arg(dim, x.ndim, op="cumprod"))


def _cum_extreme(input: jax.Array, dim: int, largest: bool, name: str) -> tuple:
    if input.ndim == 0:
        dim_arg(dim, 0, op=name)
        return RETURN_TYPES[name](input, jnp.zeros((), long_dtype()))
    axis = dim_arg(dim, input.ndim, op=name)
    pos = jax.lax.broadcasted_iota(long_dtype(), input.shape, axis)

    def combine(a, b):
        (va, ia), (vb, ib) = a, b
        better = (vb >= va) if largest else (vb <= va)
        if not is_integral(input):
            better = better | jnp.isnan(vb)
            better = better & ~(jnp.isnan(va) & ~jnp.isnan(vb))
        return jnp.where(better, vb, va), jnp.where(better, ib, ia)

    _, idx = jax.lax.associative_scan(combine, (jax.lax.stop_gradient(input), pos), axis=axis)
    return RETURN_TYPES[name](jnp.take_along_axis(input, idx, axis=axis), idx)


@op("cummax")
def cummax(input: jax.Array, dim: int) -> tuple:
    """``torch.cummax(input, dim)``: running maximum and its index (the last among ties;
    NaN sticks, as torch)."""
    return _cum_extreme(input, dim, True, "cummax")


@op("cummin")
def cummin(input: jax.Array, dim: int) -> tuple:
    return _cum_extreme(input, dim, False, "cummin")


# ------------------------------------------------------------------------------ norms

def _safe_pow_sum(a: jax.Array, p: float, axes: Any, keepdim: bool) -> jax.Array:
    """``(sum |x|^p)^(1/p)`` with torch's zero gradient where the norm is 0."""
    if p == 2:
        s = jnp.sum(a * a, axis=axes, keepdims=keepdim)
        pos = s > 0
        return jnp.where(pos, jnp.sqrt(jnp.where(pos, s, 1)), 0)
    s = jnp.sum(a ** p, axis=axes, keepdims=keepdim)
    pos = s > 0
    return jnp.where(pos, jnp.where(pos, s, 1) ** (1.0 / p), 0)


def vector_norm_impl(x: jax.Array, p: Any, dim: Any, keepdim: bool, dtype: Any,
                     name: str) -> jax.Array:
    """torch's vector norm of ``x`` over ``dim`` (None: all elements)."""
    dt = dtype_arg(dtype, op=name)
    if dt is not None:
        x = x.astype(dt)
    if is_integral(x):
        raise TypeError(f"{name}: expected a floating point or complex tensor as input, got "
                        f"{jnp.dtype(x.dtype).name}")
    axes = _axes(x, dim, name)
    if isinstance(p, str):
        if p != "fro":
            raise ValueError(f"{name}: p={p!r} is a matrix norm; only vector norms (a number, "
                             f"inf, 'fro') are mapped")
        p = 2
    p = float(p)
    a = safe_abs(x)
    if p == math.inf:
        return jnp.max(a, axis=axes, keepdims=keepdim)
    if p == -math.inf:
        return jnp.min(a, axis=axes, keepdims=keepdim)
    if p == 0:
        return jnp.sum((x != 0).astype(x.dtype), axis=axes, keepdims=keepdim)
    if p == 1:
        return jnp.sum(a, axis=axes, keepdims=keepdim)
    return _safe_pow_sum(a, p, axes, keepdim)


@op("norm")
def norm(input: jax.Array, p: Any = "fro", dim: Any = None, keepdim: bool = False,
         dtype: Any = None, out: Any = None) -> jax.Array:
    """``torch.norm(input, p='fro', dim=None, keepdim=False, dtype=None)``: vector norms over
    ``dim`` (all elements by default); the gradient is 0 where the norm is 0 (as torch).
    Matrix norms (``'nuc'``, a number with two dims other than 2) are not mapped."""
    return vector_norm_impl(input, p, dim, keepdim, dtype, "norm")


@op("vector_norm", torch=False, tensor=False, functions=("torch.linalg.vector_norm",))
def vector_norm(x: jax.Array, ord: Any = 2, dim: Any = None, keepdim: bool = False, *,
                dtype: Any = None, out: Any = None) -> jax.Array:
    """``torch.linalg.vector_norm(x, ord=2, dim=None, keepdim=False, dtype=None)``."""
    return vector_norm_impl(x, ord, dim, keepdim, dtype, "linalg.vector_norm")


@op("linalg_norm", torch=False, tensor=False, functions=("torch.linalg.norm",))
def linalg_norm(A: jax.Array, ord: Any = None, dim: Any = None, keepdim: bool = False, *,
                out: Any = None, dtype: Any = None) -> jax.Array:
    """``torch.linalg.norm``: vector norms only (``ord=None`` is the 2-norm of all elements;
    with one ``dim`` any vector ``ord``)."""
    if ord is not None and (dim is None and A.ndim == 2 or isinstance(dim, (tuple, list)) and
                            len(dim) == 2) and ord != "fro":
        raise ValueError(f"linalg.norm: matrix norm ord={ord!r} is not mapped; use "
                         f"torch.linalg.vector_norm or ord='fro'")
    return vector_norm_impl(A, 2 if ord is None else ord, dim, keepdim, dtype, "linalg.norm")


# --------------------------------------------------------------------------- sorting

def _sort_indices(x: jax.Array, axis: int, descending: bool) -> jax.Array:
    """Stable order (NaN last ascending, first descending, as torch)."""
    return jnp.argsort(x, axis=axis, stable=True, descending=descending)


@op("sort")
def sort(input: jax.Array, dim: int = -1, descending: bool = False, stable: bool = False, *,
         out: Any = None) -> tuple:
    """``torch.sort(input, dim=-1, descending=False, stable=False)`` -> ``(values, indices)``;
    always stable (torch's CPU order for ties)."""
    if input.ndim == 0:
        return RETURN_TYPES["sort"](input, jnp.zeros((), long_dtype()))
    axis = dim_arg(dim, input.ndim, op="sort")
    idx = _sort_indices(input, axis, descending)
    return RETURN_TYPES["sort"](jnp.take_along_axis(input, idx, axis=axis),
                                idx.astype(long_dtype()))


@op("argsort")
def argsort(input: jax.Array, dim: int = -1, descending: bool = False,
            stable: bool = False) -> jax.Array:
    """``torch.argsort``: the indices of :func:`sort` (stable)."""
    _, indices = sort(input, dim, descending)
    return indices


@op("msort")
def msort(input: jax.Array) -> jax.Array:
    values, _ = sort(input, 0)
    return values


@op("topk")
def topk(input: jax.Array, k: int, dim: int = -1, largest: bool = True, sorted: bool = True,
         *, out: Any = None) -> tuple:
    """``torch.topk(input, k, dim=-1, largest=True, sorted=True)`` -> ``(values, indices)``.

    Among equal values the lower index comes first; torch's CPU kernel leaves
    the order of ties unspecified (its indices may differ there, its values
    never do). ``sorted=False`` returns them sorted as well.
    """
    if input.ndim == 0:
        if k not in (0, 1):
            raise ValueError(f"topk: k ({k}) is too big for a 0-d tensor")
        return RETURN_TYPES["topk"](input, jnp.zeros((), long_dtype()))
    axis = dim_arg(dim, input.ndim, op="topk")
    if not 0 <= k <= input.shape[axis]:
        raise ValueError(f"topk: selected index k ({k}) out of range for dimension {axis} of "
                         f"size {input.shape[axis]}")
    idx = jax.lax.slice_in_dim(_sort_indices(input, axis, largest), 0, k, axis=axis)
    return RETURN_TYPES["topk"](jnp.take_along_axis(input, idx, axis=axis),
                                idx.astype(long_dtype()))


@op("kthvalue")
def kthvalue(input: jax.Array, k: int, dim: int = -1, keepdim: bool = False, *,
             out: Any = None) -> tuple:
    """``torch.kthvalue``: the k-th smallest (1-based) and its index (ties: see topk)."""
    axis = dim_arg(dim, input.ndim, op="kthvalue")
    n = input.shape[axis] if input.ndim else 1
    if not 1 <= k <= n:
        raise ValueError(f"kthvalue: selected number k ({k}) out of range for dimension {axis} "
                         f"of size {n}")
    if input.ndim == 0:
        return RETURN_TYPES["kthvalue"](input, jnp.zeros((), long_dtype()))
    idx = jax.lax.slice_in_dim(_sort_indices(input, axis, False), k - 1, k, axis=axis)
    values = jnp.take_along_axis(input, idx, axis=axis)
    if not keepdim:
        values, idx = jnp.squeeze(values, axis), jnp.squeeze(idx, axis)
    return RETURN_TYPES["kthvalue"](values, idx.astype(long_dtype()))


@op("median")
def median(input: jax.Array, dim: Optional[int] = None, keepdim: bool = False, *,
           out: Any = None) -> Any:
    """``torch.median``: the LOWER of the two middle values (not their average, as torch);
    with ``dim`` -> ``(values, indices)`` (tie indices: see topk)."""
    if dim is None:
        flat = input.reshape(-1)
        if flat.size == 0:
            return jnp.asarray(jnp.nan, input.dtype)
        lower, _ = kthvalue(flat, (flat.size + 1) // 2)
        return lower
    n = input.shape[dim_arg(dim, input.ndim, op="median")] if input.ndim else 1
    values, idx = kthvalue(input, (n + 1) // 2, dim, keepdim)
    return RETURN_TYPES["median"](values, idx)

