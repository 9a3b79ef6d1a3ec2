"""PyG's ``SGConv`` (Simplifying GCN, Wu et al.) as an equinox module, with its converter."""
from __future__ import annotations

from typing import Any

import equinox as eqx
import jax

from ...._sharding import OutSharding, sharding_aware
from ....nn import Converter, Linear, register_converter
from ._propagation import (
    WeightedPropagation,
    check_cache,
    check_common,
    convert_aggr,
    edges_for,
    gcn_normalized,
    node_features,
    spmm_message_and_aggregate,
)

__all__ = ["SGConv"]


class SGConv(WeightedPropagation):
    """``torch_geometric.nn.SGConv``: ``out = lin((D^-1/2 (A + I) D^-1/2)^K x)``.

    ``__call__(x [N, F_in], edge_index [2, E], edge_weight [E] = None) -> [N, F_out]``.

    The normalisation is PyG's ``gcn_norm`` (``improved=False``; in-degrees at
    the target, ``add_remaining_self_loops`` with weight 1 when
    ``add_self_loops``), in static shape; ``K`` propagations, then ``lin``
    (with its bias). PyG's ``cached=True`` keeps the propagated features of the
    first call; the port recomputes them every call (same result on the same
    graph), and a converted layer whose cache is filled is refused.
    Arrays: ``lin.weight [F_out, F_in]``, ``lin.bias [F_out]``.
    """
    lin: Linear
    K: int = eqx.field(static=True, default=1)
    add_self_loops: bool = eqx.field(static=True, default=True)
    aggr: str = eqx.field(static=True, default="add")
    aggr_module: Any = None
    # PyG's message_and_aggregate(adj_t, x): its own signature, as message's is the layer's
    message_and_aggregate = spmm_message_and_aggregate  # type: ignore[assignment]

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_weight=None,
                 *, out_sharding: OutSharding = None) -> jax.Array:
        op = "SGConv"
        x = node_features(x, op=op)
        n = x.shape[self.node_dim]
        edge_index, edge_weight = edges_for(edge_index, edge_weight, n, op=op, sparse=True)
        edge_index, edge_weight = gcn_normalized(edge_index, edge_weight, n,
                                                 self.add_self_loops, x.dtype)
        for _ in range(self.K):
            x = self.propagate(edge_index, x=x, edge_weight=edge_weight)
        return self.lin(x)


@register_converter("torch_geometric.nn.conv.sg_conv.SGConv")
def _sg(m, ctx: Converter) -> SGConv:
    check_common(m, ctx)
    check_cache(m, ctx, "_cached_x")
    return SGConv(ctx.child(m.lin, "lin"), K=int(m.K), add_self_loops=bool(m.add_self_loops),
                  **convert_aggr(m, ctx))
