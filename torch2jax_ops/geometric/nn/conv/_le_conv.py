"""PyG's ``LEConv`` (local extremum, Ranjan et al., ASAP) as an equinox module."""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax

from ...._sharding import OutSharding, sharding_aware
from ....nn import Converter, Linear, register_converter
from .._common import edge_values, graph_input, pair
from ._propagation import WeightedPropagation, check_common, convert_aggr

__all__ = ["LEConv"]


class LEConv(WeightedPropagation):
    """``torch_geometric.nn.LEConv``: ``out_i = sum_j w_ji (lin1(x_j) - lin2(x_i)) + lin3(x_i)``.

    ``__call__(x [N, F_in] or (x_src [N_src, F_src], x_dst [N_dst, F_dst]),
    edge_index [2, E], edge_weight [E] = None) -> [N_dst, F_out]``.

    ``a = lin1(x_src)``, ``b = lin2(x_dst)``; the message ``a_j - b_i`` (times
    ``edge_weight``) is aggregated by ``aggr`` (PyG's ``"add"``); no
    self-loops. A bipartite pair needs both sides (PyG applies ``lin2`` /
    ``lin3`` to ``x_dst``). Arrays: ``lin1.weight [F_out, F_src]``, ``lin1.bias``,
    ``lin2.weight [F_out, F_dst]`` (no bias), ``lin3.weight [F_out, F_dst]``,
    ``lin3.bias``.
    """
    lin1: Linear
    lin2: Linear
    lin3: Linear
    aggr: str = eqx.field(static=True, default="add")
    aggr_module: Any = None

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_weight=None,
                 *, out_sharding: OutSharding = None) -> jax.Array:
        op = "LEConv"
        x_src, x_dst = pair(x, op=op)
        if x_dst is None:
            raise ValueError(f"{op}: a bipartite `x` needs both sides, got (x_src, None); PyG "
                             f"applies lin2 and lin3 to x_dst")
        graph = graph_input(edge_index, x_src, x_dst, op=op)
        edge_index = graph.edge_index
        if graph.adj is not None and edge_weight is None:  # PyG: the values stand in
            edge_weight = graph.adj.values
        edge_weight = edge_values(edge_weight, edge_index, "edge_weight", op=op)
        a = self.lin1(x_src)
        b = self.lin2(x_dst)
        out = self.propagate(edge_index, a=a, b=b, edge_weight=edge_weight)
        return out + self.lin3(x_dst)

    # PyG's protocol: propagate passes message's arguments by name, so its signature is
    # the layer's own (not the base's)
    def message(self, a_j: jax.Array, b_i: jax.Array,  # type: ignore[override]
                edge_weight: Optional[jax.Array] = None) -> jax.Array:
        out = a_j - b_i
        return out if edge_weight is None else out * edge_weight.reshape(-1, 1)


@register_converter("torch_geometric.nn.conv.le_conv.LEConv")
def _le(m, ctx: Converter) -> LEConv:
    check_common(m, ctx)
    return LEConv(ctx.child(m.lin1, "lin1"), ctx.child(m.lin2, "lin2"), ctx.child(m.lin3, "lin3"),
                  **convert_aggr(m, ctx))
