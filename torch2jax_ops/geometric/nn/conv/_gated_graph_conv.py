"""PyG's ``GatedGraphConv`` (gated graph sequence networks, Li et al.) as an equinox module."""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._checking import as_array
from ...._sharding import sharding_aware
from ....nn import Converter, register_converter
from .._common import edge_values, graph_input
from ._attention import GatedPropagation, drop_dangling
from ._propagation import check_common, convert_aggr, spmm_message_and_aggregate

__all__ = ["GatedGraphConv"]


class GRUCell(eqx.Module):
    """``torch.nn.GRUCell`` (CPU formula): ``h' = (h - n) * z + n``.

    ``r = sigmoid(W_ir x + b_ir + W_hr h + b_hr)``, ``z`` likewise, ``n =
    tanh(W_in x + b_in + r * (W_hn h + b_hn))``; gates stacked ``[r, z, n]``
    in ``weight_ih [3C, F]``, ``weight_hh [3C, C]``, ``bias_ih``, ``bias_hh``.
    """
    weight_ih: jax.Array
    weight_hh: jax.Array
    bias_ih: Optional[jax.Array] = None
    bias_hh: Optional[jax.Array] = None

    def __call__(self, x: jax.Array, h: jax.Array) -> jax.Array:
        gi = x @ self.weight_ih.T
        gh = h @ self.weight_hh.T
        if self.bias_ih is not None:
            assert self.bias_hh is not None  # torch's GRUCell has both biases or neither
            gi, gh = gi + self.bias_ih, gh + self.bias_hh
        i_r, i_z, i_n = jnp.split(gi, 3, axis=-1)
        h_r, h_z, h_n = jnp.split(gh, 3, axis=-1)
        r = jax.nn.sigmoid(h_r + i_r)
        z = jax.nn.sigmoid(h_z + i_z)
        n = jnp.tanh(i_n + h_n * r)
        return (h - n) * z + n


class GatedGraphConv(GatedPropagation):
    """``torch_geometric.nn.GatedGraphConv``: ``num_layers`` rounds of message passing + GRU.

    ``__call__(x [N, F], edge_index [2, E], edge_weight [E] = None) -> [N, C]``.
    ``x`` is padded with zero columns to ``C = out_channels`` (more than ``C``
    input features is an error, as in PyG); then ``num_layers`` times:
    ``m = aggr_j(w_ji * (x @ weight[l])_j)``, ``x = rnn(m, x)`` (a GRU cell).
    Arrays: ``weight [num_layers, C, C]``, ``rnn.weight_ih``, ``rnn.weight_hh``
    ``[3C, C]``, ``rnn.bias_ih``, ``rnn.bias_hh`` ``[3C]`` (with ``bias``).
    """
    weight: Optional[jax.Array] = None
    rnn: Optional[GRUCell] = None
    aggr_module: Any = None
    # PyG's message_and_aggregate(adj_t, x): its own signature, as message's is the layer's
    message_and_aggregate = spmm_message_and_aggregate  # type: ignore[assignment]
    out_channels: int = eqx.field(static=True, default=1)
    num_layers: int = eqx.field(static=True, default=1)
    aggr: str = eqx.field(static=True, default="add")

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_weight=None, *, out_sharding=None):
        op = "GatedGraphConv"
        x = as_array(x, "x", op=op)
        if x.ndim != 2:
            raise ValueError(f"{op}: `x` must be [num_nodes, channels], got shape "
                             f"{tuple(x.shape)}")
        if x.shape[-1] > self.out_channels:
            raise ValueError(f"{op}: The number of input channels is not allowed to be larger "
                             f"than the number of output channels (x has {x.shape[-1]}, "
                             f"out_channels={self.out_channels})")
        graph = graph_input(edge_index, x, x, op=op)
        edge_weight = edge_values(edge_weight, graph.edge_index, "edge_weight", op=op)
        if graph.adj is None:
            edge_index = drop_dangling(graph.edge_index, x.shape[0], x.shape[0])
        # else: propagate takes the matrix as PyG's does: spmm(adj_t, x, aggr) for a sum / mean /
        # min / max (the values weight it, edge_weight is ignored), else messages weighted by
        # edge_weight or the values
        if x.shape[-1] < self.out_channels:
            x = jnp.concatenate([x, jnp.zeros((x.shape[0], self.out_channels - x.shape[-1]),
                                              x.dtype)], axis=1)
        for i in range(self.num_layers):
            m = self.propagate(edge_index, x=x @ self.weight[i], edge_weight=edge_weight)
            x = self.rnn(m, x)
        return x

    def message(self, x_j: jax.Array, edge_weight: Optional[jax.Array] = None) -> jax.Array:
        return x_j if edge_weight is None else edge_weight.reshape(-1, 1) * x_j


@register_converter("torch_geometric.nn.conv.gated_graph_conv.GatedGraphConv")
def _gated_graph(m, ctx: Converter) -> GatedGraphConv:
    check_common(m, ctx)
    rnn = m.rnn
    return GatedGraphConv(
        weight=ctx.array(m.weight),
        rnn=GRUCell(ctx.array(rnn.weight_ih), ctx.array(rnn.weight_hh), ctx.array(rnn.bias_ih),
                    ctx.array(rnn.bias_hh)),
        out_channels=m.out_channels, num_layers=m.num_layers, **convert_aggr(m, ctx))
