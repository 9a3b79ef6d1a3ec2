"""PyG's ``SAGEConv`` (GraphSAGE) as an equinox module, with its converter."""
from __future__ import annotations

from typing import Any, Optional, cast

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._sharding import sharding_aware
from ....nn import Converter, Linear, register_converter
from ..._edges import gather_aggregate, gather_rows
from .._common import FUSED_AGGRS, check_aggr, check_flow, graph_input, pair, spmm_adjacency

__all__ = ['SAGEConv']

_PYG = "torch_geometric.nn"
#: aggregations that commute with the linear map after them
_LINEAR = ("add", "sum", "mean")


class SAGEConv(eqx.Module):
    """``torch_geometric.nn.SAGEConv``: ``lin_l(mean_j x_j) + lin_r(x_i)``, optionally L2-normalised.

    With ``project``, neighbours are first mapped by ``relu(lin(x_j))`` (the root
    term keeps the raw ``x``). ``__call__(x, edge_index) -> [N_dst, F_out]``.

    ``edge_index`` may be an :class:`~torch2jax_ops.geometric.EdgeIndex`
    (sorted by ``"col"``: sorted aggregation) or a sparse ``adj_t [N_dst, N_src]``
    (``BCOO`` / ``BCSR``). On ``adj_t`` PyG fuses the aggregation for a
    sum / mean / min / max ``aggr``: ``spmm(adj_t, x_src, aggr)``, so the values
    weight the neighbours (a mean divides the weighted sum by the number of
    entries); with ``"mul"`` or an aggregation module it runs message passing
    over the entries and ignores the values.
    """
    lin_l: Linear
    lin_r: Optional[Linear]
    lin: Optional[Linear] = None
    aggr: Optional[str] = eqx.field(static=True, default="mean")  # None: aggr_module
    normalize: bool = eqx.field(static=True, default=False)
    aggr_module: Any = None  # an aggregation module port (aggr=SoftmaxAggregation(...) ...)

    @sharding_aware
    def __call__(self, x, edge_index):
        op = "SAGEConv"
        x_src, x_dst = pair(x, op=op)
        graph = graph_input(edge_index, x_src, x_dst, op=op)
        edge_index = graph.edge_index
        if self.lin is not None:
            x_src = jax.nn.relu(self.lin(x_src))
        n = x_src.shape[0] if x_dst is None else x_dst.shape[0]
        if graph.adj is not None:
            n = graph.adj.num_dst
            if self.aggr_module is None and self.aggr in FUSED_AGGRS:
                # PyG's message_and_aggregate: spmm(adj_t, x[0], reduce=aggr), values included
                out = self.lin_l(spmm_adjacency(graph.adj, x_src, cast(str, self.aggr), op=op))
                return self._root(out, x_dst)
        if self.aggr_module is None and self.aggr in _LINEAR and \
                self.lin_l.weight.shape[0] < self.lin_l.weight.shape[1]:
            # sum / mean commute with lin_l: project the nodes first and move F_out-wide
            # messages instead of F_in-wide ones (the gather, the scatter and their
            # transposes in the backward pass), as PyG's result up to rounding
            proj = x_src @ self.lin_l.weight.T
            out = gather_aggregate(proj, edge_index[0], edge_index[1], n, self.aggr, op=op,
                                   indices_sorted=graph.sorted)
            if self.lin_l.bias is not None:
                out = out + self.lin_l.bias
            return self._root(out, x_dst)
        if self.aggr_module is not None:
            messages = gather_rows(x_src, edge_index[0])
            out = self.lin_l(self.aggr_module(messages, edge_index[1], dim_size=n, dim=0))
        else:
            out = self.lin_l(gather_aggregate(x_src, edge_index[0], edge_index[1], n,
                                              cast(str, self.aggr), op=op,
                                              indices_sorted=graph.sorted))
        return self._root(out, x_dst)

    def _root(self, out: jax.Array, x_dst: Optional[jax.Array]) -> jax.Array:
        if self.lin_r is not None and x_dst is not None:
            out = out + self.lin_r(x_dst)
        if self.normalize:  # F.normalize(p=2, dim=-1, eps=1e-12)
            norm = jnp.linalg.norm(out, axis=-1, keepdims=True)
            out = out / jnp.maximum(norm, 1e-12)
        return out


@register_converter(f"{_PYG}.conv.sage_conv.SAGEConv")
def _sage(m, ctx: Converter):
    check_flow(m, ctx)
    aggr = check_aggr(m, ctx, ("add", "sum", "mean", "max", "min", "mul"), modules=True)
    return SAGEConv(ctx.child(m.lin_l, "lin_l"),
                    ctx.child(m.lin_r, "lin_r") if m.root_weight else None,
                    ctx.child(m.lin, "lin") if m.project else None,
                    aggr=aggr if isinstance(aggr, str) else None,
                    normalize=m.normalize,
                    aggr_module=None if isinstance(aggr, str) else aggr)
