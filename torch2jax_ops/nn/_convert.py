"""``from_torch``: a torch module as a JAX module, weights shared over DLPack.

A module whose exact class has a registered converter (:mod:`._registry`) is
converted by it; any other module is traced with ``torch.fx`` (:mod:`._fx`),
its registered submodules kept as leaves, and its forward interpreted in JAX.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, TypeVar, overload

import jax

from ..dlpack import Placement, default_device
from ._registry import class_path, converter_for, converters, fallback, family_converter_for

__all__ = ["from_torch", "Converter", "UnsupportedModuleError", "supported_modules",
           "state_arrays"]

_Port = TypeVar("_Port")


#: torch's own hooks on a module: a port never runs them
_TORCH_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                "_backward_pre_hooks")
#: hooks of a family's protocol (PyG's MessagePassing): run by the family's traced converter
_FAMILY_HOOKS = ("_propagate_forward_pre_hooks", "_propagate_forward_hooks",
                 "_message_forward_pre_hooks", "_message_forward_hooks",
                 "_aggregate_forward_pre_hooks", "_aggregate_forward_hooks",
                 "_message_and_aggregate_forward_pre_hooks",
                 "_message_and_aggregate_forward_hooks", "_edge_update_forward_pre_hooks",
                 "_edge_update_forward_hooks")


class UnsupportedModuleError(TypeError):
    """A torch module (or a setting of one, or an op in its forward) with no JAX port here."""


def supported_modules() -> list[str]:
    """The torch classes with a registered converter (every other module goes through fx)."""
    return sorted(converters())


class Converter:
    """What a converter needs: arrays placed by the placement rule, children, where it sits.

    One ``Converter`` tree serves one :func:`from_torch` call: arrays are
    memoised by tensor, so a weight shared by two submodules (tied weights)
    becomes one JAX array, and ``functional_call`` keeps them tied.
    """

    def __init__(self, copy: Optional[bool] = None, path: str = "",
                 device: Placement = None, memo: Optional[dict] = None):
        self.copy, self.path = copy, path
        self.device = default_device() if device is None else device
        self.memo: dict = {} if memo is None else memo

    def where(self, module: Any) -> str:
        return f"`{self.path or '(root)'}` ({class_path(type(module))})"

    def array(self, tensor: Any, *, allow_downcast: bool = False) -> Any:
        """A parameter or buffer as a JAX array on the target device; None stays None.

        Zero-copy when the tensor already lives there (a CPU checkpoint on a
        CPU machine); one transfer otherwise (a CPU checkpoint, a GPU run).
        ``allow_downcast`` is :func:`~torch2jax_ops.to_jax`'s (counters such as
        ``num_batches_tracked`` are int64 in torch).
        """
        if tensor is None:
            return None
        key = id(tensor)
        if key in self.memo:
            return self.memo[key][1]
        from ..dlpack import to_jax
        try:
            array = to_jax(tensor, copy=self.copy, device=self.device,
                           allow_downcast=allow_downcast)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"from_torch: {self.path or '(root)'}: {exc}") from None
        self.memo[key] = (tensor, array)  # keep the tensor alive: ids are unique while it is
        return array

    @overload
    def child(self, module: Any, name: str) -> Any: ...
    @overload
    def child(self, module: Any, name: str,
              convert: Callable[[Any, Converter], _Port]) -> _Port: ...
    def child(self, module: Any, name: str,
              convert: Optional[Callable[[Any, Converter], Any]] = None) -> Any:
        """Convert the submodule ``name`` of the current module: by its own converter
        (:meth:`convert`), or by ``convert(module, ctx)`` where the current module's
        converter ports the submodule itself; ``ctx`` is the submodule's (its path in
        errors, the shared arrays)."""
        sub = Converter(self.copy, f"{self.path}.{name}" if self.path else str(name),
                        self.device, self.memo)
        return sub.convert(module) if convert is None else convert(module, sub)

    def unsupported(self, module: Any, why: str) -> UnsupportedModuleError:
        return UnsupportedModuleError(f"from_torch: cannot convert {self.where(module)}: {why}")

    def convert(self, module: Any) -> Any:
        """The registered converter of ``module``'s exact class, else the fx path.

        A module with hooks registered on it: torch's forward / backward hooks
        cannot run in a port (refused, naming them); hooks of a family's own
        protocol (PyG's message / aggregate / propagate hooks, which
        ``to_hetero_with_bases`` uses) are run by the family's traced converter,
        never silently dropped by a hand-written port.
        """
        from torch.nn.parameter import is_lazy

        lazy = [name for name, p in list(module.named_parameters()) +
                list(module.named_buffers()) if is_lazy(p)]
        if lazy:  # (lazy modules also hold the forward pre-hook that sizes them)
            shown = ", ".join(f"`{n}`" for n in lazy[:4]) + (" ..." if len(lazy) > 4 else "")
            raise self.unsupported(
                module, f"{len(lazy)} parameter(s) are not sized yet ({shown}): lazy layers "
                        f"(Linear(-1, ...), SAGEConv((-1, -1), ...)) get their shapes from the "
                        f"first forward. Run one forward in torch first (with torch.no_grad(), "
                        f"on any batch of your data), then convert")
        torch_hooks = [h for h in _TORCH_HOOKS if getattr(module, h, None)]
        if torch_hooks:
            raise self.unsupported(module, f"it has torch hooks ({', '.join(torch_hooks)}); "
                                           f"a port cannot run them: remove them before "
                                           f"from_torch, or port what they do in the model")
        if getattr(module, "_explain", None) is True:
            raise self.unsupported(
                module, "explain mode is on (torch_geometric.explain's set_masks, which "
                        "Explainer and to_captum_model(..., mask_type='edge') call): PyG "
                        "multiplies every message by its edge mask, which a port does not "
                        "compute. Call torch_geometric.explain.algorithm.utils.clear_masks("
                        "model) before from_torch, or run the explanation in torch")
        fn = converter_for(type(module))
        if fn is not None and any(getattr(module, h, None) for h in _FAMILY_HOOKS):
            fn = family_converter_for(type(module))
        fn = fn or fallback()
        if fn is None:
            raise self.unsupported(module, "no converter is registered for its class")
        return fn(module, self)


def state_arrays(state: dict, *, copy: Optional[bool] = None, device: Placement = None,
                 renames: Optional[dict] = None) -> dict:
    """A ``state_dict``'s tensors as JAX arrays placed by the placement rule, old key names
    translated by ``renames`` (what ``from_state_dict`` readers of old checkpoints use)."""
    from ..dlpack import tree_to_jax

    renames = renames or {}
    return tree_to_jax({renames.get(key, key): value for key, value in state.items()},
                       copy=copy, device=device)


def from_torch(module: Any, *, copy: Optional[bool] = None, device: Placement = None) -> Any:
    """The JAX port of a torch module: registered layers directly, anything else through fx.

    Layers with a converter (``torch.nn``'s ``Linear``, activations, norms,
    containers; PyG's convs, ``MLP``, norms ...: :func:`supported_modules`)
    become the matching equinox module. Any other module -- your ``Net`` with
    its own ``forward``, your own ``MessagePassing`` layer -- is traced with
    ``torch.fx``: registered submodules stay whole, every function and method
    in the forward is looked up once, now, in the mapping table, and the port
    replays the graph in JAX (under ``jax.jit`` it costs what a hand-written
    port costs).

    Args:
      module: a ``torch.nn.Module``. Training mode converts too: dropout then
        needs a key (``port(x, key=key)``) and batch norm uses the batch's
        statistics (:func:`torch2jax_ops.nn.stateful_call` returns the updated
        running statistics).
      copy: as :func:`torch2jax_ops.to_jax`: ``None`` shares memory where it
        can (later in-place torch updates then show in the JAX arrays), ``True``
        copies.
      device: where the weights go: JAX's default device by default (the GPU
        when JAX has one), or a ``jax.Device`` / ``jax.sharding.Sharding``.

    Returns:
      A JAX module (a pytree) whose array names are the torch module's
      ``state_dict`` keys (:func:`torch2jax_ops.nn.state_dict`).

    Raises:
      UnsupportedModuleError: naming the module path, its class and -- for an
      op in a forward -- your file and line, with what to do.
    """
    import torch

    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"from_torch: expected a torch.nn.Module, got {type(module).__name__}"
                        + (" (a torch function: wrap it in a Module, or use as_jax)"
                           if callable(module) else ""))
    if device is not None and not isinstance(device, (jax.Device, jax.sharding.Sharding)):
        raise TypeError(f"from_torch: `device` must be a jax.Device or a jax.sharding.Sharding, "
                        f"got {device!r} (torch devices are not JAX devices: use "
                        f"jax.devices()[i])")
    return Converter(copy, device=device).convert(module)
