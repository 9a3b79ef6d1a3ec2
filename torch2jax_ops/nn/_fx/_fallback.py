"""The fallback converter: a torch module with no converter of its own becomes a TracedModule.

Registered with :func:`~.._registry.register_fallback` when this package is imported
(``torch2jax_ops.nn`` imports it). Its leaves (registered classes, torch.nn built-ins:
:func:`~._program.is_leaf`) are converted as children, each by its own converter (a
leaf without one becomes an :class:`~._port.Unsupported` that raises only if the
forward calls it); the parameters and buffers of the modules traced through become
arrays under their torch names.
"""
from __future__ import annotations

from typing import Any

from .._convert import Converter, UnsupportedModuleError
from .._registry import class_path, converter_for, register_fallback
from ._port import TracedModule, Unsupported
from ._program import _Program, is_leaf

__all__ = ["convert_traced"]


def _example(cls: type) -> str:
    return (f"@torch2jax_ops.nn.register_converter('{class_path(cls)}')\n"
            f"def convert(module, ctx):  # ctx.array(tensor) -> JAX array, ctx.child(sub, name)\n"
            f"    return MyJaxPort(...)  # an equinox.Module computing {cls.__name__}.forward")


def _arrays(m: Any, ctx: Converter, recurse: bool = True) -> dict:
    """``m``'s parameters and buffers as JAX arrays by torch name (integer buffers are
    counters, num_batches_tracked: int32 without JAX's 64-bit mode)."""
    return {name: ctx.array(t, allow_downcast=not (t.is_floating_point() or t.is_complex()))
            for name, t in list(m.named_parameters(recurse=recurse)) +
            list(m.named_buffers(recurse=recurse)) if t is not None}


def _children(module: Any, ctx: Converter) -> dict:
    """Converted leaves by dotted path, and the arrays of the traced-through modules."""
    children: dict = {}

    def walk(m: Any, prefix: str) -> None:
        children.update({prefix + k: v for k, v in _arrays(m, ctx, recurse=False).items()})
        for name, sub in m.named_children():
            path = prefix + name
            if is_leaf(sub):
                try:
                    children[path] = ctx.child(sub, path)
                except UnsupportedModuleError as exc:
                    hint = "" if converter_for(type(sub)) is not None else \
                        f"\nRegister a port for {type(sub).__name__}:\n{_example(type(sub))}"
                    children[path] = Unsupported(f"{exc}{hint}", _arrays(sub, ctx))
            else:
                walk(sub, path + ".")
    walk(module, "")
    return children


@register_fallback
def convert_traced(module: Any, ctx: Converter) -> TracedModule:
    """The fx-path converter: every module with no converter of its own."""
    if is_leaf(module):  # a torch.nn built-in without a port
        raise UnsupportedModuleError(
            f"from_torch: no JAX port for {ctx.where(module)}. Register one:\n"
            f"{_example(type(module))}")
    return TracedModule(_children(module, ctx), _Program(module, ctx.path, ctx.device))
