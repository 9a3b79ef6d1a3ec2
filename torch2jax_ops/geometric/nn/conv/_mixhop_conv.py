"""PyG's ``MixHopConv`` (Abu-El-Haija et al.) as an equinox module, with its converter."""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._sharding import OutSharding, sharding_aware
from ....nn import Converter, ModuleList, register_converter
from ._propagation import (
    WeightedPropagation,
    check_common,
    convert_aggr,
    edges_for,
    gcn_normalized,
    node_features,
    spmm_message_and_aggregate,
)

__all__ = ["MixHopConv"]


class MixHopConv(WeightedPropagation):
    """``torch_geometric.nn.MixHopConv``: ``concat_{p in powers} lins[p](A_hat^p x) + bias``.

    ``__call__(x [N, F_in], edge_index [2, E], edge_weight [E] = None)
    -> [N, len(powers) * F_out]``.

    ``A_hat`` is PyG's ``gcn_norm`` (``improved=False``, self-loops when
    ``add_self_loops``); ``x`` is propagated ``max(powers)`` times and the
    blocks are concatenated in the order of ``powers`` (repeats allowed).
    ``lins[p]`` is a bias-free Linear for ``p`` in ``powers`` and an identity
    otherwise (no arrays). Arrays: ``lins.p.weight [F_out, F_in]``,
    ``bias [len(powers) * F_out]``.
    """
    lins: ModuleList
    bias: Optional[jax.Array]
    powers: tuple = eqx.field(static=True, default=(0, 1, 2))
    add_self_loops: bool = eqx.field(static=True, default=True)
    aggr: str = eqx.field(static=True, default="add")
    aggr_module: Any = None
    # PyG's message_and_aggregate(adj_t, x): its own signature, as message's is the layer's
    message_and_aggregate = spmm_message_and_aggregate  # type: ignore[assignment]

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_weight=None,
                 *, out_sharding: OutSharding = None) -> jax.Array:
        op = "MixHopConv"
        x = node_features(x, op=op)
        n = x.shape[self.node_dim]
        edge_index, edge_weight = edges_for(edge_index, edge_weight, n, op=op, sparse=True)
        edge_index, edge_weight = gcn_normalized(edge_index, edge_weight, n,
                                                 self.add_self_loops, x.dtype)
        lins = list(self.lins)
        outs = [lins[0](x)]
        for lin in lins[1:]:
            x = self.propagate(edge_index, x=x, edge_weight=edge_weight)
            outs.append(lin(x))
        out = jnp.concatenate([outs[p] for p in self.powers], axis=-1)
        return out if self.bias is None else out + self.bias


@register_converter("torch_geometric.nn.conv.mixhop_conv.MixHopConv")
def _mixhop(m, ctx: Converter) -> MixHopConv:
    check_common(m, ctx)
    return MixHopConv(ctx.child(m.lins, "lins"), ctx.array(m.bias),
                      powers=tuple(int(p) for p in m.powers),
                      add_self_loops=bool(m.add_self_loops), **convert_aggr(m, ctx))
