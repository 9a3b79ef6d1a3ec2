"""Induced subgraphs: ``subgraph`` and ``k_hop_subgraph``, exact and static.

PyG's outputs keep only the selected edges (and nodes), a size read off the
data. The plain functions reproduce PyG on concrete arrays; the ``*_static``
versions keep every edge slot and route the removed edges to the dropped id
(see :mod:`torch2jax_ops.geometric`), and return the masks PyG computes
(``edge_mask [E]``, and ``node_mask [N]`` for the k-hop neighbourhood), from
which PyG's result is ``edge_index[:, edge_mask]`` /
``jnp.flatnonzero(node_mask)`` outside jit.

The dropped id is the number of node slots of the graph the returned edges
index: ``N`` (``num_nodes``), except for :func:`subgraph_static` with an
*index* ``subset`` and ``relabel_nodes=True``, whose edges index
``x[subset]`` (``len(subset)`` slots, the dropped id ``len(subset)``). With a
boolean ``subset`` (or a k-hop mask) and ``relabel_nodes=True`` the kept nodes
take the ids ``0 .. K-1`` in node order and the graph is seen as ``N`` slots
whose last ``N - K`` are empty.
"""
from __future__ import annotations

import functools
from typing import Any, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ..._checking import as_array, static_int
from ..._sharding import OutSharding, sharding_aware
from .._core._edges import check_ids, edge_array, node_count
from ._coalesce import require_concrete

__all__ = ["subgraph", "subgraph_static", "k_hop_subgraph", "k_hop_subgraph_static",
           "check_flag"]

FLOWS = ("source_to_target", "target_to_source")


def check_flag(value: Any, name: str, *, op: str) -> bool:
    """A Python bool option (it decides the computation, so it cannot be traced)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{op}: `{name}` must be a Python bool, got {value!r}")
    return bool(value)


def _subset_mask(subset: Any, edge_index: jax.Array, num_nodes: Any, *,
                 op: str) -> tuple[jax.Array, Optional[jax.Array], int]:
    """(node_mask [N], the index subset or None, N), PyG's reading of ``subset``."""
    if isinstance(subset, (list, tuple)):
        subset = np.asarray(subset, dtype=np.int64).reshape(-1)
        subset = jnp.asarray(subset, jnp.asarray(0).dtype)  # int32 unless x64
    subset = as_array(subset, "subset", op=op)
    if subset.dtype == jnp.bool_:
        if subset.ndim != 1:
            raise ValueError(f"{op}: a boolean `subset` is a node mask of shape [num_nodes], "
                             f"got shape {tuple(subset.shape)}")
        return subset, None, subset.shape[0]  # PyG: num_nodes = subset.size(0)
    if not jnp.issubdtype(subset.dtype, jnp.integer) or subset.ndim != 1:
        raise TypeError(f"{op}: `subset` must be a boolean node mask [num_nodes] or a 1-D "
                        f"integer array of node ids, got {subset.dtype} of shape "
                        f"{tuple(subset.shape)}")
    n = node_count(num_nodes, edge_index, op=op)
    check_ids(subset, n, "subset", op=op)  # id n: a padding entry, selects nothing
    mask = jnp.zeros((n,), bool).at[subset].set(True, mode="drop")
    return mask, subset, n


def _ends(node_mask: jax.Array, edge_index: jax.Array) -> jax.Array:
    """``node_mask[row] & node_mask[col]``; an end at the dropped id is False."""
    padded = jnp.concatenate([node_mask, jnp.zeros((1,), bool)])
    n = node_mask.shape[0]
    return padded[jnp.clip(edge_index[0], 0, n)] & padded[jnp.clip(edge_index[1], 0, n)]


def _relabel_mask(node_mask: jax.Array, edge_index: jax.Array, keep: jax.Array) -> jax.Array:
    """Kept nodes -> ``0 .. K-1`` in node order; removed edges -> ``N``."""
    n = node_mask.shape[0]
    new_id = (jnp.cumsum(node_mask.astype(jnp.int32)) - 1).astype(edge_index.dtype)
    new_id = jnp.concatenate([new_id, jnp.full((1,), n, edge_index.dtype)])
    mapped = new_id[jnp.clip(edge_index, 0, n)]
    return jnp.where(keep[None, :], mapped, jnp.asarray(n, edge_index.dtype))


