"""Aggregations over edges split across devices in ANY order: per-device partials, one collective.

For messages computed on edge-sharded arrays by your own code (no
:func:`shard_graph` layout needed): each device reduces its edges with the
library's one-device implementation, then one collective on ``[N, *F]``
combines the partials -- ``psum`` for sums (``psum_scatter`` when the rows
are split over ``node_axis``), ``pmax`` / ``pmin`` for max / min (with a
custom derivative: ``pmax`` has none; tied maxima share the cotangent evenly,
across devices, as in one device), ``[sum | count]`` in one buffer for mean,
and for a softmax the ``pmax`` of the (gradient-free) group maximum, then
the ``psum`` of the exponentials. Communication: O(N * F), never O(E * F).
"""
from __future__ import annotations

import math
from typing import Any, Optional, Union

import jax
import jax.numpy as jnp
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from .. import _dtypes
from .._checking import as_array, check_index, check_reduce, static_int
from .._sharding import sharding_mode
from ..geometric._core._edges import aggregate, gather, valid

__all__ = ["segment_aggregate", "segment_softmax"]

Axes = Union[None, str, tuple]


def _axes(mesh: Mesh, edge_axis: Axes, node_axis: Optional[str], op: str) -> tuple:
    if not isinstance(mesh, Mesh):
        raise TypeError(f"{op}: `mesh` must be a jax.sharding.Mesh, got {type(mesh).__name__}")
    names = tuple(mesh.axis_names)
    axes = names if edge_axis is None else (
        (edge_axis,) if isinstance(edge_axis, str) else tuple(edge_axis))
    if not axes or any(a not in names for a in axes):
        raise ValueError(f"{op}: `edge_axis`={edge_axis!r} must name axes of the mesh {names}")
    if node_axis is not None and node_axis not in axes:
        raise ValueError(f"{op}: `node_axis`={node_axis!r} must be one of the edge axes {axes} "
                         f"(the rows are split over devices that hold edges)")
    return axes


def _name(axes: tuple) -> Any:
    return axes if len(axes) > 1 else axes[0]


def _map(body, mesh: Mesh, in_specs: tuple, out_specs: Any, *args: jax.Array) -> Any:
    """``jax.shard_map`` that also takes arguments placed otherwise (Explicit mode reshards)."""
    fixed = []
    for a, spec in zip(args, in_specs):
        if sharding_mode([a]) == "explicit":
            have = (tuple(jax.typeof(a).sharding.spec) + (None,) * a.ndim)[:a.ndim]
            if have != (tuple(spec) + (None,) * a.ndim)[:a.ndim]:
                a = jax.sharding.reshard(a, jax.sharding.NamedSharding(mesh, spec))
        fixed.append(a)
    return jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs)(*fixed)


def _combine_sum(part: jax.Array, axes: tuple, node_axis: Optional[str]) -> jax.Array:
    if node_axis is None:
        return jax.lax.psum(part, _name(axes))
    others = tuple(a for a in axes if a != node_axis)
    if others:
        part = jax.lax.psum(part, _name(others))
    return jax.lax.psum_scatter(part, node_axis, scatter_dimension=0, tiled=True)


def _own(full: jax.Array, node_axis: Optional[str]) -> jax.Array:
    if node_axis is None:
        return full
    rows = full.shape[0] // jax.lax.axis_size(node_axis)
    return jax.lax.dynamic_slice_in_dim(full, jax.lax.axis_index(node_axis) * rows, rows, 0)


def _extreme(kind: str, n: int, axes: tuple):
    """max/min over devices with torch's tie rule for the gradient (pmax has no derivative)."""
    segment = jax.ops.segment_max if kind == "max" else jax.ops.segment_min
    collective = jax.lax.pmax if kind == "max" else jax.lax.pmin

    def forward(m, i):
        best = collective(segment(m, i, n), _name(axes))
        count = jax.lax.psum(jax.ops.segment_sum(jnp.ones(i.shape, jnp.int32), i, n),
                             _name(axes))
        empty = (count == 0).reshape((-1,) + (1,) * (m.ndim - 1))
        return jnp.where(empty, jnp.zeros((), m.dtype), best), best

    @jax.custom_vjp
    def extreme(m, i):
        return forward(m, i)[0]

    def fwd(m, i):
        out, best = forward(m, i)
        return out, (m, i, best)

    def bwd(residuals, g):
        m, i, best = residuals
        win = valid(i, n).reshape((-1,) + (1,) * (m.ndim - 1)) & (m == gather(best, i))
        ties = jax.lax.psum(jax.ops.segment_sum(win.astype(g.dtype), i, n), _name(axes))
        share = gather(g / jnp.maximum(ties, 1), i)
        return jnp.where(win, share, jnp.zeros((), g.dtype)).astype(m.dtype), None

    extreme.defvjp(fwd, bwd)
    return extreme


