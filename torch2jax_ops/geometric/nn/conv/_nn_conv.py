"""PyG's ``NNConv`` (edge-conditioned convolution, Gilmer et al. / Simonovsky & Komodakis)."""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._sharding import sharding_aware
from ....nn import Converter, Linear, register_converter
from .._common import check_flow, edge_values, graph_input, pair
from .._message_passing import MessagePassing
from ..aggr._base import aggregate_messages
from ._edge_family import converted_aggr, drop_from_source, keyed

__all__ = ["NNConv"]


class NNConv(MessagePassing):
    """``torch_geometric.nn.NNConv``: ``x'_i = lin(x_i) + aggr_j x_j @ nn(e_ji).view(in, out)
    + bias``.

    ``__call__(x [N, F_in] or (x_src, x_dst), edge_index [2, E], edge_attr [E, D],
    size=None, *, key=None) -> [N_dst, F_out]``: the edge network ``nn`` maps
    each edge's features to an ``[F_in, F_out]`` weight (memory ``E * F_in *
    F_out``, as PyG). ``aggr`` (``"add"`` by default) or ``aggr_module``;
    the root term ``lin`` (no bias) only with ``root_weight`` and a target
    feature array (``x_dst=None`` skips it, as PyG).
    """
    nn: Any
    lin: Optional[Linear]
    bias: Optional[jax.Array]
    in_channels_l: int = eqx.field(static=True, default=1)
    out_channels: int = eqx.field(static=True, default=1)
    aggr: Optional[str] = eqx.field(static=True, default="add")
    aggr_module: Any = None

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_attr=None, size=None, *, key=None,
                 out_sharding=None):
        op = "NNConv"
        x_src, x_dst = pair(x, op=op)
        graph = graph_input(edge_index, x_src, x_dst, op=op)  # values unused
        edge_index = graph.edge_index
        if graph.adj is not None:  # PyG: the matrix's shape is the size
            size = (graph.adj.num_src, graph.adj.num_dst)
        edge_attr = edge_values(edge_attr, edge_index, "edge_attr", op=op)
        if edge_attr is None:
            raise ValueError(f"{op}: `edge_attr` is required (the edge network's input, one "
                             f"row per edge)")
        n_dst = x_src.shape[0] if x_dst is None else x_dst.shape[0]
        if size is not None:
            n_dst = size[1] if size[1] is not None else n_dst
        edge_index = drop_from_source(edge_index, x_src.shape[0], n_dst)
        with keyed(key):
            out = self.propagate(edge_index, x=(x_src, x_dst), edge_attr=edge_attr, size=size)
        if x_dst is not None and self.lin is not None:
            out = out + self.lin(x_dst)
        return out if self.bias is None else out + self.bias

    def message(self, x_j, edge_attr):
        weight = self.nn(edge_attr).reshape(-1, self.in_channels_l, self.out_channels)
        return jnp.einsum("ei,eio->eo", x_j, weight)

    def aggregate(self, inputs, index, ptr=None, dim_size=None):
        return aggregate_messages(self.aggr, self.aggr_module, inputs, index, dim_size,
                                  self.node_dim)


@register_converter("torch_geometric.nn.conv.nn_conv.NNConv")
def _nn_conv(m, ctx: Converter):
    check_flow(m, ctx)
    return NNConv(ctx.child(m.nn, "nn"), ctx.child(m.lin, "lin") if m.root_weight else None,
                  ctx.array(m.bias), in_channels_l=int(m.in_channels_l),
                  out_channels=int(m.out_channels), **converted_aggr(m, ctx))
