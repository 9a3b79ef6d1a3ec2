"""Padding graphs to a few size buckets, so a stream of graphs compiles a few times, not per shape.

A jitted function recompiles for every new input shape. Real data (graphs of
10 to 10,000 nodes, mini-batches of varying size) would compile per batch;
padding every batch up to the next size of a short ladder bounds the number of
compilations by the number of ladder levels.

Convention (jraph's ``pad_with_graphs``): the real nodes, edges and graphs
come first; the padding nodes form one extra *padding graph* (id = number of
real graphs) and the padding edges join the first padding node to itself.
Nothing real touches the padding, so every conv, degree, softmax and pooling
of the real part is exactly what it is without padding; masks say which rows
are real. The result is an ordinary ``(x, edge_index, batch)`` mini-batch that
PyG would also accept.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .._checking import as_array, is_traced, static_int
from ._edges import edge_array

__all__ = ["PaddedGraph", "BucketLadder", "pad_graph", "pad_to_bucket"]


class PaddedGraph(NamedTuple):
    """A padded mini-batch. Shapes: ``x [N, *F]``, ``edge_index [2, E]``,
    ``edge_attr [E, *D]`` or None, ``batch [N]``, masks ``[N]``, ``[E]``, ``[G]``
    (``G`` graphs including the padding graph). Real rows come first."""
    x: jax.Array
    edge_index: jax.Array
    edge_attr: Optional[jax.Array]
    batch: jax.Array
    node_mask: jax.Array
    edge_mask: jax.Array
    graph_mask: jax.Array

    @property
    def num_nodes(self) -> int:
        return self.x.shape[0]

    @property
    def num_graphs(self) -> int:
        return self.graph_mask.shape[0]


def _rows(a: jax.Array, total: int, value: Any = 0) -> jax.Array:
    pad = [(0, total - a.shape[0])] + [(0, 0)] * (a.ndim - 1)
    return jnp.pad(a, pad, constant_values=value)


def pad_graph(x, edge_index, *, num_nodes: int, num_edges: int, edge_attr=None, batch=None,
              num_graphs: Optional[int] = None) -> PaddedGraph:
    """Pad one graph or a mini-batch to exactly ``num_nodes`` nodes and ``num_edges`` edges.

    Args:
      x: ``[n, *F]`` node features of the ``n`` real nodes.
      edge_index: ``[2, e]`` edges among them.
      num_nodes, num_edges: the padded sizes (Python ints); ``num_nodes`` must
        leave room for at least one padding node (``num_nodes > n``).
      edge_attr: ``[e, *D]`` or None; padding rows are zeros.
      batch: ``[n]`` sorted graph ids, or None for a single graph.
      num_graphs: the padded number of graphs including the padding graph
        (default: real graphs + 1). Graph ids past the padding graph are empty.

    Returns:
      A :class:`PaddedGraph`.
    """
    op = "pad_graph"
    x = as_array(x, "x", op=op)
    n = x.shape[0]
    edge_index = edge_array(edge_index, op=op)
    e = edge_index.shape[1]
    num_nodes = static_int(num_nodes, "num_nodes", op=op)
    num_edges = static_int(num_edges, "num_edges", op=op)
    if num_nodes <= n:
        raise ValueError(f"{op}: `num_nodes`={num_nodes} leaves no room for the padding node: "
                         f"the graph has {n} nodes, so pass num_nodes >= {n + 1}")
    if num_edges < e:
        raise ValueError(f"{op}: `num_edges`={num_edges} is smaller than the {e} real edges; "
                         f"pass num_edges >= {e}")
    edge_array(edge_index, n, op=op)
    if batch is None:
        batch = jnp.zeros((n,), edge_index.dtype)
        real_graphs = 1
    else:
        batch = as_array(batch, "batch", op=op)
        if batch.shape != (n,):
            raise ValueError(f"{op}: `batch` must have one graph id per node ({n}), got "
                             f"shape {tuple(batch.shape)}")
        if is_traced(batch):
            raise TypeError(f"{op}: pads on the host, before jit: call it on concrete arrays "
                            f"(the padded sizes decide the shapes jit compiles for)")
        real_graphs = int(np.asarray(batch).max()) + 1 if n else 0
    num_graphs = real_graphs + 1 if num_graphs is None else static_int(num_graphs, "num_graphs", op=op)
    if num_graphs <= real_graphs:
        raise ValueError(f"{op}: `num_graphs`={num_graphs} leaves no room for the padding graph: "
                         f"the batch has {real_graphs} graphs, so pass num_graphs >= "
                         f"{real_graphs + 1}")
    pad_node = jnp.asarray(n, edge_index.dtype)
    edges = jnp.concatenate(
        [edge_index, jnp.full((2, num_edges - e), pad_node, edge_index.dtype)], axis=1)
    if edge_attr is not None:
        edge_attr = as_array(edge_attr, "edge_attr", op=op)
        if edge_attr.shape[0] != e:
            raise ValueError(f"{op}: `edge_attr` must have one row per edge ({e}), got shape "
                             f"{tuple(edge_attr.shape)}")
        edge_attr = _rows(edge_attr, num_edges)
    return PaddedGraph(
        x=_rows(x, num_nodes),
        edge_index=edges,
        edge_attr=edge_attr,
        batch=_rows(batch.astype(edge_index.dtype), num_nodes, real_graphs),
        node_mask=jnp.arange(num_nodes) < n,
        edge_mask=jnp.arange(num_edges) < e,
        graph_mask=jnp.arange(num_graphs) < real_graphs,
    )


@dataclasses.dataclass(frozen=True)
class BucketLadder:
    """Padded sizes, one ``(nodes, edges, graphs)`` triple per level.

    :meth:`pick` chooses the lowest level that fits a batch in every dimension
    at once, so a stream of batches compiles at most ``len(levels)`` times.
    """
    nodes: tuple
    edges: tuple
    graphs: tuple

    def __post_init__(self):
        if not (len(self.nodes) == len(self.edges) == len(self.graphs)) or not self.nodes:
            raise ValueError("BucketLadder: `nodes`, `edges` and `graphs` need one entry per "
                             "level, and at least one level")
        for name in ("nodes", "edges", "graphs"):
            values = getattr(self, name)
            if list(values) != sorted(values):
                raise ValueError(f"BucketLadder: `{name}` must be non-decreasing, got {values}")

    @classmethod
    def geometric(cls, max_nodes: int, max_edges: int, max_graphs: int = 1, levels: int = 8,
                  min_nodes: int = 16, min_edges: int = 32, multiple: int = 8) -> "BucketLadder":
        """``levels`` sizes growing geometrically up to the largest batch expected.

        Node and edge sizes leave room for the padding node / graph and are
        rounded up to a ``multiple`` (friendlier to vectorised kernels).
        """
        def ladder(low: int, high: int) -> tuple:
            high = max(high, low)
            ratio = (high / low) ** (1 / max(levels - 1, 1))
            sizes = [low * ratio ** k for k in range(levels)]
            return tuple(int(math.ceil(s / multiple) * multiple) for s in sizes)
        graphs = tuple(int(math.ceil(g)) for g in np.geomspace(2, max_graphs + 1, levels))
        return cls(ladder(min_nodes, max_nodes + 1), ladder(min_edges, max_edges), graphs)

    @property
    def levels(self) -> int:
        return len(self.nodes)

    def pick(self, num_nodes: int, num_edges: int, num_graphs: int = 1) -> int:
        """The lowest level with room for the batch and its padding node and graph."""
        for level, (n, e, g) in enumerate(zip(self.nodes, self.edges, self.graphs)):
            if num_nodes < n and num_edges <= e and num_graphs < g:
                return level
        raise ValueError(
            f"BucketLadder.pick: a batch of {num_nodes} nodes, {num_edges} edges and "
            f"{num_graphs} graphs does not fit the largest level (nodes {self.nodes[-1]}, "
            f"edges {self.edges[-1]}, graphs {self.graphs[-1]}, padding included); build the "
            f"ladder for larger batches")


def pad_to_bucket(ladder: BucketLadder, x, edge_index, *, edge_attr=None, batch=None) -> PaddedGraph:
    """:func:`pad_graph` to the lowest level of ``ladder`` that fits this batch."""
    x = as_array(x, "x", op="pad_to_bucket")
    edge_index = edge_array(edge_index, op="pad_to_bucket")
    graphs = 1 if batch is None else (int(np.asarray(batch).max()) + 1 if x.shape[0] else 0)
    level = ladder.pick(x.shape[0], edge_index.shape[1], graphs)
    return pad_graph(x, edge_index, num_nodes=ladder.nodes[level],
                     num_edges=ladder.edges[level], edge_attr=edge_attr, batch=batch,
                     num_graphs=ladder.graphs[level])
