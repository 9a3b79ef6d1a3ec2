"""Sharded arrays: one implementation for no mesh, JAX's Auto sharding and Explicit sharding.

JAX places arrays on a ``jax.sharding.Mesh`` in one of two modes (the mesh's
``AxisType``):

* **Auto** (``AxisType.Auto``): shardings are hints; the compiler (GSPMD)
  propagates them and inserts the collectives. Every op of this package runs
  unchanged.
* **Explicit** (``AxisType.Explicit``, the default of ``jax.make_mesh``): every
  array's type carries its sharding, and an op whose output sharding is
  ambiguous (a scatter of edge-sharded messages into node rows, a gather of
  node rows by edge-sharded ids, ``concatenate`` of differently placed
  arrays, ``sort``) raises ``ShardingTypeError`` unless told where the output
  goes.

:func:`sharding_aware` wraps a public op (or a layer's ``__call__``) ONCE, at
the API boundary, so the one implementation serves every mode: under an
Explicit mesh it runs the body with those mesh axes switched to Auto (what
``jax.sharding.auto_axes`` does) and gives the result the sharding of
``out_sharding=`` (default: see :func:`default_out_spec`); without a mesh or
on an Auto mesh it calls the function as it is. The wrapper also adds the
keyword-only ``out_sharding=`` argument.

A layer's ``__call__`` given the ``edge_index`` of a
:class:`torch2jax_ops.distributed.ShardedGraph` is run by that graph's layout
instead (a ``shard_map`` over the mesh that communicates O(N*F) per layer):
the graph's arrays are *tagged* here (:func:`tag_array`), and the layout object
provides the ``call`` method. This module imports nothing of the package above
the base layer.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import math
import weakref
from typing import Any, Callable, Optional, TypeVar

import jax
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

__all__ = ["sharding_aware", "sharding_mode", "explicit_mesh", "default_out_spec",
           "plain_call", "tag_array", "array_tag"]

F = TypeVar("F", bound=Callable[..., Any])

_OUT_SHARDING_DOC = """

    ``out_sharding`` (keyword-only, added by :func:`torch2jax_ops._sharding.sharding_aware`):
    where the result goes when the arrays live on a ``jax.sharding.Mesh``: a
    ``PartitionSpec`` (needs ``jax.set_mesh``), a ``NamedSharding``, or a pytree
    of them matching the output. Default: the output keeps the input's sharding
    along every axis it shares with it, and is replicated along the reduced
    axis (a scatter of edge-sharded ``src`` gives replicated node rows).
"""


# ------------------------------------------------------------------ what kind of placement

def _is_jax(x: Any) -> bool:
    return isinstance(x, (jax.Array, jax.core.Tracer))


def _mesh_of(x: Any):
    """The (abstract) mesh in ``x``'s type; None for an unsharded array or a non-array."""
    if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer):
        if not isinstance(x.sharding, NamedSharding):
            return None  # single-device arrays: nothing to look up
    try:
        mesh = jax.typeof(x).sharding.mesh
    except (AttributeError, TypeError):
        return None
    return None if mesh.empty else mesh


def explicit_mesh(arrays: Any) -> Optional[jax.sharding.AbstractMesh]:
    """The mesh with Explicit axes that ``arrays`` (a pytree) or the context are on, else None.

    The context mesh (``jax.set_mesh``) decides when it is set; otherwise the
    type of each array does (arrays ``device_put`` on an Explicit mesh without
    ``set_mesh``). Inside ``shard_map`` the axes are Manual: None.
    """
    context = jax.sharding.get_abstract_mesh()
    if not context.empty:
        return context if context.explicit_axes else None
    for x in jax.tree_util.tree_leaves(arrays):
        mesh = _mesh_of(x) if _is_jax(x) else None
        if mesh is not None and mesh.explicit_axes:
            return mesh
    return None


