"""PyG's ``PairNorm`` (Zhao and Akoglu)."""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._checking import as_array
from ...._sharding import OutSharding, sharding_aware
from ....nn import Converter, register_converter
from ._common import graph_ids, per_graph, spread
from ._message_norm import _norm

__all__ = ["PairNorm"]


class PairNorm(eqx.Module):
    """``torch_geometric.nn.norm.PairNorm``: ``x [N, C], batch [N] -> [N, C]``.

    Centre each graph (``x - mean_g(x)``), then scale: by
    ``scale / sqrt(eps + mean_g(||x_i||^2))`` (``eps`` inside the root), or with
    ``scale_individually`` row by row by ``scale / (eps + ||x_i||)`` (``eps``
    outside the norm: PyG's two forms, mirrored). No parameters.
    ``batch_size`` is needed under jit with a ``batch``.
    """
    scale: float = eqx.field(static=True, default=1.0)
    scale_individually: bool = eqx.field(static=True, default=False)
    eps: float = eqx.field(static=True, default=1e-5)

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x: jax.Array, batch: Any = None,
                 batch_size: Optional[int] = None,
                 *, out_sharding: OutSharding = None) -> jax.Array:
        op = "PairNorm"
        x = as_array(x, "x", op=op)
        scale = self.scale
        if batch is None:
            x = x - jnp.mean(x, axis=0, keepdims=True)
            if not self.scale_individually:
                return scale * x / jnp.sqrt(self.eps + jnp.mean(jnp.sum(x * x, axis=-1)))
            return scale * x / (self.eps + _norm(x, 2))
        batch, b = graph_ids(x, batch, batch_size, op=op)
        x = x - spread(per_graph(x, batch, b, "mean", op=op), batch)
        if not self.scale_individually:
            sq = per_graph(jnp.sum(x * x, axis=-1, keepdims=True), batch, b, "mean", op=op)
            return scale * x / jnp.sqrt(self.eps + spread(sq, batch))
        return scale * x / (self.eps + _norm(x, 2))


@register_converter("torch_geometric.nn.norm.pair_norm.PairNorm")
def _pair_norm(m, ctx: Converter):
    return PairNorm(scale=float(m.scale), scale_individually=bool(m.scale_individually),
                    eps=float(m.eps))
