"""PyG's ``GENConv`` (DeeperGCN, Li et al.), with its MLP and ``MessageNorm``."""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._sharding import sharding_aware
from ....nn import Converter, Linear, Sequential, register_converter
from .._common import check_flow, edge_values, graph_input, pair
from .._message_passing import MessagePassing
from ..aggr._base import aggregate_messages
from ._edge_family import converted_aggr, drop_from_source, keyed

__all__ = ["GENConv"]


class _InstanceNorm1d(eqx.Module):
    """``torch.nn.InstanceNorm1d(C, affine=False)`` as GENConv's MLP uses it: a 2-D
    ``[N, C]`` input is torch's unbatched ``(C, L)`` form, so each row is normalised
    over its features (biased variance, ``eps``); a 3-D ``[B, C, L]`` input over ``L``."""
    eps: float = eqx.field(static=True, default=1e-5)

    def __call__(self, x: jax.Array) -> jax.Array:
        mean = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + self.eps)


@register_converter("torch_geometric.nn.conv.gen_conv.MLP")
def _gen_mlp(m, ctx: Converter):
    import torch

    layers = []
    for name, sub in m.named_children():
        if isinstance(sub, torch.nn.InstanceNorm1d):
            if sub.affine or sub.track_running_stats:
                raise ctx.unsupported(sub, "InstanceNorm1d with affine or running statistics "
                                           "(GENConv builds it without either)")
            layers.append(_InstanceNorm1d(float(sub.eps)))
        else:
            layers.append(ctx.child(sub, name))
    return Sequential(layers)


class GENConv(MessagePassing):
    """``torch_geometric.nn.GENConv``: ``x'_i = mlp(x_i + msg_norm(x_i, aggr_j (relu(x_j +
    e_ji) + eps)))``.

    ``__call__(x [N, F_in] or (x_src, x_dst), edge_index [2, E], edge_attr [E, D] = None,
    size=None, *, key=None) -> [N_dst, F_out]``. Projections exist where PyG
    creates them: ``lin_src`` (``F_src != F_out``), ``lin_edge`` (``edge_dim !=
    F_out``), ``lin_aggr_out`` (an aggregation whose width differs, e.g. a
    ``"cat"`` MultiAggregation), ``lin_dst`` (``F_dst != F_out``), PyG's
    ``Linear(bias=bias)``. The aggregation: ``aggr_module`` (PyG's default
    ``SoftmaxAggregation(t, learn_t)``, ``PowerMeanAggregation(p, learn_p)``
    -- their ``t`` / ``p`` under ``aggr_module.t`` / ``.p``), or a reduction
    name. ``msg_norm``: a :class:`~torch2jax_ops.geometric.nn.norm.MessageNorm`.
    ``mlp``: PyG's GENConv MLP (``Linear -> norm -> ReLU -> Dropout`` between
    layers; batch norm uses batch statistics in training mode; ``key`` feeds
    its dropout).
    """
    mlp: Sequential
    lin_src: Optional[Linear] = None
    lin_edge: Optional[Linear] = None
    lin_aggr_out: Optional[Linear] = None
    lin_dst: Optional[Linear] = None
    msg_norm: Any = None
    eps: float = eqx.field(static=True, default=1e-7)
    aggr: Optional[str] = eqx.field(static=True, default=None)
    aggr_module: Any = None

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_attr=None, size=None, *, key=None,
                 out_sharding=None):
        op = "GENConv"
        x_src, x_dst = pair(x, op=op)
        graph = graph_input(edge_index, x_src, x_dst, op=op)  # values unused
        edge_index = graph.edge_index
        if graph.adj is not None:  # PyG: the matrix's shape is the size
            size = (graph.adj.num_src, graph.adj.num_dst)
        edge_attr = edge_values(edge_attr, edge_index, "edge_attr", op=op)
        if self.lin_src is not None:
            x_src = self.lin_src(x_src)
        if edge_attr is not None:
            width = edge_attr.shape[-1] if self.lin_edge is None else \
                self.lin_edge.weight.shape[0]
            if width != x_src.shape[-1]:
                raise ValueError(f"{op}: the messages x_j ({x_src.shape[-1]} features) and "
                                 f"edge_attr ({width}) must have the same width (PyG asserts "
                                 f"it); build the layer with edge_dim=...")
        n_dst = x_src.shape[0] if x_dst is None else x_dst.shape[0]
        if size is not None and size[1] is not None:
            n_dst = size[1]
        edge_index = drop_from_source(edge_index, x_src.shape[0], n_dst)
        with keyed(key):
            out = self.propagate(edge_index, x=(x_src, x_dst), edge_attr=edge_attr, size=size)
            if self.lin_aggr_out is not None:
                out = self.lin_aggr_out(out)
            if self.msg_norm is not None:
                out = self.msg_norm(x_dst if x_dst is not None else x_src, out)
            if x_dst is not None:
                out = out + (x_dst if self.lin_dst is None else self.lin_dst(x_dst))
            return self.mlp(out)

    def message(self, x_j, edge_attr):
        if edge_attr is not None and self.lin_edge is not None:
            edge_attr = self.lin_edge(edge_attr)
        msg = x_j if edge_attr is None else x_j + edge_attr
        return jax.nn.relu(msg) + self.eps

    def aggregate(self, inputs, index, ptr=None, dim_size=None):
        return aggregate_messages(self.aggr, self.aggr_module, inputs, index, dim_size,
                                  self.node_dim)


@register_converter("torch_geometric.nn.conv.gen_conv.GENConv")
def _gen_conv(m, ctx: Converter):
    check_flow(m, ctx)

    def child(name):
        sub = getattr(m, name, None)
        return None if sub is None else ctx.child(sub, name)
    return GENConv(child("mlp"), child("lin_src"), child("lin_edge"), child("lin_aggr_out"),
                   child("lin_dst"), child("msg_norm"), eps=float(m.eps),
                   **converted_aggr(m, ctx))