def _subgraph(subset: Any, edge_index: Any, edge_attr: Any, relabel_nodes: Any,
              num_nodes: Any, *, op: str):
    edge_index = edge_array(edge_index, op=op)
    relabel_nodes = check_flag(relabel_nodes, "relabel_nodes", op=op)
    node_mask, index, n = _subset_mask(subset, edge_index, num_nodes, op=op)
    edge_array(edge_index, n, op=op)
    if edge_attr is not None:
        edge_attr = as_array(edge_attr, "edge_attr", op=op)
        if edge_attr.ndim == 0 or edge_attr.shape[0] != edge_index.shape[1]:
            raise ValueError(f"{op}: `edge_attr` must have one row per edge "
                             f"({edge_index.shape[1]}), got shape {tuple(edge_attr.shape)}")
    return _subgraph_core(node_mask, index, edge_index, edge_attr, relabel_nodes, n)


@functools.partial(jax.jit, static_argnums=(4, 5))
def _subgraph_core(node_mask: jax.Array, index: Optional[jax.Array], edge_index: jax.Array,
                   edge_attr: Optional[jax.Array], relabel_nodes: bool, n: int) -> tuple:
    keep = _ends(node_mask, edge_index)
    if not relabel_nodes:
        out = jnp.where(keep[None, :], edge_index, jnp.asarray(n, edge_index.dtype))
    elif index is None:
        out = _relabel_mask(node_mask, edge_index, keep)
    else:
        # PyG's map_index: node subset[k] -> k (a repeated id keeps its last position)
        k = index.shape[0]
        position = jnp.full((n + 1,), -1, jnp.int32).at[index].max(
            jnp.arange(k, dtype=jnp.int32), mode="drop")
        mapped = position[jnp.clip(edge_index, 0, n)].astype(edge_index.dtype)
        out = jnp.where(keep[None, :], mapped, jnp.asarray(k, edge_index.dtype))
    return out, edge_attr, keep


@sharding_aware
def subgraph_static(subset: Union[ArrayLike, Sequence[int]], edge_index: ArrayLike,
                    edge_attr: Optional[ArrayLike] = None, relabel_nodes: bool = False,
                    num_nodes: Optional[int] = None, *, return_edge_mask: bool = False,
                    out_sharding: OutSharding = None) -> Any:
    """:func:`subgraph` with a static shape: every edge slot kept, removed edges dropped.

    Args:
      subset: a boolean node mask ``[N]`` or node ids ``[K]`` (the id ``N``: a
        padding entry that selects nothing).
      edge_index: ``[2, E]``.
      edge_attr: ``None`` or ``[E, *F]``, returned unchanged (rows of removed
        edges are ignored downstream).
      relabel_nodes: mask subset: kept nodes become ``0 .. K-1`` in node order;
        index subset: ``subset[k]`` becomes ``k``.
      num_nodes: ``N`` for an index ``subset``; required under ``jax.jit`` (a
        mask gives ``N = subset.shape[0]``, as in PyG).
      return_edge_mask: also return ``edge_mask [E]``.

    Returns:
      ``(edge_index [2, E], edge_attr[, edge_mask [E]])``: an edge with both ends
      in ``subset`` keeps its slot, every other edge becomes the dropped edge
      (``(N, N)``; ``(K, K)`` for an index subset relabelled). PyG's result is
      ``edge_index[:, edge_mask]`` (and ``edge_attr[edge_mask]``).
    """
    op = "subgraph_static"
    out, edge_attr, keep = _subgraph(subset, edge_index, edge_attr, relabel_nodes, num_nodes,
                                     op=op)
    if check_flag(return_edge_mask, "return_edge_mask", op=op):
        return out, edge_attr, keep
    return out, edge_attr


