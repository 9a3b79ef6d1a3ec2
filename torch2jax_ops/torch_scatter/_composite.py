"""torch_scatter's composite ops on JAX: scatter_std, scatter_logsumexp,
scatter_softmax, scatter_log_softmax.

Signatures are torch_scatter 2.1's (note ``eps`` before ``dim_size`` in
log_softmax)::

    scatter_std(src, index, dim=-1, out=None, dim_size=None, unbiased=True)
    scatter_logsumexp(src, index, dim=-1, out=None, dim_size=None, eps=1e-12)
    scatter_softmax(src, index, dim=-1, dim_size=None)
    scatter_log_softmax(src, index, dim=-1, eps=1e-12, dim_size=None)

Shapes and index broadcasting are the scatter family's: std and logsumexp
reduce to src's shape with ``dim_size`` at ``dim``; softmax and log_softmax
return src's shape. torch_scatter runs each as several eager passes; here
each is one jit-fusable expression on the shared segment layout.

Numerics follow torch_scatter:

* std = sqrt(SSD / (max(n - 1, 1) + 1e-6)) (``unbiased``) or
  sqrt(SSD / (max(n, 1) + 1e-6)); a one-element group gives 0. Integer src
  gives float32, as torch's true division does.
* logsumexp = log(sum exp(x - m) + eps) + m with m the group max; NaN elements
  are dropped; empty and all -inf groups give 0; a +inf element gives the
  largest finite value.
* softmax = exp(x - m) / sum (an all -inf group gives NaN); log_softmax =
  (x - m) - log(sum + eps) (an all -inf group gives -inf).
* float16/bfloat16 are computed in float32 and rounded once at the end
  (torch rounds after every step): values agree with torch_scatter within an
  ulp, and gradients are closer to the float64 truth than torch's own
  (parity_tests/test_composite_parity.py measures both).

Deviations (each proved in parity_tests/test_deviations.py): std's gradient
is 0 where the deviation is 0 (torch gives NaN); logsumexp with ``out`` keeps
``out`` in groups without src (torch_scatter 2.1.2 gives 0); softmax and
log_softmax are right for a group whose max is the dtype's lowest finite
value (torch_scatter takes it for an empty group).
"""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from .. import _dtypes
from .._sharding import OutSharding, sharding_aware
from ._gather import take_groups
from ._groups import Groups

__all__ = ["scatter_std", "scatter_logsumexp", "scatter_softmax", "scatter_log_softmax"]


def _float_groups(src: ArrayLike, index: ArrayLike, dim: int, out: Optional[ArrayLike],
                  dim_size: Optional[int], *,
                  op: str) -> tuple[Groups, jax.Array, Optional[jax.Array]]:
    groups, src, out = Groups.build(src, index, dim, out, dim_size, op=op)
    if not jnp.issubdtype(src.dtype, jnp.floating):
        raise ValueError(f"`{op}` can only be computed over arrays with floating point data "
                         f"types, got `src` of dtype {src.dtype} (cast it: "
                         f"src.astype(jnp.float32))")
    return groups, src, out


def _group_max(groups: Groups, rows: jax.Array) -> jax.Array:
    """Per-group max with NaN skipped (torch_scatter's scatter_max); -inf for empty groups.

    No gradient flows through it: every composite's result is invariant to the
    shift it is used for.
    """
    clean = jnp.where(jnp.isnan(rows), -jnp.inf, rows)
    best = jax.ops.segment_max(clean, groups.ids, groups.num_segments,
                               indices_are_sorted=groups.indices_sorted)
    return jax.lax.stop_gradient(best)