def sharding_mode(arrays: Any = ()) -> str:
    """``"none"``, ``"auto"``, ``"explicit"`` or ``"manual"``: how ``arrays`` (or the context) sit.

    ``"manual"`` is the inside of ``jax.shard_map``; ``"none"`` means no mesh
    at all (one device, or arrays placed without a ``NamedSharding``).
    """
    context = jax.sharding.get_abstract_mesh()
    meshes = [context] if not context.empty else [
        m for m in (_mesh_of(x) for x in jax.tree_util.tree_leaves(arrays) if _is_jax(x))
        if m is not None]
    if not meshes:
        return "none"
    for kind, attr in (("explicit", "explicit_axes"), ("manual", "manual_axes")):
        if any(getattr(m, attr) for m in meshes):
            return kind
    return "auto"


# ------------------------------------------------------------------ where outputs go

def _spec_of(x: Any) -> tuple:
    """``x``'s PartitionSpec as a tuple of one entry per axis (None: not sharded)."""
    try:
        spec = tuple(jax.typeof(x).sharding.spec)
    except (AttributeError, TypeError):
        spec = ()
    return (spec + (None,) * x.ndim)[:x.ndim]


def _names(entry: Any) -> tuple:
    if entry is None:
        return ()
    return tuple(entry) if isinstance(entry, tuple) else (entry,)


def default_out_spec(shape: tuple, inputs: list, mesh: Any) -> P:
    """The sharding of an output of ``shape`` given the ``(shape, spec)`` of the inputs.

    Each output axis keeps the mesh axes of an input axis of the same size:
    first the same axis of an input with as many dimensions (a scatter keeps
    ``src``'s feature sharding, a softmax over edges its edge sharding), else
    any sharded input axis of that size (a gather by edge-sharded ids gives
    edge-sharded rows). Axes that match nothing -- the reduced axis of a
    scatter, whose size is the number of groups -- are replicated. A mesh
    axis is used once per output, and only where it divides the size.
    """
    used: set = set()
    entries: list = []
    sharded = [(s, sp) for s, sp in inputs if any(e is not None for e in sp)]
    for axis, size in enumerate(shape):
        choice = None
        for in_shape, spec in sharded:
            if len(in_shape) == len(shape) and spec[axis] is not None and in_shape[axis] == size:
                choice = spec[axis]
                break
        if choice is None:
            for in_shape, spec in sharded:
                hits = [e for n, e in zip(in_shape, spec) if e is not None and n == size]
                if hits:
                    choice = hits[0]
                    break
        names = _names(choice)
        if names and (used & set(names) or
                      size % math.prod(mesh.shape[n] for n in names) != 0):
            choice, names = None, ()
        used |= set(names)
        entries.append(choice)
    return P(*entries)


def _is_spec_leaf(s: Any) -> bool:
    return s is None or isinstance(s, (P, jax.sharding.Sharding))


def _broadcast_shardings(out_sharding: Any, out: Any) -> list:
    """``out_sharding`` (one spec/sharding, or a pytree prefix of ``out``) per output leaf."""
    if _is_spec_leaf(out_sharding):
        return [out_sharding] * len(jax.tree_util.tree_leaves(out))
    try:
        return jax.tree_util.tree_leaves(jax.tree_util.tree_map(
            lambda s, sub: [s] * len(jax.tree_util.tree_leaves(sub)), out_sharding, out,
            is_leaf=_is_spec_leaf), is_leaf=_is_spec_leaf)
    except (ValueError, TypeError) as exc:
        raise ValueError(
            f"out_sharding: expected a PartitionSpec, a NamedSharding, or a pytree of them "
            f"matching the output's structure {jax.tree_util.tree_structure(out)}; "
            f"got {out_sharding!r} ({exc})") from None


def _concrete_mesh(arrays: list):
    mesh = jax.sharding.get_mesh() if hasattr(jax.sharding, "get_mesh") else None
    if mesh is not None and not getattr(mesh, "empty", True):
        return mesh
    for x in arrays:
        if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) \
                and isinstance(x.sharding, NamedSharding):
            return x.sharding.mesh
    return None


