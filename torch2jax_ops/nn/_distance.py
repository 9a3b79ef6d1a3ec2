"""torch.nn's ``CosineSimilarity`` and ``PairwiseDistance`` as equinox modules."""
from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

__all__ = ["CosineSimilarity", "PairwiseDistance"]


class CosineSimilarity(eqx.Module):
    """``torch.nn.CosineSimilarity``: ``sum(x1 * x2, dim) / (max(|x1|, eps) max(|x2|, eps))``.

    Each norm is clamped by itself, as torch 2.x computes it; torch clamps
    without recording it for autograd, so a clamped norm's gradient is still
    the norm's own (``x / |x|``), and so it is here.
    """
    dim: int = eqx.field(static=True, default=1)
    eps: float = eqx.field(static=True, default=1e-8)

    def __call__(self, x1: jax.Array, x2: jax.Array) -> jax.Array:
        x1, x2 = jnp.broadcast_arrays(jnp.asarray(x1), jnp.asarray(x2))
        def norm(x):
            n = jnp.sqrt(jnp.sum(jnp.square(x), axis=self.dim, keepdims=True))
            clamped = jax.lax.stop_gradient(jnp.maximum(n, self.eps))
            return clamped + (n - jax.lax.stop_gradient(n))

        return jnp.sum((x1 / norm(x1)) * (x2 / norm(x2)), axis=self.dim)


class PairwiseDistance(eqx.Module):
    """``torch.nn.PairwiseDistance``: ``||x1 - x2 + eps||_p`` over the last axis."""
    norm: float = eqx.field(static=True, default=2.0)
    eps: float = eqx.field(static=True, default=1e-6)
    keepdim: bool = eqx.field(static=True, default=False)

    def __call__(self, x1: jax.Array, x2: jax.Array) -> jax.Array:
        d = jnp.asarray(x1) - jnp.asarray(x2) + self.eps
        p = self.norm
        if p == jnp.inf:
            out = jnp.max(jnp.abs(d), axis=-1, keepdims=self.keepdim)
        elif p == 0:
            out = jnp.sum((d != 0).astype(d.dtype), axis=-1, keepdims=self.keepdim)
        else:
            out = jnp.sum(jnp.abs(d) ** p, axis=-1, keepdims=self.keepdim) ** (1 / p)
        return out


def _register() -> None:
    from ._registry import register_converter
    register_converter("torch.nn.modules.distance.CosineSimilarity")(
        lambda m, ctx: CosineSimilarity(int(m.dim), float(m.eps)))
    register_converter("torch.nn.modules.distance.PairwiseDistance")(
        lambda m, ctx: PairwiseDistance(float(m.norm), float(m.eps), bool(m.keepdim)))


_register()
