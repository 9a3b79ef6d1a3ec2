"""What the propagation and spectral convs share: weighted message passing, the normalisations,
and their converters' checks.

Every layer of the family (SGConv, TAGConv, ChebConv, APPNP, GCN2Conv, ARMAConv,
MixHopConv, DNAConv, LEConv, ClusterGCNConv) is a :class:`MessagePassing`
whose message is PyG's ``edge_weight.view(-1, 1) * x_j`` (or ``x_j`` without
weights), aggregated by ``aggr`` (PyG's default ``"add"`` for all of them; any
reduction name, or an aggregation module with a converter, as ``aggr_module``).
Normalised adjacencies are built in static shapes (``gcn_norm_static``,
``get_laplacian_static``): ``E + N`` edge slots, removed self-loops in the
dropped slot. PyG's ``cached=True`` stores the normalisation (or SGConv's
propagated features) on the module at the first call; the ports never cache
and recompute it every call (equal results), so a module whose cache is
already filled is refused (its cache may belong to another graph).
"""
from __future__ import annotations

from typing import Any, Callable, Optional, cast

import jax

from ...._checking import REDUCTIONS, as_array
from ....nn import Converter
from ....nn._layers import dropout
from ....nn._registry import converter_for
from ..._edges import edge_array
from ..._norm import gcn_norm_static
from .._common import check_flow, edge_values
from .._message_passing import MessagePassing, aggregate_along

__all__ = ["WeightedPropagation", "node_features", "edges_for", "gcn_normalized",
           "edge_dropout", "convert_aggr", "check_cache", "check_common", "torch_function"]


class WeightedPropagation(MessagePassing):
    """The family's base: ``message = edge_weight.view(-1, 1) * x_j``, ``aggr`` or ``aggr_module``.

    Subclasses declare ``aggr: str = eqx.field(static=True, default="add")``
    and ``aggr_module: Any = None`` (an aggregation module called as
    ``aggr_module(inputs, index, ptr=None, dim_size=None, dim=node_dim)``).
    """

    def message(self, x_j: jax.Array, edge_weight: Optional[jax.Array] = None) -> jax.Array:
        """PyG's ``edge_weight.view(-1, 1) * x_j`` (``x_j`` without weights)."""
        return x_j if edge_weight is None else edge_weight.reshape(-1, 1) * x_j

    def aggregate(self, inputs: jax.Array, index: jax.Array, ptr: Any = None,
                  dim_size: Optional[int] = None) -> jax.Array:
        """Reduce the messages at their targets along ``node_dim``."""
        module = getattr(self, "aggr_module", None)
        if module is not None:
            return module(inputs, index, ptr=ptr, dim_size=dim_size, dim=self.node_dim)
        # propagate always passes dim_size; the family's fields declare aggr: str
        assert dim_size is not None
        return aggregate_along(inputs, index, dim_size, cast(str, self.aggr), self.node_dim)


def node_features(x: Any, *, op: str, ndim: Optional[int] = None) -> jax.Array:
    """``x`` as an array (of ``ndim`` dimensions when given)."""
    x = as_array(x, "x", op=op)
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"{op}: `x` must have {ndim} dimensions, got shape {tuple(x.shape)}")
    if x.ndim < 2:
        raise ValueError(f"{op}: `x` must be [num_nodes, channels], got shape "
                         f"{tuple(x.shape)}")
    return x


def edges_for(edge_index: Any, edge_weight: Any, num_nodes: int, *,
              op: str) -> tuple[jax.Array, Optional[jax.Array]]:
    """``edge_index`` checked against ``num_nodes`` (ids in ``[0, N]``), ``edge_weight`` [E]."""
    edge_index = edge_array(edge_index, num_nodes, op=op)
    edge_weight = edge_values(edge_weight, edge_index, "edge_weight", op=op)
    if edge_weight is not None and edge_weight.ndim != 1:
        raise ValueError(f"{op}: `edge_weight` must be one weight per edge [E], got shape "
                         f"{tuple(edge_weight.shape)}")
    return edge_index, edge_weight


