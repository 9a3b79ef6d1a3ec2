"""``shard_graph``: one graph on a mesh, its edges split over the devices; ``ShardedGraph``."""
from __future__ import annotations

import math
from typing import Any, Optional, Union

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .._checking import is_traced
from .._sharding import tag_array
from ._layout import EdgeTag, GraphLayout

__all__ = ["ShardedGraph", "shard_graph", "place"]

Axes = Union[None, str, tuple]


def place(array: Any, mesh: Mesh, spec: P) -> jax.Array:
    """A host array as a global array on ``mesh`` with ``spec``; every process passes the same data.

    Only this process's shards are copied to its devices (``make_array_from_callback``),
    so it works with one process or many (``jax.distributed``).
    """
    host = np.asarray(array)
    host = host.astype(jax.dtypes.canonicalize_dtype(host.dtype), copy=False)
    return jax.make_array_from_callback(host.shape, NamedSharding(mesh, spec),
                                        lambda index: host[index])


class ShardedGraph:
    """A graph on a mesh: a pytree whose arrays every ``geometric.nn`` layer takes as they are.

    ``x [n, *F]`` (replicated, or split by row ranges over ``node_axis``; ``n``
    is ``num_nodes`` or that padded to a multiple of the device count),
    ``edge_index [2, E_pad]`` and ``edge_attr [E_pad, *D]`` (or None) split over
    the edge axes: device ``d`` holds the edges whose target lies in its node
    range, in their original order, padded with dropped edges ``(n, n)``;
    ``edge_id [E_pad]``: each slot's position in the original edge list (-1
    for padding), to bring per-edge results back to the original order.

    ``layer(g.x, g.edge_index)`` runs the layer on the shard_map path
    (:mod:`torch2jax_ops.distributed`), under ``jax.jit`` or not. Rows past
    ``num_nodes`` are padding: ``out[:g.num_nodes]``.
    """
    __slots__ = ("x", "edge_index", "edge_attr", "edge_id", "layout")
    # declared for the type checker only (set in __init__ via object.__setattr__)
    x: Any
    edge_index: Any
    edge_attr: Any
    edge_id: Any
    layout: GraphLayout

    def __init__(self, x: Any, edge_index: Any, edge_attr: Any, edge_id: Any,
                 layout: GraphLayout):
        for name, value in (("x", x), ("edge_index", edge_index), ("edge_attr", edge_attr),
                            ("edge_id", edge_id), ("layout", layout)):
            object.__setattr__(self, name, value)
        tag_array(edge_index, EdgeTag(layout, "edge_index"))
        if edge_attr is not None:
            tag_array(edge_attr, EdgeTag(layout, "edge"))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("ShardedGraph is immutable (a pytree): build a new one with "
                             "shard_graph, or jax.tree.map over it")

    @property
    def mesh(self) -> Mesh:
        return self.layout.mesh

    @property
    def num_nodes(self) -> int:
        """Real nodes (rows of ``x`` past it are padding)."""
        return self.layout.num_nodes

    @property
    def num_edges(self) -> int:
        """Real edges (the other slots are dropped padding)."""
        return self.layout.num_edges

    @property
    def edge_axis(self) -> tuple:
        return self.layout.axes

    @property
    def node_axis(self) -> Optional[str]:
        return self.layout.node_axis

    def __repr__(self) -> str:
        lay = self.layout
        return (f"ShardedGraph(num_nodes={lay.num_nodes}, num_edges={lay.num_edges}, "
                f"x={tuple(np.shape(self.x))}, edge slots {lay.k} x {lay.e_block}, "
                f"edge_axis={lay.axes}, node_axis={lay.node_axis})")


def _flatten(g: ShardedGraph):
    children = (g.x, g.edge_index, g.edge_attr, g.edge_id)
    keys = ("x", "edge_index", "edge_attr", "edge_id")
    return tuple((jax.tree_util.GetAttrKey(k), c) for k, c in zip(keys, children)), g.layout


def _unflatten(layout: GraphLayout, children: Any) -> ShardedGraph:
    # the tracers jax.jit builds for a graph are tagged here, so `layer(g.x, g.edge_index)`
    # inside a jitted function finds the layout
    x, edge_index, edge_attr, edge_id = children
    return ShardedGraph(x, edge_index, edge_attr, edge_id, layout)


jax.tree_util.register_pytree_with_keys(
    ShardedGraph, _flatten, _unflatten,
    flatten_func=lambda g: ((g.x, g.edge_index, g.edge_attr, g.edge_id), g.layout))


def _axes(mesh: Mesh, edge_axis: Axes, node_axis: Optional[str], op: str) -> tuple:
    names = tuple(mesh.axis_names)
    if edge_axis is None:
        axes = (node_axis,) + tuple(a for a in names if a != node_axis) if node_axis else names
    else:
        axes = (edge_axis,) if isinstance(edge_axis, str) else tuple(edge_axis)
    for a in axes + ((node_axis,) if node_axis else ()):
        if a not in names:
            raise ValueError(f"{op}: the mesh has no axis {a!r} (its axes: {names}); pass "
                             f"edge_axis= / node_axis= among them")
    if len(set(axes)) != len(axes) or not axes:
        raise ValueError(f"{op}: `edge_axis` must name distinct mesh axes, got {edge_axis!r}")
    if node_axis is not None and axes[0] != node_axis:
        raise ValueError(
            f"{op}: `node_axis`={node_axis!r} must be the first (major) of the edge axes "
            f"{axes}: node ranges are owned by the devices that hold their edges. Pass "
            f"edge_axis=({node_axis!r}, ...) or leave edge_axis=None")
    return axes


