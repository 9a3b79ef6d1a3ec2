"""Where a traced forward failed: the user's file and line, in the errors that name them.

:func:`user_frame` picks the innermost frame outside torch, PyG and this package from
an fx node's stack trace; :func:`_error` is the fx path's error at a node;
:func:`_target_name` the public name of a node's target as the user wrote it;
:func:`traced_origin` which traced arguments of the forward a value comes from.
"""
from __future__ import annotations

import importlib
import inspect
import os
from typing import Any, Optional, cast

import jax

from .._convert import UnsupportedModuleError
from ._table import _TORCH_NAMESPACES

__all__ = ["user_frame", "traced_origin"]

#: torch2jax_ops/ (frames inside it are the package's, not the user's)
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def user_frame(stack_trace: Optional[str]) -> str:
    """``file:line (function): code`` of the innermost frame outside torch and this package."""
    if not stack_trace:
        return "an unknown line"
    lines = stack_trace.strip().splitlines()
    found = None
    for i, line in enumerate(lines):
        text = line.strip()
        if not text.startswith("File "):
            continue
        path = text.split('"')[1] if '"' in text else ""
        inside = (f"{os.sep}torch{os.sep}" in path or path.startswith(_PACKAGE_DIR)
                  or f"{os.sep}torch_geometric{os.sep}" in path)
        if not inside:
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            where = text[len("File "):].replace('"', "").replace(", line ", ":")
            found = f"{where}: {code}" if code else where
    return found or lines[0].strip()


def _error(node: Any, message: str) -> UnsupportedModuleError:
    return UnsupportedModuleError(f"{message} -- at {user_frame(node.meta.get('stack_trace'))}")


def _target_name(target: Any) -> str:
    if isinstance(target, str):
        return target
    if inspect.isbuiltin(target):  # torch's C functions: the public path the user wrote
        short = target.__name__.split("_", 1)[-1]  # torch.special.xlog1py: special_xlog1py
        for home in _TORCH_NAMESPACES:
            for name in (target.__name__, short):
                public = getattr(importlib.import_module(home), name, None)
                # (while tracing, the name holds fx's wrapper of the function)
                if target in (public, getattr(public, "__wrapped__", None)):
                    return f"{home}.{name}"
    module = getattr(target, "__module__", None) or ""
    module = {"_operator": "operator"}.get(module, module)
    name = cast(str, getattr(target, "__qualname__", None)
                or getattr(target, "__name__", repr(target)))
    if module == "builtins" or not module:
        return name if module == "" else f"builtins.{name}"
    return f"{module}.{name}"


def traced_origin(values: dict, port: str, node: Any) -> str:
    """Which traced arguments of the forward ``node``'s value comes from, and the fix
    ("" when none: a traced parameter, say). ``values``: the trace's node values;
    ``port``: the port's name in the message."""
    seen, stack, names = set(), [node], []
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op == "placeholder":
            if any(isinstance(leaf, jax.core.Tracer)
                   for leaf in jax.tree_util.tree_leaves(values.get(n))):
                names.append(f"`{n.target}`")
            continue
        stack.extend(n.all_input_nodes)
    if not names:
        return ""
    return (f". The value comes from {port}'s argument "
            f"{', '.join(sorted(names))}, traced (an argument of jax.jit or of a "
            f"transformation): make it a constant (close over it, "
            f"`jax.jit(lambda x: port(x, index))`; compare_modules does so for "
            f"integer inputs), or pass what the forward computes from it")