def gcn_normalized(edge_index: jax.Array, edge_weight: Optional[jax.Array], num_nodes: int,
                   add_self_loops: bool, dtype: Any) -> tuple[jax.Array, jax.Array]:
    """PyG's ``gcn_norm(edge_index, edge_weight, N, False, add_self_loops, dtype=x.dtype)``
    in a static shape (``E + N`` slots with self-loops, ``E`` without)."""
    return gcn_norm_static(edge_index, edge_weight, num_nodes=num_nodes, improved=False,
                           add_self_loops=add_self_loops, dtype=dtype)


def edge_dropout(edge_weight: jax.Array, p: float, key: Any, *, op: str) -> jax.Array:
    """``F.dropout(edge_weight, p)`` in training mode: a fresh mask per call (``key``)."""
    return dropout(edge_weight, p, True, key, op=op)


def convert_aggr(m: Any, ctx: Converter) -> dict:
    """The port's ``aggr`` / ``aggr_module`` fields for a PyG layer's ``aggr``.

    A reduction name (``"add"``, ``"mean"``, ``"max"`` ...) stays a name; any
    other aggregation (``"softmax"``, a module, a list) is converted through
    its registered converter (PyG's ``aggr_module``, with its parameters);
    one without a converter (``"lstm"`` ...) is refused.
    """
    aggr = m.aggr
    if isinstance(aggr, str) and aggr in REDUCTIONS:
        return {"aggr": aggr, "aggr_module": None}
    module = getattr(m, "aggr_module", None)
    if module is not None and converter_for(type(module)) is not None:
        return {"aggr": str(aggr), "aggr_module": ctx.child(module, "aggr_module")}
    raise ctx.unsupported(m, f"aggr={aggr!r} ({type(module).__name__}) has no JAX port; ported: "
                             f"the reductions {REDUCTIONS} and the aggregation modules with a "
                             f"registered converter")


def check_cache(m: Any, ctx: Converter, *attributes: str) -> None:
    """Refuse ``cached=True`` with a filled cache (the port recomputes every call)."""
    filled = [a for a in attributes if getattr(m, a, None) is not None]
    if getattr(m, "cached", False) and filled:
        raise ctx.unsupported(m, f"cached=True with a filled cache ({', '.join(filled)}); the "
                                 f"port recomputes the normalisation every call and cannot "
                                 f"replay a cache that may belong to another graph (call "
                                 f"reset_parameters() or build the layer with cached=False)")


def check_common(m: Any, ctx: Converter) -> None:
    """PyG's default flow, no explain mode, no chunked ``decomposed_layers``."""
    check_flow(m, ctx)
    if getattr(m, "decomposed_layers", 1) != 1:
        raise ctx.unsupported(m, f"decomposed_layers={m.decomposed_layers}; the port computes "
                                 f"all feature chunks at once (set it to 1)")


def torch_function(fn: Any, ctx: Converter, m: Any, what: str) -> Callable:
    """The JAX implementation of a plain torch function (``torch.tanh``, ``F.relu`` ...)."""
    import importlib

    from ....nn import _registry

    table = _registry.functions()
    module = getattr(fn, "__module__", None) or ""
    name = getattr(fn, "__name__", "")
    found = None
    for path in (f"{module}.{getattr(fn, '__qualname__', name)}", f"{module}.{name}",
                 f"torch.{name}", f"torch.nn.functional.{name}"):
        if path not in table:
            continue
        owner, _, attr = path.rpartition(".")
        try:
            same = getattr(importlib.import_module(owner), attr, None) is fn
        except ImportError:
            same = False
        if same:
            found = table[path]
            break
    if found is None:
        raise ctx.unsupported(m, f"{what}={fn!r} is a function without a JAX port in the fx "
                                 f"mapping table (pass a torch.nn activation module)")
    return found

