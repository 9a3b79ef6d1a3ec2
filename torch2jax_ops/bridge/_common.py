"""What both directions of the bridge share: splitting calls into arrays and static values."""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

__all__ = ["ARRAY", "split_call", "join_call", "conj_if_complex"]


class _Array:
    """Marks where an array argument goes in a flattened argument list."""

    def __repr__(self) -> str:
        return "<array>"


ARRAY = _Array()


def split_call(args: tuple, kwargs: dict, is_array: Callable[[Any], bool], *, op: str):
    """Flatten (args, kwargs); arrays are traced inputs, other leaves are static."""
    leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
    arrays = [leaf for leaf in leaves if is_array(leaf)]
    statics = tuple(ARRAY if is_array(leaf) else leaf for leaf in leaves)
    try:
        hash(statics)
    except TypeError as exc:
        raise TypeError(f"{op}: non-array arguments must be hashable (they are compile-time "
                        f"constants, one compiled version per value): {exc}") from exc
    return arrays, (treedef, statics)


def join_call(key: tuple, arrays) -> tuple[tuple, dict]:
    treedef, statics = key
    it = iter(arrays)
    return jax.tree_util.tree_unflatten(treedef, [next(it) if s is ARRAY else s
                                                  for s in statics])


def conj_if_complex(x):
    return None if x is None else (jnp.conj(x) if jnp.iscomplexobj(x) else x)
