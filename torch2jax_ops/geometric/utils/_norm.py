"""Degrees and GCN's symmetric normalisation: ``degree``, ``gcn_norm``, ``gcn_norm_static``."""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from ..._checking import as_array
from ..._sharding import OutSharding, sharding_aware
from .._core._edges import aggregate, check_ids, edge_array, gather, node_count
from ._loops import add_remaining_self_loops, remaining_loops_static

__all__ = ["degree", "gcn_norm", "gcn_norm_static", "count_ids", "gcn_weights_static"]


@sharding_aware
def degree(index: ArrayLike, num_nodes: Optional[int] = None, dtype: Any = None,
           *, out_sharding: OutSharding = None) -> jax.Array:
    """PyG's ``degree``: how often each node id occurs in ``index`` (``[E]`` -> ``[N]``).

    ``dtype`` defaults to float32, as in PyG. ``num_nodes`` is needed under jit
    (else ``index.max() + 1``); the dropped id ``num_nodes`` is not counted.
    """
    op = "degree"
    index = as_array(index, "index", op=op)
    if index.ndim != 1 or not jnp.issubdtype(index.dtype, jnp.integer):
        raise ValueError(f"{op}: `index` must be a 1-D integer array (e.g. edge_index[1]), got "
                         f"shape {tuple(index.shape)} and dtype {index.dtype}")
    n = node_count(num_nodes, index, index_name="index", op=op)
    check_ids(index, n, "index", op=op)
    return count_ids(index, n, dtype)


def count_ids(index: jax.Array, n: int, dtype: Any = None) -> jax.Array:
    """:func:`degree` on checked ids (``[E]`` integers in ``[0, n]``; ``n`` not counted):
    what layers call with their graph's or batch's ids. Validates nothing again."""
    dtype = jnp.float32 if dtype is None else dtype
    return jax.ops.segment_sum(jnp.ones(index.shape, dtype), index, n)


def _inverse_sqrt(deg: jax.Array) -> jax.Array:
    """deg ** -0.5 with inf -> 0 (PyG's masked_fill), without a NaN in the gradient at 0."""
    zero = deg == 0
    return jnp.where(zero, jnp.zeros((), deg.dtype), jnp.where(zero, 1, deg) ** -0.5)


def _normalise(edge_index: jax.Array, edge_weight: Optional[jax.Array], n: int, flow: str,
               dtype: Any) -> tuple[jax.Array, jax.Array]:
    if edge_weight is None:
        edge_weight = jnp.ones((edge_index.shape[1],), dtype or jnp.float32)
    row, col = edge_index[0], edge_index[1]
    deg = aggregate(edge_weight, col if flow == "source_to_target" else row, n, "sum")
    dinv = _inverse_sqrt(deg)
    return edge_index, gather(dinv, row) * edge_weight * gather(dinv, col)


def _arguments(edge_index: Any, edge_weight: Any, num_nodes: Optional[int], flow: str, *,
               op: str) -> tuple[jax.Array, Optional[jax.Array], int]:
    if flow not in ("source_to_target", "target_to_source"):
        raise ValueError(f"{op}: `flow` must be 'source_to_target' or 'target_to_source', "
                         f"got {flow!r}")
    edge_index = edge_array(edge_index, op=op)
    n = node_count(num_nodes, edge_index, op=op)
    edge_array(edge_index, n, op=op)
    if edge_weight is not None:
        edge_weight = as_array(edge_weight, "edge_weight", op=op)
        if edge_weight.shape != (edge_index.shape[1],):
            raise ValueError(f"{op}: `edge_weight` must have shape [num_edges] = "
                             f"({edge_index.shape[1]},), got {tuple(edge_weight.shape)}")
    return edge_index, edge_weight, n


@sharding_aware
def gcn_norm(edge_index: ArrayLike, edge_weight: Optional[ArrayLike] = None,
             num_nodes: Optional[int] = None, improved: bool = False,
             add_self_loops: bool = True, flow: str = "source_to_target",
             dtype: Any = None, *, out_sharding: OutSharding = None) -> tuple[jax.Array, jax.Array]:
    """PyG's ``gcn_norm``: ``w_ij = deg_i^-1/2 * w_ij * deg_j^-1/2`` over in-degrees.

    With ``add_self_loops`` it first calls :func:`add_remaining_self_loops`
    (loop weight 2 if ``improved`` else 1; with ``edge_weight=None`` every weight
    is 1 and ``improved`` has no effect: PyG's quirk, kept). Degrees of 0 give
    0 instead of inf. Returns ``(edge_index, edge_weight)`` as PyG does; with
    self-loops the edge count depends on the data, so under jit use
    :func:`gcn_norm_static`.
    """
    op = "gcn_norm"
    edge_index, edge_weight, n = _arguments(edge_index, edge_weight, num_nodes, flow, op=op)
    if add_self_loops:
        edge_index, edge_weight = add_remaining_self_loops(
            edge_index, edge_weight, 2.0 if improved else 1.0, n)
    return _normalise(edge_index, edge_weight, n, flow, dtype)


@sharding_aware
def gcn_norm_static(edge_index: ArrayLike, edge_weight: Optional[ArrayLike] = None, *,
                    num_nodes: int, improved: bool = False, add_self_loops: bool = True,
                    flow: str = "source_to_target",
                    dtype: Any = None,
                    out_sharding: OutSharding = None) -> tuple[jax.Array, jax.Array]:
    """:func:`gcn_norm` with a static shape, for jit: ``E + N`` edge slots with self-loops.

    Existing loops sit in the dropped slot (id ``num_nodes``, weight 0); the
    appended loops carry their weights. Node outputs equal :func:`gcn_norm`'s.
    """
    op = "gcn_norm_static"
    edge_index, edge_weight, n = _arguments(edge_index, edge_weight, num_nodes, flow, op=op)
    return gcn_weights_static(edge_index, edge_weight, n, improved=improved,
                              add_self_loops=add_self_loops, flow=flow, dtype=dtype)


def gcn_weights_static(edge_index: jax.Array, edge_weight: Optional[jax.Array], n: int, *,
                       improved: bool = False, add_self_loops: bool = True,
                       flow: str = "source_to_target",
                       dtype: Any = None) -> tuple[jax.Array, jax.Array]:
    """:func:`gcn_norm_static` on a checked graph, as the layers hold it after
    ``graph_input``: ``edge_index [2, E]`` ids in ``[0, n]``, ``edge_weight`` None or
    ``[E]``, ``flow`` one of PyG's two. Validates nothing again.

    Returns ``(edge_index [2, E + n], edge_weight [E + n])`` with self-loops, else
    ``[2, E]`` / ``[E]``.
    """
    if add_self_loops:
        edge_index, edge_weight = remaining_loops_static(
            edge_index, edge_weight, 2.0 if improved else 1.0, n, op="gcn_norm_static")
    return _normalise(edge_index, edge_weight, n, flow, dtype)
