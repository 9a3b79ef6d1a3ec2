"""PyG's ``GCNConv`` (Kipf & Welling) as an equinox module, with its converter and old checkpoints."""
from __future__ import annotations

from typing import Any, Optional, cast

import equinox as eqx
import jax

from ...._checking import as_array
from ...._sharding import sharding_aware
from ....nn import Converter, Linear, register_converter
from ....nn._convert import state_arrays
from ..._core._adjacency import Adjacency, gcn_norm_sparse
from ..._core._edges import aggregate, gather, is_sparse_matrix
from ...utils._norm import gcn_weights_static
from .._common import (
    check_flow,
    edge_values,
    graph_input,
    sparse_tensor_input,
    spmm_adjacency,
    weighted,
)

__all__ = ['GCNConv']

_PYG = "torch_geometric.nn"


class GCNConv(eqx.Module):
    """``torch_geometric.nn.GCNConv``: ``out = D^-1/2 (A + I) D^-1/2 (x W^T) + bias``.

    ``__call__(x [N, F_in], edge_index [2, E], edge_weight [E] = None) -> [N, F_out]``.
    Normalisation as :func:`torch2jax_ops.geometric.gcn_norm` (its static form),
    recomputed every call (PyG's ``cached=False``). Arrays: ``lin.weight
    [F_out, F_in]``, ``bias [F_out]``.

    ``edge_index`` may also be an :class:`~torch2jax_ops.geometric.EdgeIndex`
    (sorted by ``"col"``: the sorted aggregation when nothing reorders the
    targets, i.e. without ``normalize``) or a sparse ``adj_t [N, N]`` (``BCOO`` /
    ``BCSR``), with PyG's sparse branch: the values are the edge weights
    (``edge_weight`` is ignored, as PyG ignores it), ``gcn_norm`` adds
    ``fill * I`` (``fill`` 2 with ``improved``) on top of any diagonal entry
    instead of keeping it, and ``normalize`` needs a square matrix. Without
    ``normalize`` the output has ``adj_t.shape[0]`` rows.
    """
    lin: Linear
    bias: Optional[jax.Array]
    improved: bool = eqx.field(static=True, default=False)
    add_self_loops: bool = eqx.field(static=True, default=True)
    normalize: bool = eqx.field(static=True, default=True)

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_weight=None, *, out_sharding=None):
        op = "GCNConv"
        x = as_array(x, "x", op=op)
        # a SparseTensor adj_t: gcn_norm's fill_diag replaces the stored diagonal
        edge_index = sparse_tensor_input(
            edge_index, "gcn_loops" if self.normalize and self.add_self_loops else "values",
            x.dtype, op=op)
        if is_sparse_matrix(edge_index):
            out = self._sparse(x, edge_index, op)
            return out if self.bias is None else out + self.bias
        graph = graph_input(edge_index, x, x, op=op)
        edge_index = graph.edge_index
        edge_weight = edge_values(edge_weight, edge_index, "edge_weight", op=op,
                                  vector=self.normalize)
        n = x.shape[0]
        h = self.lin(x)
        if self.normalize:  # the graph is checked: gcn_norm_static's trusting form
            edge_index, edge_weight = gcn_weights_static(
                edge_index, edge_weight, n, improved=self.improved,
                add_self_loops=self.add_self_loops, dtype=h.dtype)
        out = aggregate(weighted(gather(h, edge_index[0]), edge_weight), edge_index[1], n,
                        indices_sorted=graph.sorted and not self.normalize)
        return out if self.bias is None else out + self.bias

    def _sparse(self, x: jax.Array, adj_t: Any, op: str) -> jax.Array:
        """PyG's branch for a torch sparse ``adj_t``: ``gcn_norm``'s sparse rules, then
        ``spmm(adj_t, x W^T)`` (the sum of the weighted sources of each row)."""
        graph = graph_input(adj_t, x, None, op=op, square=self.normalize)
        adj = cast(Adjacency, graph.adj)
        h = self.lin(x)
        if not self.normalize:
            return spmm_adjacency(adj, h, "sum", op=op)
        # a sum: the loops may stay apart from the diagonal entries (no coalescing)
        weights, loops, _ = gcn_norm_sparse(adj, improved=self.improved,
                                            add_self_loops=self.add_self_loops, dtype=h.dtype,
                                            merge=False)
        out = aggregate(weighted(gather(h, adj.edge_index[0]), weights), adj.edge_index[1],
                        adj.num_dst, op=op, indices_sorted=adj.targets_sorted)
        return out if loops is None else out + loops[:, None] * h

    @classmethod
    def from_state_dict(cls, state: dict, *, improved: bool = False, add_self_loops: bool = True,
                        normalize: bool = True, copy: Optional[bool] = None,
                        device: Any = None) -> GCNConv:
        """A GCNConv from a PyG ``state_dict``: ``lin.weight [out, in]`` (PyG >= 2.0) or the
        pre-2.0 ``weight [in, out]`` (used as ``x @ weight``), plus ``bias``.

        The arrays go to JAX's default device, or ``device``.
        """
        s = state_arrays(state, copy=copy, device=device)
        if "lin.weight" in s:
            weight = s["lin.weight"]
        elif "weight" in s:
            weight = s["weight"].T  # PyG < 2.0: x @ weight with weight [in, out]
        else:
            raise KeyError(f"GCNConv.from_state_dict: no lin.weight (PyG >= 2.0) or weight "
                           f"(PyG < 2.0) in the state dict; its keys: {sorted(state)}")
        if add_self_loops and not normalize:
            raise ValueError("GCNConv: add_self_loops=True needs normalize=True (as in PyG)")
        return cls(Linear(weight), s.get("bias"), improved=improved,
                   add_self_loops=add_self_loops, normalize=normalize)


@register_converter(f"{_PYG}.conv.gcn_conv.GCNConv")
def _gcn(m, ctx: Converter):
    check_flow(m, ctx)
    if m.cached and m._cached_edge_index is not None:
        raise ctx.unsupported(m, "cached=True with a cached normalisation; the port recomputes "
                                 "it each call (pass cached=False, or reset_cache())")
    return GCNConv(ctx.child(m.lin, "lin"), ctx.array(m.bias), improved=m.improved,
                   add_self_loops=bool(m.add_self_loops), normalize=m.normalize)
