"""PyG's ``GraphConv`` (Morris et al.) as an equinox module, with its converter."""
from __future__ import annotations

from typing import Any, Optional, cast

import equinox as eqx
import jax

from ...._sharding import sharding_aware
from ....nn import Converter, Linear, register_converter
from ..._core._edges import aggregate, gather, gather_aggregate
from .._common import (
    FUSED_AGGRS,
    Graph,
    check_aggr,
    check_flow,
    edge_values,
    graph_input,
    pair,
    sparse_tensor_input,
    spmm_adjacency,
    weighted,
)
from .._linear_parts import LINEAR_AGGRS, LinearParts

__all__ = ['GraphConv']

_PYG = "torch_geometric.nn"


class GraphConv(eqx.Module):
    """``torch_geometric.nn.GraphConv``: ``lin_rel(aggr_j w_ji x_j) + lin_root(x_i)``.

    Aggregation (``add``/``mean``/``max``) on the raw features, then ``lin_rel``.
    ``__call__(x, edge_index, edge_weight=None) -> [N_dst, F_out]``.

    ``edge_index`` may be an :class:`~torch2jax_ops.geometric.EdgeIndex`
    (sorted by ``"col"``: sorted aggregation) or a sparse ``adj_t [N_dst, N_src]``
    (``BCOO`` / ``BCSR``). On ``adj_t``, as in PyG: a sum / mean / min / max
    ``aggr`` is ``spmm(adj_t, x_src, aggr)`` (the values are the weights;
    ``edge_weight`` is ignored); ``"mul"`` or an aggregation module weights each
    entry's message by ``edge_weight`` when given (one per stored entry), else by
    the values.
    """
    lin_rel: Linear
    lin_root: Linear
    aggr: Optional[str] = eqx.field(static=True, default="add")  # None: aggr_module
    aggr_module: Any = None  # an aggregation module port (aggr=SoftmaxAggregation(...) ...)

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_weight=None, *, out_sharding=None):
        op = "GraphConv"
        x_src, x_dst = pair(x, op=op)
        # a SparseTensor adj_t: PyG's rules for it (values used, ones without)
        edge_index = sparse_tensor_input(edge_index, "values", x_src.dtype, op=op)
        graph = graph_input(edge_index, x_src, x_dst, op=op)
        if self.aggr_module is None and self.aggr in LINEAR_AGGRS:
            return self._parts(x_src, x_dst, graph, edge_weight).value()
        edge_index = graph.edge_index
        n = x_src.shape[0] if x_dst is None else x_dst.shape[0]
        if graph.adj is not None:
            n = graph.adj.num_dst
            if self.aggr_module is None and self.aggr in FUSED_AGGRS:
                # PyG's message_and_aggregate: spmm(adj_t, x[0], reduce=aggr)
                out = spmm_adjacency(graph.adj, x_src, cast(str, self.aggr), op=op)
                out = self.lin_rel(out)
                return out if x_dst is None else out + self.lin_root(x_dst)
            if edge_weight is None:  # PyG's _collect: the values stand in for edge_weight
                edge_weight = graph.adj.values
        edge_weight = edge_values(edge_weight, edge_index, "edge_weight", op=op)
        messages = weighted(gather(x_src, edge_index[0]), edge_weight)
        if self.aggr_module is not None:
            out = self.aggr_module(messages, edge_index[1], dim_size=n, dim=0)
        else:
            out = aggregate(messages, edge_index[1], n, self.aggr, op=op,
                            indices_sorted=graph.sorted)
        out = self.lin_rel(out)
        return out if x_dst is None else out + self.lin_root(x_dst)

    def linear_parts(self, x: Any, edge_index: Any,
                     edge_weight: Any = None) -> Optional[LinearParts]:
        """The output as :class:`LinearParts` (what ``HeteroConv`` fuses across the
        relations of a node type), or None for a max / min / mul or module ``aggr``."""
        if self.aggr_module is not None or self.aggr not in LINEAR_AGGRS:
            return None
        op = "GraphConv"
        x_src, x_dst = pair(x, op=op)
        return self._parts(x_src, x_dst, graph_input(edge_index, x_src, x_dst, op=op),
                           edge_weight)

    def _parts(self, x_src: jax.Array, x_dst: Optional[jax.Array], graph: Graph,
               edge_weight: Any) -> LinearParts:
        """``lin_rel(aggr_j w_ji x_j) + lin_root(x_i)`` as terms, for a sum / mean ``aggr``."""
        op, aggr = "GraphConv", cast(str, self.aggr)
        if graph.adj is not None:
            # PyG's message_and_aggregate: spmm(adj_t, x[0], reduce=aggr); the values are
            # the weights, edge_weight is ignored
            out = spmm_adjacency(graph.adj, x_src, aggr, op=op)
        else:
            n = x_src.shape[0] if x_dst is None else x_dst.shape[0]
            weight = edge_values(edge_weight, graph.edge_index, "edge_weight", op=op)
            if weight is None:  # messages that are source rows
                out = gather_aggregate(x_src, graph.edge_index[0], graph.edge_index[1], n,
                                       aggr, op=op, indices_sorted=graph.sorted, masked=True)
            else:
                messages = weighted(gather(x_src, graph.edge_index[0]), weight)
                out = aggregate(messages, graph.edge_index[1], n, aggr, op=op,
                                indices_sorted=graph.sorted)
        terms = [(out, self.lin_rel.weight)]
        addends = [] if self.lin_rel.bias is None else [self.lin_rel.bias]
        if x_dst is not None:
            terms.append((x_dst, self.lin_root.weight))
            if self.lin_root.bias is not None:
                addends.append(self.lin_root.bias)
        return LinearParts(tuple(terms), tuple(addends))


@register_converter(f"{_PYG}.conv.graph_conv.GraphConv")
def _graph(m, ctx: Converter):
    check_flow(m, ctx)
    aggr = check_aggr(m, ctx, ("add", "sum", "mean", "max", "min", "mul"), modules=True)
    return GraphConv(ctx.child(m.lin_rel, "lin_rel"), ctx.child(m.lin_root, "lin_root"),
                     aggr=aggr if isinstance(aggr, str) else None,
                     aggr_module=None if isinstance(aggr, str) else aggr)
