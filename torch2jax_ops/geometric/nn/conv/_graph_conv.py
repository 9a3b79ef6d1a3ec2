"""PyG's ``GraphConv`` (Morris et al.) as an equinox module, with its converter."""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx

from ...._sharding import sharding_aware
from ....nn import Converter, Linear, register_converter
from ..._edges import aggregate, gather
from .._common import check_aggr, check_flow, checked_edges, edge_values, pair, weighted

__all__ = ['GraphConv']

_PYG = "torch_geometric.nn"


class GraphConv(eqx.Module):
    """``torch_geometric.nn.GraphConv``: ``lin_rel(aggr_j w_ji x_j) + lin_root(x_i)``.

    Aggregation (``add``/``mean``/``max``) on the raw features, then ``lin_rel``.
    ``__call__(x, edge_index, edge_weight=None) -> [N_dst, F_out]``.
    """
    lin_rel: Linear
    lin_root: Linear
    aggr: Optional[str] = eqx.field(static=True, default="add")  # None: aggr_module
    aggr_module: Any = None  # an aggregation module port (aggr=SoftmaxAggregation(...) ...)

    @sharding_aware
    def __call__(self, x, edge_index, edge_weight=None):
        op = "GraphConv"
        x_src, x_dst = pair(x, op=op)
        edge_index = checked_edges(edge_index, x_src, x_dst, op=op)
        edge_weight = edge_values(edge_weight, edge_index, "edge_weight", op=op)
        n = x_src.shape[0] if x_dst is None else x_dst.shape[0]
        messages = weighted(gather(x_src, edge_index[0]), edge_weight)
        if self.aggr_module is not None:
            out = self.aggr_module(messages, edge_index[1], dim_size=n, dim=0)
        else:
            out = aggregate(messages, edge_index[1], n, self.aggr, op=op)
        out = self.lin_rel(out)
        return out if x_dst is None else out + self.lin_root(x_dst)


@register_converter(f"{_PYG}.conv.graph_conv.GraphConv")
def _graph(m, ctx: Converter):
    check_flow(m, ctx)
    aggr = check_aggr(m, ctx, ("add", "sum", "mean", "max", "min", "mul"), modules=True)
    return GraphConv(ctx.child(m.lin_rel, "lin_rel"), ctx.child(m.lin_root, "lin_root"),
                     aggr=aggr if isinstance(aggr, str) else None,
                     aggr_module=None if isinstance(aggr, str) else aggr)
