"""The fx path's mapping table, resolved to objects: which torch callables the tracer maps.

The registry (:mod:`.._registry`) keys its entries by dotted path; :func:`resolve`
finds the object at such a path, and :data:`_TABLE` (a :class:`_Table`) holds
``id(torch callable) -> JAX implementation``, resolved again whenever the registry
changes, with the functions the tracer records as one call instead of running their
body on proxies (``autowrap``: other libraries' Python functions, torch's C functions
in :data:`_TORCH_NAMESPACES`).
"""
from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable

from .._registry import functions, generation

__all__ = ["resolve"]


def resolve(path: str) -> Any:
    """The object at a dotted path (``"torch.nn.functional.relu"``), importing its module.

    ``None`` when the library or the name does not exist (a table entry for a
    library that is not installed is simply unused).
    """
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                obj = getattr(obj, name)
        except AttributeError:
            return None
        return obj
    return None


class _Table:
    """The registry resolved to objects: ``id(torch function) -> JAX implementation``."""

    def __init__(self) -> None:
        self.generation = -1
        self.by_id: dict[int, Callable] = {}
        self.keep: list = []  # the resolved objects, alive while their ids are keys
        self.autowrap: tuple = ()
        self.modules: list = []

    def refresh(self) -> _Table:
        """Re-resolve after any change to the registry (a new entry, a replaced one)."""
        if generation() == self.generation:
            return self
        table = functions()
        by_id: dict = {}
        keep: list = []
        wrap: list = []
        modules: list = []
        for path, impl in table.items():
            obj = resolve(path)
            if obj is None:
                continue
            by_id[id(obj)] = impl
            keep.append(obj)
            # Python functions of other libraries run their body on proxies unless fx
            # records them as one call (torch's own dispatch through __torch_function__;
            # this package's own entries are only ever called by the tracer itself)
            if inspect.isfunction(obj) and not obj.__module__.startswith(("torch.",
                                                                           "torch2jax_ops")):
                wrap.append(obj)
                home = importlib.import_module(path.rsplit(".", 1)[0])
                if home not in modules:
                    modules.append(home)
        # torch's C functions are called through fx's wrapper too: handed a proxy, torch's
        # argument parser takes it for a Tensor (its __class__) and, for an overload with a
        # Scalar slot (torch.pow(x, 2), torch.where(c, x, 0.)), reads it as one: a segfault.
        # Wrapped, they become call_function nodes (mapped, or a "no JAX mapping" error)
        for namespace in _TORCH_NAMESPACES:
            module = importlib.import_module(namespace)
            found = [v for k, v in vars(module).items() if inspect.isbuiltin(v)
                     and not k.startswith(("_", "has_torch_function"))]  # (torch's dispatch)
            wrap.extend(found)
            keep.extend(found)
            if module not in modules:
                modules.append(module)
        self.by_id, self.keep, self.autowrap, self.modules = by_id, keep, tuple(wrap), modules
        self.generation = generation()
        return self


_TABLE = _Table()

#: the torch namespaces whose C functions the tracer wraps (see _Table.refresh)
_TORCH_NAMESPACES = ("torch", "torch.nn.functional", "torch.special", "torch.linalg",
                     "torch.fft")