def _constrain(out: Any, out_sharding: Any, arrays: list) -> Any:
    """Auto mode / no mesh: ``out_sharding`` as a sharding constraint on the result."""
    leaves, tree = jax.tree_util.tree_flatten(out)
    wanted = _broadcast_shardings(out_sharding, out)
    context = jax.sharding.get_abstract_mesh()
    placed = []
    for leaf, s in zip(leaves, wanted):
        if s is None or not _is_jax(leaf):
            placed.append(leaf)
            continue
        if isinstance(s, P) and context.empty:
            mesh = _concrete_mesh(arrays)
            if mesh is None:
                raise ValueError(
                    f"out_sharding={s} is a PartitionSpec, which needs a mesh: call under "
                    f"`with jax.set_mesh(mesh):`, or pass NamedSharding(mesh, spec)")
            s = NamedSharding(mesh, s)
        placed.append(jax.lax.with_sharding_constraint(leaf, s))
    return jax.tree_util.tree_unflatten(tree, placed)


# ------------------------------------------------------------------ the boundary

def _boundary(fn: Callable, args: tuple, kwargs: dict, out_sharding: Any, mesh: Any) -> Any:
    """``fn`` with ``mesh``'s Explicit axes switched to Auto, its result resharded.

    ``jax.sharding.auto_axes`` does the same, but wants ``out_sharding`` before
    the call; here the default is computed from the output's shapes, so no
    second trace (``eval_shape``) is needed, and concrete arguments stay
    concrete (eager checks still see their values).
    """
    leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
    where = [i for i, leaf in enumerate(leaves) if _is_jax(leaf)]
    inputs = [(tuple(leaves[i].shape), _spec_of(leaves[i])) for i in where]
    auto = mesh.update_axis_types({a: AxisType.Auto for a in mesh.explicit_axes})
    outer = (jax.sharding.use_abstract_mesh(mesh) if jax.sharding.get_abstract_mesh().empty
             else contextlib.nullcontext())
    with outer:
        moved = list(leaves)
        for i in where:  # unplaced arrays join the mesh first (replicated), so that their
            if _mesh_of(leaves[i]) is None:  # cotangents come back typed on it, not on Auto
                moved[i] = jax.sharding.reshard(leaves[i], P())
        with jax.sharding.use_abstract_mesh(auto):
            for i in where:
                moved[i] = jax.sharding.reshard(moved[i], P())
            a, k = jax.tree_util.tree_unflatten(tree, moved)
            out = fn(*a, **k)
        out_leaves, out_tree = jax.tree_util.tree_flatten(out)
        if out_sharding is None:
            wanted = [default_out_spec(tuple(o.shape), inputs, mesh) if _is_jax(o) else None
                      for o in out_leaves]
        else:
            wanted = _broadcast_shardings(out_sharding, out)
        placed = [o if (s is None or not _is_jax(o)) else jax.sharding.reshard(o, s)
                  for o, s in zip(out_leaves, wanted)]
    return jax.tree_util.tree_unflatten(out_tree, placed)


def plain_call(fn: Callable, args: tuple, kwargs: dict, out_sharding: Any = None) -> Any:
    """``fn(*args, **kwargs)`` in whatever mode the arrays are in (no sharded-graph path)."""
    arrays = [x for x in jax.tree_util.tree_leaves((args, kwargs)) if _is_jax(x)]
    mesh = explicit_mesh(arrays)
    if mesh is not None:
        return _boundary(fn, args, kwargs, out_sharding, mesh)
    out = fn(*args, **kwargs)
    return out if out_sharding is None else _constrain(out, out_sharding, arrays)


# ------------------------------------------------------------------ tags: a sharded graph's arrays

_TAGS: dict = {}


