"""PyG's ``GINConv`` and ``GINEConv`` (graph isomorphism networks) as equinox modules."""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax

from ...._sharding import sharding_aware
from ....nn import Converter, Linear, register_converter
from ..._core._edges import aggregate, gather, gather_aggregate
from .._common import (
    check_flow,
    edge_values,
    graph_input,
    pair,
    sparse_tensor_input,
    spmm_adjacency,
)

__all__ = ['GINConv', 'GINEConv']

_PYG = "torch_geometric.nn"


class GINConv(eqx.Module):
    """``torch_geometric.nn.GINConv``: ``nn((1 + eps) x_i + sum_j x_j)``.

    ``eps [1]`` is trained only with ``train_eps`` (else no gradient reaches it,
    as for PyG's buffer). ``__call__(x, edge_index) -> nn's output``.

    ``edge_index`` may be an :class:`~torch2jax_ops.geometric.EdgeIndex`
    (sorted by ``"col"``: sorted aggregation) or a sparse ``adj_t [N_dst, N_src]``
    (``BCOO`` / ``BCSR``): PyG's fused ``spmm(adj_t, x_src)``, so the values
    weight the neighbours' sum.
    """
    nn: Any
    eps: jax.Array
    train_eps: bool = eqx.field(static=True, default=False)

    def _combine(self, out, x_dst):
        eps = self.eps if self.train_eps else jax.lax.stop_gradient(self.eps)
        if x_dst is not None:
            out = out + (1 + eps) * x_dst
        return self.nn(out)

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, *, out_sharding=None):
        op = "GINConv"
        x_src, x_dst = pair(x, op=op)
        # a SparseTensor adj_t: PyG's rules for it (values dropped)
        edge_index = sparse_tensor_input(edge_index, "ones", x_src.dtype, op=op)
        graph = graph_input(edge_index, x_src, x_dst, op=op)
        if graph.adj is not None:  # PyG's message_and_aggregate: spmm(adj_t, x[0], "add")
            return self._combine(spmm_adjacency(graph.adj, x_src, "sum", op=op), x_dst)
        edge_index = graph.edge_index
        n = x_src.shape[0] if x_dst is None else x_dst.shape[0]
        return self._combine(gather_aggregate(x_src, edge_index[0], edge_index[1], n, op=op,
                                              indices_sorted=graph.sorted, masked=True), x_dst)


class GINEConv(GINConv):
    """``torch_geometric.nn.GINEConv``: ``nn((1 + eps) x_i + sum_j relu(x_j + lin(e_ji)))``.

    ``lin`` (``[F_in, edge_dim]`` with bias) exists when PyG's ``edge_dim`` was
    given; without it ``edge_attr`` must already have ``F_in`` columns.
    ``__call__(x, edge_index, edge_attr) -> nn's output``.

    On a sparse ``adj_t`` (``BCOO`` / ``BCSR``) PyG passes messages over the
    stored entries and ignores the values: ``edge_attr`` is still required, one
    row per stored entry in storage order (``utils.to_edge_index(adj_t)``'s).
    """
    lin: Optional[Linear] = None

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_attr=None, *, out_sharding=None):
        op = "GINEConv"
        x_src, x_dst = pair(x, op=op)
        graph = graph_input(edge_index, x_src, x_dst, op=op)
        edge_index = graph.edge_index
        edge_attr = edge_values(edge_attr, edge_index, "edge_attr", op=op)
        if edge_attr is None:
            raise ValueError(f"{op}: `edge_attr` is required ([num_edges, edge_dim])")
        if self.lin is None and x_src.shape[-1] != edge_attr.shape[-1]:
            raise ValueError(f"{op}: node and edge feature sizes do not match ({x_src.shape[-1]} "
                             f"vs {edge_attr.shape[-1]}); PyG needs edge_dim=... for that")
        if self.lin is not None:
            edge_attr = self.lin(edge_attr)
        n = x_src.shape[0] if x_dst is None else x_dst.shape[0]
        if graph.adj is not None:
            n = graph.adj.num_dst
        messages = jax.nn.relu(gather(x_src, edge_index[0]) + edge_attr)
        return self._combine(aggregate(messages, edge_index[1], n,
                                       indices_sorted=graph.sorted), x_dst)


@register_converter(f"{_PYG}.conv.gin_conv.GINConv")
def _gin(m, ctx: Converter):
    check_flow(m, ctx)
    return GINConv(ctx.child(m.nn, "nn"), ctx.array(m.eps), train_eps=m.eps.requires_grad)


@register_converter(f"{_PYG}.conv.gin_conv.GINEConv")
def _gine(m, ctx: Converter):
    check_flow(m, ctx)
    lin = ctx.child(m.lin, "lin") if getattr(m, "lin", None) is not None else None
    return GINEConv(ctx.child(m.nn, "nn"), ctx.array(m.eps), train_eps=m.eps.requires_grad,
                    lin=lin)
