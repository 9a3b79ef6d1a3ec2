"""torch.nn's ``Flatten``, ``Unflatten``, ``Bilinear`` and the eval-mode dropout variants."""
from __future__ import annotations

import math
from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

__all__ = ["Flatten", "Unflatten", "Bilinear", "FeatureDropout"]


class Flatten(eqx.Module):
    """``torch.nn.Flatten``: axes ``start_dim..end_dim`` merged into one."""
    start_dim: int = eqx.field(static=True, default=1)
    end_dim: int = eqx.field(static=True, default=-1)

    def __call__(self, input: jax.Array) -> jax.Array:
        x = jnp.asarray(input)
        if x.ndim == 0:
            return x.reshape(1)
        s, e = self.start_dim % x.ndim, self.end_dim % x.ndim
        if s > e:
            raise ValueError(f"Flatten: start_dim={self.start_dim} comes after "
                             f"end_dim={self.end_dim} for a {x.ndim}-D input")
        return x.reshape(x.shape[:s] + (math.prod(x.shape[s:e + 1]),) + x.shape[e + 1:])


class Unflatten(eqx.Module):
    """``torch.nn.Unflatten``: axis ``dim`` split into ``unflattened_size`` (one -1 allowed)."""
    dim: int = eqx.field(static=True)
    unflattened_size: tuple = eqx.field(static=True)

    def __call__(self, input: jax.Array) -> jax.Array:
        x = jnp.asarray(input)
        d = self.dim % x.ndim
        return x.reshape(x.shape[:d] + tuple(self.unflattened_size) + x.shape[d + 1:])


class Bilinear(eqx.Module):
    """``torch.nn.Bilinear``: ``y_k = x1^T weight[k] x2 + bias_k``; ``weight [out, in1, in2]``,
    ``x1 [*, in1]``, ``x2 [*, in2]`` -> ``[*, out]``."""
    weight: jax.Array
    bias: Optional[jax.Array] = None

    def __call__(self, input1: jax.Array, input2: jax.Array) -> jax.Array:
        y = jnp.einsum("...i,oij,...j->...o", input1, self.weight, input2)
        return y if self.bias is None else y + self.bias


class FeatureDropout(eqx.Module):
    """``Dropout1d/2d/3d``, ``AlphaDropout``, ``FeatureAlphaDropout`` in eval mode: the
    identity. (Their training mode is refused when converting.)"""
    name: str = eqx.field(static=True, default="Dropout2d")

    def __call__(self, input: jax.Array) -> jax.Array:
        return input


def _feature_dropout(m: Any, ctx: Any) -> FeatureDropout:
    name = type(m).__name__
    if m.training and m.p > 0:
        raise ctx.unsupported(m, f"{name}(p={m.p}) in training mode is not ported (only "
                                 f"Dropout's element-wise training mode is); convert after "
                                 f".eval(), or use torch.nn.Dropout")
    return FeatureDropout(name)


def _register() -> None:
    from ._registry import register_converter
    register_converter("torch.nn.modules.flatten.Flatten")(
        lambda m, ctx: Flatten(int(m.start_dim), int(m.end_dim)))
    register_converter("torch.nn.modules.flatten.Unflatten")(
        lambda m, ctx: Unflatten(int(m.dim), tuple(m.unflattened_size)))
    register_converter("torch.nn.modules.linear.Bilinear")(
        lambda m, ctx: Bilinear(ctx.array(m.weight), ctx.array(m.bias)))
    for name in ("Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"):
        register_converter(f"torch.nn.modules.dropout.{name}")(_feature_dropout)


_register()
