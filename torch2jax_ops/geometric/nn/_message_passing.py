"""PyG's ``MessagePassing`` protocol in JAX: the equinox base class, and the port of your own layers.

``propagate(edge_index, size=None, **kwargs)`` runs PyG's three steps:

1. **collect** the arguments that ``message``/``aggregate``/``update`` ask for
   by name: ``x_j`` / ``x_i`` lift ``kwargs["x"]`` to the edges (``_j`` the
   sources, ``_i`` the targets for ``flow="source_to_target"``; a pair
   ``(x_src, x_dst)`` gives each side its own rows), plus the special names
   ``edge_index``, ``edge_index_i``/``_j``, ``index``, ``size``, ``size_i``/``_j``,
   ``dim_size``, ``ptr``;
2. ``message(...)`` per edge, ``aggregate(messages, index, ptr, dim_size)``
   per target node (``aggr``: a reduction name or an aggregation module);
3. ``update(aggregated, ...)``.

Node features are lifted along ``node_dim`` (PyG's default ``-2``). Shapes are
static: ``size`` comes from the arrays' shapes, and an edge whose id is the
dropped slot (``num_nodes``, see :mod:`torch2jax_ops.geometric`) sends nothing.

The graph may also be, as in PyG:

* an :class:`~torch2jax_ops.geometric.EdgeIndex`: ``size`` is its
  ``sparse_size`` (PyG ignores the ``size`` argument then); sorted by the
  aggregating side (``"col"`` for ``source_to_target``), ``ptr`` is the CSR
  pointer of the targets (PyG's ``get_csc()``) and the default ``aggregate``
  reduces with sorted segment ops;
* a sparse ``adj_t [N_dst, N_src]`` (``BCOO`` / ``BCSR``; only
  ``flow="source_to_target"``): ``size = (N_src, N_dst)`` from its shape. A layer
  that implements ``message_and_aggregate(adj_t, ...)`` and aggregates by a
  sum / mean / min / max (or ``aggr=None``) gets that call instead of
  ``message`` + ``aggregate`` (PyG's fused path); otherwise messages run over
  the stored entries (``edge_index_j`` the columns, ``edge_index_i`` the rows,
  storage order), ``edge_index`` is None, ``adj_t`` the matrix, and the values
  stand in for ``edge_weight`` / ``edge_type`` where those are None.

Two ways in:

* :class:`MessagePassing`, an equinox base class: write ``message`` (and
  optionally ``aggregate``/``update``) with JAX ops, set ``aggr``,
  ``flow``, ``node_dim`` as class attributes (or declare them as fields);
* a PyG layer of your own (a ``torch_geometric.nn.MessagePassing`` subclass)
  through ``from_torch``: its ``forward``, ``message``, ``aggregate`` and
  ``update`` run on JAX values through the fx mapping table, with
  ``propagate`` done here.
"""
from __future__ import annotations

import contextlib
import inspect
from typing import Any, Callable, Iterator, Optional, Union, cast

import equinox as eqx
import jax
import jax.numpy as jnp

from ..._checking import REDUCTIONS, is_array
from ..._sharding import OutSharding, sharding_aware
from ...nn import Converter, UnsupportedModuleError, register_converter, register_function
from ...nn._fx import TracedModule, _children, _Program
from ...torch_scatter._gather import take_groups
from .._core._adjacency import adjacency
from .._core._edge_index import EdgeIndex
from .._core._edges import aggregate as _aggregate_rows
from .._core._edges import edge_array, is_sparse_matrix

__all__ = ["MessagePassing", "SPECIAL_ARGS", "lift", "aggregate_along", "collect",
           "sorted_pointer", "FUSE_AGGRS"]

#: The argument names propagate fills in itself (PyG's ``special_args``).
SPECIAL_ARGS = frozenset({"edge_index", "adj_t", "edge_index_i", "edge_index_j", "size",
                          "size_i", "size_j", "ptr", "index", "dim_size"})
#: PyG's ``FUSE_AGGRS``: the reductions for which a sparse ``adj_t`` takes the fused path
FUSE_AGGRS = frozenset({"add", "sum", "mean", "min", "max"})
_EMPTY = inspect.Parameter.empty
_SPARSE_FLOW = ("Flow direction \"target_to_source\" is invalid for message propagation via a "
                "sparse adj_t (as in PyG). To reverse the flow, pass the transposed matrix "
                "(its .T)")


