"""PyG's ``DNAConv`` (dynamic neighbourhood aggregation, Fey) as an equinox module."""
from __future__ import annotations

import math
from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._sharding import OutSharding, sharding_aware
from ....nn import Converter, register_converter
from ....nn._layers import dropout
from ....nn._state import next_key
from ..._core._edges import is_sparse_matrix
from ._propagation import (
    WeightedPropagation,
    check_cache,
    check_common,
    convert_aggr,
    edges_for,
    gcn_normalized,
    node_features,
)

__all__ = ["DNAConv"]


class _GroupedLinear(eqx.Module):
    """PyG's ``dna_conv.Linear``: ``[*, in] -> [*, out]`` with ``groups`` blocks.

    ``weight [groups, in / groups, out / groups]`` multiplies from the right;
    group ``g`` maps input block ``g`` to output block ``g``.
    """
    weight: jax.Array
    bias: Optional[jax.Array] = None
    groups: int = eqx.field(static=True, default=1)

    def __call__(self, src: jax.Array) -> jax.Array:
        if self.groups > 1:
            g, size_in, size_out = self.weight.shape
            blocks = src.reshape(-1, g, size_in)
            out = jnp.einsum("mgi,gio->mgo", blocks, self.weight)
            out = out.reshape(src.shape[:-1] + (g * size_out,))
        else:
            out = src @ self.weight[0]
        return out if self.bias is None else out + self.bias


def _restricted_softmax(src: jax.Array, axis: int = -1, margin: float = 0.0) -> jax.Array:
    """PyG's ``restricted_softmax``: ``exp(s - m) / (sum exp(s - m) + exp(margin - m))`` with
    ``m = max(max(s), 0)``; ``m`` cancels out of the value, so no gradient flows through it."""
    src_max = jax.lax.stop_gradient(jnp.maximum(jnp.max(src, axis=axis, keepdims=True), 0.0))
    out = jnp.exp(src - src_max)
    return out / (jnp.sum(out, axis=axis, keepdims=True) + jnp.exp(margin - src_max))


class _MultiHead(eqx.Module):
    """PyG's ``dna_conv.MultiHead``: ``heads``-head scaled dot-product attention with the
    restricted softmax and (training mode) dropout on the scores."""
    lin_q: _GroupedLinear
    lin_k: _GroupedLinear
    lin_v: _GroupedLinear
    heads: int = eqx.field(static=True, default=1)
    dropout: float = eqx.field(static=True, default=0.0)
    training: bool = eqx.field(static=True, default=False)

    def __call__(self, query: jax.Array, key: jax.Array, value: jax.Array, *,
                 rng: Any = None) -> jax.Array:
        query, key, value = self.lin_q(query), self.lin_k(key), self.lin_v(value)
        channels = query.shape[-1]
        per_head = channels // self.heads

        def split(t):  # [*, entries, C] -> [*, heads, entries, C / heads]
            return jnp.swapaxes(t.reshape(t.shape[:-1] + (self.heads, per_head)), -2, -3)

        query, key, value = split(query), split(key), split(value)
        score = query @ jnp.swapaxes(key, -2, -1) / math.sqrt(per_head)
        score = _restricted_softmax(score, axis=-1)
        score = dropout(score, self.dropout, self.training, rng, op="DNAConv")
        out = jnp.swapaxes(score @ value, -3, -2)  # [*, entries, heads, C / heads]
        return out.reshape(out.shape[:-2] + (channels,))


class DNAConv(WeightedPropagation):
    """``torch_geometric.nn.DNAConv``: attention over each neighbour's layer history.

    ``__call__(x [N, L, C], edge_index [2, E], edge_weight [E] = None, *, key=None)
    -> [N, C]``.

    ``x`` stacks the ``L`` previous layers' features of every node (PyG's
    ``node_dim=0``). The message of edge ``j -> i`` is ``w_ji *
    MultiHead(q = x_i[-1], k = v = x_j)``: ``heads``-head attention of node
    ``i``'s latest representation over ``j``'s ``L`` representations, with
    PyG's restricted softmax ``exp(s) / (sum exp(s) + 1)`` and grouped
    projections (``groups``). ``w`` is PyG's ``gcn_norm`` (``improved=False``,
    self-loops when ``add_self_loops``) when ``normalize``, else
    ``edge_weight``, which is then required (PyG fails without it).

    Training mode with ``dropout > 0``: dropout on the attention scores, from
    ``key`` (or the enclosing key scope). PyG's ``cached=True`` stores the
    normalisation at the first call; the port recomputes it.
    Arrays: ``multi_head.lin_{q,k,v}.weight [groups, C / groups, C / groups]``,
    ``multi_head.lin_{q,k,v}.bias [C]``.
    """
    multi_head: _MultiHead
    add_self_loops: bool = eqx.field(static=True, default=True)
    normalize: bool = eqx.field(static=True, default=True)
    aggr: str = eqx.field(static=True, default="add")
    aggr_module: Any = None
    node_dim = 0

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_weight=None, *, key=None,
                 out_sharding: OutSharding = None) -> jax.Array:
        op = "DNAConv"
        x = node_features(x, op=op)
        if x.ndim != 3:
            raise ValueError(f"{op}: feature shape must be [num_nodes, num_layers, channels], "
                             f"got {tuple(x.shape)}")
        n = x.shape[self.node_dim]
        edge_index, edge_weight = edges_for(edge_index, edge_weight, n, op=op, sparse=True)
        if self.normalize:
            edge_index, edge_weight = gcn_normalized(edge_index, edge_weight, n,
                                                     self.add_self_loops, x.dtype)
        elif edge_weight is None and not is_sparse_matrix(edge_index):
            raise ValueError(f"{op}: normalize=False needs `edge_weight` (PyG's message "
                             f"multiplies by it); pass edge_weight=..., or use normalize=True")
        if self.multi_head.training and self.multi_head.dropout > 0 and key is None:
            key = next_key(op)
        return self.propagate(edge_index, x=x, edge_weight=edge_weight, rng=key)

    # PyG's protocol: propagate passes message's arguments by name, so its signature is
    # the layer's own (not the base's)
    def message(self, x_i: jax.Array, x_j: jax.Array, edge_weight: jax.Array,  # type: ignore[override]
                rng: Any = None) -> jax.Array:
        x_i = x_i[:, -1:]  # [E, 1, C]
        out = self.multi_head(x_i, x_j, x_j, rng=rng)  # [E, 1, C]
        return edge_weight.reshape(-1, 1) * out[:, 0]


def _grouped(m, ctx: Converter) -> _GroupedLinear:
    return _GroupedLinear(ctx.array(m.weight), ctx.array(m.bias), groups=int(m.groups))


@register_converter("torch_geometric.nn.conv.dna_conv.DNAConv")
def _dna(m, ctx: Converter) -> DNAConv:
    check_common(m, ctx)
    check_cache(m, ctx, "_cached_edge_index", "_cached_adj_t")
    mh = m.multi_head
    multi_head = _MultiHead(_grouped(mh.lin_q, ctx), _grouped(mh.lin_k, ctx),
                            _grouped(mh.lin_v, ctx), heads=int(mh.heads),
                            dropout=float(mh.dropout), training=bool(mh.training))
    return DNAConv(multi_head, add_self_loops=bool(m.add_self_loops),
                   normalize=bool(m.normalize), **convert_aggr(m, ctx))