def segment_aggregate(messages: Any, index: Any, num_nodes: int, reduce: str = "sum", *,
                      mesh: Mesh, edge_axis: Axes = None,
                      node_axis: Optional[str] = None) -> jax.Array:
    """PyG's ``scatter(messages, index, dim=0, dim_size=num_nodes, reduce=reduce)`` on split edges.

    Args:
      messages: ``[E, *F]``, split over ``edge_axis`` along axis 0 (E divisible
        by the number of devices; pad with ids ``num_nodes``, which reach no node).
      index: ``[E]`` target ids in ``[0, num_nodes]``, split like ``messages``,
        in any order.
      num_nodes: ``N``, a Python int.
      reduce: ``"sum"``/``"add"``, ``"mean"``, ``"max"``, ``"min"``.
      mesh, edge_axis: the mesh, and the axis (or axes) the edges are split over
        (default: all of the mesh's axes).
      node_axis: None for replicated output rows, or an edge axis to split them
        by range (``N`` divisible by its size).

    Returns:
      ``[N, *F]``; empty nodes get 0, as the one-device op gives.
    """
    op = "segment_aggregate"
    axes = _axes(mesh, edge_axis, node_axis, op)
    messages = as_array(messages, "messages", op=op)
    index = as_array(index, "index", op=op)
    check_index(index, op=op)
    n = static_int(num_nodes, "num_nodes", op=op)
    kind = check_reduce(reduce, ("sum", "add", "mean", "max", "min"), op=op,
                        hints={"mul": "a product across devices is not ported; use "
                                      "scatter(..., reduce='mul') on one device"})
    if index.shape != messages.shape[:1]:
        raise ValueError(f"{op}: `index` must have shape [E] = ({messages.shape[0]},), got "
                         f"{tuple(index.shape)}")
    k = math.prod(mesh.shape[a] for a in axes)
    if messages.shape[0] % k:
        raise ValueError(f"{op}: {messages.shape[0]} edges do not split evenly over {k} devices; "
                         f"pad them to a multiple of {k} with index {n} (the dropped slot)")
    if node_axis is not None and n % mesh.shape[node_axis]:
        raise ValueError(f"{op}: `num_nodes`={n} is not divisible by the size of node_axis "
                         f"{node_axis!r} ({mesh.shape[node_axis]}); pad the node rows")
    edge = P(_name(axes))

    def body(m: jax.Array, i: jax.Array) -> jax.Array:
        if kind == "sum":
            acc = _dtypes.accumulation_dtype(m.dtype)
            local = aggregate(m.astype(acc), i, n, "sum", op=op)
            return _combine_sum(local, axes, node_axis).astype(m.dtype)
        if kind == "mean":
            acc = _dtypes.accumulation_dtype(m.dtype)
            flat = m.reshape(m.shape[0], -1).astype(acc)
            both = jnp.concatenate([flat, jnp.ones((m.shape[0], 1), acc)], axis=1)
            both = _combine_sum(aggregate(both, i, n, "sum", op=op), axes, node_axis)
            total, count = both[:, :-1], jnp.maximum(both[:, -1:], 1)
            if jnp.issubdtype(m.dtype, jnp.integer):
                out = jax.lax.div(total.astype(m.dtype), count.astype(m.dtype))
            else:
                out = (total / count).astype(m.dtype)
            return out.reshape((out.shape[0],) + m.shape[1:])
        return _own(_extreme(kind, n, axes)(m, i), node_axis)

    return _map(body, mesh, (edge, edge), P(node_axis) if node_axis else P(), messages, index)


def segment_softmax(scores: Any, index: Any, num_nodes: int, *, mesh: Mesh,
                    edge_axis: Axes = None) -> jax.Array:
    """PyG's ``utils.softmax(scores, index, num_nodes=num_nodes)`` on edges split over devices.

    ``scores [E, *H]`` and ``index [E]`` split over ``edge_axis`` (any order)
    -> ``[E, *H]`` split the same way: ``exp(s - max) / (sum exp(s - max) +
    1e-16)`` per target, the max without gradient (as PyG); entries with the
    dropped id ``num_nodes`` give 0. Two collectives on ``[N, *H]``: the
    ``pmax`` of the per-node max, the ``psum`` of the sums.
    """
    op = "segment_softmax"
    axes = _axes(mesh, edge_axis, None, op)
    scores = as_array(scores, "scores", op=op)
    index = as_array(index, "index", op=op)
    check_index(index, op=op)
    n = static_int(num_nodes, "num_nodes", op=op)
    if not jnp.issubdtype(scores.dtype, jnp.floating):
        raise TypeError(f"{op}: `scores` must be floating point, got {scores.dtype}")
    if index.shape != scores.shape[:1]:
        raise ValueError(f"{op}: `index` must have shape [E] = ({scores.shape[0]},), got "
                         f"{tuple(index.shape)}")
    name = _name(axes)

    def body(s: jax.Array, i: jax.Array) -> jax.Array:
        keep = valid(i, n).reshape((-1,) + (1,) * (s.ndim - 1))
        s = jnp.where(keep, s, 0)
        top = jax.lax.pmax(jax.ops.segment_max(jax.lax.stop_gradient(s), i, n), name)
        e = jnp.exp(s - gather(top, i))
        total = jax.lax.psum(jax.ops.segment_sum(e, i, n), name) + 1e-16
        return jnp.where(keep, e / gather(total, i), 0).astype(s.dtype)

    return _map(body, mesh, (P(name), P(name)), P(name), scores, index)
