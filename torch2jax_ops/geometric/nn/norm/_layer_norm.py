"""PyG's ``LayerNorm`` (``mode="graph"`` or ``"node"``)."""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._checking import as_array
from ...._sharding import OutSharding, sharding_aware
from ....nn import Converter, register_converter
from ...utils._norm import count_ids
from ._common import graph_ids, per_graph, spread

__all__ = ["LayerNorm"]


class LayerNorm(eqx.Module):
    """``torch_geometric.nn.norm.LayerNorm``: ``x [N, C], batch [N] -> [N, C]``.

    ``mode="graph"`` normalises each graph over all its nodes and channels;
    ``mode="node"`` each row (``torch.nn.functional.layer_norm``). Arrays
    ``weight``, ``bias`` ``[C]`` (absent without ``affine``).

    PyG's quirks, mirrored: with ``batch=None`` the graph mode divides by
    ``std + eps`` (``x.std(unbiased=False) + eps``), with a ``batch`` by
    ``sqrt(var + eps)``; in the batched form an empty graph counts as one node
    (``degree.clamp(min=1)``); the affine step needs both ``weight`` and
    ``bias``. ``batch_size`` is needed under jit with a ``batch`` (PyG reads
    ``batch.max() + 1``); graph id ``batch_size`` marks padding nodes.
    """
    weight: Optional[jax.Array] = None
    bias: Optional[jax.Array] = None
    in_channels: int = eqx.field(static=True, default=1)
    eps: float = eqx.field(static=True, default=1e-5)
    affine: bool = eqx.field(static=True, default=True)
    mode: str = eqx.field(static=True, default="graph")

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x: jax.Array, batch: Any = None,
                 batch_size: Optional[int] = None,
                 *, out_sharding: OutSharding = None) -> jax.Array:
        op = "LayerNorm"
        x = as_array(x, "x", op=op)
        if self.mode == "node":
            mean = jnp.mean(x, axis=-1, keepdims=True)
            var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
            out = (x - mean) * jax.lax.rsqrt(var + self.eps)
            if self.weight is not None:
                out = out * self.weight
            if self.bias is not None:
                out = out + self.bias
            return out
        if self.mode != "graph":
            raise ValueError(f"{op}: unknown `mode` {self.mode!r}; PyG has 'graph' and 'node'")
        if batch is None:
            x = x - jnp.mean(x)
            out = x / (jnp.sqrt(jnp.mean(jnp.square(x - jnp.mean(x)))) + self.eps)
        else:
            batch, b = graph_ids(x, batch, batch_size, op=op)
            norm = jnp.maximum(count_ids(batch, b, x.dtype), 1) * x.shape[-1]
            norm = norm.reshape(-1, 1)
            mean = jnp.sum(per_graph(x, batch, b, op=op), axis=-1, keepdims=True) / norm
            x = x - spread(mean, batch)
            var = jnp.sum(per_graph(x * x, batch, b, op=op), axis=-1, keepdims=True) / norm
            out = x / spread(jnp.sqrt(var + self.eps), batch)
        if self.weight is not None and self.bias is not None:
            out = out * self.weight + self.bias
        return out


@register_converter("torch_geometric.nn.norm.layer_norm.LayerNorm")
def _layer_norm(m, ctx: Converter):
    if m.mode not in ("graph", "node"):
        raise ctx.unsupported(m, f"mode={m.mode!r}; PyG has 'graph' and 'node'")
    return LayerNorm(ctx.array(m.weight), ctx.array(m.bias), in_channels=int(m.in_channels),
                     eps=float(m.eps), affine=bool(m.affine), mode=m.mode)