# ------------------------------------------------------------------ the protocol

def lift(src: jax.Array, edge_index: jax.Array, dim: int, node_dim: int = -2) -> jax.Array:
    """``src.index_select(node_dim, edge_index[dim])``; dropped ids gather zeros."""
    axis = node_dim % src.ndim
    ids = edge_index[dim]
    if axis == 0:
        return take_groups(src, ids, 0)
    return jnp.moveaxis(take_groups(jnp.moveaxis(src, axis, 0), ids, 0), 0, axis)


def aggregate_along(inputs: jax.Array, index: jax.Array, dim_size: int, reduce: str,
                    node_dim: int = -2, indices_sorted: bool = False) -> jax.Array:
    """PyG's ``scatter(inputs, index, dim=node_dim, dim_size=dim_size, reduce=reduce)``.

    ``indices_sorted=True`` promises a non-decreasing ``index`` (sorted segment ops).
    """
    axis = node_dim % inputs.ndim
    moved = jnp.moveaxis(inputs, axis, 0)
    return jnp.moveaxis(_aggregate_rows(moved, index, dim_size, reduce, op="propagate",
                                        indices_sorted=indices_sorted), 0, axis)


def sorted_pointer(index: jax.Array, dim_size: int) -> jax.Array:
    """``[dim_size + 1]`` CSR offsets of a non-decreasing ``index`` (PyG's ``ptr``).

    Group ``g`` holds the elements ``ptr[g] <= e < ptr[g + 1]``; dropped ids
    (``>= dim_size``, at the end of a sorted index) fall past ``ptr[-1]``.
    """
    bounds = jnp.arange(dim_size + 1, dtype=index.dtype)
    return jnp.searchsorted(index, bounds, side="left").astype(jnp.int32)


def adjacency_edges(adj_t: Any) -> jax.Array:
    """A sparse ``adj_t``'s entries as ``[2, S]`` (row 0: columns = sources, row 1: rows)."""
    return adjacency(adj_t, name="edge_index", op="propagate").edge_index


def adjacency_values(adj_t: Any) -> jax.Array:
    """A sparse ``adj_t``'s stored values ``[S]`` (storage order)."""
    return adjacency(adj_t, name="edge_index", op="propagate").values


def edge_index_array(edge_index: Any) -> jax.Array:
    """An :class:`EdgeIndex`'s plain ``[2, E]`` array (a plain array as it is)."""
    return edge_array(edge_index, op="propagate")


def _sorted_side(edge_index: Any, flow: str) -> bool:
    """PyG's rule for ``ptr``: the aggregating side of an ``EdgeIndex`` is sorted."""
    if not isinstance(edge_index, EdgeIndex):
        return False
    return edge_index.sort_order == ("col" if flow == "source_to_target" else "row")


def _set_size(size: list, side: int, data: Any, node_dim: int, op: str) -> None:
    n = data.shape[node_dim % data.ndim]
    if size[side] is None:
        size[side] = n
    elif size[side] != n:
        raise ValueError(f"{op}: a node tensor has {n} rows along node_dim={node_dim}, but the "
                         f"size says {size[side]}")


