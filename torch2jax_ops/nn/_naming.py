"""torch-style dotted names for the leaves of a pytree module."""
from __future__ import annotations

import collections
from typing import Any, Iterator

import jax
import numpy as np

from .._checking import is_array
from ..tree import leaf_name

__all__ = ["leaf_name", "named_arrays", "named_parameters", "state_dict"]


def named_arrays(module: Any) -> Iterator[tuple[str, Any]]:
    """(name, array) for every array leaf of ``module``, in pytree order."""
    for path, leaf in jax.tree_util.tree_flatten_with_path(module)[0]:
        if is_array(leaf):
            yield leaf_name(path), leaf


def named_parameters(module: Any) -> Iterator[tuple[str, Any]]:
    """(name, array) for every floating-point array leaf: what torch calls parameters.

    ``dict(named_parameters(model))`` is the argument ``torch.func.functional_call``
    users build with ``dict(model.named_parameters())``. A pytree does not mark
    buffers, so floating buffers (BatchNorm's running stats) are included.
    """
    for name, leaf in named_arrays(module):
        if np.issubdtype(leaf.dtype, np.inexact):
            yield name, leaf


def state_dict(module: Any) -> collections.OrderedDict[str, Any]:
    """Every array leaf by dotted name, as torch's ``module.state_dict()`` keys them."""
    return collections.OrderedDict(named_arrays(module))