@sharding_aware
def subgraph(subset: Union[ArrayLike, Sequence[int]], edge_index: ArrayLike,
             edge_attr: Optional[ArrayLike] = None, relabel_nodes: bool = False,
             num_nodes: Optional[int] = None, *, return_edge_mask: bool = False,
             out_sharding: OutSharding = None) -> Any:
    """``torch_geometric.utils.subgraph``: the edges with both ends in ``subset``.

    Args:
      subset: a boolean node mask ``[N]`` (then ``N = subset.shape[0]``) or node
        ids (array or list).
      edge_index: ``[2, E]`` (concrete: the output size depends on it).
      edge_attr: ``None`` or ``[E, *F]``.
      relabel_nodes: renumber the kept nodes ``0 .. K-1`` (in ``subset``'s order for
        ids, node order for a mask).
      num_nodes: ``N`` for an index ``subset`` (default ``edge_index.max() + 1``).
      return_edge_mask: also return the boolean ``edge_mask [E]``.

    Returns:
      ``(edge_index [2, E'], edge_attr [E', *F] or None[, edge_mask [E]])``.
      Under ``jax.jit`` use :func:`subgraph_static`.
    """
    op = "subgraph"
    edge_index = edge_array(edge_index, op=op)
    require_concrete(edge_index, "subgraph_static",
                     "every edge slot kept, removed edges routed to the dropped id, and "
                     "return_edge_mask=True gives PyG's edge_mask", op=op)
    out, edge_attr, keep = _subgraph(subset, edge_index, edge_attr, relabel_nodes, num_nodes,
                                     op=op)
    kept = np.flatnonzero(np.asarray(keep))
    out = out[:, kept]
    attr: Any = edge_attr
    edge_attr = None if attr is None else attr[kept]
    if check_flag(return_edge_mask, "return_edge_mask", op=op):
        return out, edge_attr, keep
    return out, edge_attr


# ------------------------------------------------------------------------ k-hop subgraph

def _node_ids(node_idx: Any, n: int, *, op: str) -> jax.Array:
    if isinstance(node_idx, (int, np.integer)) and not isinstance(node_idx, bool):
        node_idx = [int(node_idx)]
    if isinstance(node_idx, (list, tuple)):
        node_idx = jnp.asarray(np.asarray(node_idx, dtype=np.int64).reshape(-1),
                               jnp.asarray(0).dtype)
    node_idx = as_array(node_idx, "node_idx", op=op)
    if not jnp.issubdtype(node_idx.dtype, jnp.integer):
        raise TypeError(f"{op}: `node_idx` must hold integer node ids, got {node_idx.dtype}")
    node_idx = node_idx.reshape(-1)
    check_ids(node_idx, n, "node_idx", op=op)  # the id n: a padding entry, reaches nothing
    return node_idx


def _k_hop(node_idx: Any, num_hops: Any, edge_index: Any, relabel_nodes: Any, num_nodes: Any,
           flow: Any, directed: Any, *, op: str):
    edge_index = edge_array(edge_index, op=op)
    hops = static_int(num_hops, "num_hops", op=op)
    if hops is None:
        raise TypeError(f"{op}: `num_hops` must be an int >= 0, got None")
    relabel_nodes = check_flag(relabel_nodes, "relabel_nodes", op=op)
    directed = check_flag(directed, "directed", op=op)
    if flow not in FLOWS:
        raise ValueError(f"{op}: `flow` must be one of {', '.join(map(repr, FLOWS))}, "
                         f"got {flow!r}")
    n = node_count(num_nodes, edge_index, op=op)
    edge_array(edge_index, n, op=op)
    seeds = _node_ids(node_idx, n, op=op)
    return _k_hop_core(seeds, edge_index, hops, n, flow, directed, relabel_nodes)


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5, 6))
def _k_hop_core(seeds: jax.Array, edge_index: jax.Array, hops: int, n: int, flow: str,
                directed: bool, relabel_nodes: bool) -> tuple:
    # PyG: source_to_target walks edges backwards (from targets to their sources)
    row, col = (edge_index[0], edge_index[1]) if flow == "target_to_source" else (
        edge_index[1], edge_index[0])
    real = (row < n) & (col < n)
    frontier = jnp.zeros((n,), bool).at[seeds].set(True, mode="drop")
    reached, preserved = frontier, jnp.zeros(row.shape, bool)
    for _ in range(hops):
        crossed = _ends(frontier, jnp.stack([row, row])) & real
        preserved = preserved | crossed
        frontier = jnp.zeros((n,), bool).at[jnp.where(crossed, col, n)].set(True, mode="drop")
        reached = reached | frontier
    if directed:
        edge_mask = preserved
    else:
        edge_mask = _ends(reached, jnp.stack([row, col])) & real
    rank = jnp.cumsum(reached.astype(jnp.int32)) - 1
    rank = jnp.concatenate([rank, jnp.full((1,), n, rank.dtype)])  # a padding seed: n
    mapping = rank[jnp.clip(seeds, 0, n)].astype(edge_index.dtype)
    if relabel_nodes:
        out = _relabel_mask(reached, edge_index, edge_mask)
    else:
        out = jnp.where(edge_mask[None, :], edge_index, jnp.asarray(n, edge_index.dtype))
    return reached, out, mapping, edge_mask