def collect(names: Any, edge_index: Any, size: Optional[tuple], kwargs: dict, *, flow: str,
            node_dim: int, op: str, is_tensor: Callable[[Any], bool] = is_array,
            shape_of: Callable[[Any], Any] = lambda a: a,
            lift_fn: Callable[..., Any] = lift, adj_t: Any = None, values: Any = None,
            ptr_fn: Optional[Callable[[Any, int], Any]] = None) -> dict:
    """PyG's ``_collect``: the values of ``names`` (and the special arguments).

    ``is_tensor``/``shape_of``/``lift_fn`` let the traced path run the same
    rules on proxies. A sparse ``adj_t``: ``edge_index`` is its ``[2, S]``
    entries (sources first) and ``values`` its values (module docstring for
    what changes). ``ptr_fn(index, dim_size)``: the aggregating side is
    sorted, and ``ptr`` is its CSR pointer.
    """
    if flow not in ("source_to_target", "target_to_source"):
        raise ValueError(f"{op}: `flow` must be 'source_to_target' or 'target_to_source', "
                         f"got {flow!r}")
    i, j = (1, 0) if flow == "source_to_target" else (0, 1)
    sizes = [None, None] if size is None else list(size)
    out: dict = {}
    for name in names:
        if name[-2:] not in ("_i", "_j"):
            out[name] = kwargs.get(name, _EMPTY)
            continue
        side = j if name.endswith("_j") else i
        data = kwargs.get(name[:-2], _EMPTY)
        if isinstance(data, (tuple, list)):
            if len(data) != 2:
                raise ValueError(f"{op}: `{name[:-2]}` must be a (source, target) pair, got "
                                 f"{len(data)} entries")
            if is_tensor(data[1 - side]):
                _set_size(sizes, 1 - side, shape_of(data[1 - side]), node_dim, op)
            data = data[side]
        if is_tensor(data):
            _set_size(sizes, side, shape_of(data), node_dim, op)
            data = lift_fn(data, edge_index, side, node_dim)
        out[name] = data
    out.update(adj_t=None, edge_index=edge_index, edge_index_i=edge_index[i],
               edge_index_j=edge_index[j], ptr=None)
    if adj_t is not None:  # PyG's branch for a torch sparse adj_t
        out.update(adj_t=adj_t, edge_index=None)
        if out.get("edge_weight", None) is None:
            out["edge_weight"] = values
        if out.get("edge_attr", None) is None:
            out["edge_attr"] = None  # the values are scalars (adjacency refuses dense dims)
        if out.get("edge_type", None) is None:
            out["edge_type"] = values
    out["index"] = out["edge_index_i"]
    out["size"] = sizes
    out["size_i"] = sizes[i] if sizes[i] is not None else sizes[j]
    out["size_j"] = sizes[j] if sizes[j] is not None else sizes[i]
    out["dim_size"] = out["size_i"]
    if ptr_fn is not None and out["dim_size"] is not None:
        out["ptr"] = ptr_fn(out["index"], out["dim_size"])
    return out


def _parameters(fn: Callable, skip_first: bool) -> list:
    params = list(inspect.signature(fn).parameters.values())
    return params[1:] if skip_first else params


def user_args(cls_or_obj: Any, fused: bool = False) -> list:
    """The names ``message``/``aggregate``/``update`` ask for, minus the special ones
    (``fused``: those of ``message_and_aggregate`` and ``update``, PyG's ``_fused_user_args``)."""
    names: list = []
    methods = ((("message_and_aggregate", True), ("update", True)) if fused else
               (("message", False), ("aggregate", True), ("update", True)))
    for method, skip in methods:
        for p in _parameters(getattr(cls_or_obj, method), skip):
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name in SPECIAL_ARGS:
                continue
            if p.name not in names:
                names.append(p.name)
    return names


def call_with(fn: Callable, collected: dict, *first: Any, op: str) -> Any:
    """Call ``fn(*first, **the collected values it names)``, defaults for the missing ones."""
    kwargs = {}
    for p in _parameters(fn, bool(first)):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        value = collected.get(p.name, _EMPTY)
        if value is _EMPTY:
            if p.default is _EMPTY:
                raise TypeError(f"{op}: {getattr(fn, '__name__', 'fn')}() needs `{p.name}`; pass "
                                f"it to propagate (propagate(edge_index, {p.name.rstrip('_ij')}"
                                f"=...))")
            continue
        kwargs[p.name] = value
    return fn(*first, **kwargs)


# --------------------------------------------------------------- the equinox base

