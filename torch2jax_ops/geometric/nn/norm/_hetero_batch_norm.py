"""PyG's ``HeteroBatchNorm``: batch normalisation with statistics and affine maps per type."""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._sharding import OutSharding, sharding_aware
from ....nn import Converter, register_converter
from ....nn._state import record_update
from ....torch_scatter._groups import Groups
from .._common import typed_rows

__all__ = ["HeteroBatchNorm"]


def type_mean_var(x: jax.Array, type_vec: jax.Array,
                  num_types: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """PyG's ``FusedAggregation(["mean", "var"])`` over types: ``mean, var [T, C]`` and the
    rows per type ``[T]``. ``var = mean(x**2) - mean(x)**2`` (biased); a type with no row
    has mean 0 and variance 0 (the count is clamped to 1, as PyG's). One ``Groups``
    planner (the scatter core) for all three: half types accumulate in float32."""
    groups = Groups(x, type_vec, 0, num_types, (x.shape[0], 1), op="HeteroBatchNorm")
    mean = groups.from_groups(groups.mean(x, rounding="trunc"))
    mean2 = groups.from_groups(groups.mean(x * x, rounding="trunc"))
    return mean, mean2 - mean * mean, groups.counts().reshape(num_types)


class HeteroBatchNorm(eqx.Module):
    """``torch_geometric.nn.HeteroBatchNorm``: ``x [N, C], type_vec [N] -> [N, C]``.

    Row ``i`` is normalised with its type's statistics,
    ``(x_i - mean[t_i]) / sqrt(clamp(var[t_i], min=eps))``, then
    ``* weight[t_i] + bias[t_i]`` with ``affine``. Eval mode with
    ``track_running_stats`` uses ``running_mean`` / ``running_var [T, C]``;
    training mode (or no running statistics) the batch's per-type mean and
    biased variance. As in PyG those statistics are computed under
    ``torch.no_grad()``: no gradient flows through them (``stop_gradient``).

    Training mode with ``track_running_stats`` moves the running statistics of
    the types that have rows in this batch (PyG's ``torch.unique(type_vec)``;
    here a mask, so it works under ``jax.jit``) by ``momentum`` (``None``: the
    cumulative average, ``1 / num_batches_tracked``, the only case in which PyG
    counts the batch in ``num_batches_tracked``) with the biased variance;
    collect the new module with :func:`torch2jax_ops.nn.stateful_call`.
    """
    weight: Optional[jax.Array] = None
    bias: Optional[jax.Array] = None
    running_mean: Optional[jax.Array] = None
    running_var: Optional[jax.Array] = None
    num_batches_tracked: Optional[jax.Array] = None
    num_types: int = eqx.field(static=True, default=1)
    eps: float = eqx.field(static=True, default=1e-5)
    momentum: Optional[float] = eqx.field(static=True, default=0.1)
    training: bool = eqx.field(static=True, default=False)

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x: Any, type_vec: Any, *, out_sharding: OutSharding = None) -> jax.Array:
        t = self.num_types
        x, type_vec = typed_rows(x, type_vec, t, op="HeteroBatchNorm", what="statistics")
        if self.training or self.running_mean is None:
            mean, var, count = jax.lax.stop_gradient(type_mean_var(x, type_vec, t))
            if self.training and self.running_mean is not None:
                present = count > 0
                record_update(self, lambda m: m._moved(mean, var, present))
        else:
            assert self.running_var is not None  # tracked together with running_mean
            mean = jax.lax.stop_gradient(self.running_mean)
            var = jax.lax.stop_gradient(self.running_var)
        # a type outside [0, num_types) under jit (no error there): a NaN row, never a
        # wrapped-around negative id
        ids = jnp.where(type_vec < 0, t, type_vec)

        def rows(table: jax.Array) -> jax.Array:
            return jnp.take(table, ids, axis=0, mode="fill", fill_value=jnp.nan)

        out = (x - rows(mean)) / rows(jnp.sqrt(jnp.maximum(var, self.eps)))
        if self.weight is not None:
            out = out * rows(self.weight)
        if self.bias is not None:
            out = out + rows(self.bias)
        return out

    def _moved(self, mean: jax.Array, var: jax.Array, present: jax.Array) -> HeteroBatchNorm:
        """This module after one training step: the present types' statistics moved."""
        assert self.running_mean is not None and self.running_var is not None
        tracked = self.num_batches_tracked
        if self.momentum is None:  # PyG counts batches only here
            assert tracked is not None
            tracked = tracked + 1
            m: Any = 1.0 / tracked.astype(mean.dtype)
        else:
            m = self.momentum
        keep = ~present[:, None]
        rm = jnp.where(keep, self.running_mean, (1.0 - m) * self.running_mean + m * mean)
        rv = jnp.where(keep, self.running_var, (1.0 - m) * self.running_var + m * var)
        return eqx.tree_at(lambda b: (b.running_mean, b.running_var, b.num_batches_tracked),
                           self, (rm.astype(self.running_mean.dtype),
                                  rv.astype(self.running_var.dtype), tracked),
                           is_leaf=lambda v: v is None)


@register_converter("torch_geometric.nn.norm.batch_norm.HeteroBatchNorm")
def _hetero_batch_norm(m: Any, ctx: Converter) -> HeteroBatchNorm:
    return HeteroBatchNorm(
        ctx.array(m.weight), ctx.array(m.bias), ctx.array(m.running_mean),
        ctx.array(m.running_var),
        ctx.array(m.num_batches_tracked, allow_downcast=True),
        num_types=int(m.num_types), eps=float(m.eps),
        momentum=None if m.momentum is None else float(m.momentum), training=bool(m.training))
