"""``torch.cdist``: the p-norm distance between every row of ``x1`` and every row of ``x2``.

torch computes it in one of two ways, and the two give different numbers:

* **direct** -- ``(sum_k |x1[i, k] - x2[j, k]| ** p) ** (1 / p)`` per pair (every ``p``);
* **matmul** (``p == 2`` only) -- ``sqrt(clamp_min(|x1_i|^2 + |x2_j|^2 - 2 x1_i . x2_j, 0))``
  with the cross term from one matrix product. Faster, but it loses precision
  for close rows (cancellation): two rows 1e-4 apart come out 0 or ~3e-4 apart
  in float32.

``compute_mode`` picks one as torch does: ``'use_mm_for_euclid_dist_if_necessary'``
(the default) uses the matmul form when ``P > 25`` or ``R > 25``;
``'use_mm_for_euclid_dist'`` always; ``'donot_use_mm_for_euclid_dist'`` never. The
port follows the same rule (a static decision: shapes are static), so it gives
torch's numbers for torch's formula; the matmul runs at full float32 precision.

Gradients follow torch's own derivative rules (a ``jax.custom_vjp``), never NaN:
at a zero distance the gradient is 0 (``p == 2``, both forms; ``p < 1`` also
where a coordinate difference is 0); ``p == inf`` sends ``sign(diff)`` to every
coordinate that attains the maximum (ties all get it); ``p == 0`` has gradient 0.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

__all__ = ["cdist", "COMPUTE_MODES"]

#: torch's compute_mode names -> 0 (mm if P or R > 25), 1 (always mm), 2 (never mm)
COMPUTE_MODES = {"use_mm_for_euclid_dist_if_necessary": 0, "use_mm_for_euclid_dist": 1,
                 "donot_use_mm_for_euclid_dist": 2}

_HIGHEST = jax.lax.Precision.HIGHEST


def uses_matmul(p: float, rows1: int, rows2: int, compute_mode: str) -> bool:
    """Whether torch computes this cdist with the matmul form (torch's rule, see above)."""
    mode = COMPUTE_MODES[compute_mode]
    return p == 2 and (mode == 1 or (mode == 0 and (rows1 > 25 or rows2 > 25)))


def cdist(x1: jax.Array, x2: jax.Array, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> jax.Array:
    """``torch.cdist(x1, x2, p=2.0, compute_mode=...)``.

    ``x1``: ``[*B1, P, M]``, ``x2``: ``[*B2, R, M]`` (floating, same dtype; the batch
    dims broadcast) -> ``[*broadcast(B1, B2), P, R]``. ``p >= 0`` (``inf`` allowed).
    See the module docstring for the formula each ``compute_mode`` selects.
    """
    x1, x2 = jnp.asarray(x1), jnp.asarray(x2)
    if x1.ndim < 2 or x2.ndim < 2:
        which, nd = ("x1", x1.ndim) if x1.ndim < 2 else ("x2", x2.ndim)
        raise ValueError(f"cdist: `{which}` must have at least 2 dims ([*batch, rows, "
                         f"features]), got {nd}-D")
    for name, x in (("x1", x1), ("x2", x2)):
        if not jnp.issubdtype(x.dtype, jnp.floating):
            raise TypeError(f"cdist: `{name}` must have a floating dtype, got "
                            f"{jnp.dtype(x.dtype).name}")
    if x1.dtype != x2.dtype:
        raise TypeError(f"cdist: `x1` and `x2` must have the same dtype, got "
                        f"{jnp.dtype(x1.dtype).name} and {jnp.dtype(x2.dtype).name}")
    if x1.shape[-1] != x2.shape[-1]:
        raise ValueError(f"cdist: `x1` and `x2` must have the same number of columns "
                         f"(last dim), got {x1.shape[-1]} and {x2.shape[-1]}")
    try:
        p = float(p)
    except (TypeError, ValueError):
        raise TypeError(f"cdist: `p` must be a number >= 0 (or inf), got {p!r}") from None
    if not p >= 0:  # (NaN too)
        raise ValueError(f"cdist: `p` must be >= 0 (or inf), got {p}")
    if compute_mode not in COMPUTE_MODES:
        raise ValueError(f"cdist: `compute_mode`={compute_mode!r} is not one of "
                         f"{sorted(COMPUTE_MODES)}")
    try:
        batch = jnp.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    except ValueError:
        raise ValueError(f"cdist: the batch dims of `x1` {x1.shape[:-2]} and `x2` "
                         f"{x2.shape[:-2]} do not broadcast") from None
    rows1, rows2, m = x1.shape[-2], x2.shape[-2], x1.shape[-1]
    a = jnp.broadcast_to(x1, batch + (rows1, m))
    b = jnp.broadcast_to(x2, batch + (rows2, m))
    if rows1 == 0 or rows2 == 0 or m == 0:
        # every distance is an empty sum (0); the gradient of the inputs is 0
        return jnp.zeros(batch + (rows1, rows2), x1.dtype)
    if uses_matmul(p, rows1, rows2, compute_mode):
        return _euclidean_mm(a, b)
    return _direct(a, b, p)


# ------------------------------------------------------------------ the direct form

def _reduce(diff: jax.Array, p: float) -> jax.Array:
    a = jnp.abs(diff)
    if p == 0:
        return jnp.sum((a != 0).astype(diff.dtype), axis=-1)
    if p == 1:
        return jnp.sum(a, axis=-1)
    if p == 2:
        return jnp.sqrt(jnp.sum(a * a, axis=-1))
    if p == math.inf:
        return jnp.max(a, axis=-1)
    return jnp.sum(a ** p, axis=-1) ** (1.0 / p)


def _pair_grad(diff: jax.Array, dist: jax.Array, g: jax.Array, p: float) -> jax.Array:
    """d dist / d x1 times the cotangent, per pair and coordinate (torch's rules)."""
    dist, g = dist[..., None], g[..., None]
    zero = jnp.zeros((), diff.dtype)
    if p == 0:
        return jnp.zeros_like(diff)
    if p == 1:
        return g * jnp.sign(diff)
    if p == 2:
        safe = jnp.where(dist == 0, 1, dist)
        return jnp.where(dist == 0, zero, g * diff / safe)
    if p == math.inf:
        return g * jnp.sign(diff) * (jnp.abs(diff) == dist).astype(diff.dtype)
    a = jnp.abs(diff)
    safe_dist = jnp.where(dist == 0, 1, dist)
    if p < 2:
        dead = (dist == 0) | ((diff == 0) & (p < 1))
        safe_a = jnp.where(dead, 1, a)
        out = jnp.sign(diff) * safe_a ** (p - 1) * g / safe_dist ** (p - 1)
    else:
        dead = jnp.broadcast_to(dist == 0, diff.shape)
        out = diff * a ** (p - 2) * g / safe_dist ** (p - 1)
    return jnp.where(dead, zero, out)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _direct(a: jax.Array, b: jax.Array, p: float) -> jax.Array:
    return _reduce(a[..., :, None, :] - b[..., None, :, :], p)


def _direct_fwd(a: jax.Array, b: jax.Array, p: float) -> tuple:
    dist = _reduce(a[..., :, None, :] - b[..., None, :, :], p)
    return dist, (a, b, dist)


def _direct_bwd(p: float, res: tuple, g: jax.Array) -> tuple:
    a, b, dist = res
    per_pair = _pair_grad(a[..., :, None, :] - b[..., None, :, :], dist, g, p)
    return jnp.sum(per_pair, axis=-2), -jnp.sum(per_pair, axis=-3)


_direct.defvjp(_direct_fwd, _direct_bwd)


# ------------------------------------------------------------------ the matmul form

def _euclidean_mm_impl(a: jax.Array, b: jax.Array) -> jax.Array:
    na = jnp.sum(a * a, axis=-1, keepdims=True)
    nb = jnp.sum(b * b, axis=-1, keepdims=True)
    left = jnp.concatenate([-2 * a, na, jnp.ones_like(na)], axis=-1)
    right = jnp.concatenate([b, jnp.ones_like(nb), nb], axis=-1)
    squared = jnp.matmul(left, jnp.swapaxes(right, -1, -2), precision=_HIGHEST)
    return jnp.sqrt(jnp.maximum(squared, 0))


@jax.custom_vjp
def _euclidean_mm(a: jax.Array, b: jax.Array) -> jax.Array:
    return _euclidean_mm_impl(a, b)


def _mm_fwd(a: jax.Array, b: jax.Array) -> tuple:
    dist = _euclidean_mm_impl(a, b)
    return dist, (a, b, dist)


def _mm_bwd(res: tuple, g: jax.Array) -> tuple:
    a, b, dist = res
    ratio = jnp.where(dist == 0, jnp.zeros((), g.dtype), g / jnp.where(dist == 0, 1, dist))
    ga = a * jnp.sum(ratio, axis=-1, keepdims=True) - jnp.matmul(ratio, b, precision=_HIGHEST)
    gb = b * jnp.sum(ratio, axis=-2)[..., None] - jnp.matmul(
        jnp.swapaxes(ratio, -1, -2), a, precision=_HIGHEST)
    return ga, gb


_euclidean_mm.defvjp(_mm_fwd, _mm_bwd)