class MessagePassing(eqx.Module):
    """PyG's ``torch_geometric.nn.MessagePassing`` as an equinox base class.

    Subclass it, write ``__call__`` (PyG's ``forward``) calling
    :meth:`propagate`, and override :meth:`message` (and :meth:`aggregate`,
    :meth:`update` if needed) with JAX ops. ``aggr``, ``flow`` and ``node_dim``
    are class attributes here (``aggr = "max"``); declare one as a field
    (``aggr: str = eqx.field(static=True)``) for a per-instance value, or as an
    aggregation module field (a callable
    ``aggr(inputs, index, ptr=None, dim_size=None, dim=-2)``).

    Shapes: ``x [N, F]`` (or ``(x_src [N_src, F], x_dst [N_dst, F])``),
    ``edge_index [2, E]`` -> messages ``[E, F']`` -> output ``[N_dst, F']``.
    Under ``jax.jit`` every size comes from the arrays' static shapes.

    >>> class EdgeConv(MessagePassing):
    ...     mlp: eqx.nn.MLP
    ...     aggr = "max"
    ...     def __call__(self, x, edge_index):
    ...         return self.propagate(edge_index, x=x)
    ...     def message(self, x_i, x_j):
    ...         return jax.vmap(self.mlp)(jnp.concatenate([x_i, x_j - x_i], -1))
    """
    # a class attribute here, not a field (so no annotation: equinox would make it one);
    # subclasses redeclare it as a field of their own type: a reduction name, an aggregation
    # module, or None next to an aggr_module
    aggr = cast(Union[str, Callable[..., jax.Array], None], "sum")
    flow = "source_to_target"
    node_dim = -2

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def propagate(self, edge_index: Any, size: Optional[tuple] = None,
                  *, out_sharding: OutSharding = None, **kwargs: Any) -> Any:
        """PyG's ``propagate``: collect, ``message``, ``aggregate``, ``update``.

        ``edge_index``: ``[2, E]``, an ``EdgeIndex``, or a sparse ``adj_t``
        ``[N_dst, N_src]`` (module docstring).
        """
        op = f"{type(self).__name__}.propagate"
        extra: dict = {}
        if is_sparse_matrix(edge_index):
            if self.flow != "source_to_target":
                raise ValueError(f"{op}: {_SPARSE_FLOW}")
            adj = adjacency(edge_index, op=op)
            size = (adj.num_src, adj.num_dst)  # PyG: the matrix's shape, `size` ignored
            if self._fuses():
                collected = collect(user_args(self, fused=True), adj.edge_index, size, kwargs,
                                    flow=self.flow, node_dim=self.node_dim, op=op,
                                    adj_t=edge_index, values=adj.values)
                out = call_with(self.message_and_aggregate, collected, edge_index, op=op)
                return call_with(self.update, collected, out, op=op)
            extra = {"adj_t": edge_index, "values": adj.values}
            edges = adj.edge_index
        else:
            if isinstance(edge_index, EdgeIndex):
                size = edge_index.sparse_size  # PyG: [num_rows, num_cols], `size` ignored
                if _sorted_side(edge_index, self.flow):
                    extra = {"ptr_fn": sorted_pointer}
            edges = edge_array(edge_index, op=op)
        collected = collect(user_args(self), edges, size, kwargs, flow=self.flow,
                            node_dim=self.node_dim, op=op, **extra)
        if collected["dim_size"] is None:
            raise ValueError(f"{op}: no node tensor was passed (x=..., or a pair) and `size` is "
                             f"None, so the number of nodes is unknown; pass size=(N, N)")
        messages = call_with(self.message, collected, op=op)
        out = call_with(self.aggregate, collected, messages, op=op)
        return call_with(self.update, collected, out, op=op)

    def _fuses(self) -> bool:
        """PyG's ``fuse``: ``message_and_aggregate`` is implemented, and ``aggr`` is None
        or one of the reductions it serves."""
        if type(self).message_and_aggregate is MessagePassing.message_and_aggregate:
            return False
        return self.aggr is None or (isinstance(self.aggr, str) and self.aggr in FUSE_AGGRS)

    def message(self, x_j: jax.Array) -> jax.Array:
        """Per-edge messages ``[E, *F]``; by default the source features."""
        return x_j

    def message_and_aggregate(self, adj_t: Any) -> jax.Array:
        """Messages and aggregation in one step on a sparse ``adj_t`` (PyG's fused path):
        override it (e.g. ``spmm(adj_t, x, reduce=self.aggr)``) to have it used."""
        raise NotImplementedError(f"{type(self).__name__}: message_and_aggregate is not "
                                  f"implemented")

    def aggregate(self, inputs: jax.Array, index: jax.Array, ptr: Any = None,
                  dim_size: Optional[int] = None) -> jax.Array:
        """Reduce the messages at their targets along ``node_dim`` by ``aggr``.

        ``ptr`` (given for an ``EdgeIndex`` sorted by its targets) means ``index``
        is sorted: the reduction uses sorted segment ops.
        """
        if callable(self.aggr):
            return self.aggr(inputs, index, ptr=ptr, dim_size=dim_size, dim=self.node_dim)
        # propagate always passes dim_size; layers whose aggr may be None override aggregate
        assert self.aggr is not None and dim_size is not None
        return aggregate_along(inputs, index, dim_size, self.aggr, self.node_dim,
                               indices_sorted=ptr is not None)

    def update(self, inputs: jax.Array) -> jax.Array:
        """The new node features from the aggregated messages; by default unchanged."""
        return inputs


