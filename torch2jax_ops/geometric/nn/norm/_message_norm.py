"""PyG's ``MessageNorm`` (DeeperGCN, Li et al.)."""
from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._sharding import OutSharding, sharding_aware
from ....nn import Converter, register_converter

__all__ = ["MessageNorm"]


def _norm(x: jax.Array, p: float) -> jax.Array:
    """``x.norm(p, dim=-1, keepdim=True)`` with torch's gradient at 0 (0, not NaN)."""
    if p == 2:
        sq = jnp.sum(x * x, axis=-1, keepdims=True)
        zero = sq == 0
        return jnp.where(zero, 0, jnp.sqrt(jnp.where(zero, 1, sq))).astype(x.dtype)
    a = jnp.abs(x)
    if p == 1:
        return jnp.sum(a, axis=-1, keepdims=True)
    if p == float("inf"):
        return jnp.max(a, axis=-1, keepdims=True)
    s = jnp.sum(a ** p, axis=-1, keepdims=True)
    zero = s == 0
    return jnp.where(zero, 0, jnp.where(zero, 1, s) ** (1.0 / p)).astype(x.dtype)


class MessageNorm(eqx.Module):
    """``torch_geometric.nn.norm.MessageNorm``: ``normalize(msg, p) * ||x||_p * scale``.

    ``__call__(x [N, F], msg [N, F'], p=2.0) -> [N, F']``; ``F.normalize``
    divides by ``max(||msg||_p, 1e-12)``. ``scale [1]`` is a parameter in PyG
    (``requires_grad=learn_scale``); here it always receives its gradient, as
    under ``torch.func`` -- freeze it in the optimizer when ``learn_scale``
    was False (:attr:`learn_scale` records it).
    """
    scale: jax.Array
    learn_scale: bool = eqx.field(static=True, default=False)

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, msg, p: float = 2.0, *, out_sharding: OutSharding = None):
        norm = _norm(msg, p)
        msg = msg / jnp.where(norm < 1e-12, jnp.asarray(1e-12, norm.dtype), norm)
        return msg * _norm(x, p) * self.scale


@register_converter("torch_geometric.nn.norm.msg_norm.MessageNorm")
def _message_norm(m, ctx: Converter):
    return MessageNorm(ctx.array(m.scale), learn_scale=bool(m.scale.requires_grad))
