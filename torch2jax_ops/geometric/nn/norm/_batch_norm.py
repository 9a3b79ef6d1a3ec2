"""PyG's ``BatchNorm``: a ``torch.nn.BatchNorm1d`` named ``module``."""
from __future__ import annotations

from typing import Any

import equinox as eqx
import jax

from ...._sharding import OutSharding, sharding_aware
from ....nn import BatchNorm1d, Converter, register_converter

__all__ = ["BatchNorm"]


class BatchNorm(eqx.Module):
    """``torch_geometric.nn.norm.BatchNorm``: ``x [N, C] -> [N, C]``, a ``BatchNorm1d`` named
    ``module`` (arrays ``module.weight``, ``module.bias``, ``module.running_mean``,
    ``module.running_var``, ``module.num_batches_tracked``).

    Eval mode normalises with the running statistics; training mode with the
    batch's, and updates the running ones (collect them with
    :func:`torch2jax_ops.nn.stateful_call`). With ``allow_single_element`` a
    single row is normalised with the running statistics even in training
    mode, and nothing is updated (PyG calls ``F.batch_norm(training=False)``).
    """
    module: BatchNorm1d
    allow_single_element: bool = eqx.field(static=True, default=False)

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x: jax.Array, *args: Any,
                 out_sharding: OutSharding = None, **kwargs: Any) -> jax.Array:
        if self.allow_single_element and x.shape[0] <= 1 and self.module.training:
            return eqx.tree_at(lambda b: b.training, self.module, False)(x)
        return self.module(x)


@register_converter("torch_geometric.nn.norm.batch_norm.BatchNorm")
def _pyg_batch_norm(m, ctx: Converter):
    if getattr(m, "mode", "node") != "node":
        raise ctx.unsupported(m, f"mode={m.mode!r}; only mode='node' is ported")
    return BatchNorm(ctx.child(m.module, "module"),
                     allow_single_element=bool(getattr(m, "allow_single_element", False)))
