"""PyG's ``HEATConv`` (heterogeneous edge-enhanced graph attention, Mo et al.) as an equinox module.

PyG concatenates ``[x_i, x_j, edge_type_emb, edge_attr_emb]`` per edge and
multiplies by ``att.weight`` (and ``[x_j, edge_attr_emb]`` by ``lin.weight``).
Both maps are linear in the concatenated parts, so the port splits the weight
matrices by those parts: the node parts are projected once per node and
gathered per edge, the edge-type part once per edge type (``leaky_relu`` of
the embedding table times its slice of ``att.weight``) and gathered by
``edge_type``; only the edge-feature part is a per-edge matmul. The same
sums as PyG's, in another order (float rounding), without building the
``[E, 2C + D_type + D_attr]`` concatenation.
"""
from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._checking import as_array, check_bounds, check_index
from ...._sharding import OutSharding, sharding_aware
from ....nn import Converter, Embedding, Linear, register_converter
from ..._core._edges import edge_array, gather_rows, valid
from .._common import edge_values
from .._hetero_linear import HeteroLinear
from ._attention import GatedPropagation, attend, dropout_weights
from ._propagation import check_common, convert_aggr

__all__ = ["HEATConv"]


class HEATConv(GatedPropagation):
    """``torch_geometric.nn.HEATConv``; attention dropout in training mode (with a key).

    ``__call__(x [N, F_in], edge_index [2, E], node_type [N], edge_type [E],
    edge_attr [E, edge_dim], *, key=None)`` -> ``[N, heads * C]`` (``concat``)
    or ``[N, C]`` (mean over heads).

    ``h = hetero_lin(x, node_type)`` (one weight per node type,
    :class:`~torch2jax_ops.geometric.nn.HeteroLinear`); per edge ``j -> i``:
    ``t_ji = leaky_relu(edge_type_emb[edge_type])``, ``a_ji =
    leaky_relu(edge_attr_emb(edge_attr))``, the score ``leaky_relu(att([h_i,
    h_j, t_ji, a_ji]))`` per head, softmax-normalised over each target's
    incoming edges (no self-loops added), the message ``lin([h_j, a_ji])``
    (shared by the heads), aggregated by ``aggr`` (PyG's default ``"add"``).
    ``concat``: heads concatenated, ``h_i`` added to every head first
    (``root_weight``); else the head mean, then ``+ h_i``.

    PyG's behaviour mirrored: ``edge_attr`` is required (PyG's message applies
    ``edge_attr_emb`` to it, and fails on None); ``bias`` switches the biases of
    both ``hetero_lin`` and ``lin``; the layer takes one node set (no
    bipartite pair). Arrays as PyG's ``state_dict``: ``hetero_lin.weight
    [T_node, F_in, C]`` / ``hetero_lin.bias``, ``edge_type_emb.weight
    [T_edge, D_type]``, ``edge_attr_emb.weight [D_attr, edge_dim]``,
    ``att.weight [heads, 2C + D_type + D_attr]``, ``lin.weight [C, C + D_attr]``
    / ``lin.bias``.
    """
    hetero_lin: HeteroLinear
    edge_type_emb: Embedding
    edge_attr_emb: Linear
    att: Linear
    lin: Linear
    aggr_module: Any = None
    heads: int = eqx.field(static=True, default=1)
    out_channels: int = eqx.field(static=True, default=1)
    concat: bool = eqx.field(static=True, default=True)
    negative_slope: float = eqx.field(static=True, default=0.2)
    dropout: float = eqx.field(static=True, default=0.0)
    root_weight: bool = eqx.field(static=True, default=True)
    training: bool = eqx.field(static=True, default=False)
    aggr: str = eqx.field(static=True, default="add")
    node_dim = 0

    def _edge_inputs(self, edge_index: Any, edge_type: Any, edge_attr: Any, n: int,
                     op: str) -> tuple[jax.Array, jax.Array, jax.Array]:
        edge_index = edge_array(edge_index, n, op=op)
        e = edge_index.shape[1]
        if edge_type is None:
            raise ValueError(f"{op}: `edge_type` is required ([num_edges] edge-type ids)")
        edge_type = as_array(edge_type, "edge_type", op=op)
        check_index(edge_type, "edge_type", op=op)
        if edge_type.shape != (e,):
            raise ValueError(f"{op}: `edge_type` must be 1-D with one type per edge ({e}), got "
                             f"shape {tuple(edge_type.shape)}")
        types = self.edge_type_emb.weight.shape[0]
        check_bounds(edge_type, types, "edge_type",
                     target=f"the edge types (num_edge_types={types})",
                     fix="each edge's type must name a row of edge_type_emb", op=op)
        width = self.edge_attr_emb.weight.shape[1]
        if edge_attr is None:
            raise ValueError(f"{op}: `edge_attr` [num_edges, edge_dim={width}] is required (PyG's "
                             f"message embeds it with edge_attr_emb and fails on None)")
        edge_attr = edge_values(edge_attr, edge_index, "edge_attr", op=op)
        assert edge_attr is not None  # not None in, not None out
        if edge_attr.ndim != 2 or edge_attr.shape[1] != width:
            raise ValueError(f"{op}: `edge_attr` must be [num_edges, edge_dim={width}], got "
                             f"shape {tuple(edge_attr.shape)}")
        return edge_index, edge_type, edge_attr

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x: Any, edge_index: Any, node_type: Any, edge_type: Any,
                 edge_attr: Any = None, *, key: Any = None,
                 out_sharding: OutSharding = None) -> jax.Array:
        op = "HEATConv"
        x = as_array(x, "x", op=op)
        if x.ndim != 2:
            raise ValueError(f"{op}: `x` must be [num_nodes, in_channels], got shape "
                             f"{tuple(x.shape)}")
        n = x.shape[0]
        edge_index, edge_type, edge_attr = self._edge_inputs(edge_index, edge_type, edge_attr,
                                                             n, op)
        heads, c, slope = self.heads, self.out_channels, self.negative_slope
        h = self.hetero_lin(x, node_type)  # [N, C]
        src, dst = edge_index[0], edge_index[1]
        dst = jnp.where(valid(src, n), dst, n)  # a dropped source drops the edge
        attr = jax.nn.leaky_relu(self.edge_attr_emb(edge_attr), slope)  # [E, D_attr]
        # att([h_i, h_j, t, a]) = h_i @ W_i.T + h_j @ W_j.T + t @ W_t.T + a @ W_a.T
        w = self.att.weight  # [H, 2C + D_type + D_attr]
        d_type = self.edge_type_emb.weight.shape[1]
        w_nodes, w_type, w_attr = w[:, :2 * c], w[:, 2 * c:2 * c + d_type], w[:, 2 * c + d_type:]
        node_scores = h @ jnp.concatenate([w_nodes[:, :c], w_nodes[:, c:]], axis=0).T
        type_scores = jax.nn.leaky_relu(self.edge_type_emb.weight, slope) @ w_type.T
        scores = (gather_rows(node_scores[:, :heads], dst) + gather_rows(node_scores[:, heads:], src)
                  + jnp.take(type_scores, edge_type, axis=0) + attr @ w_attr.T)
        scores = jax.nn.leaky_relu(scores, slope)  # [E, H]
        # lin([h_j, a]) = h_j @ L_x.T + a @ L_a.T + b
        w_lin = self.lin.weight  # [C, C + D_attr]
        messages = gather_rows(h @ w_lin[:, :c].T, src) + attr @ w_lin[:, c:].T
        if self.lin.bias is not None:
            messages = messages + self.lin.bias
        if heads == 1:  # one head: no unit axis (the attention family's convention)
            scores = scores[:, 0]
        else:
            messages = jnp.broadcast_to(messages[:, None, :], (messages.shape[0], heads, c))
        weights, _ = dropout_weights(self.training, self.dropout, key, scores.shape, (0,), op=op)
        out = attend(self, scores, messages, dst, n, weights=weights)  # [N, H, C] / [N, C]
        if heads == 1:
            return out + h if self.root_weight else out
        if self.concat:
            if self.root_weight:
                out = out + h[:, None, :]
            return out.reshape(n, heads * c)
        out = jnp.mean(out, axis=1)
        return out + h if self.root_weight else out


@register_converter("torch_geometric.nn.conv.heat_conv.HEATConv")
def _heat(m: Any, ctx: Converter) -> HEATConv:
    check_common(m, ctx)
    if m.node_dim != 0:
        raise ctx.unsupported(m, f"node_dim={m.node_dim}; HEATConv's is 0")
    return HEATConv(
        hetero_lin=ctx.child(m.hetero_lin, "hetero_lin"),
        edge_type_emb=ctx.child(m.edge_type_emb, "edge_type_emb"),
        edge_attr_emb=ctx.child(m.edge_attr_emb, "edge_attr_emb"),
        att=ctx.child(m.att, "att"), lin=ctx.child(m.lin, "lin"),
        heads=int(m.heads), out_channels=int(m.out_channels), concat=bool(m.concat),
        negative_slope=float(m.negative_slope), dropout=float(m.dropout),
        root_weight=bool(m.root_weight), training=bool(m.training), **convert_aggr(m, ctx))

