"""PyG's ``GCNConv`` (Kipf & Welling) as an equinox module, with its converter and old checkpoints."""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax

from ...._checking import as_array
from ...._sharding import sharding_aware
from ....nn import Converter, Linear, register_converter
from ....nn._convert import state_arrays
from ..._edges import aggregate, gather
from ..._norm import gcn_norm_static
from .._common import check_flow, checked_edges, edge_values, weighted

__all__ = ['GCNConv']

_PYG = "torch_geometric.nn"


class GCNConv(eqx.Module):
    """``torch_geometric.nn.GCNConv``: ``out = D^-1/2 (A + I) D^-1/2 (x W^T) + bias``.

    ``__call__(x [N, F_in], edge_index [2, E], edge_weight [E] = None) -> [N, F_out]``.
    Normalisation as :func:`torch2jax_ops.geometric.gcn_norm` (its static form),
    recomputed every call (PyG's ``cached=False``). Arrays: ``lin.weight
    [F_out, F_in]``, ``bias [F_out]``.
    """
    lin: Linear
    bias: Optional[jax.Array]
    improved: bool = eqx.field(static=True, default=False)
    add_self_loops: bool = eqx.field(static=True, default=True)
    normalize: bool = eqx.field(static=True, default=True)

    @sharding_aware
    def __call__(self, x, edge_index, edge_weight=None):
        op = "GCNConv"
        x = as_array(x, "x", op=op)
        edge_index = checked_edges(edge_index, x, x, op=op)
        edge_weight = edge_values(edge_weight, edge_index, "edge_weight", op=op)
        n = x.shape[0]
        h = self.lin(x)
        if self.normalize:
            edge_index, edge_weight = gcn_norm_static(
                edge_index, edge_weight, num_nodes=n, improved=self.improved,
                add_self_loops=self.add_self_loops, dtype=h.dtype)
        out = aggregate(weighted(gather(h, edge_index[0]), edge_weight), edge_index[1], n)
        return out if self.bias is None else out + self.bias

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