@sharding_aware
def k_hop_subgraph_static(node_idx: Union[int, Sequence[int], ArrayLike], num_hops: int,
                          edge_index: ArrayLike, relabel_nodes: bool = False,
                          num_nodes: Optional[int] = None, flow: str = "source_to_target",
                          directed: bool = False, *, out_sharding: OutSharding = None) -> tuple:
    """:func:`k_hop_subgraph` with static shapes: a node mask instead of the node list.

    Args:
      node_idx: the centre node(s): an int, a list or a 1-D array ``[S]``.
      num_hops: ``k`` (a Python int: the hops unroll).
      edge_index: ``[2, E]``.
      relabel_nodes: renumber the reached nodes ``0 .. K-1`` in node order.
      num_nodes: ``N``; required under ``jax.jit``.
      flow: ``"source_to_target"`` (the nodes whose messages reach ``node_idx``
        within ``k`` hops: edges are followed from target to source) or
        ``"target_to_source"``.
      directed: keep only the edges crossed while expanding (else every edge
        between reached nodes).

    Returns:
      ``(node_mask [N], edge_index [2, E], mapping [S], edge_mask [E])``: PyG's
      ``subset`` is ``jnp.flatnonzero(node_mask)``, its ``edge_index`` is
      ``edge_index[:, edge_mask]``; removed edges are ``(N, N)`` here; ``mapping``
      is the position of each ``node_idx`` among the reached nodes.
    """
    return _k_hop(node_idx, num_hops, edge_index, relabel_nodes, num_nodes, flow, directed,
                  op="k_hop_subgraph_static")


@sharding_aware
def k_hop_subgraph(node_idx: Union[int, Sequence[int], ArrayLike], num_hops: int,
                   edge_index: ArrayLike, relabel_nodes: bool = False,
                   num_nodes: Optional[int] = None, flow: str = "source_to_target",
                   directed: bool = False, *, out_sharding: OutSharding = None) -> tuple:
    """``torch_geometric.utils.k_hop_subgraph``: the ``k``-hop neighbourhood of ``node_idx``.

    Returns ``(subset [K], edge_index [2, E'], mapping [S], edge_mask [E])`` as
    PyG: the reached nodes sorted, the edges among them (or, with
    ``directed=True``, the edges crossed while expanding), the positions of
    ``node_idx`` in ``subset``, and the boolean edge mask. Needs a concrete
    ``edge_index``; under ``jax.jit`` use :func:`k_hop_subgraph_static`.
    Arguments as :func:`k_hop_subgraph_static`.
    """
    op = "k_hop_subgraph"
    edge_index = edge_array(edge_index, op=op)
    require_concrete(edge_index, "k_hop_subgraph_static",
                     "a node mask [N] instead of the node list, every edge slot kept with "
                     "the removed ones routed to the dropped id N", op=op)
    reached, out, mapping, edge_mask = _k_hop(node_idx, num_hops, edge_index, relabel_nodes,
                                              num_nodes, flow, directed, op=op)
    subset = jnp.asarray(np.flatnonzero(np.asarray(reached)), edge_index.dtype)
    return subset, out[:, np.flatnonzero(np.asarray(edge_mask))], mapping, edge_mask
