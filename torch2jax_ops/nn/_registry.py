"""The one registry of ports: which JAX code stands for which torch class, function or method.

A leaf module: it imports nothing of the package, so every layer can register
into it without an import cycle. Layers register themselves when their module
is imported (``torch2jax_ops`` imports them all):

* :func:`register_converter` -- a torch ``nn.Module`` class (by its dotted
  path, an exact class: a subclass may override ``forward``) -> a converter
  ``fn(torch_module, ctx) -> JAX module``;
* :func:`register_function` -- a torch function (``"torch.cat"``,
  ``"torch.nn.functional.relu"``, ``"operator.add"``,
  ``"torch_scatter.scatter"`` ...) -> its JAX implementation with the torch
  signature, used for the ``call_function`` nodes of a traced forward;
* :func:`register_method` -- a ``torch.Tensor`` method name (``"view"``,
  ``"sum"`` ...) -> ``fn(self, *args, **kwargs)`` on a JAX array, used for
  ``call_method`` nodes.

Keys are dotted paths, so the registry never imports torch; they are resolved
to objects when a model is converted (an entry whose library is not
installed is skipped).
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar

__all__ = ["register_converter", "register_function", "register_method", "register_fallback",
           "class_path", "converter_for", "family_converter_for", "fallback", "converters", "functions", "methods",
           "mapping_table"]

F = TypeVar("F", bound=Callable[..., Any])

_CONVERTERS: dict[str, Callable[..., Any]] = {}
#: base class path -> converter for every subclass without its own (PyG's MessagePassing)
_SUBCLASS_CONVERTERS: dict[str, Callable[..., Any]] = {}
_FUNCTIONS: dict[str, Callable[..., Any]] = {}
_METHODS: dict[str, Callable[..., Any]] = {}
#: the converter of every module without a registered class (the fx path)
_FALLBACK: list[Callable[..., Any]] = []


def class_path(cls: type) -> str:
    """``"module.path.ClassName"``: the key a class is registered under."""
    return f"{cls.__module__}.{cls.__qualname__}"


def _register(table: dict, keys: tuple, what: str) -> Callable[[F], F]:
    if not keys or not all(isinstance(k, str) and k for k in keys):
        raise TypeError(f"register_{what}: pass one or more non-empty strings, got {keys!r}")

    def add(fn: F) -> F:
        if not callable(fn):
            raise TypeError(f"register_{what}: expected a callable, got {type(fn).__name__}")
        for key in keys:
            table[key] = fn
        return fn
    return add


def register_converter(*class_paths: str, subclasses: bool = False) -> Callable[[F], F]:
    """Decorator: ``fn(torch_module, ctx) -> JAX module`` converts the classes ``class_paths``.

    An exact class matches first; with ``subclasses=True`` the converter also
    takes every subclass that has no converter of its own (how user-written
    ``MessagePassing`` layers are converted).

    >>> @register_converter("my_project.layers.Gate")
    ... def _gate(module, ctx):
    ...     return Gate(ctx.array(module.weight))
    """
    return _register(_SUBCLASS_CONVERTERS if subclasses else _CONVERTERS, class_paths,
                     "converter")


def register_function(*paths: str) -> Callable[[F], F]:
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
    return _register(_FUNCTIONS, paths, "function")


def register_method(*names: str) -> Callable[[F], F]:
    """Decorator: ``fn(array, *args, **kwargs)`` implements ``torch.Tensor.<name>``."""
    return _register(_METHODS, names, "method")


def register_fallback(fn: F) -> F:
    """Decorator: ``fn(torch_module, ctx)`` converts every module with no converter of its own."""
    _FALLBACK[:] = [fn]
    return fn


def fallback() -> Callable[..., Any] | None:
    """The converter of modules without one of their own (None until :mod:`._fx` is loaded)."""
    return _FALLBACK[0] if _FALLBACK else None


def converter_for(cls: type) -> Callable[..., Any] | None:
    """The converter of this exact class, else of its nearest registered base
    (``subclasses=True`` registrations), else None."""
    exact = _CONVERTERS.get(class_path(cls))
    if exact is not None:
        return exact
    for base in getattr(cls, "__mro__", (cls,))[1:]:
        family = _SUBCLASS_CONVERTERS.get(class_path(base))
        if family is not None:
            return family
    return None


def family_converter_for(cls: type) -> Callable[..., Any] | None:
    """The converter of ``cls``'s nearest registered base (``subclasses=True``
    registrations: a family that converts any member by tracing it), ignoring an
    exact converter of ``cls`` itself; None if there is none."""
    for base in getattr(cls, "__mro__", (cls,)):
        family = _SUBCLASS_CONVERTERS.get(class_path(base))
        if family is not None:
            return family
    return None


def converters() -> dict[str, Callable[..., Any]]:
    """Every registered class path and its converter (a copy)."""
    return dict(_CONVERTERS)


def functions() -> dict[str, Callable[..., Any]]:
    """Every registered torch function path and its JAX implementation (a copy)."""
    return dict(_FUNCTIONS)


def methods() -> dict[str, Callable[..., Any]]:
    """Every registered ``torch.Tensor`` method name and its JAX implementation (a copy)."""
    return dict(_METHODS)


#: how the mapping table groups function paths: (heading, path prefix)
_FAMILIES = (("`torch.*`", "torch."), ("`torch.nn.functional.*`", "torch.nn.functional."),
             ("`torch.special.*`", "torch.special."), ("`torch.linalg.*`", "torch.linalg."),
             ("`operator.*` (Python operators on tensors)", "operator."),
             ("`torch_scatter.*`", "torch_scatter."),
             ("`torch_geometric.*`", "torch_geometric."))


def mapping_table() -> str:
    """The fx mapping table as Markdown: every torch function and Tensor method with a port.

    Generated from the registry (what ``migration_guide/porting.md`` shows;
    ``torch2jax-ops mapping-table --check`` keeps the page in step).
    """
    functions_by_family: dict = {}
    for path in _FUNCTIONS:
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
    methods_ = sorted(n for n in _METHODS if not n.startswith("_"))
    lines.append(f"| `Tensor` methods | {len(methods_)} | "
                 f"{', '.join(f'`.{n}`' for n in methods_)} |")
    return "\n".join(lines)
