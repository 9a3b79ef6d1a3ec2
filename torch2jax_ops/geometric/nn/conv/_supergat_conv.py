"""PyG's ``SuperGATConv`` (self-supervised graph attention, Kim & Oh) as an equinox module."""
from __future__ import annotations

import math
from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._checking import as_array
from ...._sharding import OutSharding, sharding_aware
from ....nn import Converter, Linear, register_converter
from ....nn._state import next_key
from ..._core._edges import edge_array, gather, gather_dot, valid
from .._common import graph_input
from ._attention import (
    GatedPropagation,
    attend,
    dropout_weights,
    heads_view,
    loop_plan,
    merge_heads,
)
from ._propagation import check_common, convert_aggr

__all__ = ["SuperGATConv"]


class SuperGATConv(GatedPropagation):
    """``torch_geometric.nn.SuperGATConv``: GAT attention checked by link prediction.

    ``__call__(x [N, F_in], edge_index [2, E], neg_edge_index [2, E_neg] = None,
    batch = None, *, key=None, return_attention_loss=False)`` -> ``[N, heads * C]``
    (``concat``) or ``[N, C]``; with ``return_attention_loss=True`` the pair
    ``(out, loss)``, where ``loss`` is what PyG's ``get_attention_loss()``
    returns after this forward. :meth:`get_attention_loss` takes the forward's
    inputs and returns the loss alone (the port keeps no state between calls,
    so PyG's argument-free method becomes a method of the inputs).

    ``h = lin(x)`` viewed ``[N, H, C]``; with ``add_self_loops`` every existing
    loop is removed and one loop per node added (node-wise here). Per edge,
    ``logits = h_i . h_j``; ``attention_type="MX"``: ``e = (att_l . h_j +
    att_r . h_i) * sigmoid(logits)``; ``"SD"``: ``e = logits / sqrt(C)``;
    ``alpha = softmax_i(leaky_relu(e))`` (dropout in training), ``out_i =
    sum_j alpha_ji h_j``; heads concatenated or averaged; + ``bias``.

    The attention loss (training mode): ``BCE_with_logits(mean_heads(att), y)``
    over the positive edges (the edges after the self-loop step, loops
    included; ``y = 1``; "MX": the raw ``logits``, "SD": ``logits / sqrt(C)``)
    and the negative edges ``neg_edge_index`` (``y = 0``), averaged over all
    of them. In eval mode it is PyG's ``torch.tensor([0])``: an integer array
    of shape ``[1]``. Dropped edges (padding, removed loops) are left out of
    the average.

    What differs from PyG: the port does not sample negatives, so a training
    call that asks for the loss needs ``neg_edge_index`` (PyG samples with
    ``negative_sampling`` when it is None); positive edges are sampled with
    ``edge_sample_ratio`` as PyG does (``dropout_edge``, a key), as a mask in a
    static shape. Arrays: ``lin.weight [H*C, F_in]``, ``att_l``, ``att_r``
    ``[1, H, C]`` ("MX"), ``bias``.
    """
    lin: Optional[Linear] = None
    att_l: Optional[jax.Array] = None
    att_r: Optional[jax.Array] = None
    bias: Optional[jax.Array] = None
    aggr_module: Any = None
    heads: int = eqx.field(static=True, default=1)
    out_channels: int = eqx.field(static=True, default=1)
    concat: bool = eqx.field(static=True, default=True)
    negative_slope: float = eqx.field(static=True, default=0.2)
    dropout: float = eqx.field(static=True, default=0.0)
    add_self_loops: bool = eqx.field(static=True, default=True)
    attention_type: str = eqx.field(static=True, default="MX")
    neg_sample_ratio: float = eqx.field(static=True, default=0.5)
    edge_sample_ratio: float = eqx.field(static=True, default=1.0)
    is_undirected: bool = eqx.field(static=True, default=False)
    training: bool = eqx.field(static=True, default=False)
    aggr: str = eqx.field(static=True, default="add")
    node_dim = 0

    def _vector(self, att: jax.Array) -> jax.Array:
        return att.reshape(-1) if self.heads == 1 else att[0]

    def _logits(self, h_i: jax.Array, h_j: jax.Array) -> jax.Array:
        """PyG's ``get_attention(..., return_logits=True)``: ``[E, H]`` (one head ``[E]``)."""
        return self._scaled(jnp.sum(h_i * h_j, axis=-1))

    def _scaled(self, logits: jax.Array) -> jax.Array:
        """``SD`` divides the dot products by ``sqrt(C)``; ``MX`` keeps them."""
        return logits if self.attention_type == "MX" else logits / math.sqrt(self.out_channels)

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, neg_edge_index=None, batch=None, *, key=None,
                 return_attention_loss: bool = False, out_sharding: OutSharding = None):
        op = "SuperGATConv"
        if isinstance(x, (tuple, list)):
            raise TypeError(f"{op}: `x` must be one node-feature array [N, F] (SuperGATConv "
                            f"has no bipartite form), got a {type(x).__name__}")
        x = as_array(x, "x", op=op)
        n = x.shape[0]
        # a sparse adj_t: PyG rebuilds it with its loops, coalesced (values unused)
        edge_index = graph_input(edge_index, x, x, op=op,
                                 coalesce=self.add_self_loops).edge_index
        heads, channels = self.heads, self.out_channels
        assert self.lin is not None  # always set by the converter
        h = heads_view(self.lin(x), heads, channels)
        src, dst, n_loops = loop_plan(edge_index, n, n, self.add_self_loops)
        if self.attention_type == "MX":
            assert self.att_l is not None and self.att_r is not None  # "MX" has both
            a_l = jnp.sum(h * self._vector(self.att_l), axis=-1)
            a_r = jnp.sum(h * self._vector(self.att_r), axis=-1)
            logits = self._scaled(gather_dot(h, h, dst, src))
            loop_logits = self._logits(h[:n_loops], h[:n_loops])
            scores = (gather(a_l, src) + gather(a_r, dst)) * jax.nn.sigmoid(logits)
            loop_scores = (a_l[:n_loops] + a_r[:n_loops]) * jax.nn.sigmoid(loop_logits)
        else:
            scores = logits = self._scaled(gather_dot(h, h, dst, src))
            loop_scores = loop_logits = self._logits(h[:n_loops], h[:n_loops])
        scores = jax.nn.leaky_relu(scores, self.negative_slope)
        loop_scores = jax.nn.leaky_relu(loop_scores, self.negative_slope)
        if self.training and (self.dropout > 0 or (return_attention_loss
                                                   and self.edge_sample_ratio < 1)):
            key = next_key(op) if key is None else key
        weights, loop_weights = dropout_weights(self.training, self.dropout, key, scores.shape,
                                                loop_scores.shape, op=op)
        # the edges' logits are edge dots and the messages h[src] are read by the weighted
        # sum itself: on the CPU the kernel pair, no [E, H, C] buffer
        out = attend(self, scores, h, dst, n, loop_scores, h[:n_loops], weights, loop_weights,
                     src=src)
        out = merge_heads(out, heads, self.concat)
        if self.bias is not None:
            out = out + self.bias
        if not return_attention_loss:
            return out
        if not self.training:
            return out, jnp.zeros((1,), int)  # PyG: torch.tensor([0])
        if neg_edge_index is None:
            raise ValueError(
                f"{op}: in training mode the attention loss needs `neg_edge_index` [2, E_neg] "
                f"(PyG samples negatives itself with negative_sampling; the port does not). "
                f"Pass negative edges (e.g. int(neg_sample_ratio * edge_sample_ratio * E) "
                f"node pairs that are not edges), or call it with return_attention_loss=False")
        neg = edge_array(neg_edge_index, n, "neg_edge_index", op=op)
        neg_logits = self._logits(gather(h, neg[1]), gather(h, neg[0]))
        pos_mask = valid(dst, n).astype(h.dtype)
        loop_mask = jnp.ones((n_loops,), h.dtype)
        if self.edge_sample_ratio < 1:  # PyG's dropout_edge(p=1 - edge_sample_ratio)
            p = self.edge_sample_ratio
            pos_mask = pos_mask * jax.random.bernoulli(jax.random.fold_in(key, 2), p,
                                                       pos_mask.shape)
            loop_mask = loop_mask * jax.random.bernoulli(jax.random.fold_in(key, 3), p,
                                                         loop_mask.shape)
        neg_mask = (valid(neg[0], n) & valid(neg[1], n)).astype(h.dtype)

        def mean_heads(a):
            return a if heads == 1 else jnp.mean(a, axis=-1)

        # BCE with logits: y = 1 -> softplus(-z), y = 0 -> softplus(z)
        total = (jnp.sum(pos_mask * jax.nn.softplus(-mean_heads(logits)))
                 + jnp.sum(loop_mask * jax.nn.softplus(-mean_heads(loop_logits)))
                 + jnp.sum(neg_mask * jax.nn.softplus(mean_heads(neg_logits))))
        count = jnp.sum(pos_mask) + jnp.sum(loop_mask) + jnp.sum(neg_mask)
        return out, total / count

    def get_attention_loss(self, x, edge_index, neg_edge_index=None, batch=None, *,
                           key=None) -> jax.Array:
        """PyG's ``get_attention_loss()`` for the forward on these inputs (see the class)."""
        return self(x, edge_index, neg_edge_index, batch, key=key, return_attention_loss=True)[1]


@register_converter("torch_geometric.nn.conv.supergat_conv.SuperGATConv")
def _supergat(m, ctx: Converter) -> SuperGATConv:
    check_common(m, ctx)
    return SuperGATConv(
        lin=ctx.child(m.lin, "lin"), att_l=ctx.array(m.att_l), att_r=ctx.array(m.att_r),
        bias=ctx.array(m.bias), heads=m.heads, out_channels=m.out_channels, concat=m.concat,
        negative_slope=float(m.negative_slope), dropout=float(m.dropout),
        add_self_loops=m.add_self_loops, attention_type=m.attention_type,
        neg_sample_ratio=float(m.neg_sample_ratio),
        edge_sample_ratio=float(m.edge_sample_ratio), is_undirected=m.is_undirected,
        training=m.training, **convert_aggr(m, ctx))
