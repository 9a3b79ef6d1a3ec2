"""PyG's ``CGConv`` (crystal graph convolution, Xie & Grossman)."""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._sharding import sharding_aware
from ....nn import BatchNorm1d, Converter, Linear, register_converter
from .._common import check_flow, edge_values, graph_input, pair
from .._message_passing import MessagePassing
from ..aggr._base import aggregate_messages
from ._edge_family import converted_aggr, drop_from_source, softplus

__all__ = ["CGConv"]


class CGConv(MessagePassing):
    """``torch_geometric.nn.CGConv``: ``x'_i = x_i + bn(aggr_j sigmoid(lin_f(z)) *
    softplus(lin_s(z)))`` with ``z = [x_i, x_j, e_ji]``.

    ``__call__(x [N, C] or (x_src [N_src, C_src], x_dst [N_dst, C_dst]), edge_index
    [2, E], edge_attr [E, dim] = None) -> [N_dst, C_dst]``. ``lin_f`` / ``lin_s``
    (``[C_dst, C_dst + C_src + dim]``) are applied to each node once and the
    per-edge sums gathered (``W z = W_i x_i + W_j x_j + W_e e``: no ``[E, 2C +
    dim]`` concatenation). ``bn``: a ``BatchNorm1d`` with ``batch_norm``
    (training mode uses batch statistics, see ``stateful_call``).
    """
    lin_f: Linear
    lin_s: Linear
    bn: Optional[BatchNorm1d] = None
    aggr: Optional[str] = eqx.field(static=True, default="add")
    aggr_module: Any = None

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_attr=None, *, out_sharding=None):
        op = "CGConv"
        x_src, x_dst = pair(x, op=op)
        if x_dst is None:
            raise ValueError(f"{op}: `x` must be an array or an (x_src, x_dst) pair of arrays")
        edge_index = graph_input(edge_index, x_src, x_dst, op=op).edge_index  # values unused
        edge_attr = edge_values(edge_attr, edge_index, "edge_attr", op=op)
        c_dst, c_src = x_dst.shape[-1], x_src.shape[-1]
        width = self.lin_f.weight.shape[1]
        extra = width - c_dst - c_src
        given = 0 if edge_attr is None else edge_attr.shape[-1]
        if given != extra:
            raise ValueError(f"{op}: lin_f takes {width} features = x_i ({c_dst}) + x_j "
                             f"({c_src}) + edge_attr ({extra}), but edge_attr has {given} "
                             f"(PyG's concatenation would not fit either)")
        edge_index = drop_from_source(edge_index, x_src.shape[0], x_dst.shape[0])
        w = jnp.concatenate([self.lin_f.weight, self.lin_s.weight], axis=0)  # [2C, width]
        p_dst = x_dst @ w[:, :c_dst].T
        p_src = x_src @ w[:, c_dst:c_dst + c_src].T
        bias = None
        if self.lin_f.bias is not None:
            bias = jnp.concatenate([self.lin_f.bias, self.lin_s.bias])
        e = None if edge_attr is None else edge_attr @ w[:, c_dst + c_src:].T
        out = self.propagate(edge_index, p=(p_src, p_dst), e=e, bias=bias)
        if self.bn is not None:
            out = self.bn(out)
        return out + x_dst

    def message(self, p_i, p_j, e, bias):
        z = p_i + p_j
        if e is not None:
            z = z + e
        if bias is not None:
            z = z + bias
        f, s = jnp.split(z, 2, axis=-1)
        return jax.nn.sigmoid(f) * softplus(s)

    def aggregate(self, inputs, index, ptr=None, dim_size=None):
        return aggregate_messages(self.aggr, self.aggr_module, inputs, index, dim_size,
                                  self.node_dim)


@register_converter("torch_geometric.nn.conv.cg_conv.CGConv")
def _cg_conv(m, ctx: Converter):
    check_flow(m, ctx)
    return CGConv(ctx.child(m.lin_f, "lin_f"), ctx.child(m.lin_s, "lin_s"),
                  ctx.child(m.bn, "bn") if m.bn is not None else None, **converted_aggr(m, ctx))
