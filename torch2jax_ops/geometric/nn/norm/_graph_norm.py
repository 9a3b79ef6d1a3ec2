"""PyG's ``GraphNorm`` (Cai et al.), ``GraphSizeNorm`` and ``MeanSubtractionNorm``."""
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

__all__ = ["GraphNorm", "GraphSizeNorm", "MeanSubtractionNorm"]


class GraphNorm(eqx.Module):
    """``torch_geometric.nn.norm.GraphNorm``: ``x [N, C], batch [N] -> [N, C]``.

    ``out = x - mean_g(x) * mean_scale``; ``weight * out / sqrt(mean_g(out^2) + eps) + bias``
    per graph ``g`` (empty graphs: mean 0). Arrays ``weight``, ``bias``,
    ``mean_scale`` ``[C]``. ``batch_size`` is needed under jit with a ``batch``;
    graph id ``batch_size`` marks padding nodes.
    """
    weight: jax.Array
    bias: jax.Array
    mean_scale: jax.Array
    eps: float = eqx.field(static=True, default=1e-5)

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x: jax.Array, batch: Any = None,
                 batch_size: Optional[int] = None,
                 *, out_sharding: OutSharding = None) -> jax.Array:
        op = "GraphNorm"
        x = as_array(x, "x", op=op)
        batch, b = graph_ids(x, batch, batch_size, op=op)
        mean = per_graph(x, batch, b, "mean", op=op)
        out = x - spread(mean, batch) * self.mean_scale
        var = per_graph(out * out, batch, b, "mean", op=op)
        std = spread(jnp.sqrt(var + self.eps), batch)
        return self.weight * out / std + self.bias


class GraphSizeNorm(eqx.Module):
    """``torch_geometric.nn.norm.GraphSizeNorm``: ``x / sqrt(|V_g|)`` row-wise, by graph size.

    ``batch_size`` is needed under jit with a ``batch`` (PyG's ``degree`` reads
    ``batch.max() + 1``).
    """

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x: jax.Array, batch: Any = None,
                 batch_size: Optional[int] = None,
                 *, out_sharding: OutSharding = None) -> jax.Array:
        op = "GraphSizeNorm"
        x = as_array(x, "x", op=op)
        batch, b = graph_ids(x, batch, batch_size, op=op)
        inv_sqrt_deg = count_ids(batch, b, x.dtype) ** -0.5
        return x * spread(inv_sqrt_deg, batch).reshape(-1, 1)


class MeanSubtractionNorm(eqx.Module):
    """``torch_geometric.nn.norm.MeanSubtractionNorm``: ``x - mean_g(x)`` per graph.

    PyG names the number of graphs ``dim_size`` here; it is needed under jit
    with a ``batch``.
    """

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x: jax.Array, batch: Any = None,
                 dim_size: Optional[int] = None, *, out_sharding: OutSharding = None) -> jax.Array:
        op = "MeanSubtractionNorm"
        x = as_array(x, "x", op=op)
        if batch is None:
            return x - jnp.mean(x, axis=0, keepdims=True)
        batch, b = graph_ids(x, batch, dim_size, op=op, name="dim_size")
        return x - spread(per_graph(x, batch, b, "mean", op=op), batch)


@register_converter("torch_geometric.nn.norm.graph_norm.GraphNorm")
def _graph_norm(m, ctx: Converter):
    return GraphNorm(ctx.array(m.weight), ctx.array(m.bias), ctx.array(m.mean_scale),
                     eps=float(m.eps))


@register_converter("torch_geometric.nn.norm.graph_size_norm.GraphSizeNorm")
def _graph_size_norm(m, ctx: Converter):
    return GraphSizeNorm()


@register_converter("torch_geometric.nn.norm.mean_subtraction_norm.MeanSubtractionNorm")
def _mean_subtraction_norm(m, ctx: Converter):
    return MeanSubtractionNorm()
