"""PyG's ``ChebConv`` (Chebyshev spectral filters, Defferrard et al.) as an equinox module."""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._checking import as_array
from ...._sharding import OutSharding, sharding_aware
from ....nn import Converter, ModuleList, register_converter
from ..._core._edges import gather
from ...utils._laplacian import check_normalization, laplacian_static
from ._propagation import WeightedPropagation, check_common, convert_aggr, edges_for, node_features

__all__ = ["ChebConv"]


class ChebConv(WeightedPropagation):
    """``torch_geometric.nn.ChebConv``: ``out = sum_{k<K} lins[k](T_k(L_hat) x) + bias``.

    ``__call__(x [N, F_in], edge_index [2, E], edge_weight [E] = None, batch [N] = None,
    lambda_max = None) -> [N, F_out]``.

    ``T_0 = x``, ``T_1 = L_hat x``, ``T_k = 2 L_hat T_{k-1} - T_{k-2}`` with
    ``L_hat = 2 L / lambda_max - I`` and ``L`` PyG's ``get_laplacian`` (see
    :func:`torch2jax_ops.geometric.utils.get_laplacian`: out-degrees at the
    source, self-loops of the input removed first). PyG's quirks, kept:

    * ``lambda_max=None`` means ``2 * max(L's entries)`` -- 2 for ``"sym"`` and
      ``"rw"`` (their diagonal is 1) but twice the largest weighted degree for
      ``normalization=None`` (not the largest eigenvalue); the gradient flows
      through that max (ties share it evenly, as torch's ``max()``);
    * a per-graph ``lambda_max [B]`` with ``batch`` is read at each entry's
      source node; a number becomes an array of ``x``'s dtype;
    * ``2 w / lambda_max`` entries equal to ``+inf`` become 0 (``-inf`` and
      NaN stay); every diagonal entry then loses 1.

    Arrays: ``lins.k.weight [F_out, F_in]`` (no biases), ``bias [F_out]``.
    """
    lins: ModuleList
    bias: Optional[jax.Array]
    normalization: Optional[str] = eqx.field(static=True, default="sym")
    aggr: str = eqx.field(static=True, default="add")
    aggr_module: Any = None

    def __check_init__(self):
        check_normalization(self.normalization, op="ChebConv")

    @property
    def K(self) -> int:
        return len(self.lins)

    def _norm(self, edge_index, num_nodes, edge_weight, lambda_max, dtype, batch, op):
        # edges_for checked the graph, __check_init__ the normalization
        edge_index, weight = laplacian_static(edge_index, edge_weight, self.normalization,
                                              num_nodes, dtype)
        kept = edge_index[0] < num_nodes  # PyG has no dropped slots: keep them out of the max
        if lambda_max is None:
            lambda_max = 2.0 * jnp.max(jnp.where(kept, weight, -jnp.inf))
        elif isinstance(lambda_max, (int, float)):  # PyG: torch.tensor(value, dtype=x.dtype)
            lambda_max = jnp.asarray(lambda_max, dtype)
        else:
            lambda_max = as_array(lambda_max, "lambda_max", op=op)
        if batch is not None and lambda_max.size > 1:
            batch = as_array(batch, "batch", op=op)
            if batch.shape != (num_nodes,):
                raise ValueError(f"{op}: `batch` must have shape [num_nodes] = ({num_nodes},), "
                                 f"got {tuple(batch.shape)}")
            lambda_max = lambda_max[gather(batch, edge_index[0])]
        weight = (2.0 * weight) / lambda_max
        weight = jnp.where(weight == jnp.inf, jnp.zeros((), weight.dtype), weight)
        loop = edge_index[0] == edge_index[1]
        return edge_index, jnp.where(loop, weight - 1, weight)

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_weight=None, batch=None,
                 lambda_max=None, *, out_sharding: OutSharding = None) -> jax.Array:
        op = "ChebConv"
        x = node_features(x, op=op)
        n = x.shape[self.node_dim]
        edge_index, edge_weight = edges_for(edge_index, edge_weight, n, op=op)
        edge_index, norm = self._norm(edge_index, n, edge_weight, lambda_max, x.dtype, batch, op)
        lins = list(self.lins)
        tx_0 = tx_1 = x
        out = lins[0](tx_0)
        if len(lins) > 1:
            tx_1 = self.propagate(edge_index, x=x, edge_weight=norm)
            out = out + lins[1](tx_1)
        for lin in lins[2:]:
            tx_2 = 2.0 * self.propagate(edge_index, x=tx_1, edge_weight=norm) - tx_0
            out = out + lin(tx_2)
            tx_0, tx_1 = tx_1, tx_2
        return out if self.bias is None else out + self.bias


@register_converter("torch_geometric.nn.conv.cheb_conv.ChebConv")
def _cheb(m, ctx: Converter) -> ChebConv:
    check_common(m, ctx)
    return ChebConv(ctx.child(m.lins, "lins"), ctx.array(m.bias),
                    normalization=m.normalization, **convert_aggr(m, ctx))
