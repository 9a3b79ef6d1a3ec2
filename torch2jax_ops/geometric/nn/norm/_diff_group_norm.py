"""PyG's ``DiffGroupNorm`` (Zhou et al.): soft cluster assignment, batch norm per group."""
from __future__ import annotations

import equinox as eqx
import jax

from ...._checking import as_array
from ...._sharding import OutSharding, sharding_aware
from ....nn import BatchNorm1d, Converter, Linear, register_converter

__all__ = ["DiffGroupNorm"]


class DiffGroupNorm(eqx.Module):
    """``torch_geometric.nn.norm.DiffGroupNorm``: ``x [N, C] -> x + lamda * sum_g BN(s_g * x)``.

    ``s = softmax(lin(x))`` ``[N, G]``; ``norm`` is a ``BatchNorm1d`` over the
    ``G * C`` grouped features (training mode: batch statistics, running
    statistics updated through :func:`torch2jax_ops.nn.stateful_call`). Arrays
    ``lin.weight`` ``[G, C]``, ``norm.*`` as in PyG.
    """
    lin: Linear
    norm: BatchNorm1d
    in_channels: int = eqx.field(static=True, default=1)
    groups: int = eqx.field(static=True, default=1)
    lamda: float = eqx.field(static=True, default=0.01)

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x: jax.Array, *, out_sharding: OutSharding = None) -> jax.Array:
        x = as_array(x, "x", op="DiffGroupNorm")
        f, g = self.in_channels, self.groups
        s = jax.nn.softmax(self.lin(x), axis=-1)
        out = s[..., :, None] * x[..., None, :]
        out = self.norm(out.reshape(-1, g * f)).reshape(-1, g, f).sum(-2)
        return x + self.lamda * out


@register_converter("torch_geometric.nn.norm.diff_group_norm.DiffGroupNorm")
def _diff_group_norm(m, ctx: Converter):
    return DiffGroupNorm(ctx.child(m.lin, "lin"), ctx.child(m.norm, "norm"),
                         in_channels=int(m.in_channels), groups=int(m.groups),
                         lamda=float(m.lamda))
