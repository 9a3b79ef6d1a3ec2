"""The one registry of ports: which JAX code stands for which torch class, function or method.

A leaf module: it imports nothing of the package, so every layer can register
into it without an import cycle. Layers register themselves when their module
is imported (``torch2jax_ops`` imports them all). One entry per (kind, key):

* ``"module"`` -- :func:`register_converter`: a torch ``nn.Module`` class (by its
  dotted path, an exact class: a subclass may override ``forward``) -> a
  converter ``fn(torch_module, ctx) -> JAX module``;
* ``"family"`` -- ``register_converter(..., subclasses=True)``: the converter of
  every subclass without one of its own (PyG's ``MessagePassing``);
* ``"function"`` -- :func:`register_function`: a torch function (``"torch.cat"``,
  ``"torch.nn.functional.relu"``, ``"operator.add"``, ``"torch_scatter.scatter"``,
  ``"torch_geometric.utils.softmax"`` ...) -> its JAX implementation with the
  torch signature, for the ``call_function`` nodes of a traced forward;
* ``"method"`` -- :func:`register_method`: a ``torch.Tensor`` method name
  (``"view"``, ``"sum"`` ...) -> ``fn(self, *args, **kwargs)`` on a JAX array;
* ``"fallback"`` -- :func:`register_fallback`: the converter of every module with
  no entry of its own (the fx path).

Rules that keep the table independent of import order:

* a key has one registrant. Registering a taken key raises :class:`RegistryConflict`
  naming both registrants, unless ``replace=True`` says the replacement is meant (a
  user overriding a port). The package itself never replaces (a test checks it), so
  the table is the same whatever order its modules load in;
* every change (a registration, a replacement, :func:`unregister`) bumps
  :func:`generation`, which the resolved caches of the fx path compare against.

Keys are dotted paths, so the registry never imports torch; they are resolved
to objects when a model is converted (an entry whose library is not
installed is skipped).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator, Optional, TypeVar

__all__ = ["Entry", "RegistryConflict", "KINDS", "register", "register_converter",
           "register_function", "register_method", "register_fallback", "unregister",
           "entries", "generation", "class_path", "converter_for", "family_converter_for",
           "fallback", "converters", "functions", "methods", "mapping_table"]

F = TypeVar("F", bound=Callable[..., Any])

#: the kinds of entry, in the order a table lists them
KINDS = ("module", "family", "function", "method", "fallback")


class RegistryConflict(ValueError):
    """A key registered twice by different registrants without ``replace=True``."""


@dataclasses.dataclass(frozen=True)
class Entry:
    """One port: ``fn`` stands for the torch object ``key`` of this ``kind``."""
    kind: str
    key: str
    fn: Callable[..., Any]

    @property
    def registrant(self) -> str:
        """``module.qualname`` of the port (who registered it)."""
        return _name_of(self.fn)


_ENTRIES: dict[tuple[str, str], Entry] = {}
_GENERATION = [0]


def _name_of(fn: Any) -> str:
    module = getattr(fn, "__module__", None) or "?"
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}.{name}"


def class_path(cls: type) -> str:
    """``"module.path.ClassName"``: the key a class is registered under."""
    return f"{cls.__module__}.{cls.__qualname__}"


def generation() -> int:
    """A number that changes with every change to the registry (for resolved caches)."""
    return _GENERATION[0]


def register(kind: str, *keys: str, replace: bool = False) -> Callable[[F], F]:
    """Decorator: register ``fn`` under ``keys`` of ``kind`` (one of :data:`KINDS`).

    The one registration function; :func:`register_converter`,
    :func:`register_function`, :func:`register_method` and
    :func:`register_fallback` are this with their kind. Registering the same
    function again under the same key is a no-op (a module imported twice).

    Raises:
      RegistryConflict: a key already belongs to another port and ``replace`` is
        False; the message names both.
    """
    if kind not in KINDS:
        raise ValueError(f"register: kind must be one of {KINDS}, got {kind!r}")
    if not keys or not all(isinstance(k, str) and k for k in keys):
        raise TypeError(f"register ({kind}): pass one or more non-empty strings, got {keys!r}")

    def add(fn: F) -> F:
        if not callable(fn):
            raise TypeError(f"register ({kind}): expected a callable, got {type(fn).__name__}")
        for key in keys:
            old = _ENTRIES.get((kind, key))
            if old is not None and old.fn is not fn and not replace:
                raise RegistryConflict(
                    f"the {kind} {key!r} is already ported by {old.registrant}; "
                    f"{_name_of(fn)} registers it again. Pass replace=True to replace the "
                    f"port on purpose, or unregister({kind!r}, {key!r}) first")
        changed = False
        for key in keys:
            old = _ENTRIES.get((kind, key))
            if old is None or old.fn is not fn:
                _ENTRIES[(kind, key)] = Entry(kind, key, fn)
                changed = True
        if changed:
            _GENERATION[0] += 1
        return fn
    return add


def unregister(kind: str, *keys: str) -> None:
    """Remove entries (a missing key is ignored)."""
    for key in keys:
        if _ENTRIES.pop((kind, key), None) is not None:
            _GENERATION[0] += 1


def register_converter(*class_paths: str, subclasses: bool = False,
                       replace: bool = False) -> Callable[[F], F]:
    """Decorator: ``fn(torch_module, ctx) -> JAX module`` converts the classes ``class_paths``.

    An exact class matches first; with ``subclasses=True`` the converter also
    takes every subclass that has no converter of its own (how user-written
    ``MessagePassing`` layers are converted).

    >>> @register_converter("my_project.layers.Gate")
    ... def _gate(module, ctx):
    ...     return Gate(ctx.array(module.weight))
    """
    return register("family" if subclasses else "module", *class_paths, replace=replace)


def register_function(*paths: str, replace: bool = False) -> Callable[[F], F]:
    """Decorator: the JAX implementation of the torch functions ``paths`` (same signature).

    >>> @register_function("my_project.ops.fused_gelu")
    ... def _fused_gelu(x):
    ...     return jax.nn.gelu(x, approximate=True)
    """
    bad = [p for p in paths if not isinstance(p, str) or "." not in p.strip(".")]
    if bad:
        raise ValueError(f"register_function: a torch function is named by its dotted path "
                         f"('torch.cat', 'torch.nn.functional.relu', 'operator.add'), got "
                         f"{bad[:5]!r}")
    return register("function", *paths, replace=replace)


def register_method(*names: str, replace: bool = False) -> Callable[[F], F]:
    """Decorator: ``fn(array, *args, **kwargs)`` implements ``torch.Tensor.<name>``."""
    return register("method", *names, replace=replace)


def register_fallback(fn: F) -> F:
    """Decorator: ``fn(torch_module, ctx)`` converts every module with no converter of its own."""
    return register("fallback", "*")(fn)


def entries(kind: Optional[str] = None) -> Iterator[Entry]:
    """Every entry (of one kind), in registration order."""
    return (e for (k, _), e in list(_ENTRIES.items()) if kind in (None, k))


def _table(kind: str) -> dict[str, Callable[..., Any]]:
    return {e.key: e.fn for e in entries(kind)}


def fallback() -> Callable[..., Any] | None:
    """The converter of modules without one of their own (None until :mod:`._fx` is loaded)."""
    entry = _ENTRIES.get(("fallback", "*"))
    return None if entry is None else entry.fn


def converter_for(cls: type) -> Callable[..., Any] | None:
    """The converter of this exact class, else of its nearest registered base
    (``subclasses=True`` registrations), else None."""
    exact = _ENTRIES.get(("module", class_path(cls)))
    if exact is not None:
        return exact.fn
    return family_converter_for(cls, skip_self=True)


def family_converter_for(cls: type, *, skip_self: bool = False) -> Callable[..., Any] | None:
    """The converter of ``cls``'s nearest registered base (``subclasses=True``
    registrations: a family that converts any member by tracing it), ignoring an
    exact converter of ``cls`` itself; None if there is none."""
    mro = getattr(cls, "__mro__", (cls,))
    for base in mro[1:] if skip_self else mro:
        family = _ENTRIES.get(("family", class_path(base)))
        if family is not None:
            return family.fn
    return None


def converters() -> dict[str, Callable[..., Any]]:
    """Every registered class path (exact classes) and its converter (a copy)."""
    return _table("module")


def functions() -> dict[str, Callable[..., Any]]:
    """Every registered torch function path and its JAX implementation (a copy)."""
    return _table("function")


def methods() -> dict[str, Callable[..., Any]]:
    """Every registered ``torch.Tensor`` method name and its JAX implementation (a copy)."""
    return _table("method")


#: how the mapping table groups function paths: (heading, path prefix)
_FAMILIES = (("`torch.*`", "torch."), ("`torch.nn.functional.*`", "torch.nn.functional."),
             ("`torch.special.*`", "torch.special."), ("`torch.linalg.*`", "torch.linalg."),
             ("`operator.*` (Python operators on tensors)", "operator."),
             ("`torch_scatter.*`", "torch_scatter."),
             ("`torch_geometric.*`", "torch_geometric."))


def mapping_table() -> str:
    """The fx mapping table as Markdown: every torch function and Tensor method with a port.

    Generated from the registry (what ``migration_guide/porting.md`` shows;
    ``torch2jax-ops tables`` keeps the page in step).
    """
    functions_by_family: dict = {}
    for path in functions():
        for heading, prefix in reversed(_FAMILIES):  # most specific prefix first
            if path.startswith(prefix):
                rest = path[len(prefix):]
                if heading == "`torch.*`" and "." in rest:
                    break  # torch's private submodules (torch._C...): aliases of public names
                name = rest.rsplit(".", 1)[-1] if prefix == "torch_geometric." else rest
                if not name.startswith("_"):
                    functions_by_family.setdefault(heading, set()).add(name)
                break
    lines = ["| family | count | names |", "|---|---:|---|"]
    for heading, _ in _FAMILIES:
        names = sorted(functions_by_family.get(heading, ()))
        if names:
            lines.append(f"| {heading} | {len(names)} | {', '.join(f'`{n}`' for n in names)} |")
    methods_ = sorted(n for n in methods() if not n.startswith("_"))
    lines.append(f"| `Tensor` methods | {len(methods_)} | "
                 f"{', '.join(f'`.{n}`' for n in methods_)} |")
    return "\n".join(lines)
