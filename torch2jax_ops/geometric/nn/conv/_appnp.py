"""PyG's ``APPNP`` (personalized-PageRank propagation, Klicpera et al.) as an equinox module."""
from __future__ import annotations

from typing import Any

import equinox as eqx
import jax

from ...._sharding import OutSharding, sharding_aware
from ....nn import Converter, register_converter
from ....nn._state import next_key
from ..._core._adjacency import with_values
from ..._core._edges import is_sparse_matrix
from ._propagation import (
    WeightedPropagation,
    check_cache,
    check_common,
    convert_aggr,
    edge_dropout,
    edges_for,
    gcn_normalized,
    node_features,
    spmm_message_and_aggregate,
)

__all__ = ["APPNP"]


class APPNP(WeightedPropagation):
    """``torch_geometric.nn.APPNP``: ``x_{k+1} = (1 - alpha) A_hat x_k + alpha x_0``, ``K`` times.

    ``__call__(x [N, F], edge_index [2, E], edge_weight [E] = None, *, key=None) -> [N, F]``.

    ``A_hat`` is PyG's ``gcn_norm`` (``improved=False``; self-loops by
    ``add_remaining_self_loops`` when ``add_self_loops``) when ``normalize``,
    else the raw ``edge_weight`` (no self-loops are added then, whatever
    ``add_self_loops`` says). No parameters.

    Training mode with ``dropout > 0``: before each of the ``K`` propagations the
    edge weights go through ``F.dropout(p=dropout)`` with a fresh mask per hop,
    drawn from ``key`` (or the enclosing key scope). PyG's quirk, kept: it
    overwrites ``edge_weight`` with the dropped-out weights, so the masks
    compound (hop ``k`` keeps an edge with probability ``(1 - p)^k``, scaled by
    ``(1 - p)^-k``). Like PyG it needs edge weights (``normalize=True`` or an
    ``edge_weight``). PyG's
    ``cached=True`` stores the normalisation at the first call; the port
    recomputes it (same result on the same graph).
    """
    K: int = eqx.field(static=True, default=1)
    alpha: float = eqx.field(static=True, default=0.1)
    dropout: float = eqx.field(static=True, default=0.0)
    add_self_loops: bool = eqx.field(static=True, default=True)
    normalize: bool = eqx.field(static=True, default=True)
    training: bool = eqx.field(static=True, default=False)
    aggr: str = eqx.field(static=True, default="add")
    aggr_module: Any = None
    # PyG's message_and_aggregate(adj_t, x): its own signature, as message's is the layer's
    message_and_aggregate = spmm_message_and_aggregate  # type: ignore[assignment]

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_weight=None, *, key=None,
                 out_sharding: OutSharding = None) -> jax.Array:
        op = "APPNP"
        x = node_features(x, op=op)
        n = x.shape[self.node_dim]
        edge_index, edge_weight = edges_for(edge_index, edge_weight, n, op=op, sparse=True)
        if self.normalize:
            edge_index, edge_weight = gcn_normalized(edge_index, edge_weight, n,
                                                     self.add_self_loops, x.dtype)
        drop = self.dropout > 0 and self.training
        sparse = is_sparse_matrix(edge_index)
        if drop:
            if edge_weight is None and not sparse:
                raise ValueError(f"{op}: edge dropout in training mode needs edge weights "
                                 f"(PyG asserts edge_weight is not None): pass edge_weight=..., "
                                 f"or build the layer with normalize=True")
            key = next_key(op) if key is None else key
        h = x
        for k in range(self.K):
            if drop and sparse:  # PyG drops out the matrix's values (compounding too)
                edge_index = with_values(edge_index, edge_dropout(
                    edge_index.data, self.dropout, jax.random.fold_in(key, k), op=op))
            elif drop:  # PyG reassigns edge_weight: the masks of the hops compound
                edge_weight = edge_dropout(edge_weight, self.dropout,
                                           jax.random.fold_in(key, k), op=op)
            x = self.propagate(edge_index, x=x, edge_weight=edge_weight)
            x = x * (1 - self.alpha)
            x = x + self.alpha * h
        return x


@register_converter("torch_geometric.nn.conv.appnp.APPNP")
def _appnp(m, ctx: Converter) -> APPNP:
    check_common(m, ctx)
    check_cache(m, ctx, "_cached_edge_index", "_cached_adj_t")
    return APPNP(K=int(m.K), alpha=float(m.alpha), dropout=float(m.dropout),
                 add_self_loops=bool(m.add_self_loops), normalize=bool(m.normalize),
                 training=bool(m.training), **convert_aggr(m, ctx))
