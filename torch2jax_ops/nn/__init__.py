"""Generic torch module ports, and torch-style names for the arrays of a JAX module.

* :func:`from_torch` converts a torch module tree (``Linear``, activations,
  ``Dropout``, ``LayerNorm``, ``BatchNorm1d``, ``Sequential``, ``ModuleList``,
  PyG's ``MLP`` and convs) into equinox modules, weights over DLPack;
* :mod:`.layers` holds those modules;
* naming: a JAX module's array leaves get the dotted names torch gives
  parameters and buffers (attribute names joined by dots, list positions as
  numbers), so an ``mlp.lins[0].weight`` leaf is ``"lins.0.weight"``, exactly
  the ``state_dict`` key of the torch module it was ported from.
"""
from .convert import UnsupportedModuleError, from_torch, register_converter, supported_modules
from .layers import (Activation, BatchNorm1d, Dropout, Identity, LayerNorm, Linear, ModuleList,
                     Sequential)
from .naming import leaf_name, named_arrays, named_parameters, state_dict

__all__ = ["from_torch", "supported_modules", "register_converter", "UnsupportedModuleError",
           "Linear", "Identity", "Activation", "Dropout", "LayerNorm", "BatchNorm1d",
           "Sequential", "ModuleList",
           "leaf_name", "named_arrays", "named_parameters", "state_dict"]
