"""Generic torch module ports: torch-style names for the arrays of a JAX module.

A JAX module here is any callable pytree (an ``equinox.Module``, a dataclass
registered as a pytree, a tuple of layers...). Its array leaves get the
dotted names torch gives parameters and buffers: attribute names joined by
dots, list and tuple positions as numbers, dict keys as they are, so an
``mlp.layers[0].weight`` leaf is ``"layers.0.weight"``, exactly the
``state_dict`` key of the torch module it was ported from.
"""
from .naming import leaf_name, named_arrays, named_parameters, state_dict

__all__ = ["leaf_name", "named_arrays", "named_parameters", "state_dict"]
