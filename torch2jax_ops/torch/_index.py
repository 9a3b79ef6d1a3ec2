"""torch's index family on JAX: index_add, index_reduce, index_select.

Signatures, defaults and numerics are torch 2.x's::

    index_add(input, dim, index, source, *, alpha=1)                     -> input's shape
    index_reduce(input, dim, index, source, reduce, *, include_self=True) -> input's shape
    index_select(input, dim, index)                       -> input's shape, len(index) at dim

``index`` is a vector (0-d or 1-d) of ids in ``[0, input.size(dim)]``; slice
``i`` of ``source`` along ``dim`` goes to slice ``index[i]`` of ``input``, so
``source`` has ``input``'s shape except at ``dim``, where it has
``len(index)``.

float16/bfloat16 follow torch's CPU kernels, which differ per op:
``index_add`` on a 1-d ``input``, with ``alpha != 1`` or along a middle dim
(``0 < dim < ndim - 1``), and every ``index_reduce`` "prod"/"mean",
accumulate step by step in the narrow type, in index order (each partial
result rounded: 3000 float16 ones sum to 2048); ``index_add`` with
``alpha == 1`` along the first or last dim of a >= 2-d ``input`` accumulates
in float32 and rounds once. (``index_reduce``'s count is an ``index_add`` of
ones, so it follows the same rule.) The step-by-step forms run as a loop over the index
(one step per entry) for these two dtypes only.
"""
from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from .._sharding import OutSharding, sharding_aware
from . import _validate as v
from ._reduce import plan_index, reduce_into

__all__ = ["index_add", "index_reduce", "index_select", "index_add_core"]


def _operands(input: Any, index: Any, source: Any, dim: Any, *,
              op: str) -> tuple[jax.Array, jax.Array, jax.Array, int]:
    input = v.operand(input, "input", op=op)
    index = v.index_operand(index, op=op)
    source = v.operand(source, "source", op=op)
    dim = v.normalize_dim(dim, input.ndim, op=op)
    v.same_dtype(input, source, "input", "source", op=op)
    v.index_shapes(input.shape, index, source.shape, dim, op=op)
    v.bounds(index, input.shape[dim] if input.ndim else 1, dim, op=op)
    return input, index, source, dim


def _index_core(input: jax.Array, dim: int, index: jax.Array, source: jax.Array, reduce: str,
                include_self: bool, *, alpha: Any = None, sequential: bool,
                sequential_count: bool = False, op: str) -> jax.Array:
    if index.size == 0:
        return input
    x = input.reshape(1) if input.ndim == 0 else input
    s = source.reshape(1) if source.ndim == 0 else source
    groups = plan_index(x, dim, index, s, op=op)
    out = reduce_into(groups, s, x, reduce, include_self, sequential=sequential,
                      sequential_count=sequential_count, alpha=alpha, op=op)
    return out.reshape(input.shape)


def _stepwise(ndim: int, dim: int, alpha: Any = 1) -> bool:
    """Whether torch's CPU ``index_add_`` rounds float16/bfloat16 at every step: on a 1-d
    ``input``, with ``alpha != 1``, or along a middle dim (``0 < dim < ndim - 1``); along
    the first or the last dim of a >= 2-d ``input`` it accumulates in float32."""
    return ndim <= 1 or alpha != 1 or 0 < dim < ndim - 1


def index_add_core(input: jax.Array, dim: int, index: jax.Array, source: jax.Array,
                   alpha: Any = 1) -> jax.Array:
    """:func:`index_add` without the argument checks (index_select's backward)."""
    return _index_core(input, dim, index, source, "sum", True, alpha=alpha,
                       sequential=_stepwise(input.ndim, dim, alpha), op="index_add")