def _shift(groups: Groups, rows: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(max per group, x - max per row) as softmax/log_softmax shift.

    Like torch_scatter, a group whose max is -inf is shifted by 0; unlike it,
    a group whose max is the lowest finite value is shifted by that value.
    """
    best = _group_max(groups, rows)
    best = jnp.where(best == -jnp.inf, jnp.zeros((), rows.dtype), best)
    return best, rows - take_groups(best, groups.ids, 0)


@sharding_aware
def scatter_softmax(src: ArrayLike, index: ArrayLike, dim: int = -1,
                    dim_size: Optional[int] = None,
                    *, out_sharding: OutSharding = None) -> jax.Array:
    """Softmax of ``src`` within each group: ``exp(x - max) / sum(exp(x - max))``.

    Output has src's shape; a group that is all -inf gives NaN (0 / 0), NaN or
    +inf elements make their group NaN, as in torch_scatter.
    """
    groups, src, _ = _float_groups(src, index, dim, None, dim_size, op="scatter_softmax")
    _, shifted = _shift(groups, _work_rows(groups, src))
    exp = jnp.exp(shifted)
    total = groups.sum_rows(exp)
    return groups.from_rows(exp / take_groups(total, groups.ids, jnp.inf)).astype(src.dtype)


@sharding_aware
def scatter_log_softmax(src: ArrayLike, index: ArrayLike, dim: int = -1, eps: float = 1e-12,
                        dim_size: Optional[int] = None,
                        *, out_sharding: OutSharding = None) -> jax.Array:
    """Log-softmax within each group: ``(x - max) - log(sum(exp(x - max)) + eps)``.

    Note the order of the arguments: ``eps`` comes before ``dim_size``.
    """
    groups, src, _ = _float_groups(src, index, dim, None, dim_size, op="scatter_log_softmax")
    _, shifted = _shift(groups, _work_rows(groups, src))
    log_total = jnp.log(groups.sum_rows(jnp.exp(shifted)) + eps)
    return groups.from_rows(shifted - take_groups(log_total, groups.ids, jnp.inf)).astype(src.dtype)


@sharding_aware
def scatter_logsumexp(src: ArrayLike, index: ArrayLike, dim: int = -1,
                      out: Optional[ArrayLike] = None, dim_size: Optional[int] = None,
                      eps: float = 1e-12, *, out_sharding: OutSharding = None) -> jax.Array:
    """``log(sum(exp(x)) + eps)`` per group, computed stably around the group max.

    Empty and all -inf groups give 0; NaN elements are dropped; a +inf element
    gives the dtype's largest finite value (torch_scatter's ``nan_to_num``).
    With ``out``: ``log(exp(out) + sum(exp(x)))`` per group, and groups
    without src keep ``out``.
    """
    op = "scatter_logsumexp"
    groups, src, out = _float_groups(src, index, dim, out, dim_size, op=op)
    rows = _work_rows(groups, src)
    best = _group_max(groups, rows)
    extra = None
    if out is not None:
        out_groups = groups.to_groups(out).astype(rows.dtype)
        best = jnp.maximum(best, jax.lax.stop_gradient(out_groups))
        extra = jnp.exp(_no_nan(out_groups - best))
    shifted = _no_nan(rows - take_groups(best, groups.ids, 0))
    total = groups.sum_rows(jnp.exp(shifted), extra)
    result = (jnp.log(total + eps) + best).astype(src.dtype)
    # torch_scatter's nan_to_num: +inf becomes the largest finite value of src's dtype
    return groups.from_groups(jnp.nan_to_num(result, nan=0.0, neginf=0.0))


def _work_rows(groups: Groups, src: jax.Array) -> jax.Array:
    """src in the flat layout, widened to float32 for float16/bfloat16."""
    return groups.to_rows(src).astype(_dtypes.accumulation_dtype(src.dtype))


def _no_nan(x: jax.Array) -> jax.Array:
    """NaN -> -inf: (NaN - max) and (-inf - -inf) contribute nothing to a logsumexp."""
    return jnp.where(jnp.isnan(x), -jnp.inf, x)


@sharding_aware
def scatter_std(src: ArrayLike, index: ArrayLike, dim: int = -1,
                out: Optional[ArrayLike] = None,
                dim_size: Optional[int] = None, unbiased: bool = True,
                *, out_sharding: OutSharding = None) -> jax.Array:
    """Standard deviation per group: ``sqrt(SSD / (max(n - 1, 1) + 1e-6))``.

    ``unbiased=False`` divides by ``max(n, 1) + 1e-6``. Empty and one-element
    groups give 0. With ``out``: ``sqrt((out + SSD) / ...)``. Integer ``src``
    gives float32 (torch's true division); the gradient at a zero deviation is
    0 (torch_scatter gives NaN).
    """
    op = "scatter_std"
    groups, src, out = Groups.build(src, index, dim, out, dim_size, op=op)
    if jnp.issubdtype(src.dtype, jnp.complexfloating):
        raise TypeError(f"{op}: `src` of dtype {src.dtype} is not supported")
    integer = jnp.issubdtype(src.dtype, jnp.integer)
    if integer and out is not None:
        raise TypeError(f"{op}: `out` needs a floating `src` (the result of an integer src is "
                        f"float32); cast src to out's dtype")
    result_dtype = jnp.float32 if integer else src.dtype
    dtype = _dtypes.accumulation_dtype(result_dtype)
    rows = groups.to_rows(src)
    count = jnp.maximum(groups.counts().astype(dtype), 1)
    mean = groups.sum_rows(rows, keep_accumulator=True).astype(dtype) / count
    deviation = rows.astype(dtype) - take_groups(mean, groups.ids, 0)
    ssd = groups.sum_rows(deviation * deviation,
                          None if out is None else groups.to_groups(out).astype(dtype))
    if unbiased:
        count = jnp.maximum(count - 1, 1)
    variance = ssd / (count + 1e-6)
    # sqrt has an infinite slope at 0. A one-element group's std is constant (slope 0);
    # elsewhere a zero deviation is a kink, and 0 is its smallest subgradient.
    zero = variance == 0
    std = jnp.where(zero, jnp.zeros((), dtype), jnp.sqrt(jnp.where(zero, 1, variance)))
    return groups.from_groups(std).astype(result_dtype)