def tag_array(array: Any, tag: Any) -> Any:
    """Remember ``tag`` for this very array object (a weak reference: no leak); returns ``array``.

    :class:`torch2jax_ops.distributed.ShardedGraph` tags its arrays (and the
    tracers that stand for them under ``jax.jit``) with its layout, so a
    layer's wrapper can recognise a sharded graph's ``edge_index``.
    """
    key = id(array)

    def forget(ref: Any, key: int = key) -> None:
        entry = _TAGS.get(key)
        if entry is not None and entry[0] is ref:
            del _TAGS[key]

    try:
        _TAGS[key] = (weakref.ref(array, forget), tag)
    except TypeError:  # not weak-referenceable (a NumPy array): nothing to remember
        pass
    return array


def array_tag(x: Any) -> Any:
    """The tag :func:`tag_array` gave ``x``, or None."""
    entry = _TAGS.get(id(x))
    if entry is None or entry[0]() is not x:
        return None
    return entry[1]


def _graph_tag(leaves: list, is_layer: bool) -> Any:
    if not (_TAGS and is_layer):
        return None
    for x in leaves:
        tag = array_tag(x)
        if tag is not None and hasattr(tag, "call"):
            return tag
    return None


# ------------------------------------------------------------------ the decorator

_WRAPPERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def sharding_aware(fn: F) -> F:
    """Make a public op or a layer's ``__call__`` work on arrays placed on a ``jax.sharding.Mesh``.

    The one implementation is called in every mode:

    * no mesh, or an Auto mesh: ``fn`` as it is (``out_sharding``, if given,
      becomes a sharding constraint on the result);
    * an Explicit mesh (from ``jax.set_mesh`` or the arguments' types): ``fn``
      runs with those axes switched to Auto, and the result is resharded to
      ``out_sharding`` (default: :func:`default_out_spec`);
    * a layer (a method: first parameter ``self``) given the arrays of a
      :class:`torch2jax_ops.distributed.ShardedGraph`: the graph's layout runs
      it (one ``shard_map``, O(N*F) communicated per layer).

    Adds the keyword-only ``out_sharding=None`` argument; name, docstring
    (with a note appended) and signature (``__signature__``) are kept.
    Wrapping twice returns the first wrapper.
    """
    if getattr(fn, "__sharding_aware__", False):
        return fn
    if fn in _WRAPPERS:  # one wrapper per function: re-exports stay the same object
        return _WRAPPERS[fn]
    signature = inspect.signature(fn)
    params = list(signature.parameters.values())
    if "out_sharding" in signature.parameters:
        raise TypeError(f"sharding_aware: {fn.__qualname__} already has an `out_sharding` "
                        f"parameter")
    is_layer = bool(params) and params[0].name == "self"
    extra = inspect.Parameter("out_sharding", inspect.Parameter.KEYWORD_ONLY, default=None)
    at = next((i for i, p in enumerate(params) if p.kind is p.VAR_KEYWORD), len(params))
    params.insert(at, extra)

    @functools.wraps(fn)
    def wrapper(*args: Any, out_sharding: Any = None, **kwargs: Any) -> Any:
        leaves = [x for x in jax.tree_util.tree_leaves((args, kwargs)) if _is_jax(x)]
        graph = _graph_tag(leaves, is_layer)
        if graph is not None and sharding_mode(leaves) != "manual":
            return graph.call(fn, args, kwargs, out_sharding)
        mesh = explicit_mesh(leaves)
        if mesh is not None:
            return _boundary(fn, args, kwargs, out_sharding, mesh)
        out = fn(*args, **kwargs)
        return out if out_sharding is None else _constrain(out, out_sharding, leaves)

    wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__doc__ = (fn.__doc__ or "") + _OUT_SHARDING_DOC
    wrapper.__sharding_aware__ = True  # type: ignore[attr-defined]
    _WRAPPERS[fn] = wrapper
    return wrapper  # type: ignore[return-value]
