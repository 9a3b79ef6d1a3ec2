"""Self-loops: ``add_self_loops``, ``add_remaining_self_loops``, ``remove_self_loops``.

``add_self_loops`` has a static output shape (``E + N`` edges) and works
under ``jax.jit`` as it is. Removing or replacing loops deletes edges, so
PyG's output shape depends on the data: the plain functions reproduce PyG
exactly on concrete arrays, and their ``*_static`` versions keep all ``E``
slots and route the deleted edges to the dropped node id ``num_nodes`` (see
:mod:`torch2jax_ops.geometric.message_passing`), which every op here ignores.
"""
from __future__ import annotations

from typing import Any, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ..._checking import REDUCTIONS, as_array, check_reduce, is_traced
from ..._sharding import OutSharding, sharding_aware
from .._core._edges import aggregate, edge_array, node_count

__all__ = ["add_self_loops", "append_self_loops", "loop_attributes", "route_self_loops",
           "add_remaining_self_loops",
           "add_remaining_self_loops_static", "remaining_loops_static",
           "remove_self_loops", "remove_self_loops_static"]

FillValue = Union[None, float, int, str, jax.Array]


def _attr(edge_attr: Any, num_edges: int, *, op: str) -> Optional[jax.Array]:
    if edge_attr is None:
        return None
    edge_attr = as_array(edge_attr, "edge_attr", op=op)
    if edge_attr.ndim == 0 or edge_attr.shape[0] != num_edges:
        raise ValueError(f"{op}: `edge_attr` must have one row per edge ({num_edges}), got shape "
                         f"{tuple(edge_attr.shape)}")
    return edge_attr


def loop_attributes(edge_attr: jax.Array, fill_value: FillValue, col: jax.Array, num_nodes: int,
                    *, op: str) -> jax.Array:
    """The attributes of the ``num_nodes`` new loops, by PyG's ``fill_value`` rule.

    ``col`` holds the targets of the edges of ``edge_attr`` (ids of dropped
    edges, ``>= num_nodes``, count for no node).
    """
    shape = (num_nodes,) + edge_attr.shape[1:]
    if fill_value is None:
        return jnp.ones(shape, edge_attr.dtype)
    if isinstance(fill_value, str):
        # a string names a reduction of each node's incoming edge attributes
        reduce = check_reduce(fill_value, REDUCTIONS, "fill_value", op=op)
        return aggregate(edge_attr, col, num_nodes, reduce, op=op)
    value = jnp.asarray(fill_value, edge_attr.dtype)
    return jnp.broadcast_to(value, shape)


def _loops(num_nodes: int, dtype: Any) -> jax.Array:
    loop = jnp.arange(num_nodes, dtype=dtype)
    return jnp.stack([loop, loop])


@sharding_aware
def add_self_loops(edge_index: ArrayLike, edge_attr: Optional[ArrayLike] = None,
                   fill_value: FillValue = None,
                   num_nodes: Optional[int] = None,
                   *, out_sharding: OutSharding = None) -> tuple[jax.Array, Optional[jax.Array]]:
    """PyG's ``add_self_loops``: append one loop ``(i, i)`` per node, existing loops or not.

    Args:
      edge_index: ``[2, E]`` integer array.
      edge_attr: ``None`` or ``[E, *F]`` edge weights/features.
      fill_value: the new loops' attributes: ``None`` -> 1, a number or an array
        broadcast to ``[N, *F]``, or a reduction name (``"mean"``, ``"sum"``,
        ``"max"``, ...) of each node's incoming edge attributes.
      num_nodes: ``N``; needed under jit (else ``edge_index.max() + 1``).

    Returns:
      ``(edge_index [2, E + N], edge_attr [E + N, *F] or None)``.
    """
    op = "add_self_loops"
    edge_index = edge_array(edge_index, op=op)
    n = node_count(num_nodes, edge_index, op=op)
    edge_array(edge_index, n, op=op)
    return append_self_loops(edge_index, _attr(edge_attr, edge_index.shape[1], op=op), fill_value,
                             n, op=op)


