"""PyG's own ``torch_geometric.utils.scatter`` (what PyG 2.x's aggregations call).

Unlike torch_scatter's ``scatter`` (``dim=-1``, a broadcast index, NaN
skipped by min/max, the gradient of a tie to its first element), PyG's
reduces along ``dim=0`` by default with a 1-D index and follows torch's native
``scatter_reduce_(include_self=False)`` on the CPU: empty groups give 0 (1 for
``mul``), NaN propagates through min/max, and tied maxima share the gradient.
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp

from .._checking import REDUCTIONS, as_array, check_index, check_reduce, normalize_dim
from ._edges import aggregate, check_ids, node_count

__all__ = ["scatter"]


def scatter(src: Any, index: Any, dim: int = 0, dim_size: Optional[int] = None,
            reduce: str = "sum") -> jax.Array:
    """``torch_geometric.utils.scatter``: reduce ``src`` along ``dim`` into ``dim_size`` groups.

    Args:
      src: ``[..., E (at dim), ...]`` values.
      index: ``[E]`` group ids in ``[0, dim_size)``; the id ``dim_size`` is the
        dropped slot (the entry reaches no group).
      dim: the reduced axis (negative counts from the end).
      dim_size: the number of groups; under ``jax.jit`` it must be given
        (PyG reads ``index.max() + 1`` from the data).
      reduce: ``"sum"``/``"add"``, ``"mean"``, ``"mul"``, ``"min"``, ``"max"``.

    Returns:
      ``src``'s shape with ``dim_size`` at ``dim``.
    """
    op = "scatter"
    src = as_array(src, "src", op=op)
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
    kind = check_reduce(reduce, REDUCTIONS, op=op,
                        hints={"any": "not ported: its winner is write-order dependent"})
    size = node_count(dim_size, index, "dim_size", index_name="index",
                      hint="the number of groups (num_nodes)", op=op)
    check_ids(index, size, "index", op=op)
    out = aggregate(jnp.moveaxis(src, dim, 0), index, size, kind, op=op)
    return jnp.moveaxis(out, 0, dim)
