"""What a traced module replays: the torch module's forward, its arguments, what it reads.

A :class:`_Program` is the torch module's code (never its weights: those are the
port's arrays), its forward's signature, and the constants the forward reads from
outside its parameters. :func:`root_arguments` hands the forward its arguments;
:func:`named_array` finds a tensor the forward reads among the port's arrays (by torch
name), :func:`_torch_attribute` reads one off the torch module; :func:`is_leaf` decides
which submodules are ``call_module`` leaves (converted on their own) and which are
traced through.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

import jax

from ..._checking import is_array
from .._convert import UnsupportedModuleError
from .._registry import converter_for, methods

__all__ = ["is_leaf", "named_array", "root_arguments"]


class _Program:
    """What a :class:`TracedModule` replays: the torch module's code, never its weights."""

    def __init__(self, torch_module: Any, path: str, device: Any, method: str = "forward"):
        self.torch_module, self.path, self.device, self.method = torch_module, path, device, method
        self.name = f"{type(torch_module).__name__}.{method}" + (f" (`{path}`)" if path else "")
        self.signature = inspect.signature(getattr(type(torch_module), method))
        self.constants: dict = {}
        self.methods = methods()

    def is_leaf(self, m: Any) -> bool:
        return is_leaf(m)

    def bind(self, args: tuple, kwargs: dict) -> list:
        """(parameter, value) for every parameter of the forward after ``self``."""
        params = list(self.signature.parameters.values())[1:]
        sig = self.signature.replace(parameters=params)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.name}{sig}: {exc} (the port takes the torch forward's "
                            f"arguments, as JAX arrays)") from None
        bound.apply_defaults()
        return [(sig.parameters[k], v) for k, v in bound.arguments.items()]

    def constant(self, tensor: Any) -> Any:
        """A tensor the forward reads from outside its parameters, as a JAX constant (cached)."""
        key = id(tensor)
        if key not in self.constants:
            from ...dlpack import to_jax
            # integer constants (offsets, type ids the forward builds with torch.tensor) are
            # int64 in torch: int32 without JAX's 64-bit mode, their range checked
            self.constants[key] = (tensor, to_jax(tensor, device=self.device,
                                                  allow_downcast=not tensor.is_floating_point()))
        return self.constants[key][1]


def root_arguments(bound: list, placeholder: Callable[[str, Any], Any]) -> tuple[list, dict]:
    """The forward's positional and keyword arguments as the trace hands them over (fx's
    signature rules do not apply): ``bound`` is :meth:`_Program.bind`'s. An array, or an
    object with array attributes (a Data-like batch), is ``placeholder(name, value)`` (a
    proxy); a tuple, list or dict holding arrays the same container of such; anything
    else (``None``, ints, strings, flags) is passed as it is."""

    def build(name: str, arg: Any) -> Any:
        if is_array(arg):
            return placeholder(name, arg)
        if isinstance(arg, (tuple, list)) and not hasattr(arg, "_fields") and \
                any(_holds_array(a) for a in arg):  # (a named tuple is a Data-like object)
            return type(arg)(build(f"{name}_{i}", a) for i, a in enumerate(arg))
        if isinstance(arg, dict) and any(_holds_array(a) for a in arg.values()):
            return {k: build(f"{name}_{k}", a) for k, a in arg.items()}
        if _holds_array(arg):  # an object with array attributes (a Data-like batch)
            return placeholder(name, arg)
        return arg

    positional: list = []
    keywords: dict = {}
    for param, arg in bound:
        built = build(param.name, arg)
        if param.kind == param.KEYWORD_ONLY:
            keywords[param.name] = built
        elif param.kind == param.VAR_POSITIONAL:
            positional.extend(built)
        elif param.kind == param.VAR_KEYWORD:
            keywords.update(built)
        else:
            positional.append(built)
    return positional, keywords


def _holds_array(x: Any) -> bool:
    return any(is_array(leaf) for leaf in jax.tree_util.tree_leaves(x))


def is_leaf(m: Any) -> bool:
    """A ``call_module`` leaf: a registered class, or a torch.nn built-in; never a container.

    Modules of your own (and PyG models without a converter) are traced through.
    """
    import torch

    if isinstance(m, (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict,
                      torch.nn.ParameterList, torch.nn.ParameterDict)):
        return False  # containers: their children (or parameters) are the leaves
    if converter_for(type(m)) is not None:
        return True
    module = type(m).__module__
    return module.startswith("torch.nn.") or module.startswith("torch.ao.nn.")


def named_array(arrays: dict, submodules: dict, port: str, target: str) -> Any:
    """The port's array under a torch name: the forward's own parameters, or one of
    a converted submodule's (``lin.weight``, ``lins.0.bias``, ``embedding.weight``),
    so gradients reach the port's array and it keeps its state_dict name. ``arrays``: the
    port's own arrays by torch name; ``submodules``: its converted leaves by dotted path;
    ``port``: its name in the message. None when neither has it (a constant)."""
    if target in arrays:
        return arrays[target]
    prefix, _, rest = target.rpartition(".")
    while prefix:
        if prefix in submodules:
            from .._naming import named_arrays
            found = dict(named_arrays(submodules[prefix])).get(rest)
            if found is None:  # never the torch tensor: its gradient would be lost
                raise UnsupportedModuleError(
                    f"{port}: the forward reads `{target}`, but the port "
                    f"of `{prefix}` ({type(submodules[prefix]).__name__}) has no "
                    f"array named `{rest}`")
            return found
        prefix, _, head = prefix.rpartition(".")
        rest = f"{head}.{rest}"
    return None


def _torch_attribute(root: Any, target: str) -> Any:
    """``root``'s attribute at a dotted path, read past fx's patched ``Module.__getattr__``."""
    attr = root
    for part in target.split("."):
        if hasattr(attr, "_parameters") and hasattr(attr, "_modules"):  # a torch Module
            for store in ("_parameters", "_buffers", "_modules"):
                if part in attr.__dict__.get(store, {}):
                    attr = attr.__dict__[store][part]
                    break
            else:
                attr = object.__getattribute__(attr, part)
        else:
            attr = getattr(attr, part)
    return attr
