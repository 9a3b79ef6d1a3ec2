"""What the PyG layer ports share: node-feature pairs, per-edge inputs, converter checks.

Shapes: ``x [N, F_in]`` or a bipartite ``(x_src [N_src, F], x_dst [N_dst, F])``
pair, ``edge_index [2, E]`` whose ids may use the dropped slot ``N`` (see
:mod:`torch2jax_ops.geometric`), per-edge values with one row per edge.
"""
from __future__ import annotations

from typing import Any, Optional, Union

import jax

from ..._checking import REDUCTIONS, as_array
from ...nn import Converter
from .._edges import edge_array

__all__ = ["NodeFeatures", "pair", "checked_edges", "edge_values", "weighted", "check_flow",
           "check_aggr"]

NodeFeatures = Union[jax.Array, tuple]


def pair(x: NodeFeatures, *, op: str) -> tuple[jax.Array, Optional[jax.Array]]:
    """``x`` or ``(x_src, x_dst)`` as the pair PyG's layers work on."""
    if isinstance(x, (tuple, list)):
        if len(x) != 2:
            raise ValueError(f"{op}: a tuple `x` must be (x_src, x_dst), got {len(x)} entries")
        src = as_array(x[0], "x[0]", op=op)
        return src, None if x[1] is None else as_array(x[1], "x[1]", op=op)
    x = as_array(x, "x", op=op)
    return x, x


def checked_edges(edge_index: Any, x_src: jax.Array, x_dst: Optional[jax.Array], *, op: str) -> jax.Array:
    """``edge_index`` checked against the larger side of a (possibly bipartite) graph."""
    n = max(x_src.shape[0], x_src.shape[0] if x_dst is None else x_dst.shape[0])
    return edge_array(edge_index, n, op=op)


def edge_values(values: Any, edge_index: jax.Array, name: str, *, op: str) -> Optional[jax.Array]:
    """Per-edge weights or features: one row per edge, or None."""
    if values is None:
        return None
    values = as_array(values, name, op=op)
    if values.ndim == 0 or values.shape[0] != edge_index.shape[1]:
        raise ValueError(f"{op}: `{name}` must have one row per edge ({edge_index.shape[1]}), "
                         f"got shape {tuple(values.shape)}")
    return values


def weighted(messages: jax.Array, weight: Optional[jax.Array]) -> jax.Array:
    """``weight [E] * messages [E, *F]``; no weight: the messages."""
    return messages if weight is None else weight.reshape((-1,) + (1,) * (messages.ndim - 1)) \
        * messages


def check_flow(m: Any, ctx: Converter) -> None:
    """A converter's check: PyG's default flow, no explain mode."""
    if getattr(m, "flow", "source_to_target") != "source_to_target":
        raise ctx.unsupported(m, f"flow={m.flow!r}; only 'source_to_target' (PyG's default) "
                                 f"is ported")
    if getattr(m, "explain", False):
        raise ctx.unsupported(m, "explain mode is on")


def check_aggr(m: Any, ctx: Converter, allowed: tuple = REDUCTIONS, *,
               modules: bool = False) -> Any:
    """A converter's check: ``m.aggr`` is a reduction name the port implements.

    ``modules=True`` (layers that take an aggregation module): any other
    aggregation -- a module (``aggr=SoftmaxAggregation(learn=True)``), a name
    PyG resolves to one (``"std"``, ``"softmax"``), a list of names -- whose
    class has a converter (:mod:`torch2jax_ops.geometric.nn.aggr`) is returned
    converted, as the layer's ``aggr_module`` (its arrays keep PyG's
    ``aggr_module.*`` names); the port calls it as
    ``aggr_module(messages, index, dim_size=N, dim=node_dim)``.
    """
    aggr = m.aggr
    if isinstance(aggr, str) and aggr in allowed:
        return aggr
    module = getattr(m, "aggr_module", None)
    if modules and module is not None:
        from ...nn._registry import converter_for

        if converter_for(type(module)) is not None:
            return ctx.child(module, "aggr_module")
    hint = (" or an aggregation module with a converter (torch2jax_ops.geometric.nn.aggr)"
            if modules else "")
    raise ctx.unsupported(m, f"aggr={aggr!r}; ported: {allowed}{hint}")
