"""``from_torch``: a torch module tree as a JAX module tree, weights shared over DLPack.

Converters are registered per exact torch class (a subclass may override
``forward``, so it is never taken for its parent). A tree with an unsupported
part fails on the first such submodule, named by its dotted path.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

__all__ = ["from_torch", "register_converter", "Converter", "UnsupportedModuleError",
           "supported_modules"]

#: "module.path.ClassName" -> converter(torch_module, converter_context)
_CONVERTERS: dict[str, Callable] = {}


class UnsupportedModuleError(TypeError):
    """A torch module (or a setting of one) with no JAX port here."""


def _key(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def register_converter(*class_paths: str) -> Callable:
    """Decorator: ``fn(module, ctx) -> JAX module`` converts the torch classes ``class_paths``."""
    def add(fn: Callable) -> Callable:
        for path in class_paths:
            _CONVERTERS[path] = fn
        return fn
    return add


def _load() -> None:
    from . import torch_modules  # noqa: F401  (registers torch.nn converters)
    from ..geometric.nn import convert as _geometric  # noqa: F401  (registers PyG converters)


def supported_modules() -> list[str]:
    """The torch classes :func:`from_torch` converts."""
    _load()
    return sorted(_CONVERTERS)


class Converter:
    """What a converter needs: the arrays of a module, its children, and where it sits."""

    def __init__(self, copy: Optional[bool] = None, path: str = ""):
        self.copy, self.path = copy, path

    def where(self, module: Any) -> str:
        return f"`{self.path or '(root)'}` ({_key(type(module))})"

    def array(self, tensor: Any) -> Any:
        """A parameter or buffer as a JAX array (zero-copy when possible); None stays None."""
        if tensor is None:
            return None
        from ..dlpack import to_jax
        try:
            return to_jax(tensor, copy=self.copy)
        except TypeError as exc:
            raise TypeError(f"from_torch: {self.path or '(root)'}: {exc}") from None

    def child(self, module: Any, name: str) -> Any:
        """Convert the submodule ``name`` of the current module."""
        sub = Converter(self.copy, f"{self.path}.{name}" if self.path else str(name))
        return sub.convert(module)

    def unsupported(self, module: Any, why: str) -> UnsupportedModuleError:
        return UnsupportedModuleError(f"from_torch: cannot convert {self.where(module)}: {why}")

    def eval_only(self, module: Any, why: str) -> None:
        """Refuse a module in training mode whose eval behaviour differs (dropout, batch norm)."""
        if module.training:
            raise ValueError(f"from_torch: {self.where(module)} is in training mode, where "
                             f"{why}; the JAX port computes eval mode. Call model.eval() first")

    def convert(self, module: Any) -> Any:
        fn = _CONVERTERS.get(_key(type(module)))
        if fn is None:
            raise UnsupportedModuleError(
                f"from_torch: no JAX port for {self.where(module)}. Supported classes: "
                f"{', '.join(c.rsplit('.', 1)[1] for c in sorted(_CONVERTERS))}. Port this "
                f"part by hand (an equinox.Module) and convert its supported children")
        return fn(module, self)


def from_torch(module: Any, *, copy: Optional[bool] = None) -> Any:
    """The JAX port of a torch module tree (eval-mode semantics), weights over DLPack.

    Supported: ``Linear``, ``Identity``, activations (``ReLU``, ``LeakyReLU``,
    ``ELU``, ``GELU``, ``SiLU``, ``Tanh``, ``Sigmoid``, ``Softplus``), ``Dropout``,
    ``LayerNorm``, ``BatchNorm1d``, ``Sequential``, ``ModuleList``, and from PyG
    ``MLP``, ``Linear``, ``BatchNorm`` and the convs of
    :mod:`torch2jax_ops.geometric.nn` (see :func:`supported_modules`).

    Args:
      module: a ``torch.nn.Module``. Modules whose training mode behaves
        differently (dropout with ``p > 0``, batch norm) must be in ``eval()``
        mode.
      copy: as :func:`torch2jax_ops.to_jax`: ``None`` shares memory where it
        can (later in-place torch updates then show in the JAX arrays), ``True``
        copies.

    Returns:
      An equinox module (a pytree) whose array names match the torch
      ``state_dict`` keys (:func:`torch2jax_ops.nn.state_dict`).

    Raises:
      UnsupportedModuleError: naming the first submodule with no port.
    """
    _load()
    import torch

    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"from_torch: expected a torch.nn.Module, got {type(module).__name__}")
    return Converter(copy).convert(module)
