"""PyG's ``GCN2Conv`` (GCNII, Chen et al.) as an equinox module, with its converter."""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax

from ...._checking import as_array
from ...._sharding import OutSharding, sharding_aware
from ....nn import Converter, register_converter
from .._common import sparse_tensor_input
from ._propagation import (
    WeightedPropagation,
    check_cache,
    check_common,
    convert_aggr,
    edges_for,
    gcn_normalized,
    node_features,
    spmm_message_and_aggregate,
)

__all__ = ["GCN2Conv"]


def _addmm(inputs: jax.Array, weight: jax.Array, beta: float) -> jax.Array:
    """``torch.addmm(inputs, inputs, weight, beta=1 - beta, alpha=beta)``.

    With ``1 - beta == 0`` torch ignores ``inputs`` in the sum (NaN/inf there
    are not propagated through that term): the term is left out here too.
    """
    product = beta * (inputs @ weight)
    return product if 1.0 - beta == 0 else (1.0 - beta) * inputs + product


class GCN2Conv(WeightedPropagation):
    """``torch_geometric.nn.GCN2Conv`` (GCNII): initial residual and identity mapping.

    ``__call__(x [N, C], x_0 [N0 >= N, C], edge_index [2, E], edge_weight [E] = None)
    -> [N, C]``.

    ``h = (1 - alpha) A_hat x + alpha x_0[:N]`` (PyG slices ``x_0`` to ``x``'s
    rows), ``A_hat`` PyG's ``gcn_norm`` (``improved=False``) when ``normalize``;
    then ``(1 - beta) h + beta h @ weight1`` (shared weights), or
    ``(1 - beta) p + beta p @ weight1 + (1 - beta) q + beta q @ weight2`` with
    ``p = (1 - alpha) A_hat x`` and ``q = alpha x_0[:N]`` (``shared_weights=False``).
    ``beta = log(theta / layer + 1)``, or 1 without ``theta``/``layer``. Note
    the weights multiply from the right (``h @ weight1``, ``[C, C]``).
    PyG's ``cached=True`` stores the normalisation at the first call; the port
    recomputes it. Arrays: ``weight1 [C, C]``, ``weight2 [C, C]`` (unshared).
    """
    weight1: jax.Array
    weight2: Optional[jax.Array]
    alpha: float = eqx.field(static=True, default=0.1)
    beta: float = eqx.field(static=True, default=1.0)
    add_self_loops: bool = eqx.field(static=True, default=True)
    normalize: bool = eqx.field(static=True, default=True)
    aggr: str = eqx.field(static=True, default="add")
    aggr_module: Any = None
    # PyG's message_and_aggregate(adj_t, x): its own signature, as message's is the layer's
    message_and_aggregate = spmm_message_and_aggregate  # type: ignore[assignment]

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, x_0, edge_index, edge_weight=None,
                 *, out_sharding: OutSharding = None) -> jax.Array:
        op = "GCN2Conv"
        x = node_features(x, op=op)
        x_0 = as_array(x_0, "x_0", op=op)
        n = x.shape[self.node_dim]
        if x_0.ndim != x.ndim or x_0.shape[0] < n:
            raise ValueError(f"{op}: `x_0` must be [N0, C] with N0 >= x's {n} rows (PyG uses "
                             f"x_0[:N]), got shape {tuple(x_0.shape)}")
        # a SparseTensor adj_t: gcn_norm's fill_diag replaces the stored diagonal (as GCNConv)
        edge_index = sparse_tensor_input(
            edge_index, "gcn_loops" if self.normalize and self.add_self_loops else "values",
            x.dtype, op=op)
        edge_index, edge_weight = edges_for(edge_index, edge_weight, n, op=op, sparse=True)
        if self.normalize:
            edge_index, edge_weight = gcn_normalized(edge_index, edge_weight, n,
                                                     self.add_self_loops, x.dtype)
        x = self.propagate(edge_index, x=x, edge_weight=edge_weight) * (1 - self.alpha)
        x_0 = self.alpha * x_0[:n]
        if self.weight2 is None:
            return _addmm(x + x_0, self.weight1, self.beta)
        return _addmm(x, self.weight1, self.beta) + _addmm(x_0, self.weight2, self.beta)


@register_converter("torch_geometric.nn.conv.gcn2_conv.GCN2Conv")
def _gcn2(m, ctx: Converter) -> GCN2Conv:
    check_common(m, ctx)
    check_cache(m, ctx, "_cached_edge_index", "_cached_adj_t")
    return GCN2Conv(ctx.array(m.weight1), ctx.array(m.weight2), alpha=float(m.alpha),
                    beta=float(m.beta), add_self_loops=bool(m.add_self_loops),
                    normalize=bool(m.normalize), **convert_aggr(m, ctx))
