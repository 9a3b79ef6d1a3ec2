"""PyG's ``EdgeConv`` (DGCNN, Wang et al.) on the ``MessagePassing`` base."""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax.numpy as jnp

from ...._sharding import sharding_aware
from ....nn import Converter, register_converter
from .._common import check_flow, graph_input, pair
from .._message_passing import MessagePassing
from ..aggr._base import aggregate_messages
from ._edge_family import converted_aggr, drop_from_source, keyed

__all__ = ["EdgeConv"]


class EdgeConv(MessagePassing):
    """``torch_geometric.nn.EdgeConv``: ``x'_i = aggr_j nn([x_i, x_j - x_i])``.

    ``__call__(x [N, F] or (x_src, x_dst), edge_index [2, E], *, key=None) -> [N_dst, F_out]``.
    ``aggr`` (``"max"`` by default; a node without incoming edges gets 0, PyG's
    scatter) or an aggregation module ``aggr_module``. ``nn``'s arrays keep
    PyG's names (``nn.0.weight`` ...); ``key`` feeds dropout inside ``nn`` in
    training mode.
    """
    nn: Any
    aggr: Optional[str] = eqx.field(static=True, default="max")
    aggr_module: Any = None

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, *, key=None, out_sharding=None):
        op = "EdgeConv"
        x_src, x_dst = pair(x, op=op)
        if x_dst is None:
            raise ValueError(f"{op}: `x` must be an array or an (x_src, x_dst) pair of arrays "
                             f"(x_i is read from x_dst)")
        edge_index = graph_input(edge_index, x_src, x_dst, op=op).edge_index  # values unused
        edge_index = drop_from_source(edge_index, x_src.shape[0], x_dst.shape[0])
        with keyed(key):
            return self.propagate(edge_index, x=(x_src, x_dst))

    def message(self, x_i, x_j):
        return self.nn(jnp.concatenate([x_i, x_j - x_i], axis=-1))

    def aggregate(self, inputs, index, ptr=None, dim_size=None):
        return aggregate_messages(self.aggr, self.aggr_module, inputs, index, dim_size,
                                  self.node_dim)


@register_converter("torch_geometric.nn.conv.edge_conv.EdgeConv")
def _edge_conv(m, ctx: Converter):
    check_flow(m, ctx)
    return EdgeConv(ctx.child(m.nn, "nn"), **converted_aggr(m, ctx))