@sharding_aware
def index_add(input: ArrayLike, dim: int, index: ArrayLike, source: ArrayLike, *,
              alpha: Any = 1, out_sharding: OutSharding = None) -> jax.Array:
    """``torch.index_add``: ``input`` plus ``alpha * source`` summed at ``index`` along ``dim``.

    Args:
      input: ``[..., N (at dim), ...]``; the result has its shape and dtype.
      dim: the axis of ``input`` that ``index`` addresses.
      index: ``[L]`` (or 0-d) integer ids in ``[0, N)``.
      source: ``input``'s shape with ``L`` at ``dim``, ``input``'s dtype.
      alpha: a Python number (static); integer tensors truncate a float
        ``alpha`` toward zero, as torch does.

    The gradient is ``grad`` for ``input`` and ``alpha * grad[index]`` for
    ``source``. float16/bfloat16: see the module docstring (step-by-step
    rounding on a 1-d ``input``, with ``alpha != 1`` or along a middle dim).
    """
    op = "index_add"
    input, index, source, dim = _operands(input, index, source, dim, op=op)
    alpha = v.alpha_value(alpha, input.dtype, op=op)
    return index_add_core(input, dim, index, source, alpha)


@sharding_aware
def index_reduce(input: ArrayLike, dim: int, index: ArrayLike, source: ArrayLike, reduce: str,
                 *, include_self: bool = True, out_sharding: OutSharding = None) -> jax.Array:
    """``torch.index_reduce``: reduce ``source`` slices into ``input`` slices at ``index``.

    Args:
      input, dim, index, source: as in :func:`index_add`.
      reduce: "prod", "mean", "amax" or "amin" (no "sum": use :func:`index_add`).
      include_self: ``input``'s slice takes part in the reduction; with
        ``False`` the slices no index reaches keep ``input``.

    Values and gradients follow torch's ``index_reduce`` (the same rules as
    :func:`~torch2jax_ops.torch.scatter_reduce`: "mean" counts ``input``'s
    element with ``include_self`` and floors for integers, "prod"'s gradient
    is exact at zeros, "amax"/"amin" split the gradient among ties and
    ``input``'s element); float16/bfloat16 "prod"/"mean" accumulate step by
    step in the narrow type, as torch's kernel does.
    """
    op = "index_reduce"
    kind = v.reduce_name(reduce, v.INDEX_REDUCES, op=op)
    include_self = v.flag(include_self, "include_self", op=op)
    input, index, source, dim = _operands(input, index, source, dim, op=op)
    return _index_core(input, dim, index, source, kind, include_self,
                       sequential=kind in ("prod", "mean"),
                       sequential_count=_stepwise(input.ndim, dim),
                       op=op)


@sharding_aware
def index_select(input: ArrayLike, dim: int, index: ArrayLike,
                 *, out_sharding: OutSharding = None) -> jax.Array:
    """``torch.index_select``: the slices ``index`` of ``input`` along ``dim``.

    Args:
      input: ``[..., N (at dim), ...]`` (a 0-d ``input`` takes the one index 0).
      dim: the axis to select along.
      index: ``[L]`` (or 0-d: ``L = 1``) integer ids in ``[0, N)``.

    Returns:
      ``input``'s shape with ``L`` at ``dim``. The gradient is torch's
      ``index_add`` of the cotangent (step by step for float16/bfloat16 on a
      1-d ``input``, as torch's).
    """
    op = "index_select"
    input = v.operand(input, "input", op=op)
    index = v.index_operand(index, op=op)
    dim = v.normalize_dim(dim, input.ndim, op=op)
    v.index_vector(index, op=op)
    if input.ndim == 0 and index.size != 1:
        raise ValueError(f"{op}: a 0-d `input` takes exactly one index (0), got {index.size}")
    v.bounds(index, input.shape[dim] if input.ndim else 1, dim, op=op)
    if jnp.issubdtype(input.dtype, jnp.inexact):
        return _select(input, index, dim, input.shape)
    return _select_value(input, index, dim)


def _select_value(input: jax.Array, index: jax.Array, dim: int) -> jax.Array:
    x = input.reshape(1) if input.ndim == 0 else input
    ids = index.reshape(-1)
    ids = jnp.where(ids < 0, x.shape[dim], ids)  # never wrap: a bad id (traced) reads 0
    out = jnp.take(x, ids, axis=dim, mode="fill", fill_value=0)
    return out.reshape(()) if input.ndim == 0 else out


@partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _select(input, index, dim, shape):
    return _select_value(input, index, dim)


def _select_fwd(input, index, dim, shape):
    return _select_value(input, index, dim), index


def _select_bwd(dim, shape, index, g):
    return index_add_core(jnp.zeros(shape, g.dtype), dim, index.reshape(-1), g), None


_select.defvjp(_select_fwd, _select_bwd)
