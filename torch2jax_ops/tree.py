"""Whole pytrees of parameters: torch-style leaf names, model soups and checkpoint averages.

A checkpoint converted with :func:`torch2jax_ops.dlpack.tree_to_jax` is a
pytree (an ``OrderedDict`` of arrays); :func:`weighted_sum` combines several
of them leaf by leaf. :func:`leaf_name` spells a pytree key path the way
torch names parameters (``layers.0.weight``), which is how ``func``,
``nn`` and ``parity`` match arrays to torch's ``state_dict`` keys.
"""
from __future__ import annotations

from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from . import _dtypes

__all__ = ["leaf_name", "weighted_sum"]

INTEGER_LEAVES = ("error", "first", "round")


def leaf_name(path: tuple) -> str:
    """The dotted torch name of a pytree key path: ``(.layers, [0], .weight)`` -> ``"layers.0.weight"``."""
    parts = []
    for key in path:
        for attr in ("name", "key", "idx"):  # GetAttrKey, DictKey / FlattenedIndexKey, SequenceKey
            if hasattr(key, attr):
                parts.append(str(getattr(key, attr)))
                break
        else:
            parts.append(str(key))
    return ".".join(parts)


def _where(path) -> str:
    return jax.tree_util.keystr(path) or "<root>"


def _check_same_structure(flat: list, treedefs: list) -> None:
    """All trees have the same leaf paths and containers; else name the first difference."""
    paths0 = [path for path, _ in flat[0]]
    for k in range(1, len(flat)):
        if treedefs[k] == treedefs[0]:
            continue
        paths = [path for path, _ in flat[k]]
        in_k, in_0 = set(paths), set(paths0)
        missing = next((p for p in paths0 if p not in in_k), None)
        extra = next((p for p in paths if p not in in_0), None)
        if missing is not None:
            raise ValueError(f"weighted_sum: the trees differ in structure; first differing "
                             f"path: {_where(missing)} is in trees[0] but not in trees[{k}]")
        if extra is not None:
            raise ValueError(f"weighted_sum: the trees differ in structure; first differing "
                             f"path: {_where(extra)} is in trees[{k}] but not in trees[0]")
        raise ValueError(f"weighted_sum: trees[0] and trees[{k}] have the same leaf paths but "
                         f"different containers (list vs tuple, dict vs OrderedDict): "
                         f"{treedefs[0]} vs {treedefs[k]}")


def _is_array(leaf: Any) -> bool:
    return isinstance(leaf, (jax.Array, np.ndarray, np.generic))


def weighted_sum(trees: Sequence[Any], weights: Any, *, integer_leaves: str = "error") -> Any:
    """``sum_k weights[k] * trees[k]``, leaf by leaf, for pytrees of one structure.

    A uniform soup is ``weighted_sum(trees, [1 / K] * K)``; the weights are not
    normalised for you. Leaves of the same shape and dtype (every ``64 x 64``
    weight of every layer, say) are stacked into one ``(K, L, *shape)`` array
    and contracted with the weights in one operation. float16/bfloat16 leaves
    are accumulated in float32 and rounded once. Works under ``jax.jit``
    (``weights`` may be traced).

    Args:
      trees: a non-empty sequence of K pytrees with identical structure, leaf
        shapes and dtypes (JAX or NumPy arrays; torch tensors must go through
        ``tree_to_jax`` first). Non-array leaves (strings, Python numbers)
        must be equal in all trees and are passed through.
      weights: K numbers, a list or a 1-D array of shape ``(K,)``.
      integer_leaves: what to do with integer/bool leaves (e.g. BatchNorm's
        ``num_batches_tracked``): ``"error"`` (default) raises, ``"first"``
        takes ``trees[0]``'s, ``"round"`` rounds the weighted sum to the
        nearest integer.

    Returns:
      A pytree with ``trees[0]``'s structure and leaf dtypes.

    Raises:
      ValueError: the trees differ (the message names the first differing
        path, or the leaf whose shape or dtype differs), or ``weights`` has the
        wrong shape.
      TypeError: a torch tensor leaf, or an integer leaf with
        ``integer_leaves="error"``.
    """
    if integer_leaves not in INTEGER_LEAVES:
        raise ValueError(f"weighted_sum: integer_leaves must be one of {INTEGER_LEAVES}, "
                         f"got {integer_leaves!r}")
    trees = list(trees)
    if not trees:
        raise ValueError("weighted_sum: trees is empty; pass at least one pytree")
    k = len(trees)
    weights = jnp.asarray(weights)
    if weights.shape != (k,):
        raise ValueError(f"weighted_sum: weights must have shape ({k},), one per tree, got "
                         f"shape {weights.shape}")
    flat, treedefs = zip(*(jax.tree_util.tree_flatten_with_path(tree) for tree in trees))
    _check_same_structure(list(flat), list(treedefs))

    out: list[Any] = [None] * len(flat[0])
    groups: dict[tuple, list[int]] = {}  # (shape, dtype) -> leaf positions
    for i, (path, first) in enumerate(flat[0]):
        leaves = [flat[j][i][1] for j in range(k)]
        if any(type(leaf).__module__.startswith("torch") for leaf in leaves):
            raise TypeError(f"weighted_sum: the leaf at {_where(path)} is a torch tensor; "
                            f"convert the trees with torch2jax_ops.dlpack.tree_to_jax first")
        if not all(_is_array(leaf) for leaf in leaves):
            if any(_is_array(leaf) for leaf in leaves) or any(
                    leaf != first for leaf in leaves[1:]):
                raise ValueError(f"weighted_sum: the non-array leaf at {_where(path)} differs "
                                 f"between trees ({[leaf for leaf in leaves]}); only arrays "
                                 f"are combined, other leaves must be equal")
            out[i] = first
            continue
        shape, dtype = jnp.shape(first), jnp.result_type(first)
        for j, leaf in enumerate(leaves[1:], start=1):
            if jnp.shape(leaf) != shape or jnp.result_type(leaf) != dtype:
                raise ValueError(f"weighted_sum: the leaf at {_where(path)} is {dtype}"
                                 f"{list(shape)} in trees[0] but {jnp.result_type(leaf)}"
                                 f"{list(jnp.shape(leaf))} in trees[{j}]")
        if not jnp.issubdtype(dtype, jnp.inexact):
            if integer_leaves == "error":
                raise TypeError(f"weighted_sum: the leaf at {_where(path)} is {dtype}; pass "
                                f"integer_leaves='first' to keep trees[0]'s or 'round' to "
                                f"round the weighted sum")
            if integer_leaves == "first":
                out[i] = jnp.asarray(first)
                continue
        groups.setdefault((shape, dtype), []).append(i)

    for (shape, dtype), positions in groups.items():
        compute = _dtypes.accumulation_dtype(dtype) if jnp.issubdtype(dtype, jnp.inexact) else (
            jnp.float64 if _dtypes.x64_enabled() else jnp.float32)
        real = jnp.finfo(compute).dtype  # complex leaves take real weights
        stacked = jnp.stack([jnp.asarray(flat[j][i][1]) for j in range(k) for i in positions])
        stacked = stacked.reshape((k, len(positions)) + shape).astype(compute)
        summed = jnp.einsum("k,kl...->l...", weights.astype(real), stacked)
        if not jnp.issubdtype(dtype, jnp.inexact):
            summed = jnp.round(summed)
        summed = summed.astype(dtype)
        for slot, i in enumerate(positions):
            out[i] = summed[slot]
    return jax.tree_util.tree_unflatten(treedefs[0], out)
