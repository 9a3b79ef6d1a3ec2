"""PyG's ``SAGEConv`` (GraphSAGE) as an equinox module, with its converter."""
from __future__ import annotations

from typing import Any, Optional, cast

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._sharding import sharding_aware
from ....nn import Converter, Linear, register_converter
from ..._core._edges import gather_aggregate, gather_rows
from .._common import (
    FUSED_AGGRS,
    Graph,
    check_aggr,
    check_flow,
    graph_input,
    pair,
    sparse_tensor_input,
    spmm_adjacency,
)
from .._linear_parts import LINEAR_AGGRS, LinearParts

__all__ = ['SAGEConv']

_PYG = "torch_geometric.nn"


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

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, *, out_sharding=None):
        op = "SAGEConv"
        x_src, x_dst = pair(x, op=op)
        # a SparseTensor adj_t: PyG's rules for it (values dropped)
        edge_index = sparse_tensor_input(edge_index, "ones", x_src.dtype, op=op)
        graph = graph_input(edge_index, x_src, x_dst, op=op)
        parts = self._parts(x_src, x_dst, graph)
        if parts is not None:
            return self._normalize(parts.value())
        edge_index = graph.edge_index
        if self.lin is not None:
            x_src = jax.nn.relu(self.lin(x_src))
        n = graph.adj.num_dst if graph.adj is not None else \
            x_src.shape[0] if x_dst is None else x_dst.shape[0]
        if graph.adj is not None and self.aggr_module is None and self.aggr in FUSED_AGGRS:
            # PyG's message_and_aggregate for max / min: spmm(adj_t, x[0], reduce=aggr)
            out = self.lin_l(spmm_adjacency(graph.adj, x_src, cast(str, self.aggr), op=op))
        elif self.aggr_module is not None:
            messages = gather_rows(x_src, edge_index[0])
            out = self.lin_l(self.aggr_module(messages, edge_index[1], dim_size=n, dim=0))
        else:
            out = self.lin_l(gather_aggregate(x_src, edge_index[0], edge_index[1], n,
                                              cast(str, self.aggr), op=op,
                                              indices_sorted=graph.sorted))
        if self.lin_r is not None and x_dst is not None:
            out = out + self.lin_r(x_dst)
        return self._normalize(out)

    def linear_parts(self, x: Any, edge_index: Any) -> Optional[LinearParts]:
        """The output as :class:`LinearParts` (what ``HeteroConv`` fuses across the
        relations of a node type), or None where it is not a sum of linear maps
        (``normalize``, a max / min / mul or module ``aggr``)."""
        if self.normalize or not self._linear:
            return None
        op = "SAGEConv"
        x_src, x_dst = pair(x, op=op)
        return self._parts(x_src, x_dst, graph_input(edge_index, x_src, x_dst, op=op))

    @property
    def _linear(self) -> bool:
        return self.aggr_module is None and self.aggr in LINEAR_AGGRS

    def _parts(self, x_src: jax.Array, x_dst: Optional[jax.Array],
               graph: Graph) -> Optional[LinearParts]:
        """``lin_l(aggr_j x_j) + lin_r(x_i)`` as terms, for a sum / mean ``aggr``."""
        if not self._linear:
            return None
        op, aggr = "SAGEConv", cast(str, self.aggr)
        if self.lin is not None:
            x_src = jax.nn.relu(self.lin(x_src))
        w = self.lin_l.weight
        terms: list = []
        addends: list = []
        if graph.adj is not None:
            # PyG's message_and_aggregate: spmm(adj_t, x[0], reduce=aggr), values included
            terms.append((spmm_adjacency(graph.adj, x_src, aggr, op=op), w))
        else:
            n = x_src.shape[0] if x_dst is None else x_dst.shape[0]
            src, dst = graph.edge_index[0], graph.edge_index[1]
            if w.shape[0] < w.shape[1]:
                # sum / mean commute with lin_l: project the nodes first and move F_out-wide
                # messages instead of F_in-wide ones (the gather, the scatter and their
                # transposes in the backward pass), as PyG's result up to rounding
                addends.append(gather_aggregate(x_src @ w.T, src, dst, n, aggr, op=op,
                                                indices_sorted=graph.sorted))
            else:
                terms.append((gather_aggregate(x_src, src, dst, n, aggr, op=op,
                                               indices_sorted=graph.sorted), w))
        if self.lin_l.bias is not None:
            addends.append(self.lin_l.bias)
        if self.lin_r is not None and x_dst is not None:
            terms.append((x_dst, self.lin_r.weight))
            if self.lin_r.bias is not None:
                addends.append(self.lin_r.bias)
        return LinearParts(tuple(terms), tuple(addends))

    def _normalize(self, out: jax.Array) -> jax.Array:
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
