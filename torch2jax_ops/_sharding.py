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

Where the wrapper is, and what it adds
--------------------------------------
:func:`sharding_aware` decorates each public op and each layer's ``__call__``
(or ``MessagePassing.propagate``) ONCE, where it is defined: the module's
attribute *is* the public function (``torch2jax_ops.scatter is
torch2jax_ops.torch_scatter._scatter.scatter``), and no ``__init__`` rebinds
anything at import time. Each decorated function declares the keyword-only
parameter ``out_sharding: OutSharding = None`` in its own signature, so type
checkers (the package ships ``py.typed``) and ``inspect.signature`` see it; the
decorator refuses a function that does not declare it. The wrapper consumes
the argument: the body always receives ``None`` and never reads it.

Why a declared parameter and not a decorator that adds one: PEP 612 cannot
type "the same parameters plus one keyword" (a ``Protocol`` with
``*args: P.args, out_sharding: ..., **kwargs: P.kwargs`` is rejected by mypy:
"Arguments not allowed after ParamSpec.args", and ``Concatenate`` only
prepends positional parameters). So :func:`sharding_aware` is typed as the
identity on the signature (``Callable[Param, R] -> Callable[Param, R]``), and
the signature itself carries ``out_sharding``.

The three paths of one call (decided on every call, in :func:`sharding_aware`'s wrapper)
----------------------------------------------------------------------------------------
1. **A sharded graph (layers only) -> shard_map.** The wrapper of a *method*
   (first parameter ``self``: a layer's ``__call__`` or
   ``MessagePassing.propagate``) looks at the ids of its array arguments.
   :func:`torch2jax_ops.distributed.shard_graph` *tags* the arrays of the
   :class:`~torch2jax_ops.distributed.ShardedGraph` it builds
   (:func:`tag_array`: its ``edge_index`` and per-edge arrays, and under
   ``jax.jit`` the tracers that stand for them) with an ``EdgeTag`` naming
   the graph's ``GraphLayout``. If one argument carries such a tag and the
   call is not already inside a ``shard_map`` (mode ``"manual"``), the call
   goes to ``tag.call`` -> ``GraphLayout.call``
   (``torch2jax_ops/distributed/_layout.py``): one ``shard_map`` over the
   mesh, O(N*F) communicated per aggregation -- or, when the layer's program
   does something that rule cannot make exact (``flow="target_to_source"``,
   a scatter keyed by anything but ``edge_index[1]``, per-edge outputs), a
   warning and path 2/3. A layer given plain arrays (not from
   ``shard_graph``), and every public *function*, never takes this path.
2. **An Explicit mesh -> the boundary.** Arrays on a mesh with Explicit axes
   (from ``jax.set_mesh`` or the arrays' types): the body runs with those
   axes switched to Auto (what ``jax.sharding.auto_axes`` does) and the
   result is resharded to ``out_sharding`` (default: :func:`default_out_spec`).
3. **No mesh, or an Auto mesh -> the body as it is**; ``out_sharding``, if
   given, becomes a sharding constraint on the result.

Calls nested inside a wrapped call see the Auto (or Manual) axes the outer
wrapper set up, so they take path 3: one boundary per public call. This
module imports nothing of the package above the base layer.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import math
import weakref
from typing import Any, Callable, Dict, List, Optional, ParamSpec, Tuple, TypeVar, Union

import jax
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

__all__ = ["OutSharding", "sharding_aware", "sharding_mode", "explicit_mesh",
           "default_out_spec", "plain_call", "tag_array", "array_tag"]

Param = ParamSpec("Param")
R = TypeVar("R")

#: The type of the ``out_sharding=`` keyword of every public op and layer: a
#: ``PartitionSpec`` (needs ``jax.set_mesh``), a ``jax.sharding.Sharding``
#: (``NamedSharding``), a tuple / list / dict of them matching the output's
#: structure (``scatter_max`` returns a tuple), or None (the default placement).
OutSharding = Optional[Union[P, jax.sharding.Sharding, Tuple[Any, ...], List[Any],
                             Dict[Any, Any]]]

_OUT_SHARDING_DOC = """

    ``out_sharding`` (keyword-only, handled by :func:`torch2jax_ops._sharding.sharding_aware`):
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

_LAYER_DOC = """

    Multi-device (added by :func:`torch2jax_ops._sharding.sharding_aware`): given
    the ``edge_index`` (or per-edge arrays) of a
    :class:`torch2jax_ops.distributed.ShardedGraph`, this call runs on the
    graph's layout (one ``shard_map``; see ``torch2jax_ops.distributed``), or
    falls back to JAX's automatic partitioning with a warning where that path
    cannot be exact; any other arguments take the path of a public op.
"""


def _check_declares_out_sharding(fn: Callable) -> None:
    """The rule of this module: ``fn`` declares ``*, out_sharding: OutSharding = None`` itself."""
    param = inspect.signature(fn).parameters.get("out_sharding")
    if param is None or param.kind is not inspect.Parameter.KEYWORD_ONLY \
            or param.default is not None:
        raise TypeError(
            f"sharding_aware: {fn.__module__}.{fn.__qualname__} must declare the keyword-only "
            f"parameter `out_sharding: OutSharding = None` in its own signature (so type "
            f"checkers see it; the decorator handles the value, the body gets None)")


def sharding_aware(fn: Callable[Param, R]) -> Callable[Param, R]:
    """Make a public op or a layer's ``__call__`` work on arrays placed on a ``jax.sharding.Mesh``.

    Apply it where the function is defined; ``fn`` must declare
    ``*, out_sharding: OutSharding = None`` (else ``TypeError``). The one
    implementation is called in every mode (the three paths of the module
    docstring, decided on every call):

    * a layer (a method: first parameter ``self``) given the arrays of a
      :class:`torch2jax_ops.distributed.ShardedGraph` (tagged by
      :func:`tag_array`), outside a ``shard_map``: the graph's layout runs it
      (one ``shard_map``, O(N*F) communicated per layer);
    * an Explicit mesh (from ``jax.set_mesh`` or the arguments' types): ``fn``
      runs with those axes switched to Auto, and the result is resharded to
      ``out_sharding`` (default: :func:`default_out_spec`);
    * no mesh, or an Auto mesh: ``fn`` as it is (``out_sharding``, if given,
      becomes a sharding constraint on the result).

    The wrapper consumes ``out_sharding``: the body is called without it.
    Name, docstring (with a note appended), ``__wrapped__`` and so the
    signature are ``fn``'s. Wrapping a wrapper returns it unchanged.
    """
    if getattr(fn, "__sharding_aware__", False):
        return fn
    _check_declares_out_sharding(fn)
    params = list(inspect.signature(fn).parameters)
    is_layer = bool(params) and params[0] == "self"

    @functools.wraps(fn)
    def wrapper(*args: Any, out_sharding: OutSharding = None, **kwargs: Any) -> Any:
        leaves = [x for x in jax.tree_util.tree_leaves((args, kwargs)) if _is_jax(x)]
        # path 1 (layers only): an argument tagged by shard_graph -> the graph's shard_map
        graph = _graph_tag(leaves, is_layer)
        if graph is not None and sharding_mode(leaves) != "manual":
            return graph.call(fn, args, kwargs, out_sharding)
        # path 2: an Explicit mesh -> the body on Auto axes, the result resharded
        mesh = explicit_mesh(leaves)
        if mesh is not None:
            return _boundary(fn, args, kwargs, out_sharding, mesh)
        # path 3: no mesh / Auto mesh -> the body as it is
        out = fn(*args, **kwargs)
        return out if out_sharding is None else _constrain(out, out_sharding, leaves)

    wrapper.__doc__ = (fn.__doc__ or "") + _OUT_SHARDING_DOC + (_LAYER_DOC if is_layer else "")
    wrapper.__sharding_aware__ = True  # type: ignore[attr-defined]
    return wrapper
