"""PyG's ``AttentionalAggregation`` (global soft attention, Li et al.)."""
from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from ....nn import Converter, register_converter
from ...utils._softmax import segment_softmax
from ._base import Aggregation, reduce_along

__all__ = ["AttentionalAggregation"]


class AttentionalAggregation(Aggregation):
    """``torch_geometric.nn.aggr.AttentionalAggregation``:
    ``sum_i softmax(gate_nn(x))_i * nn(x)_i`` per group.

    PyG keeps a PyG ``MLP`` under ``gate_mlp`` / ``mlp`` (called with
    ``batch=index, batch_size=dim_size``) and any other module under
    ``gate_nn`` / ``nn``; the port keeps the same names, so the state_dict
    keys match. The softmax runs over each group along ``dim`` (per gate
    channel). In training mode with dropout inside the networks, pass
    ``key=`` (or call inside a keyed port).
    """
    gate_nn: Any = None
    gate_mlp: Any = None
    nn: Any = None
    mlp: Any = None

    def _aggregate(self, x, g):
        batch = g.ids if g.indexed else None
        if self.gate_mlp is not None:
            gate = self.gate_mlp(x, batch=batch, batch_size=g.n)
        else:
            gate = self.gate_nn(x)
        if self.mlp is not None:
            x = self.mlp(x, batch=batch, batch_size=g.n)
        elif self.nn is not None:
            x = self.nn(x)
        moved = jnp.moveaxis(gate, g.axis, 0)
        gate = jnp.moveaxis(segment_softmax(moved, g.ids, g.n), 0, g.axis)
        return reduce_along(gate * x, g, "sum", op="AttentionalAggregation")


@register_converter("torch_geometric.nn.aggr.attention.AttentionalAggregation")
def _attentional(m, ctx: Converter):
    def child(name):
        sub = getattr(m, name, None)
        return None if sub is None else ctx.child(sub, name)
    return AttentionalAggregation(gate_nn=child("gate_nn"), gate_mlp=child("gate_mlp"),
                                  nn=child("nn"), mlp=child("mlp"))