def append_self_loops(edge_index: jax.Array, edge_attr: Optional[jax.Array],
                      fill_value: FillValue, num_nodes: int, *,
                      op: str = "add_self_loops") -> tuple[jax.Array, Optional[jax.Array]]:
    """:func:`add_self_loops` on checked arguments (ids may exceed ``num_nodes``: dropped)."""
    out_index = jnp.concatenate([edge_index, _loops(num_nodes, edge_index.dtype)], axis=1)
    if edge_attr is None:
        return out_index, None
    loop_attr = loop_attributes(edge_attr, fill_value, edge_index[1], num_nodes, op=op)
    return out_index, jnp.concatenate([edge_attr, loop_attr], axis=0)


def route_self_loops(edge_index: jax.Array, num_nodes: int) -> jax.Array:
    """Every loop ``(i, i)`` of a checked ``edge_index`` becomes ``(num_nodes, num_nodes)``."""
    loop = edge_index[0] == edge_index[1]
    return jnp.where(loop[None, :], jnp.asarray(num_nodes, edge_index.dtype), edge_index)


@sharding_aware
def remove_self_loops_static(edge_index: ArrayLike, edge_attr: Optional[ArrayLike] = None, *,
                             num_nodes: int,
                             out_sharding: OutSharding = None) -> tuple[jax.Array, Optional[jax.Array]]:
    """:func:`remove_self_loops` with a static shape: loops go to the dropped slot.

    Returns ``(edge_index [2, E], edge_attr)`` where every loop ``(i, i)`` is now
    ``(num_nodes, num_nodes)``, which no op here counts; ``edge_attr`` is
    returned unchanged (its rows of dropped edges are ignored downstream).
    """
    op = "remove_self_loops_static"
    edge_index = edge_array(edge_index, op=op)
    n = node_count(num_nodes, edge_index, op=op)
    edge_array(edge_index, n, op=op)
    return route_self_loops(edge_index, n), _attr(edge_attr, edge_index.shape[1], op=op)


def _concrete(edge_index: jax.Array, static: str, *, op: str) -> None:
    if is_traced(edge_index):
        raise TypeError(
            f"{op}: the number of edges it returns depends on the data, which jax.jit cannot "
            f"compile. Use {static}(..., num_nodes=N) instead: same edges in the same slots, "
            f"deleted ones routed to the dropped node id N, which every torch2jax_ops.geometric "
            f"op ignores")


@sharding_aware
def remove_self_loops(edge_index: ArrayLike, edge_attr: Optional[ArrayLike] = None,
                      *, out_sharding: OutSharding = None
                      ) -> tuple[jax.Array, Optional[jax.Array]]:
    """PyG's ``remove_self_loops``: the edges ``(i, j)`` with ``i != j``, in order.

    Needs a concrete ``edge_index`` (the output size depends on it); under jit
    use :func:`remove_self_loops_static`.
    """
    op = "remove_self_loops"
    edge_index = edge_array(edge_index, op=op)
    _concrete(edge_index, "remove_self_loops_static", op=op)
    edge_attr = _attr(edge_attr, edge_index.shape[1], op=op)
    keep = np.flatnonzero(np.asarray(edge_index[0] != edge_index[1]))
    return edge_index[:, keep], None if edge_attr is None else edge_attr[keep]


@sharding_aware
def add_remaining_self_loops_static(edge_index: ArrayLike,
                                    edge_attr: Optional[ArrayLike] = None,
                                    fill_value: FillValue = None, *,
                                    num_nodes: int,
                                    out_sharding: OutSharding = None) -> tuple[jax.Array, Optional[jax.Array]]:
    """:func:`add_remaining_self_loops` with a static shape (``E + N`` edge slots).

    Existing loops move to the dropped slot; the appended loop of node ``i``
    carries the attribute of ``i``'s existing loop if it has one (the last one
    if several; its gradient goes to each of them, as torch's), else ``fill_value`` (``None`` -> 1, a number, an array, or a
    reduction name over each node's incoming edges, loops included).
    """
    op = "add_remaining_self_loops_static"
    edge_index = edge_array(edge_index, op=op)
    n = node_count(num_nodes, edge_index, op=op)
    edge_array(edge_index, n, op=op)
    edge_attr = _attr(edge_attr, edge_index.shape[1], op=op)
    return remaining_loops_static(edge_index, edge_attr, fill_value, n, op=op)


