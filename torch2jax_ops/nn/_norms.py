"""torch.nn's ``InstanceNorm1d/2d/3d``, ``GroupNorm`` and ``RMSNorm`` as equinox modules.

(``BatchNorm1d/2d/3d`` and ``LayerNorm`` live in :mod:`._layers`.) Biased
variances, ``eps`` inside the square root, as torch.
"""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "GroupNorm", "RMSNorm"]


class _InstanceNorm(eqx.Module):
    """``torch.nn.InstanceNorm{1,2,3}d``: each (sample, channel) normalised over its spatial
    axes; ``[N, C, *spatial]`` or unbatched ``[C, *spatial]``. With
    ``track_running_stats`` (eval mode) the running statistics are used instead."""
    eps: float = eqx.field(static=True)
    weight: Optional[jax.Array] = None
    bias: Optional[jax.Array] = None
    running_mean: Optional[jax.Array] = None
    running_var: Optional[jax.Array] = None
    num_batches_tracked: Optional[jax.Array] = None
    dims: int = eqx.field(static=True, default=1)

    def __call__(self, input: jax.Array) -> jax.Array:
        x = jnp.asarray(input)
        op = f"InstanceNorm{self.dims}d"
        if x.ndim not in (self.dims + 1, self.dims + 2):
            raise ValueError(f"{op}: expected {self.dims + 1}-D (unbatched) or "
                             f"{self.dims + 2}-D (batched) input, got shape {tuple(x.shape)}")
        batched = x.ndim == self.dims + 2
        if not batched:
            x = x[None]
        shape = (1, -1) + (1,) * self.dims
        if self.running_mean is not None:
            assert self.running_var is not None
            mean = jax.lax.stop_gradient(self.running_mean).reshape(shape)
            var = jax.lax.stop_gradient(self.running_var).reshape(shape)
        else:
            axes = tuple(range(2, x.ndim))
            mean = jnp.mean(x, axis=axes, keepdims=True)
            var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
        y = (x - mean) * jax.lax.rsqrt(var + self.eps)
        if self.weight is not None:
            y = y * self.weight.reshape(shape)
        if self.bias is not None:
            y = y + self.bias.reshape(shape)
        return y if batched else y[0]


class InstanceNorm1d(_InstanceNorm):
    """``torch.nn.InstanceNorm1d``: ``[N, C, L]`` or ``[C, L]``."""


class InstanceNorm2d(_InstanceNorm):
    """``torch.nn.InstanceNorm2d``: ``[N, C, H, W]`` or ``[C, H, W]``."""


class InstanceNorm3d(_InstanceNorm):
    """``torch.nn.InstanceNorm3d``: ``[N, C, D, H, W]`` or ``[C, D, H, W]``."""


class GroupNorm(eqx.Module):
    """``torch.nn.GroupNorm``: ``x [N, C, *]``; the ``C / num_groups`` channels of a group
    (and all positions) share one mean and biased variance; per-channel affine."""
    num_groups: int = eqx.field(static=True)
    eps: float = eqx.field(static=True)
    weight: Optional[jax.Array] = None
    bias: Optional[jax.Array] = None

    def __call__(self, input: jax.Array) -> jax.Array:
        x = jnp.asarray(input)
        if x.ndim < 2 or x.shape[1] % self.num_groups:
            raise ValueError(f"GroupNorm: expected [N, C, *] with C divisible by num_groups="
                             f"{self.num_groups}, got shape {tuple(x.shape)}")
        g = x.reshape((x.shape[0], self.num_groups, -1))
        mean = jnp.mean(g, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(g - mean), axis=-1, keepdims=True)
        y = ((g - mean) * jax.lax.rsqrt(var + self.eps)).reshape(x.shape)
        shape = (1, -1) + (1,) * (x.ndim - 2)
        if self.weight is not None:
            y = y * self.weight.reshape(shape)
        if self.bias is not None:
            y = y + self.bias.reshape(shape)
        return y


class RMSNorm(eqx.Module):
    """``torch.nn.RMSNorm``: ``x * rsqrt(mean(x^2 over normalized_shape) + eps) * weight``;
    ``eps=None`` is the dtype's machine epsilon, as torch."""
    normalized_shape: tuple = eqx.field(static=True)
    eps: Optional[float] = eqx.field(static=True, default=None)
    weight: Optional[jax.Array] = None

    def __call__(self, input: jax.Array) -> jax.Array:
        x = jnp.asarray(input)
        n = len(self.normalized_shape)
        if tuple(x.shape[x.ndim - n:]) != tuple(self.normalized_shape):
            raise ValueError(f"RMSNorm: the last axes of the input {tuple(x.shape)} must be "
                             f"normalized_shape={self.normalized_shape}")
        axes = tuple(range(x.ndim - n, x.ndim))
        eps = jnp.finfo(x.dtype).eps if self.eps is None else self.eps
        y = x * jax.lax.rsqrt(jnp.mean(jnp.square(x), axis=axes, keepdims=True) + eps)
        return y if self.weight is None else y * self.weight


def _instance_norm(m: Any, ctx: Any) -> _InstanceNorm:
    dims = int(type(m).__name__[-2])
    cls = {1: InstanceNorm1d, 2: InstanceNorm2d, 3: InstanceNorm3d}[dims]
    if m.track_running_stats and m.training:
        raise ctx.unsupported(m, "track_running_stats=True in training mode (the running "
                                 "statistics move every call) is not ported; convert after "
                                 ".eval(), or use track_running_stats=False")
    tracked = m.track_running_stats and not m.training
    return cls(float(m.eps), ctx.array(m.weight), ctx.array(m.bias),
               ctx.array(m.running_mean) if tracked else None,
               ctx.array(m.running_var) if tracked else None,
               ctx.array(m.num_batches_tracked, allow_downcast=True) if tracked else None,
               dims=dims)


def _register() -> None:
    from ._registry import register_converter
    for d in (1, 2, 3):
        register_converter(f"torch.nn.modules.instancenorm.InstanceNorm{d}d")(_instance_norm)
    register_converter("torch.nn.modules.normalization.GroupNorm")(
        lambda m, ctx: GroupNorm(int(m.num_groups), float(m.eps), ctx.array(m.weight),
                                 ctx.array(m.bias)))
    register_converter("torch.nn.modules.normalization.RMSNorm")(
        lambda m, ctx: RMSNorm(tuple(m.normalized_shape), m.eps, ctx.array(m.weight)))


_register()
