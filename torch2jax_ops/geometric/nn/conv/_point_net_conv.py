"""PyG's ``PointNetConv`` (PointNet++ set abstraction, Qi et al.)."""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax.numpy as jnp

from ...._checking import as_array
from ...._sharding import sharding_aware
from ....nn import Converter, register_converter
from .._common import check_flow, graph_input
from .._message_passing import MessagePassing
from ..aggr._base import aggregate_messages
from ._edge_family import converted_aggr, drop_from_source, keyed, route_loops, with_loops

__all__ = ["PointNetConv"]


class PointNetConv(MessagePassing):
    """``torch_geometric.nn.PointNetConv``: ``x'_i = global_nn(aggr_j local_nn([x_j,
    pos_j - pos_i]))``.

    ``__call__(x [N_src, F] or None or (x_src, x_dst), pos [N, 3] or (pos_src,
    pos_dst), edge_index [2, E], *, key=None) -> [N_dst, F_out]`` (``N_dst``:
    ``pos_dst``'s rows). Only ``x_src`` enters the messages (PyG reads ``x_j``;
    a lone ``x`` is ``(x, None)``). With ``add_self_loops`` existing loops are
    removed (routed to the dropped slot: static shape) and one loop per node
    appended for the first ``min(N_src, N_dst)`` nodes, as PyG. ``aggr``:
    ``"max"`` by default (a node without messages gets 0), or ``aggr_module``.
    """
    local_nn: Any = None
    global_nn: Any = None
    add_self_loops: bool = eqx.field(static=True, default=True)
    aggr: Optional[str] = eqx.field(static=True, default="max")
    aggr_module: Any = None

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, pos, edge_index, *, key=None, out_sharding=None):
        op = "PointNetConv"
        x_src = x[0] if isinstance(x, (tuple, list)) else x
        x_src = None if x_src is None else as_array(x_src, "x", op=op)
        if isinstance(pos, (tuple, list)):
            pos_src, pos_dst = as_array(pos[0], "pos[0]", op=op), as_array(pos[1], "pos[1]",
                                                                            op=op)
        else:
            pos_src = pos_dst = as_array(pos, "pos", op=op)
        n_src, n_dst = pos_src.shape[0], pos_dst.shape[0]
        if x_src is not None and x_src.shape[0] != n_src:
            raise ValueError(f"{op}: `x` has {x_src.shape[0]} rows but `pos` (its source "
                             f"side) has {n_src}")
        # a sparse adj_t: PyG rebuilds it with its loops, coalesced (values unused)
        edge_index = graph_input(edge_index, pos_src, pos_dst, op=op,
                                 coalesce=self.add_self_loops,
                                 names=("pos[0]", "pos[1]")).edge_index
        if self.add_self_loops:
            edge_index = with_loops(route_loops(edge_index, n_src, n_dst), min(n_src, n_dst))
        edge_index = drop_from_source(edge_index, n_src, n_dst)
        with keyed(key):
            out = self.propagate(edge_index, x=(x_src, None), pos=(pos_src, pos_dst))
            return out if self.global_nn is None else self.global_nn(out)

    def message(self, x_j, pos_i, pos_j):
        msg = pos_j - pos_i
        if x_j is not None:
            msg = jnp.concatenate([x_j, msg], axis=1)
        return msg if self.local_nn is None else self.local_nn(msg)

    def aggregate(self, inputs, index, ptr=None, dim_size=None):
        return aggregate_messages(self.aggr, self.aggr_module, inputs, index, dim_size,
                                  self.node_dim)


@register_converter("torch_geometric.nn.conv.point_conv.PointNetConv")
def _point_net_conv(m, ctx: Converter):
    check_flow(m, ctx)

    def child(name):
        sub = getattr(m, name, None)
        return None if sub is None else ctx.child(sub, name)
    return PointNetConv(child("local_nn"), child("global_nn"),
                        add_self_loops=bool(m.add_self_loops), **converted_aggr(m, ctx))
