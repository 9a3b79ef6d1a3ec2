"""PyG's own ``torch_geometric.utils.scatter`` (what PyG 2.x's aggregations call).

Unlike torch_scatter's ``scatter`` (``dim=-1``, a broadcast index, NaN
skipped by min/max, the gradient of a tie to its first element), PyG's
reduces along ``dim=0`` by default with a 1-D index and follows torch's native
``scatter_reduce_(include_self=False)`` on the CPU: empty groups give 0 (1 for
``mul``), NaN propagates through min/max, and tied maxima share the gradient.
PyG's reduce names: ``sum``/``add``, ``mean``, ``mul``, ``min``/``amin``,
``max``/``amax`` (``any`` is not ported); ``mean`` of integers is PyG's true
division (``scatter_add_ / count``): float32, torch's default dtype.
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp

from ..._batch_vector import graph_count
from ..._checking import as_array, check_index, check_reduce, normalize_dim
from ..._sharding import OutSharding, sharding_aware
from .._core._edges import aggregate, check_ids, node_count

__all__ = ["scatter", "pyg_scatter", "PYG_REDUCTIONS"]

#: PyG 2.x's ``utils.scatter`` reduce names ("any" is not ported: its winner is write-order
#: dependent); "add" is "sum", "amin"/"amax" are "min"/"max".
PYG_REDUCTIONS: tuple[str, ...] = ("sum", "add", "mean", "mul", "min", "max", "amin", "amax")
_HINTS = {"any": "not ported: its winner is write-order dependent"}


def pyg_scatter(src: jax.Array, index: jax.Array, dim_size: int, reduce: str, *,
                op: str) -> jax.Array:
    """PyG's ``utils.scatter(src, index, 0, dim_size, reduce)`` on checked arguments.

    Ids equal to ``dim_size`` reach no group. ``mean`` of an integer ``src`` is
    a true division, float32 (PyG: ``scatter_add_(...) / count``).
    """
    kind = check_reduce(reduce, PYG_REDUCTIONS, op=op, hints=_HINTS)
    kind = {"amin": "min", "amax": "max"}.get(kind, kind)
    if kind == "mean" and not jnp.issubdtype(src.dtype, jnp.inexact):
        total = aggregate(src, index, dim_size, "sum", op=op).astype(jnp.float32)
        count = aggregate(jnp.ones(index.shape, jnp.float32), index, dim_size, "sum", op=op)
        return total / jnp.maximum(count, 1.0).reshape((dim_size,) + (1,) * (src.ndim - 1))
    return aggregate(src, index, dim_size, kind, op=op)


@sharding_aware
def scatter(src: Any, index: Any, dim: int = 0, dim_size: Optional[int] = None,
            reduce: str = "sum", *, out_sharding: OutSharding = None) -> jax.Array:
    """``torch_geometric.utils.scatter``: reduce ``src`` along ``dim`` into ``dim_size`` groups.

    Args:
      src: ``[..., E (at dim), ...]`` values.
      index: ``[E]`` group ids in ``[0, dim_size)``; the id ``dim_size`` is the
        dropped slot (the entry reaches no group).
      dim: the reduced axis (negative counts from the end).
      dim_size: the number of groups; under ``jax.jit`` it must be given
        (PyG reads ``index.max() + 1`` from the data).
      reduce: ``"sum"``/``"add"``, ``"mean"``, ``"mul"``, ``"min"``/``"amin"``,
        ``"max"``/``"amax"`` (``"mean"`` of integers: float32, PyG's true division).

    Returns:
      ``src``'s shape with ``dim_size`` at ``dim``.
    """
    op = "scatter"
    src = as_array(src, "src", op=op)
    dim_size = graph_count(index, dim_size)
    index = as_array(index, "index", op=op)
    check_index(index, op=op)
    if index.ndim != 1:
        raise ValueError(f"{op}: `index` must be one-dimensional (PyG's scatter), got "
                         f"{index.ndim} dimensions; torch_scatter.scatter broadcasts k-D "
                         f"indices")
    if src.ndim == 0:
        raise ValueError(f"{op}: `src` must have at least one dimension, got a 0-d array")
    dim = normalize_dim(dim, src.ndim, op=op)
    if index.shape[0] != src.shape[dim]:
        raise ValueError(f"{op}: `index` has {index.shape[0]} entries but `src` has "
                         f"{src.shape[dim]} along dim={dim}")
    check_reduce(reduce, PYG_REDUCTIONS, op=op, hints=_HINTS)
    size = node_count(dim_size, index, "dim_size", index_name="index",
                      hint="the number of groups (num_nodes)", op=op)
    check_ids(index, size, "index", op=op)
    out = pyg_scatter(jnp.moveaxis(src, dim, 0), index, size, reduce, op=op)
    return jnp.moveaxis(out, 0, dim)
