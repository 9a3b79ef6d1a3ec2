"""PyG's ``GeneralConv`` (the design-space conv of You et al.) as an equinox module."""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._sharding import sharding_aware
from ....nn import Converter, Linear, register_converter
from ...utils._softmax import segment_softmax
from .._common import edge_values, graph_input, pair
from ._attention import GatedPropagation, drop_dangling, head_dot, heads_view, l2_normalize
from ._propagation import check_common, convert_aggr

__all__ = ["GeneralConv"]


class GeneralConv(GatedPropagation):
    """``torch_geometric.nn.GeneralConv``: linear messages, optional attention, heads averaged.

    ``__call__(x [N, F_in] or (x_src [N_src, F_src], x_dst [N_dst, F_dst]),
    edge_index [2, E], edge_attr [E, D] = None, size=None) -> [N_dst, C]``
    (``size``: a static ``(N_src, N_dst)``, as PyG's ``propagate``).

    Message ``m_ji = lin_msg(x_j)`` (``directed_msg=False``: ``+ lin_msg_i(x_i)``)
    ``+ lin_edge(e_ji)`` (with ``in_edge_channels`` and ``edge_attr``), viewed
    ``[E, H, C]``; with ``attention`` it is weighted by ``softmax_i(leaky_relu(s,
    0.2))``, ``s = att_msg . m_ji`` ("additive") or ``m_ij . m_ji / sqrt(C)``
    ("dot_product", ``m_ij`` the message with both ends swapped); aggregated
    by ``aggr``; the heads averaged; ``+ lin_self(x_dst)``; rows L2-normalised
    with ``l2_normalize``.

    PyG's behaviour mirrored: ``lin_self`` is the identity only when
    ``in_channels == out_channels`` as given (an int) and not ``skip_linear``
    (a tuple ``in_channels`` always gets a Linear); ``lin_msg_i`` takes
    ``in_channels[0]`` features though it reads the targets; the
    dot-product scale is the buffer ``scaler = sqrt(out_channels)`` (no
    gradient); the attention slope is fixed at 0.2; ``edge_attr`` without
    ``in_edge_channels`` is an error (PyG has no ``lin_edge`` then), and
    ``in_edge_channels`` without ``edge_attr`` drops the edge term.
    Projections are applied to the nodes before the gather (the same
    values as PyG's per-edge ``lin_msg(x_j)``).
    """
    lin_msg: Optional[Linear] = None
    lin_msg_i: Optional[Linear] = None
    lin_self: Any = None
    lin_edge: Optional[Linear] = None
    att_msg: Optional[jax.Array] = None
    scaler: Optional[jax.Array] = None
    aggr_module: Any = None
    out_channels: int = eqx.field(static=True, default=1)
    heads: int = eqx.field(static=True, default=1)
    directed_msg: bool = eqx.field(static=True, default=True)
    attention: bool = eqx.field(static=True, default=False)
    attention_type: str = eqx.field(static=True, default="additive")
    normalize_l2: bool = eqx.field(static=True, default=False)
    aggr: str = eqx.field(static=True, default="add")
    node_dim = 0

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_attr=None, size=None,
                 *, out_sharding=None):
        op = "GeneralConv"
        tuple_input = isinstance(x, (tuple, list))
        x_src, x_dst = pair(x, op=op)
        if x_dst is None:
            raise ValueError(f"{op}: `x` = (x_src, None): the root term lin_self needs the "
                             f"target features; pass (x_src, x_dst)")
        graph = graph_input(edge_index, x_src, x_dst, op=op)  # values unused
        edge_index = graph.edge_index
        if graph.adj is not None:  # PyG: the matrix's shape is the size
            size = (graph.adj.num_src, graph.adj.num_dst)
        edge_attr = edge_values(edge_attr, edge_index, "edge_attr", op=op)
        if edge_attr is not None and self.lin_edge is None:
            raise ValueError(f"{op}: `edge_attr` was given but the layer has no "
                             f"in_edge_channels (PyG has no lin_edge then); build it with "
                             f"in_edge_channels=D or drop edge_attr")
        n_dst = x_dst.shape[0] if size is None or size[1] is None else int(size[1])
        edge_index = drop_dangling(edge_index, x_src.shape[0], n_dst)
        dot = self.attention and self.attention_type == "dot_product"

        def both_sides(lin):  # lin applied to (x_src, x_dst), once when they are the same x
            if lin is None:
                return None
            on_src = lin(x_src)
            return (on_src, on_src if not tuple_input else lin(x_dst))

        # fwd: lin_msg, rev: lin_msg_i, on (sources, targets)
        fwd = both_sides(self.lin_msg)
        rev = None if self.directed_msg else both_sides(self.lin_msg_i)
        if not dot:  # the target side of lin_msg / the source side of lin_msg_i are unused
            fwd = (fwd[0], None)
            rev = None if rev is None else (None, rev[1])
        edge = None if edge_attr is None else self.lin_edge(edge_attr)
        out = self.propagate(edge_index, size=size, fwd=fwd, rev=rev, edge=edge)
        out = out if self.heads == 1 else jnp.mean(out, axis=1)
        out = out + self.lin_self(x_dst)
        return l2_normalize(out) if self.normalize_l2 else out

    def _basic(self, fwd: jax.Array, rev: Optional[jax.Array],
               edge: Optional[jax.Array]) -> jax.Array:
        """PyG's ``message_basic``: ``lin_msg(x_j) (+ lin_msg_i(x_i)) (+ lin_edge(e))``."""
        out = fwd if rev is None else fwd + rev
        out = out if edge is None else out + edge
        return heads_view(out, self.heads, self.out_channels)

    def message(self, fwd_j: jax.Array, fwd_i: Optional[jax.Array] = None,
                rev_i: Optional[jax.Array] = None, rev_j: Optional[jax.Array] = None,
                edge: Optional[jax.Array] = None, index: Optional[jax.Array] = None,
                size_i: Optional[int] = None) -> jax.Array:
        # fwd = lin_msg(x), rev = lin_msg_i(x), lifted to the sources (_j) / targets (_i)
        x_j_out = self._basic(fwd_j, rev_i, edge)
        if not self.attention:
            return x_j_out
        # propagate fills index and size_i; fwd_i is passed with attention
        assert index is not None and size_i is not None
        if self.attention_type == "dot_product":
            assert fwd_i is not None and self.scaler is not None
            x_i_out = self._basic(fwd_i, rev_j, edge)
            scaler = jax.lax.stop_gradient(self.scaler).astype(x_j_out.dtype)
            alpha = jnp.sum(x_i_out * x_j_out, axis=-1) / scaler
        else:
            assert self.att_msg is not None  # set for the additive attention
            att = self.att_msg.reshape(-1) if self.heads == 1 else self.att_msg[0]
            alpha = head_dot(x_j_out, att)
        alpha = segment_softmax(jax.nn.leaky_relu(alpha, 0.2), index, size_i)
        return x_j_out * alpha[..., None]


@register_converter("torch_geometric.nn.conv.general_conv.GeneralConv")
def _general(m, ctx: Converter) -> GeneralConv:
    check_common(m, ctx)
    attention = bool(m.attention)
    return GeneralConv(
        lin_msg=ctx.child(m.lin_msg, "lin_msg"),
        lin_msg_i=None if m.directed_msg else ctx.child(m.lin_msg_i, "lin_msg_i"),
        lin_self=ctx.child(m.lin_self, "lin_self"),
        lin_edge=ctx.child(m.lin_edge, "lin_edge") if m.in_edge_channels is not None else None,
        att_msg=ctx.array(m.att_msg) if attention and m.attention_type == "additive" else None,
        scaler=ctx.array(m.scaler) if attention and m.attention_type == "dot_product" else None,
        out_channels=m.out_channels, heads=m.heads, directed_msg=m.directed_msg,
        attention=attention, attention_type=m.attention_type, normalize_l2=m.normalize_l2,
        **convert_aggr(m, ctx))
