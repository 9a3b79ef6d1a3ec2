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
from ..._sharding import sharding_aware
from ...nn import Converter, UnsupportedModuleError, register_converter, register_function
from ...nn._fx import TracedModule, _children, _Program
from ...torch_scatter._gather import take_groups
from .._edges import aggregate as _aggregate_rows
from .._edges import edge_array

__all__ = ["MessagePassing", "SPECIAL_ARGS", "lift", "aggregate_along", "collect"]

#: The argument names propagate fills in itself (PyG's ``special_args``).
SPECIAL_ARGS = frozenset({"edge_index", "adj_t", "edge_index_i", "edge_index_j", "size",
                          "size_i", "size_j", "ptr", "index", "dim_size"})
_EMPTY = inspect.Parameter.empty


# ------------------------------------------------------------------ the protocol

def lift(src: jax.Array, edge_index: jax.Array, dim: int, node_dim: int = -2) -> jax.Array:
    """``src.index_select(node_dim, edge_index[dim])``; dropped ids gather zeros."""
    axis = node_dim % src.ndim
    ids = edge_index[dim]
    if axis == 0:
        return take_groups(src, ids, 0)
    return jnp.moveaxis(take_groups(jnp.moveaxis(src, axis, 0), ids, 0), 0, axis)


def aggregate_along(inputs: jax.Array, index: jax.Array, dim_size: int, reduce: str,
                    node_dim: int = -2) -> jax.Array:
    """PyG's ``scatter(inputs, index, dim=node_dim, dim_size=dim_size, reduce=reduce)``."""
    axis = node_dim % inputs.ndim
    moved = jnp.moveaxis(inputs, axis, 0)
    return jnp.moveaxis(_aggregate_rows(moved, index, dim_size, reduce, op="propagate"), 0, axis)


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
            lift_fn: Callable[..., Any] = lift) -> dict:
    """PyG's ``_collect``: the values of ``names`` (and the special arguments).

    ``is_tensor``/``shape_of``/``lift_fn`` let the traced path run the same
    rules on proxies.
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
    out["index"] = out["edge_index_i"]
    out["size"] = sizes
    out["size_i"] = sizes[i] if sizes[i] is not None else sizes[j]
    out["size_j"] = sizes[j] if sizes[j] is not None else sizes[i]
    out["dim_size"] = out["size_i"]
    return out


def _parameters(fn: Callable, skip_first: bool) -> list:
    params = list(inspect.signature(fn).parameters.values())
    return params[1:] if skip_first else params


def user_args(cls_or_obj: Any) -> list:
    """The names ``message``/``aggregate``/``update`` ask for, minus the special ones."""
    names: list = []
    for method, skip in (("message", False), ("aggregate", True), ("update", True)):
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

    @sharding_aware
    def propagate(self, edge_index: Any, size: Optional[tuple] = None, **kwargs: Any) -> Any:
        """PyG's ``propagate``: collect, ``message``, ``aggregate``, ``update``."""
        op = f"{type(self).__name__}.propagate"
        edge_index = edge_array(edge_index, op=op)
        collected = collect(user_args(self), edge_index, size, kwargs, flow=self.flow,
                            node_dim=self.node_dim, op=op)
        if collected["dim_size"] is None:
            raise ValueError(f"{op}: no node tensor was passed (x=..., or a pair) and `size` is "
                             f"None, so the number of nodes is unknown; pass size=(N, N)")
        messages = call_with(self.message, collected, op=op)
        out = call_with(self.aggregate, collected, messages, op=op)
        return call_with(self.update, collected, out, op=op)

    def message(self, x_j: jax.Array) -> jax.Array:
        """Per-edge messages ``[E, *F]``; by default the source features."""
        return x_j

    def aggregate(self, inputs: jax.Array, index: jax.Array, ptr: Any = None,
                  dim_size: Optional[int] = None) -> jax.Array:
        """Reduce the messages at their targets along ``node_dim`` by ``aggr``."""
        if callable(self.aggr):
            return self.aggr(inputs, index, ptr=ptr, dim_size=dim_size, dim=self.node_dim)
        # propagate always passes dim_size; layers whose aggr may be None override aggregate
        assert self.aggr is not None and dim_size is not None
        return aggregate_along(inputs, index, dim_size, self.aggr, self.node_dim)

    def update(self, inputs: jax.Array) -> jax.Array:
        """The new node features from the aggregated messages; by default unchanged."""
        return inputs


# ------------------------------------------------------- your own PyG layers, ported

register_function("torch2jax_ops.geometric.nn._message_passing.lift")(lift)
register_function("torch2jax_ops.geometric.nn._message_passing.aggregate_along")(
    aggregate_along)

_PYG_MP = "torch_geometric.nn.conv.message_passing.MessagePassing"


def _pyg_default(module: Any, name: str) -> bool:
    """True when ``module``'s ``name`` method is PyG's own (not overridden by the user)."""
    from torch_geometric.nn import MessagePassing as PyGMessagePassing
    return getattr(type(module), name) is getattr(PyGMessagePassing, name)


def _traced_propagate(tracer: Any, module: Any, op: str) -> Callable:
    """``module.propagate`` while its forward is traced: the protocol on proxies."""
    import torch.fx as fx

    def value(p: Any) -> Any:
        return tracer.values[p.node] if isinstance(p, fx.Proxy) else p

    def proxy_call(fn: Callable, *args: Any) -> Any:
        return tracer.create_proxy("call_function", fn, args, {})

    def propagate(edge_index: Any, size: Optional[tuple] = None, **kwargs: Any) -> Any:
        ei = value(edge_index)
        if not is_array(ei):
            raise UnsupportedModuleError(
                f"{op}: propagate got a {type(ei).__name__} as edge_index; the port takes an "
                f"edge_index [2, E] array (sparse adjacency inputs are not ported yet)")
        names = user_args(module)
        collected = collect(
            names, edge_index, size, kwargs, flow=module.flow, node_dim=module.node_dim,
            op=op, is_tensor=lambda a: is_array(value(a)), shape_of=value,
            lift_fn=lambda data, e, side, node_dim: proxy_call(lift, data, e, side, node_dim))
        if collected["dim_size"] is None:
            raise UnsupportedModuleError(f"{op}: propagate could not infer the number of nodes "
                                         f"(no node tensor and size=None)")
        messages = call_with(module.message, collected, op=op)
        if _pyg_default(module, "aggregate") and isinstance(module.aggr, str) \
                and module.aggr in REDUCTIONS:
            out = proxy_call(aggregate_along, messages, collected["index"],
                             collected["dim_size"], module.aggr, module.node_dim)
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
                         "_message_forward_pre_hooks", "_message_forward_hooks",
                         "_aggregate_forward_pre_hooks", "_aggregate_forward_hooks")
             if getattr(module, h, None)]
    if hooks:
        raise ctx.unsupported(module, f"it has propagate hooks ({', '.join(hooks)})")
    return TracedMessagePassing(_children(module, ctx), _Program(module, ctx.path, ctx.device))
