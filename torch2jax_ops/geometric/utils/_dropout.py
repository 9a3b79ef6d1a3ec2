"""Random edge and node dropout: ``dropout_edge`` and ``dropout_node``, with an explicit key.

torch's random stream cannot be reproduced, so these match PyG in
distribution and structure, not draw for draw: an edge is kept when
``uniform(key, [E]) >= p`` (PyG: ``torch.rand(E) >= p``), a node when
``uniform(key, [N]) > p``; the kept edges are a subset of the input in their
order; with ``force_undirected`` an edge and its reverse go together; with
``training=False`` or ``p=0`` the input comes back as it is (no key needed).
The same key gives the same mask in the exact and in the ``*_static`` form.
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ..._checking import is_traced
from ..._sharding import OutSharding, sharding_aware
from .._core._edges import edge_array, node_count
from ._coalesce import require_concrete
from ._subgraph import check_flag, subgraph, subgraph_static

__all__ = ["dropout_edge", "dropout_edge_static", "dropout_node", "dropout_node_static",
           "check_rate", "check_key"]


def check_rate(p: Any, *, op: str) -> float:
    """A dropout probability in ``[0, 1]`` (a Python number: it decides the computation)."""
    if is_traced(p) or isinstance(p, bool) or not isinstance(p, (int, float, np.number)):
        raise TypeError(f"{op}: `p` must be a Python float in [0, 1], got {p!r}")
    if not 0.0 <= float(p) <= 1.0:
        raise ValueError(f"{op}: `p` (the dropout probability) must lie in [0, 1], got {p}")
    return float(p)


def check_key(key: Any, *, op: str) -> jax.Array:
    """The PRNG key of a random op; its absence is an error that says what to pass."""
    if key is None:
        raise ValueError(
            f"{op}: dropping at random needs a PRNG key: pass key=jax.random.key(seed) (a new "
            f"key per step). torch's random stream cannot be replayed, so the draws match PyG "
            f"in distribution, not one by one; training=False or p=0 needs no key")
    return key


def _edge_mask(edge_index: jax.Array, p: float, force_undirected: bool, n: Optional[int],
               key: Any, *, op: str) -> jax.Array:
    mask = jax.random.uniform(check_key(key, op=op), (edge_index.shape[1],)) >= p
    if force_undirected:  # PyG: edge_mask[row > col] = False (loops are kept)
        mask = mask & (edge_index[0] <= edge_index[1])
    if n is not None:  # a dropped input edge stays dropped
        mask = mask & (edge_index[0] < n) & (edge_index[1] < n)
    return mask


@sharding_aware
def dropout_edge_static(edge_index: ArrayLike, p: float = 0.5, force_undirected: bool = False,
                        training: bool = True, *, num_nodes: Optional[int] = None,
                        key: Optional[jax.Array] = None, out_sharding: OutSharding = None) -> tuple:
    """:func:`dropout_edge` with a static shape: dropped edges go to the dropped slot.

    Args:
      edge_index: ``[2, E]``.
      p: the probability of dropping an edge, in ``[0, 1]``.
      force_undirected: keep only edges ``row <= col`` that survive, each with its
        reverse (PyG drops every ``row > col`` edge first; a self-loop comes back
        twice, as in PyG).
      training: ``False`` returns the input (no key needed).
      num_nodes: ``N``, the dropped id; required under ``jax.jit``.
      key: a ``jax.random`` key (required when ``training`` and ``p > 0``).

    Returns:
      ``(edge_index [2, E], edge_mask [E])``; with ``force_undirected``
      ``edge_index`` is ``[2, 2E]``: slot ``e`` is edge ``e`` (or ``(N, N)``) and
      slot ``E + e`` its reverse. PyG's result is ``edge_index[:, edge_mask]``
      (force_undirected: ``edge_index[:, jnp.tile(edge_mask, 2)]``, and PyG's
      second output is ``jnp.tile(jnp.flatnonzero(edge_mask), 2)``).
    """
    op = "dropout_edge_static"
    edge_index = edge_array(edge_index, op=op)
    p = check_rate(p, op=op)
    force_undirected = check_flag(force_undirected, "force_undirected", op=op)
    training = check_flag(training, "training", op=op)
    if not training or p == 0.0:
        return edge_index, jnp.ones((edge_index.shape[1],), bool)
    n = node_count(num_nodes, edge_index, op=op)
    edge_array(edge_index, n, op=op)
    mask = _edge_mask(edge_index, p, force_undirected, n, key, op=op)
    out = jnp.where(mask[None, :], edge_index, jnp.asarray(n, edge_index.dtype))
    if force_undirected:
        out = jnp.concatenate([out, out[::-1]], axis=1)
    return out, mask


@sharding_aware
def dropout_edge(edge_index: ArrayLike, p: float = 0.5, force_undirected: bool = False,
                 training: bool = True, *, key: Optional[jax.Array] = None,
                 out_sharding: OutSharding = None) -> tuple:
    """``torch_geometric.utils.dropout_edge``: drop each edge with probability ``p``.

    Args:
      edge_index: ``[2, E]`` (concrete when ``training`` and ``p > 0``).
      p: the drop probability in ``[0, 1]``.
      force_undirected: drop every ``row > col`` edge, keep each surviving edge with
        its reverse (PyG's quirks: a kept self-loop appears twice, and the second
        output is the kept edges' ids, repeated, not a mask).
      training: ``False`` (or ``p=0``): the input, all-True mask.
      key: a ``jax.random`` key (required when ``training`` and ``p > 0``).

    Returns:
      ``(edge_index [2, E'], edge_mask [E])`` or, with ``force_undirected``,
      ``(edge_index [2, 2K], edge_id [2K])``. Draws differ from torch's (see the
      module docs). Under ``jax.jit`` use :func:`dropout_edge_static`.
    """
    op = "dropout_edge"
    edge_index = edge_array(edge_index, op=op)
    p = check_rate(p, op=op)
    force_undirected = check_flag(force_undirected, "force_undirected", op=op)
    training = check_flag(training, "training", op=op)
    if not training or p == 0.0:
        return edge_index, jnp.ones((edge_index.shape[1],), bool)
    require_concrete(edge_index, "dropout_edge_static",
                     "every edge slot kept, the dropped edges routed to the dropped id N", op=op)
    mask = _edge_mask(edge_index, p, force_undirected, None, key, op=op)
    kept = np.flatnonzero(np.asarray(mask))
    out = edge_index[:, kept]
    if not force_undirected:
        return out, mask
    out = jnp.concatenate([out, out[::-1]], axis=1)
    return out, jnp.asarray(np.tile(kept, 2), edge_index.dtype)


def _node_mask(n: int, p: float, key: Any, *, op: str) -> jax.Array:
    return jax.random.uniform(check_key(key, op=op), (n,)) > p  # PyG: rand(N) > p


@sharding_aware
def dropout_node_static(edge_index: ArrayLike, p: float = 0.5, num_nodes: Optional[int] = None,
                        training: bool = True, relabel_nodes: bool = False, *,
                        key: Optional[jax.Array] = None, out_sharding: OutSharding = None) -> tuple:
    """:func:`dropout_node` with a static shape: the edges of dropped nodes go to ``(N, N)``.

    Args:
      edge_index: ``[2, E]``.
      p: the probability of dropping a node, in ``[0, 1]``.
      num_nodes: ``N``; required under ``jax.jit``.
      training: ``False`` (or ``p=0``): the input, all-True masks.
      relabel_nodes: renumber the kept nodes ``0 .. K-1`` in node order (the graph
        is then ``N`` slots, the last ``N - K`` empty).
      key: a ``jax.random`` key (required when ``training`` and ``p > 0``).

    Returns:
      ``(edge_index [2, E], edge_mask [E], node_mask [N])``; PyG's edges are
      ``edge_index[:, edge_mask]``.
    """
    op = "dropout_node_static"
    edge_index = edge_array(edge_index, op=op)
    p = check_rate(p, op=op)
    training = check_flag(training, "training", op=op)
    check_flag(relabel_nodes, "relabel_nodes", op=op)
    n = node_count(num_nodes, edge_index, op=op)
    edge_array(edge_index, n, op=op)
    if not training or p == 0.0:
        return edge_index, jnp.ones((edge_index.shape[1],), bool), jnp.ones((n,), bool)
    node_mask = _node_mask(n, p, key, op=op)
    out, _, edge_mask = subgraph_static(node_mask, edge_index, None, relabel_nodes, n,
                                        return_edge_mask=True)
    return out, edge_mask, node_mask


@sharding_aware
def dropout_node(edge_index: ArrayLike, p: float = 0.5, num_nodes: Optional[int] = None,
                 training: bool = True, relabel_nodes: bool = False, *,
                 key: Optional[jax.Array] = None, out_sharding: OutSharding = None) -> tuple:
    """``torch_geometric.utils.dropout_node``: drop each node (and its edges) with probability ``p``.

    Returns ``(edge_index [2, E'], edge_mask [E], node_mask [N])`` as PyG: the
    edges between kept nodes (renumbered with ``relabel_nodes``). ``training=False``
    or ``p=0`` returns the input and all-True masks. Needs a concrete
    ``edge_index`` otherwise; under ``jax.jit`` use :func:`dropout_node_static`.
    Arguments as :func:`dropout_node_static`.
    """
    op = "dropout_node"
    edge_index = edge_array(edge_index, op=op)
    p = check_rate(p, op=op)
    training = check_flag(training, "training", op=op)
    check_flag(relabel_nodes, "relabel_nodes", op=op)
    n = node_count(num_nodes, edge_index, op=op)
    if not training or p == 0.0:
        return edge_index, jnp.ones((edge_index.shape[1],), bool), jnp.ones((n,), bool)
    require_concrete(edge_index, "dropout_node_static",
                     "every edge slot kept, the edges of dropped nodes routed to the dropped "
                     "id N", op=op)
    node_mask = _node_mask(n, p, key, op=op)
    out, _, edge_mask = subgraph(node_mask, edge_index, None, relabel_nodes, n,
                                 return_edge_mask=True)
    return out, edge_mask, node_mask
