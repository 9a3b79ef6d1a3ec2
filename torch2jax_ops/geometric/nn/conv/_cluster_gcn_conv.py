"""PyG's ``ClusterGCNConv`` (Chiang et al.) as an equinox module, with its converter."""
from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._checking import debug_check, is_traced
from ...._sharding import OutSharding, sharding_aware
from ....nn import Converter, Linear, register_converter
from ..._core._edges import aggregate, gather, is_sparse_matrix, valid
from ...utils._loops import _loops, route_self_loops
from .._common import graph_input
from ._propagation import WeightedPropagation, check_common, convert_aggr, edges_for, node_features

__all__ = ["ClusterGCNConv"]


class ClusterGCNConv(WeightedPropagation):
    """``torch_geometric.nn.ClusterGCNConv``: ``lin_out((D^-1 A + l diag(D^-1)) x) + lin_root(x)``.

    ``__call__(x [N, F_in], edge_index [2, E]) -> [N, F_out]``.

    With ``add_self_loops`` (default) the input's self-loops are removed and one
    added per node; ``deg_i`` counts node ``i``'s incoming edges (repeats
    included, its loop included, counted in float32 as PyG's ``degree``),
    clamped to at least 1; edge ``j -> i`` carries
    ``1 / deg_i`` and the loop of ``i`` ``(1 + diag_lambda) / deg_i``.

    PyG's quirk without ``add_self_loops``: ``edge_weight[row == col] +=
    diag_lambda * deg_inv`` pairs the ``k``-th self-loop *in edge order* with
    ``deg_inv[k]`` (not with its own node), and torch only accepts it when the
    graph has exactly ``N`` self-loops (or ``N == 1``); other graphs raise, as
    in PyG (under jit: a :func:`torch2jax_ops.checked` error). Kept as is.
    Arrays: ``lin_out.weight [F_out, F_in]``, ``lin_out.bias``,
    ``lin_root.weight [F_out, F_in]`` (no bias).
    """
    lin_out: Linear
    lin_root: Linear
    diag_lambda: float = eqx.field(static=True, default=0.0)
    add_self_loops: bool = eqx.field(static=True, default=True)
    aggr: str = eqx.field(static=True, default="add")
    aggr_module: Any = None

    def _weights(self, edge_index, n, op):
        if self.add_self_loops:
            edge_index = jnp.concatenate([route_self_loops(edge_index, n),
                                          _loops(n, edge_index.dtype)], axis=1)
        row, col = edge_index[0], edge_index[1]
        counted = jnp.where(valid(row, n), col, n)  # a dropped edge counts for no node
        # PyG's degree() counts in float32 whatever x's dtype (the weights stay float32)
        deg = aggregate(jnp.ones(col.shape, jnp.float32), counted, n, "sum")
        deg_inv = 1.0 / jnp.maximum(deg, 1.0)
        weight = gather(deg_inv, col)
        # PyG rounds diag_lambda * deg_inv before adding it; XLA on CPU would contract the
        # multiply and the add into one fused multiply-add (one rounding, 1 ulp off in float32).
        # A select between them (always true: deg_inv > 0) keeps the two roundings.
        scaled = jnp.where(deg_inv > 0, self.diag_lambda * deg_inv, jnp.zeros((), deg_inv.dtype))
        if self.add_self_loops:  # the appended loops, node by node
            return edge_index, weight.at[-n:].add(scaled) if n else weight
        loop = (row == col) & valid(row, n)
        count = jnp.sum(loop)
        if n != 1:
            message = (f"{op}: add_self_loops=False adds diag_lambda * deg_inv to the self-loop "
                       f"edges in edge order, which PyG (torch broadcasting) only accepts when "
                       f"the graph has exactly num_nodes={n} self-loops")
            if is_traced(count):
                debug_check(count == n, message)
            elif int(count) != n:
                raise ValueError(f"{message}; this one has {int(count)}. Build the layer with "
                                 f"add_self_loops=True, or add one self-loop per node")
        rank = jnp.clip(jnp.cumsum(loop) - 1, 0, max(n - 1, 0))
        extra = scaled[rank] if n else jnp.zeros(rank.shape, deg_inv.dtype)
        return edge_index, jnp.where(loop, weight + extra, weight)

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, *, out_sharding: OutSharding = None) -> jax.Array:
        op = "ClusterGCNConv"
        x = node_features(x, op=op)
        n = x.shape[self.node_dim]
        if is_sparse_matrix(edge_index):  # PyG's sparse branch: loops into a coalesced matrix
            edge_index = graph_input(edge_index, x, x, op=op, coalesce=self.add_self_loops,
                                     square=True).edge_index
        else:
            edge_index, _ = edges_for(edge_index, None, n, op=op)
        edge_index, edge_weight = self._weights(edge_index, n, op)
        out = self.propagate(edge_index, x=x, edge_weight=edge_weight)
        return self.lin_out(out) + self.lin_root(x)


@register_converter("torch_geometric.nn.conv.cluster_gcn_conv.ClusterGCNConv")
def _cluster_gcn(m, ctx: Converter) -> ClusterGCNConv:
    check_common(m, ctx)
    return ClusterGCNConv(ctx.child(m.lin_out, "lin_out"), ctx.child(m.lin_root, "lin_root"),
                          diag_lambda=float(m.diag_lambda), add_self_loops=bool(m.add_self_loops),
                          **convert_aggr(m, ctx))