# ------------------------------------------------------- your own PyG layers, ported

register_function("torch2jax_ops.geometric.nn._message_passing.lift")(lift)
register_function("torch2jax_ops.geometric.nn._message_passing.aggregate_along")(
    aggregate_along)
for _helper in (sorted_pointer, adjacency_edges, adjacency_values, edge_index_array):
    register_function(f"torch2jax_ops.geometric.nn._message_passing.{_helper.__name__}")(
        _helper)
del _helper

_PYG_MP = "torch_geometric.nn.conv.message_passing.MessagePassing"


def _pyg_default(module: Any, name: str) -> bool:
    """True when ``module``'s ``name`` method is PyG's own (not overridden by the user)."""
    from torch_geometric.nn import MessagePassing as PyGMessagePassing
    return getattr(type(module), name) is getattr(PyGMessagePassing, name)


#: PyG's basic aggregation classes -> the reduction names that mean them
_BASIC_AGGRS = {"SumAggregation": ("add", "sum"), "MeanAggregation": ("mean",),
                "MaxAggregation": ("max",), "MinAggregation": ("min",),
                "MulAggregation": ("mul",)}


class EdgeListAggr(str):
    """The reduction a layer's ``aggr_module`` computes, where ``.aggr`` was changed after
    construction (``conv.aggr = 'mean'``, a ``set_aggr`` helper). PyG's ``propagate`` over an
    edge list calls the ``aggr_module`` it built (so the change does nothing there), while
    its fused sparse path (``spmm(adj_t, x, reduce=self.aggr)``) reads ``.aggr``; the port
    follows the edge-list rule and refuses a sparse ``adj_t`` (:func:`spmm_adjacency`)."""
    assigned: str = ""


def effective_aggr(m: Any) -> Any:
    """What PyG's ``propagate`` aggregates with over an edge list: the class of the
    ``aggr_module`` built in ``__init__``, not the ``.aggr`` attribute (which a model may
    reassign afterwards without effect there).

    Returns ``m.aggr`` when the two agree (or there is no module), an
    :class:`EdgeListAggr` naming the module's reduction when a basic module and
    ``.aggr`` disagree, and None when the module is not a basic reduction but
    ``.aggr`` names one (the module decides: convert it).
    """
    aggr = m.aggr
    module = getattr(m, "aggr_module", None)
    if module is None or not type(module).__module__.startswith("torch_geometric.nn.aggr"):
        return aggr
    names = _BASIC_AGGRS.get(type(module).__name__)
    if names is None:
        return None if isinstance(aggr, str) and aggr in REDUCTIONS else aggr
    if isinstance(aggr, str) and aggr in names:
        return aggr
    out = EdgeListAggr("add" if "add" in names else names[0])
    out.assigned = str(aggr)
    return out


#: PyG layers whose traced forward would silently differ on a sparse adj_t (refused)
_SPARSE_REFUSED = frozenset({"EGConv"})


