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

A sparse ``adj_t [N, N]`` (``BCOO`` / ``BCSR``) takes PyG's sparse branch:
``gcn_norm`` of the matrix (``A + I``, the loop added to a diagonal entry,
the values as weights, ``edge_weight`` ignored) is a matrix again
(:func:`gcn_normalized`), and ``propagate`` on it runs the layer's
``message_and_aggregate`` (``spmm(adj_t, x, aggr)``, :func:`spmm_message_and_aggregate`,
for the layers whose PyG class has one and a sum / mean / min / max ``aggr``)
or messages over its entries with the values as ``edge_weight``.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, cast

import jax

from ...._checking import REDUCTIONS, as_array
from ....nn import Converter
from ....nn._layers import dropout
from ....nn._registry import converter_for
from ..._core._adjacency import adjacency, normalized_matrix
from ..._core._edges import edge_array, is_sparse_matrix
from ...utils._norm import gcn_weights_static
from .._common import check_flow, edge_values, effective_aggr, refuse_sparse, spmm_adjacency
from .._message_passing import MessagePassing, aggregate_along

__all__ = ["WeightedPropagation", "node_features", "edges_for", "gcn_normalized",
           "spmm_message_and_aggregate",
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
        return aggregate_along(inputs, index, dim_size, cast(str, self.aggr), self.node_dim,
                               indices_sorted=ptr is not None)


def node_features(x: Any, *, op: str, ndim: Optional[int] = None) -> jax.Array:
    """``x`` as an array (of ``ndim`` dimensions when given)."""
    x = as_array(x, "x", op=op)
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"{op}: `x` must have {ndim} dimensions, got shape {tuple(x.shape)}")
    if x.ndim < 2:
        raise ValueError(f"{op}: `x` must be [num_nodes, channels], got shape "
                         f"{tuple(x.shape)}")
    return x


def edges_for(edge_index: Any, edge_weight: Any, num_nodes: int, *, op: str,
              sparse: bool = False) -> tuple[Any, Optional[jax.Array]]:
    """``edge_index`` checked against ``num_nodes`` (ids in ``[0, N]``), ``edge_weight`` [E].

    ``sparse=True``: a sparse ``adj_t`` (``BCOO`` / ``BCSR``) is accepted and
    returned as it is (checked: ``[N, N]``, ``edge_weight`` one per stored
    entry); without it a sparse input is an error (PyG's layer fails on one).
    """
    if is_sparse_matrix(edge_index):
        if not sparse:
            refuse_sparse(edge_index, op=op, why=f"PyG's {op} cannot take (it fails on one)")
        adj = adjacency(edge_index, op=op)
        if (adj.num_dst, adj.num_src) != (num_nodes, num_nodes):
            raise ValueError(f"{op}: `edge_index` is a sparse adj_t of shape "
                             f"{tuple(edge_index.shape)}; it must be [N, N] with N = "
                             f"{num_nodes}, the nodes of `x`")
        edge_weight = edge_values(edge_weight, adj.edge_index, "edge_weight", op=op)
        return edge_index, edge_weight
    edge_index = edge_array(edge_index, num_nodes, op=op)
    return edge_index, edge_values(edge_weight, edge_index, "edge_weight", op=op, vector=True)


def gcn_normalized(edge_index: Any, edge_weight: Optional[jax.Array], num_nodes: int,
                   add_self_loops: bool, dtype: Any) -> tuple[Any, Optional[jax.Array]]:
    """PyG's ``gcn_norm(edge_index, edge_weight, N, False, add_self_loops, dtype=x.dtype)``
    in a static shape (``E + N`` slots with self-loops, ``E`` without).

    A sparse ``adj_t`` gives PyG's sparse result: the normalised matrix (a ``BCOO``,
    :func:`~torch2jax_ops.geometric._core._adjacency.normalized_matrix`) and no weights.
    """
    if is_sparse_matrix(edge_index):
        adj = adjacency(edge_index, op="gcn_norm", coalesce=add_self_loops)
        return normalized_matrix(adj, add_self_loops=add_self_loops, dtype=dtype), None
    return gcn_weights_static(edge_index, edge_weight, num_nodes,
                              add_self_loops=add_self_loops, dtype=dtype)


def spmm_message_and_aggregate(self: Any, adj_t: Any, x: jax.Array) -> jax.Array:
    """PyG's ``message_and_aggregate(adj_t, x)`` of the layers that have one:
    ``spmm(adj_t, x, reduce=self.aggr)`` (``x [N, F]``; set it as the class's
    ``message_and_aggregate``)."""
    op = type(self).__name__
    return spmm_adjacency(adjacency(adj_t, op=op), x, cast(str, self.aggr), op=op)


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
    aggr = effective_aggr(m)  # PyG's propagate uses the module built in __init__
    if isinstance(aggr, str) and aggr in REDUCTIONS:
        return {"aggr": aggr, "aggr_module": None}
    aggr = m.aggr
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
                                 f"replay a cache that may belong to another graph (empty it, "
                                 f"keeping the weights: {'; '.join(f'`.{a} = None`' for a in filled)}"
                                 f", before from_torch, or build the layer with cached=False)")


def check_common(m: Any, ctx: Converter) -> None:
    """PyG's default flow, no explain mode, no chunked ``decomposed_layers``."""
    check_flow(m, ctx)
    if getattr(m, "decomposed_layers", 1) != 1:
        raise ctx.unsupported(m, f"decomposed_layers={m.decomposed_layers}; the port computes "
                                 f"all feature chunks at once (set it to 1)")


def torch_function(fn: Any, ctx: Converter, m: Any, what: str) -> Callable:
    """The JAX implementation of a plain torch function (``torch.tanh``, ``F.relu`` ...), or a
    function of your own made of torch calls (a lambda), replayed through the fx table."""
    import functools
    import importlib
    import inspect

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
    if found is None and (inspect.isfunction(fn) or isinstance(fn, functools.partial)):
        # your own function of torch code (act=lambda x: x): replayed through the table
        from ....nn._fx import TorchCallable

        return TorchCallable(fn, ctx.device)
    if found is None:
        raise ctx.unsupported(m, f"{what}={fn!r} is a function without a JAX port in the fx "
                                 f"mapping table (pass a torch.nn activation module)")
    return found

