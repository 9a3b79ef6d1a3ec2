"""PyG's ``AGNNConv`` (attention-based graph neural network, Thekumparampil et al.)."""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._checking import as_array
from ...._sharding import sharding_aware
from ....nn import Converter, register_converter
from ..._core._edges import gather_dot
from .._common import graph_input
from ._attention import GatedPropagation, attend, l2_normalize, loop_plan
from ._propagation import check_common, convert_aggr

__all__ = ["AGNNConv"]


class AGNNConv(GatedPropagation):
    """``torch_geometric.nn.AGNNConv``: ``out_i = sum_j softmax_i(beta cos(x_i, x_j)) x_j``.

    ``__call__(x [N, F], edge_index [2, E]) -> [N, F]``. No weights but the
    temperature ``beta [1]``: a parameter (``requires_grad=True``) or a buffer
    of ones that gets no gradient (``requires_grad=False``), as in PyG. With
    ``add_self_loops`` every existing loop is removed and one loop per node
    added (node-wise here). The cosine uses ``F.normalize`` (norms clamped at
    1e-12), the softmax is PyG's (grouped by target).
    """
    beta: Optional[jax.Array] = None
    aggr_module: Any = None
    requires_grad: bool = eqx.field(static=True, default=True)
    add_self_loops: bool = eqx.field(static=True, default=True)
    aggr: str = eqx.field(static=True, default="add")

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, *, out_sharding=None):
        op = "AGNNConv"
        x = as_array(x, "x", op=op)
        if x.ndim != 2:
            raise ValueError(f"{op}: `x` must be [num_nodes, channels], got shape "
                             f"{tuple(x.shape)}")
        n = x.shape[0]
        # a sparse adj_t: PyG rebuilds it with its loops, coalesced (values unused)
        edge_index = graph_input(edge_index, x, x, op=op,
                                 coalesce=self.add_self_loops).edge_index
        beta = self.beta if self.requires_grad else jax.lax.stop_gradient(self.beta)
        x_norm = l2_normalize(x)
        src, dst, n_loops = loop_plan(edge_index, n, n, self.add_self_loops)
        # cosine scores as edge dots and the sum of source rows by src: on the CPU the
        # kernel pair, no [E, F] buffer (geometric/_core/_edges.py)
        scores = beta * gather_dot(x_norm, x_norm, dst, src)
        loop_scores = beta * jnp.sum(x_norm[:n_loops] * x_norm[:n_loops], axis=-1)
        return attend(self, scores, x, dst, n, loop_scores, x[:n_loops], src=src)


@register_converter("torch_geometric.nn.conv.agnn_conv.AGNNConv")
def _agnn(m, ctx: Converter) -> AGNNConv:
    check_common(m, ctx)
    return AGNNConv(beta=ctx.array(m.beta), requires_grad=m.requires_grad,
                    add_self_loops=m.add_self_loops, **convert_aggr(m, ctx))