def _traced_propagate(tracer: Any, module: Any, op: str) -> Callable:
    """``module.propagate`` while its forward is traced: the protocol on proxies."""
    import torch.fx as fx

    def value(p: Any) -> Any:
        return tracer.values[p.node] if isinstance(p, fx.Proxy) else p

    def proxy_call(fn: Callable, *args: Any) -> Any:
        return tracer.create_proxy("call_function", fn, args, {})

    def propagate(edge_index: Any, size: Optional[tuple] = None, **kwargs: Any) -> Any:
        ei = value(edge_index)
        common: dict = dict(
            flow=module.flow, node_dim=module.node_dim, op=op,
            is_tensor=lambda a: is_array(value(a)), shape_of=value,
            lift_fn=lambda data, e, side, node_dim: proxy_call(lift, data, e, side, node_dim))
        extra: dict = {}
        edges = edge_index
        if is_sparse_matrix(ei):
            if module.flow != "source_to_target":
                raise ValueError(f"{op}: {_SPARSE_FLOW}")
            if type(module).__name__ in _SPARSE_REFUSED:
                # its forward normalises a sparse adj_t in a branch the trace does not take
                # (isinstance(adj_t, Tensor)): the numbers would differ without an error
                raise UnsupportedModuleError(
                    f"{op}: {type(module).__name__} with a sparse adj_t is not ported (its "
                    f"forward's normalisation of a sparse matrix does not trace); pass the "
                    f"edge_index [2, E] (torch2jax_ops.geometric.utils.to_edge_index(adj_t) "
                    f"flipped: edge_index[::-1])")
            size = (int(ei.shape[1]), int(ei.shape[0]))  # PyG: the matrix's shape
            edges = proxy_call(adjacency_edges, edge_index)
            extra = {"adj_t": edge_index, "values": proxy_call(adjacency_values, edge_index)}
            if getattr(module, "fuse", False):  # PyG's fused message_and_aggregate
                names = user_args(module, fused=True)
                collected = collect(names, edges, size, kwargs, **common, **extra)
                out = call_with(module.message_and_aggregate, collected, edge_index, op=op)
                return call_with(module.update, collected, out, op=op)
        elif isinstance(ei, EdgeIndex):
            size = ei.sparse_size  # PyG: [num_rows, num_cols], `size` ignored
            edges = proxy_call(edge_index_array, edge_index)
            if _sorted_side(ei, module.flow):
                extra = {"ptr_fn": lambda index, n: proxy_call(sorted_pointer, index, n)}
        elif not is_array(ei):
            raise UnsupportedModuleError(
                f"{op}: propagate got a {type(ei).__name__} as edge_index; the port takes an "
                f"edge_index [2, E] array, an EdgeIndex or a sparse adj_t (BCOO / BCSR)")
        collected = collect(user_args(module), edges, size, kwargs, **common, **extra)
        if collected["dim_size"] is None:
            raise UnsupportedModuleError(f"{op}: propagate could not infer the number of nodes "
                                         f"(no node tensor and size=None)")
        messages = call_with(module.message, collected, op=op)
        # PyG's message forward hooks (to_hetero_with_bases scales each message by its edge
        # type's weight): hook(module, (inputs,), messages) on proxies, like the forward
        for hook in list(getattr(module, "_message_forward_hooks", {}).values()):
            result = hook(module, (collected,), messages)
            messages = messages if result is None else result
        aggr = effective_aggr(module)  # the module PyG built, whatever `.aggr` says now
        if _pyg_default(module, "aggregate") and isinstance(aggr, str) and aggr in REDUCTIONS:
            out = proxy_call(aggregate_along, messages, collected["index"],
                             collected["dim_size"], str(aggr), module.node_dim,
                             collected["ptr"] is not None)
        else:
            out = call_with(module.aggregate, collected, messages, op=op)
        return call_with(module.update, collected, out, op=op)

    return propagate


class TracedMessagePassing(TracedModule):
    """The port of your own ``torch_geometric.nn.MessagePassing`` layer.

    Its ``forward``, ``message``, ``aggregate`` and ``update`` run on JAX
    values through the fx mapping table; ``propagate`` is the protocol above.
    Parameters and submodules (an MLP inside ``message``) keep their torch names.
    """
    __slots__ = ()

    def _patches(self) -> Callable:
        module, op = self._program.torch_module, f"{self._program.name}"

        @contextlib.contextmanager
        def patched(tracer: Any) -> Iterator[None]:
            module.__dict__["propagate"] = _traced_propagate(tracer, module, op)
            try:
                yield
            finally:
                module.__dict__.pop("propagate", None)
        return patched


@register_converter(_PYG_MP, subclasses=True)
def _convert_message_passing(module: Any, ctx: Converter) -> TracedMessagePassing:
    if getattr(module, "explain", False):
        raise ctx.unsupported(module, "explain mode is on")
    if getattr(module, "decomposed_layers", 1) != 1:
        raise ctx.unsupported(module, f"decomposed_layers={module.decomposed_layers}; the port "
                                      f"computes all feature chunks at once (set it to 1)")
    hooks = [h for h in ("_propagate_forward_pre_hooks", "_propagate_forward_hooks",
                         "_message_forward_pre_hooks", "_aggregate_forward_pre_hooks",
                         "_aggregate_forward_hooks", "_message_and_aggregate_forward_pre_hooks",
                         "_message_and_aggregate_forward_hooks",
                         "_edge_update_forward_pre_hooks", "_edge_update_forward_hooks")
             if getattr(module, h, None)]
    if hooks:  # (message forward hooks run: propagate above)
        raise ctx.unsupported(module, f"it has propagate hooks ({', '.join(hooks)}); only "
                                      f"message forward hooks are run by the port")
    return TracedMessagePassing(_children(module, ctx), _Program(module, ctx.path, ctx.device))