def remaining_loops_static(edge_index: jax.Array, edge_attr: Optional[jax.Array],
                           fill_value: FillValue, n: int, *,
                           op: str) -> tuple[jax.Array, Optional[jax.Array]]:
    """:func:`add_remaining_self_loops_static` on checked inputs (a layer's graph).

    Trusts its inputs: ``edge_index [2, E]`` integer ids in ``[0, n]`` and ``edge_attr``
    ``None`` or ``[E, *F]``, as :func:`add_remaining_self_loops_static` and the layers'
    ``graph_input`` leave them; it validates nothing again.
    """
    num_edges = edge_index.shape[1]
    loop = edge_index[0] == edge_index[1]
    out_index = jnp.concatenate([route_self_loops(edge_index, n), _loops(n, edge_index.dtype)],
                                axis=1)
    if edge_attr is None:
        return out_index, None
    loop_attr = loop_attributes(edge_attr, fill_value, edge_index[1], n, op=op)
    # The last existing loop of each node wins: scatter the edge position, take the max.
    slot = jnp.where(loop, edge_index[1], n)  # a loop's source is its target: key by target
    last = jax.ops.segment_max(jnp.where(loop, jnp.arange(num_edges), -1), slot, n)
    has = last >= 0
    taken = edge_attr[jnp.clip(last, 0, max(num_edges - 1, 0))] if num_edges else loop_attr
    shape = (n,) + (1,) * (edge_attr.ndim - 1)
    if num_edges:
        # the value is the last loop's, but the gradient goes to every loop of the node, as
        # torch's (PyG's loop_attr[i] = edge_attr[loops]: index_put's backward hands each
        # written value the gradient, overwritten duplicates included); `d - stop(d)` is 0
        # (where finite: an inf loop attribute keeps its value, inf - inf would be nan)
        mask = loop.reshape((num_edges,) + (1,) * (edge_attr.ndim - 1))
        every = jax.ops.segment_sum(jnp.where(mask, edge_attr, 0), slot, n + 1)[:n]
        fixed = jax.lax.stop_gradient(every)
        zero = jnp.where(jnp.isfinite(fixed), every - fixed, 0)
        taken = jax.lax.stop_gradient(taken) + zero
    loop_attr = jnp.where(has.reshape(shape), taken, loop_attr)
    return out_index, jnp.concatenate([edge_attr, loop_attr], axis=0)


@sharding_aware
def add_remaining_self_loops(edge_index: ArrayLike, edge_attr: Optional[ArrayLike] = None,
                             fill_value: FillValue = None, num_nodes: Optional[int] = None,
                             *, out_sharding: OutSharding = None
                             ) -> tuple[jax.Array, Optional[jax.Array]]:
    """PyG's ``add_remaining_self_loops``: drop existing loops, append one loop per node.

    Returns ``(edge_index [2, E' + N], edge_attr)``: the non-loop edges in order,
    then ``(i, i)`` for every node; a node's new loop keeps the attribute of its
    old loop, others get ``fill_value`` (``None`` -> 1). With ``edge_attr=None``
    the fill value is not used (PyG's behaviour). Needs a concrete
    ``edge_index``; under jit use :func:`add_remaining_self_loops_static`.
    """
    op = "add_remaining_self_loops"
    edge_index = edge_array(edge_index, op=op)
    _concrete(edge_index, "add_remaining_self_loops_static", op=op)
    n = node_count(num_nodes, edge_index, op=op)
    static_index, static_attr = add_remaining_self_loops_static(
        edge_index, edge_attr, fill_value, num_nodes=n)
    num_edges = edge_index.shape[1]
    keep = np.concatenate([np.flatnonzero(np.asarray(edge_index[0] != edge_index[1])),
                           num_edges + np.arange(n)])
    return static_index[:, keep], None if static_attr is None else static_attr[keep]

