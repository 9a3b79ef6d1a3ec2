"""PyG's ``TransformerConv`` (graph transformer, Shi et al., UniMP) as an equinox module."""
from __future__ import annotations

import math
from typing import Any, Optional, cast

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._sharding import sharding_aware
from ....nn import Converter, Linear, register_converter
from ..._core._edges import gather_dot, gather_rows, valid
from .._common import edge_values, graph_input, pair
from ._attention import (
    GatedPropagation,
    attend,
    dropout_weights,
    edge_attention,
    heads_view,
    merge_heads,
)
from ._propagation import check_common, convert_aggr

__all__ = ["TransformerConv"]


class TransformerConv(GatedPropagation):
    """``torch_geometric.nn.TransformerConv``; attention dropout in training mode (with a key).

    ``__call__(x [N, F_in] or (x_src [N_src, F_src], x_dst [N_dst, F_dst]),
    edge_index [2, E], edge_attr [E, D] = None, return_attention_weights=None,
    *, key=None)`` -> ``[N_dst, heads * C]`` (``concat``) or ``[N_dst, C]``;
    with ``return_attention_weights`` a bool (``True`` *or* ``False``: PyG tests
    ``isinstance(..., bool)``) also ``(edge_index, alpha [E, H])``.

    ``q = lin_query(x_dst)``, ``k = lin_key(x_src)``, ``v = lin_value(x_src)``
    viewed ``[N, H, C]``; with ``edge_dim``, ``e = lin_edge(edge_attr)`` is
    added to both keys and values. ``alpha_ji = softmax_i(q_i . (k_j + e_ji) /
    sqrt(C))``, ``out_i = sum_j alpha_ji (v_j + e_ji)``; heads concatenated or
    averaged; then the root term ``lin_skip(x_dst)``: added, or with ``beta``
    mixed by the gate ``sigmoid(lin_beta([out, x_r, out - x_r]))``. No
    self-loops.

    PyG's behaviour mirrored: ``beta`` only acts with ``root_weight``;
    ``lin_skip`` exists (and is in the state dict) even with
    ``root_weight=False``, unused; the returned attention is taken before
    dropout (PyG stores ``_alpha`` before ``F.dropout``); ``edge_dim`` needs
    ``edge_attr`` and ``edge_attr`` needs ``edge_dim`` (PyG fails otherwise).

    Arrays: ``lin_key``, ``lin_query``, ``lin_value`` (``weight [H*C, F]``,
    ``bias``), ``lin_edge.weight [H*C, D]``, ``lin_skip`` (``[H*C, F_dst]`` or
    ``[C, F_dst]``), ``lin_beta.weight [1, 3*H*C]`` (or ``[1, 3*C]``).

    ``edge_index`` may be an :class:`~torch2jax_ops.geometric.EdgeIndex` or a
    sparse ``adj_t [N_dst, N_src]`` (``BCOO`` / ``BCSR``). On ``adj_t``, as in
    PyG: attention over the stored entries, the values ignored (``edge_attr``,
    when the layer has ``edge_dim``, has one row per stored entry in storage
    order), and the returned attention is ``(adj_t, alpha [S, H])`` in that order.
    """
    lin_key: Optional[Linear] = None
    lin_query: Optional[Linear] = None
    lin_value: Optional[Linear] = None
    lin_edge: Optional[Linear] = None
    lin_skip: Optional[Linear] = None
    lin_beta: Optional[Linear] = None
    aggr_module: Any = None
    heads: int = eqx.field(static=True, default=1)
    out_channels: int = eqx.field(static=True, default=1)
    concat: bool = eqx.field(static=True, default=True)
    root_weight: bool = eqx.field(static=True, default=True)
    dropout: float = eqx.field(static=True, default=0.0)
    training: bool = eqx.field(static=True, default=False)
    aggr: str = eqx.field(static=True, default="add")
    node_dim = 0

    def _project(self, x_src: jax.Array, x_dst: jax.Array, tuple_input: bool):
        """``(key, value, query, skip)``: one matmul when source and target are the same x."""
        # the converter always sets key / value / query, and lin_skip with root_weight
        assert self.lin_key is not None and self.lin_value is not None \
            and self.lin_query is not None
        lins = [self.lin_key, self.lin_value, self.lin_query]
        if self.root_weight:
            assert self.lin_skip is not None
            lins.append(self.lin_skip)
        if tuple_input:
            k, v = self.lin_key(x_src), self.lin_value(x_src)
            q = self.lin_query(x_dst)
            return k, v, q, (self.lin_skip(x_dst) if self.root_weight and self.lin_skip is not None
                             else None)
        weight = jnp.concatenate([lin.weight for lin in lins], axis=0)
        out = x_src @ weight.T
        if self.lin_key.bias is not None:
            # PyG's one `bias` flag: every projection has a bias, or none does
            out = out + jnp.concatenate([cast(jax.Array, lin.bias) for lin in lins])
        cuts = [0]
        for lin in lins:
            cuts.append(cuts[-1] + lin.weight.shape[0])
        parts = [out[:, a:b] for a, b in zip(cuts[:-1], cuts[1:])]
        return tuple(parts) + ((None,) if not self.root_weight else ())

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_attr=None, return_attention_weights=None, *,
                 key=None, out_sharding=None):
        op = "TransformerConv"
        tuple_input = isinstance(x, (tuple, list))
        x_src, x_dst = pair(x, op=op)
        if x_dst is None:
            raise ValueError(f"{op}: `x` = (x_src, None): the queries and the root term need "
                             f"the target features; pass (x_src, x_dst)")
        graph = graph_input(edge_index, x_src, x_dst, op=op)
        edge_index = graph.edge_index
        edge_attr = edge_values(edge_attr, edge_index, "edge_attr", op=op)
        if (edge_attr is None) != (self.lin_edge is None):
            raise ValueError(
                f"{op}: " + ("the layer has edge_dim set, so `edge_attr` is required (PyG "
                             "asserts it)" if edge_attr is None else
                             "`edge_attr` was given but the layer has no edge_dim; build it "
                             "with edge_dim=D (PyG would add the raw features to the values)"))
        heads, channels = self.heads, self.out_channels
        k, v, q, skip = self._project(x_src, x_dst, tuple_input)
        n_src, n_dst = x_src.shape[0], x_dst.shape[0]
        src, dst = edge_index[0], edge_index[1]
        dst = jnp.where(valid(src, n_src), dst, n_dst)  # a dropped source drops the edge
        k, v, q = (heads_view(a, heads, channels) for a in (k, v, q))
        if edge_attr is None:
            # q_i . k_j and the weighted sum of v_j straight from the node rows: on the
            # CPU the kernel pair, with no [E, H, C] buffer (gather_dot, softmax_aggregate)
            scores = gather_dot(q, k, dst, src) / math.sqrt(channels)
            messages, message_src = v, src
        else:
            # two gathers, not one of [k, v] sliced after: XLA:CPU copied each slice
            # out for the reductions that read it (TransformerConv x2 at 1M edges: -15%);
            # plain gathers (gather_rows) for the same reason
            e = heads_view(self.lin_edge(edge_attr), heads, channels)
            k_j, messages, message_src = gather_rows(k, src) + e, gather_rows(v, src) + e, None
            scores = jnp.sum(gather_rows(q, dst) * k_j, axis=-1) / math.sqrt(channels)
        weights, _ = dropout_weights(self.training, self.dropout, key, scores.shape, (0,), op=op)
        out = merge_heads(attend(self, scores, messages, dst, n_dst, weights=weights,
                                 src=message_src), heads, self.concat)
        if self.root_weight:
            if self.lin_beta is not None:
                gate = jax.nn.sigmoid(self.lin_beta(jnp.concatenate([out, skip, out - skip],
                                                                    axis=-1)))
                out = gate * skip + (1 - gate) * out
            else:
                out = out + skip
        if not isinstance(return_attention_weights, bool):
            return out
        alpha = edge_attention(scores, dst, n_dst).reshape(scores.shape[0], heads)
        if graph.adj is not None:
            return out, (graph.adj.matrix, alpha)  # PyG returns the adj_t it was given
        return out, (edge_index, alpha)


@register_converter("torch_geometric.nn.conv.transformer_conv.TransformerConv")
def _transformer(m, ctx: Converter) -> TransformerConv:
    check_common(m, ctx)
    return TransformerConv(
        lin_key=ctx.child(m.lin_key, "lin_key"), lin_query=ctx.child(m.lin_query, "lin_query"),
        lin_value=ctx.child(m.lin_value, "lin_value"),
        lin_edge=None if m.lin_edge is None else ctx.child(m.lin_edge, "lin_edge"),
        lin_skip=ctx.child(m.lin_skip, "lin_skip"),
        lin_beta=None if m.lin_beta is None else ctx.child(m.lin_beta, "lin_beta"),
        heads=m.heads, out_channels=m.out_channels, concat=m.concat,
        root_weight=m.root_weight, dropout=float(m.dropout), training=m.training,
        **convert_aggr(m, ctx))
