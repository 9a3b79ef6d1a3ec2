"""PyG's ``InstanceNorm``: each graph normalised on its own, channel by channel."""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._checking import as_array
from ...._sharding import OutSharding, sharding_aware
from ....nn import Converter, register_converter
from ....nn._state import record_update
from ...utils._norm import count_ids
from ._common import graph_ids, per_graph, spread

__all__ = ["InstanceNorm"]


class InstanceNorm(eqx.Module):
    """``torch_geometric.nn.norm.InstanceNorm``: ``x [N, C], batch [N] -> [N, C]``.

    Training mode, or ``track_running_stats=False``: every graph normalised with
    its own per-channel mean and biased variance; eval mode with
    ``track_running_stats``: with ``running_mean`` / ``running_var``. Affine
    ``weight``, ``bias`` ``[C]`` with ``affine``.

    Training mode with ``track_running_stats`` updates the running statistics
    as PyG does (collect the new module with
    :func:`torch2jax_ops.nn.stateful_call`): ``batch=None`` runs
    ``F.instance_norm`` (``running_var`` moves by the unbiased variance,
    ``n / (n - 1)``); with a ``batch`` PyG's own rule: the *mean over all
    ``batch_size`` graphs* (empty ones included, with mean 0 and variance 0) of
    each graph's mean and of its variance divided by ``max(n_g - 1, 1)``.
    ``num_batches_tracked`` never moves (PyG's forward does not count). With a
    ``batch`` an empty graph counts as one node (``degree.clamp(min=1)``).
    ``batch_size`` is needed under jit with a ``batch``.
    """
    weight: Optional[jax.Array] = None
    bias: Optional[jax.Array] = None
    running_mean: Optional[jax.Array] = None
    running_var: Optional[jax.Array] = None
    num_batches_tracked: Optional[jax.Array] = None
    in_channels: int = eqx.field(static=True, default=1)
    eps: float = eqx.field(static=True, default=1e-5)
    momentum: float = eqx.field(static=True, default=0.1)
    track_running_stats: bool = eqx.field(static=True, default=False)
    training: bool = eqx.field(static=True, default=False)

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x: jax.Array, batch: Any = None,
                 batch_size: Optional[int] = None,
                 *, out_sharding: OutSharding = None) -> jax.Array:
        op = "InstanceNorm"
        x = as_array(x, "x", op=op)
        input_stats = self.training or not self.track_running_stats
        if batch is None:
            if input_stats:
                n = x.shape[0]
                if n <= 1:
                    raise ValueError(f"{op}: expected more than 1 spatial element when "
                                     f"training, got input size {(1, x.shape[1], n)} "
                                     f"(a single node: PyG's F.instance_norm refuses it)")
                mean = jnp.mean(x, axis=0, keepdims=True)
                var = jnp.mean(jnp.square(x - mean), axis=0, keepdims=True)
                if self.running_mean is not None:
                    unbiased = var[0] * (n / (n - 1))
                    record_update(self, lambda m: m._moved(mean[0], unbiased))
            else:  # tracked running statistics
                assert self.running_mean is not None and self.running_var is not None
                mean = jax.lax.stop_gradient(self.running_mean)[None]
                var = jax.lax.stop_gradient(self.running_var)[None]
            out = (x - mean) * jax.lax.rsqrt(var + self.eps)
            if self.weight is not None:
                out = out * self.weight
            if self.bias is not None:
                out = out + self.bias
            return out
        batch, b = graph_ids(x, batch, batch_size, op=op)
        if input_stats:
            norm = jnp.maximum(count_ids(batch, b, x.dtype), 1).reshape(-1, 1)
            unbiased_norm = jnp.maximum(norm - 1, 1)
            mean = per_graph(x, batch, b, op=op) / norm
            x = x - spread(mean, batch)
            var = per_graph(x * x, batch, b, op=op)
            unbiased_var = var / unbiased_norm
            var = var / norm
            if self.running_mean is not None:
                record_update(self, lambda m: m._moved(jnp.mean(mean, axis=0),
                                                       jnp.mean(unbiased_var, axis=0)))
        else:  # tracked running statistics
            assert self.running_mean is not None and self.running_var is not None
            mean = jnp.broadcast_to(jax.lax.stop_gradient(self.running_mean)[None],
                                    (b, x.shape[1]))
            var = jnp.broadcast_to(jax.lax.stop_gradient(self.running_var)[None],
                                   (b, x.shape[1]))
            x = x - spread(mean, batch)
        out = x / spread(jnp.sqrt(var + self.eps), batch)
        if self.weight is not None and self.bias is not None:
            out = out * self.weight.reshape(1, -1) + self.bias.reshape(1, -1)
        return out

    def _moved(self, mean: jax.Array, var: jax.Array) -> InstanceNorm:
        """This module after one training step's update of its running statistics."""
        m = self.momentum
        assert self.running_mean is not None and self.running_var is not None
        mean, var = jax.lax.stop_gradient(mean), jax.lax.stop_gradient(var)
        rm = ((1 - m) * self.running_mean + m * mean).astype(self.running_mean.dtype)
        rv = ((1 - m) * self.running_var + m * var).astype(self.running_var.dtype)
        return eqx.tree_at(lambda n: (n.running_mean, n.running_var), self, (rm, rv))


@register_converter("torch_geometric.nn.norm.instance_norm.InstanceNorm")
def _instance_norm(m, ctx: Converter):
    track = bool(m.track_running_stats)
    if track and m.momentum is None:
        raise ctx.unsupported(m, "momentum=None (a cumulative average) with "
                                 "track_running_stats=True: PyG's forward needs a number "
                                 "(it computes 1 - momentum); pass momentum=<float>")
    return InstanceNorm(ctx.array(m.weight), ctx.array(m.bias), ctx.array(m.running_mean),
                        ctx.array(m.running_var),
                        ctx.array(getattr(m, "num_batches_tracked", None), allow_downcast=True),
                        in_channels=int(m.num_features), eps=float(m.eps),
                        momentum=0.1 if m.momentum is None else float(m.momentum),
                        track_running_stats=track, training=bool(m.training))
