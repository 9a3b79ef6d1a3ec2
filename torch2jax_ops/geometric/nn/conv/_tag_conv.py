"""PyG's ``TAGConv`` (topology adaptive GCN, Du et al.) as an equinox module, with its converter."""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax

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

__all__ = ["TAGConv"]


class TAGConv(WeightedPropagation):
    """``torch_geometric.nn.TAGConv``: ``out = sum_{k=0}^K lins[k](A_hat^k x) + bias``.

    ``__call__(x [N, F_in], edge_index [2, E], edge_weight [E] = None) -> [N, F_out]``.

    ``A_hat = D^-1/2 A D^-1/2`` from PyG's ``gcn_norm`` **without** self-loops
    (in-degrees at the target; a node without incoming edges sends with weight
    0) when ``normalize``; with ``normalize=False`` the raw ``edge_weight``
    (or 1). ``K = len(lins) - 1`` hops. Arrays: ``lins.k.weight [F_out, F_in]``
    (no biases), ``bias [F_out]``.
    """
    lins: ModuleList
    bias: Optional[jax.Array]
    normalize: bool = eqx.field(static=True, default=True)
    aggr: str = eqx.field(static=True, default="add")
    aggr_module: Any = None
    # PyG's message_and_aggregate(adj_t, x): its own signature, as message's is the layer's
    message_and_aggregate = spmm_message_and_aggregate  # type: ignore[assignment]

    @property
    def K(self) -> int:
        return len(self.lins) - 1

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_weight=None,
                 *, out_sharding: OutSharding = None) -> jax.Array:
        op = "TAGConv"
        x = node_features(x, op=op)
        n = x.shape[self.node_dim]
        edge_index, edge_weight = edges_for(edge_index, edge_weight, n, op=op, sparse=True)
        if self.normalize:
            edge_index, edge_weight = gcn_normalized(edge_index, edge_weight, n, False, x.dtype)
        out = self.lins[0](x)
        for lin in list(self.lins)[1:]:
            x = self.propagate(edge_index, x=x, edge_weight=edge_weight)
            out = out + lin(x)
        return out if self.bias is None else out + self.bias


@register_converter("torch_geometric.nn.conv.tag_conv.TAGConv")
def _tag(m, ctx: Converter) -> TAGConv:
    check_common(m, ctx)
    return TAGConv(ctx.child(m.lins, "lins"), ctx.array(m.bias), normalize=bool(m.normalize),
                   **convert_aggr(m, ctx))
