"""torch's scatter family and gather on JAX: scatter_reduce, scatter_add, scatter, gather.

Signatures, defaults and numerics are torch 2.x's (``torch.scatter_reduce``,
``Tensor.scatter_reduce`` ...)::

    scatter_reduce(input, dim, index, src, reduce, *, include_self=True) -> input's shape
    scatter_add(input, dim, index, src)                                  -> input's shape
    scatter(input, dim, index, src)   /   scatter(input, dim, index, value=v)
    gather(input, dim, index)                                            -> index's shape

Shapes (torch's rule, no broadcasting): ``index`` has as many dims as
``input`` and ``src``; ``index.size(d) <= src.size(d)`` for every ``d`` and
``<= input.size(d)`` for ``d != dim``. Element ``p`` of ``index`` sends
``src[p]`` to ``input[p with p[dim] replaced by index[p]]``; only the
index-shaped leading block of ``src`` is read. JAX arrays are immutable:
the in-place forms (``scatter_reduce_``) are these functions, whose result
the caller rebinds.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Optional, overload

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from .._sharding import OutSharding, sharding_aware
from . import _validate as v
from ._reduce import assign, plan_scatter, reduce_into

__all__ = ["scatter_reduce", "scatter_add", "scatter", "gather", "scatter_add_core"]


def _at_least_1d(x: jax.Array) -> jax.Array:
    return x.reshape(1) if x.ndim == 0 else x


@overload
def _operands(input: Any, index: Any, src: None, dim: Any, *, op: str,
              src_name: str = "src") -> tuple[jax.Array, jax.Array, None, int]: ...
@overload
def _operands(input: Any, index: Any, src: ArrayLike, dim: Any, *, op: str,
              src_name: str = "src") -> tuple[jax.Array, jax.Array, jax.Array, int]: ...
@overload
def _operands(input: Any, index: Any, src: Optional[ArrayLike], dim: Any, *, op: str,
              src_name: str = "src") -> tuple[jax.Array, jax.Array, Optional[jax.Array], int]: ...
def _operands(input: Any, index: Any, src: Any, dim: Any, *, op: str,
              src_name: str = "src") -> tuple[jax.Array, jax.Array, Optional[jax.Array], int]:
    input = v.operand(input, "input", op=op)
    index = v.index_operand(index, op=op)
    dim = v.normalize_dim(dim, input.ndim, op=op)
    src = None if src is None else v.operand(src, src_name, op=op)
    if src is not None:
        v.same_dtype(input, src, "input", src_name, op=op)
    v.scatter_shapes(input.shape, index.shape, None if src is None else src.shape, dim,
                     src_name, op=op)
    v.bounds(index, input.shape[dim] if input.ndim else 1, dim, op=op)
    return input, index, src, dim


def _scatter_core(input: jax.Array, dim: int, index: jax.Array, src: jax.Array, reduce: str,
                  include_self: bool, *, op: str) -> jax.Array:
    """The validated op: ``reduce`` is a reduction of :func:`reduce_into` or "assign"."""
    if index.size == 0:
        return input
    x = _at_least_1d(input)
    groups, block = plan_scatter(x, dim, _at_least_1d(index), _at_least_1d(src), op=op)
    if reduce == "assign":
        out = assign(groups, block, x)
    else:
        out = reduce_into(groups, block, x, reduce, include_self, op=op)
    return out.reshape(input.shape)


def scatter_add_core(input: jax.Array, dim: int, index: jax.Array, src: jax.Array) -> jax.Array:
    """:func:`scatter_add` without the argument checks (gather's backward)."""
    return _scatter_core(input, dim, index, src, "sum", True, op="scatter_add")


@sharding_aware
def scatter_reduce(input: ArrayLike, dim: int, index: ArrayLike, src: ArrayLike, reduce: str,
                   *, include_self: bool = True, out_sharding: OutSharding = None) -> jax.Array:
    """``torch.scatter_reduce``: reduce ``src`` into ``input`` at ``index`` along ``dim``.

    Args:
      input: ``[..., N (at dim), ...]``; the result has its shape and dtype.
      dim: the axis of ``input`` that ``index`` addresses.
      index: integer ids in ``[0, N)``, as many dims as ``input``.
      src: ``input``'s dtype, as many dims, at least ``index``'s size in every dim.
      reduce: "sum", "prod", "mean", "amax" or "amin" ("max"/"min" are torch's
        undocumented aliases of "amax"/"amin"; torch raises in their backward).
      include_self: ``input``'s element takes part in its group's reduction.
        With ``False`` the positions no index reaches keep ``input``.

    Numerics and gradients are torch's CPU ones: float16/bfloat16 accumulate in
    float32 and round once; "mean" counts ``input``'s element with
    ``include_self`` and floors for integers; "prod"'s gradient is exact at
    zeros; "amax"/"amin" propagate NaN and split the gradient evenly among
    the tied elements *and* ``input``'s element whenever it equals the result
    (even with ``include_self=False``, where its share is then dropped --
    torch's rule, kept).
    """
    op = "scatter_reduce"
    kind = v.reduce_name(reduce, v.SCATTER_REDUCES, op=op, aliases=True)
    include_self = v.flag(include_self, "include_self", op=op)
    input, index, src, dim = _operands(input, index, src, dim, op=op)
    return _scatter_core(input, dim, index, src, kind, include_self, op=op)


@sharding_aware
def scatter_add(input: ArrayLike, dim: int, index: ArrayLike, src: ArrayLike,
                *, out_sharding: OutSharding = None) -> jax.Array:
    """``torch.scatter_add``: ``input`` plus ``src`` summed at ``index`` along ``dim``.

    ``scatter_reduce(input, dim, index, src, "sum")``; shapes as there.
    float16/bfloat16 accumulate in float32 (``input`` included) and round once.
    """
    op = "scatter_add"
    input, index, src, dim = _operands(input, index, src, dim, op=op)
    return _scatter_core(input, dim, index, src, "sum", True, op=op)


@sharding_aware
def scatter(input: ArrayLike, dim: int, index: ArrayLike, src: Optional[ArrayLike] = None, *,
            value: Any = None, reduce: Optional[str] = None,
            out_sharding: OutSharding = None) -> jax.Array:
    """``torch.scatter``: write ``src`` (or the scalar ``value``) into ``input`` at ``index``.

    Args:
      input: ``[..., N (at dim), ...]``; the result has its shape and dtype.
      dim, index: as in :func:`scatter_reduce`.
      src: an array (``input``'s dtype, at least ``index``'s size in every
        dim); a Python/NumPy number here is taken as ``value`` (torch's
        overload). Give ``src`` or ``value``, not both.
      value: a number written at every index (cast to ``input``'s dtype).
      reduce: ``None`` (write), "add" or "multiply" (torch's deprecated
        forms of ``scatter_reduce(..., "sum"/"prod")`` with ``input`` included).

    Without ``reduce``, where several elements write the same position the
    LAST along ``dim`` wins: what torch's CPU kernel does, though torch
    documents the order as undefined (its CUDA kernel may differ). The
    gradient is torch's: every writer gets its target's gradient, and
    ``input`` keeps it where nothing was written. torch has no gradient for
    the ``reduce`` forms; here they have ``scatter_reduce``'s.
    """
    op = "scatter"
    if src is not None and v.is_number(src):
        if value is not None:
            raise TypeError(f"{op}: got a number for `src` and also `value`; pass one of them")
        src, value = None, src
    if (src is None) == (value is None):
        raise TypeError(f"{op}: pass exactly one of `src` (an array) and `value` (a number)")
    if value is not None and not v.is_number(value):
        raise TypeError(f"{op}: `value` must be a Python or NumPy number, got "
                        f"{type(value).__name__}; pass an array as `src`")
    kinds = {None: "assign", "add": "sum", "multiply": "prod"}
    if not (reduce is None or isinstance(reduce, str)) or reduce not in kinds:
        raise ValueError(f"{op}: `reduce` must be None, 'add' or 'multiply', got {reduce!r} "
                         f"(scatter_reduce takes 'sum', 'prod', 'mean', 'amax', 'amin')")
    input, index, src, dim = _operands(input, index, src, dim, op=op)
    if src is None:
        src = jnp.broadcast_to(jnp.asarray(value).astype(input.dtype), index.shape)
    return _scatter_core(input, dim, index, src, kinds[reduce], True, op=op)


# ----------------------------------------------------------------------------- gather

@sharding_aware
def gather(input: ArrayLike, dim: int, index: ArrayLike,
           *, out_sharding: OutSharding = None) -> jax.Array:
    """``torch.gather``: ``out[p] = input[p with p[dim] replaced by index[p]]``.

    Args:
      input: ``[..., N (at dim), ...]``.
      dim: the axis that ``index`` addresses.
      index: integer ids in ``[0, N)``, as many dims as ``input``, no larger
        than ``input`` in every dim but ``dim`` (any size along ``dim``).

    Returns:
      ``index``'s shape, ``input``'s dtype. The gradient is torch's
      ``scatter_add`` of the cotangent (float16/bfloat16 accumulate in float32).
    """
    op = "gather"
    input = v.operand(input, "input", op=op)
    index = v.index_operand(index, op=op)
    dim = v.normalize_dim(dim, input.ndim, op=op)
    if index.size == 0:
        return jnp.zeros(index.shape, input.dtype)
    v.gather_shapes(input.shape, index.shape, dim, op=op)
    v.bounds(index, input.shape[dim] if input.ndim else 1, dim, op=op)
    if jnp.issubdtype(input.dtype, jnp.inexact):
        return _gather(input, index, dim, input.shape)
    return _gather_value(input, index, dim)


def _gather_value(input: jax.Array, index: jax.Array, dim: int) -> jax.Array:
    x, i = _at_least_1d(input), _at_least_1d(index)
    size = x.shape[dim]
    x = x[tuple(slice(None) if d == dim else slice(0, n) for d, n in enumerate(i.shape))]
    i = jnp.where(i < 0, size, i)  # never wrap: a bad id (traced) reads 0
    out = jnp.take_along_axis(x, i, axis=dim, mode="fill", fill_value=0)
    return out.reshape(index.shape)


@partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _gather(input, index, dim, shape):
    return _gather_value(input, index, dim)


def _gather_fwd(input, index, dim, shape):
    return _gather_value(input, index, dim), index


def _gather_bwd(dim, shape, index, g):
    return scatter_add_core(jnp.zeros(shape, g.dtype), dim, index, g), None


_gather.defvjp(_gather_fwd, _gather_bwd)