def shard_graph(x: Any, edge_index: Any, *, mesh: Mesh, edge_attr: Any = None,
                edge_axis: Axes = None, node_axis: Optional[str] = None) -> ShardedGraph:
    """Place a graph on ``mesh``: no device holds all edges; every layer takes the result as it is.

    Args:
      x: ``[N, *F]`` node features (host or device array; read on the host).
      edge_index: ``[2, E]`` edges ``source -> target`` with ids in ``[0, N]``
        (``N``, the dropped slot, marks edges that reach no node: they are
        left out).
      mesh: a ``jax.sharding.Mesh`` (Auto or Explicit axes).
      edge_attr: ``[E, *D]`` per-edge features or weights, or None.
      edge_axis: the mesh axis (or tuple of axes) the edges are split over;
        default: all of the mesh's axes.
      node_axis: None to replicate ``x`` on every device, or the first edge axis
        to split its rows by range (``x`` padded with zero rows to a multiple
        of the device count).

    Returns:
      A :class:`ShardedGraph`. Device ``d`` of the ``k`` edge devices owns the
      node rows ``[d * ceil(n / k), (d + 1) * ceil(n / k))`` and holds the
      edges into them, padded to the largest such set with dropped edges
      ``(n, n)``: ``k`` equal blocks of slots, balanced as far as the
      in-degrees of the node ranges are (renumber the nodes first to balance
      a skewed graph). Every process of a multi-process run passes the same
      host arrays; each places only its own shards.
    """
    op = "shard_graph"
    if not isinstance(mesh, Mesh):
        raise TypeError(f"{op}: `mesh` must be a jax.sharding.Mesh (jax.make_mesh(...)), got "
                        f"{type(mesh).__name__}")
    if is_traced(x) or is_traced(edge_index) or is_traced(edge_attr):
        raise TypeError(f"{op}: places data on the devices from the host, before jit: call it on "
                        f"concrete arrays, outside jax.jit")
    x = np.asarray(x)
    ei = np.asarray(edge_index)
    if x.ndim == 0:
        raise ValueError(f"{op}: `x` must have a node axis, got a 0-d array")
    if ei.ndim != 2 or ei.shape[0] != 2 or not np.issubdtype(ei.dtype, np.integer):
        raise ValueError(f"{op}: `edge_index` must be an integer array of shape [2, num_edges], "
                         f"got shape {ei.shape} and dtype {ei.dtype}")
    num_nodes, num_edges = x.shape[0], ei.shape[1]
    if ei.size and (ei.min() < 0 or ei.max() > num_nodes):
        raise IndexError(f"{op}: `edge_index` has ids outside [0, {num_nodes}] (min {ei.min()}, "
                         f"max {ei.max()}); ids are rows of x, {num_nodes} marks a dropped edge")
    attr = None
    if edge_attr is not None:
        attr = np.asarray(edge_attr)
        if attr.ndim == 0 or attr.shape[0] != num_edges:
            raise ValueError(f"{op}: `edge_attr` must have one row per edge ({num_edges}), got "
                             f"shape {attr.shape}")
    axes = _axes(mesh, edge_axis, node_axis, op)
    k = math.prod(mesh.shape[a] for a in axes)
    n = num_nodes if node_axis is None else -(-num_nodes // k) * k
    block = max(-(-n // k), 1)

    src, dst = ei[0].astype(np.int64), ei[1].astype(np.int64)
    kept = np.flatnonzero(dst < num_nodes)          # edges into the dropped slot do nothing
    owner = dst[kept] // block
    order = kept[np.argsort(owner, kind="stable")]  # by owner, original order within
    counts = np.bincount(owner, minlength=k)
    e_block = max(int(counts.max()) if counts.size else 0, 1)
    while e_block == n or e_block * k == n:          # keep edge and node lengths apart
        e_block += 1
    sorted_owner = dst[order] // block
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    slots = sorted_owner * e_block + (np.arange(order.size) - starts[sorted_owner])

    total = k * e_block
    index = np.full((2, total), n, ei.dtype)
    index[0, slots] = np.where(src[order] >= num_nodes, n, src[order])
    index[1, slots] = dst[order]
    edge_id = np.full((total,), -1, np.int32 if num_edges < 2**31 else np.int64)
    edge_id[slots] = order
    edge = P(axes if len(axes) > 1 else axes[0])
    placed_attr = None
    if attr is not None:
        padded = np.zeros((total,) + attr.shape[1:], attr.dtype)
        padded[slots] = attr[order]
        placed_attr = place(padded, mesh, edge)
    if n != num_nodes:
        x = np.concatenate([x, np.zeros((n - num_nodes,) + x.shape[1:], x.dtype)])
    layout = GraphLayout(mesh=mesh, axes=axes, node_axis=node_axis, num_nodes=num_nodes,
                         num_edges=num_edges, n=n, block=block, e_block=e_block)
    return ShardedGraph(place(x, mesh, P(node_axis) if node_axis else P()),
                        place(index, mesh, P(None, edge[0])), placed_attr,
                        place(edge_id, mesh, edge), layout)
