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
from jax.typing import ArrayLike

from ..._batch_vector import BatchVector
from ..._checking import as_array, is_traced, static_int
from ..._sharding import OutSharding, sharding_aware
from .._core._edges import edge_array

__all__ = ["PaddedGraph", "BucketLadder", "pad_graph", "pad_to_bucket", "label_level"]


class _PaddedGraphFields(NamedTuple):
    x: Optional[jax.Array]
    edge_index: jax.Array
    edge_attr: Optional[jax.Array]
    batch: jax.Array
    node_mask: jax.Array
    edge_mask: jax.Array
    graph_mask: jax.Array
    y: Optional[jax.Array] = None
    seed_mask: Optional[jax.Array] = None
    extras: Optional[dict] = None


class PaddedGraph(_PaddedGraphFields):
    """A padded mini-batch (a pytree: pass it to a jitted function as it is).

    Shapes: ``x [N, *F]`` (None for featureless graphs), ``edge_index [2, E]``,
    ``edge_attr [E, *D]`` or None, ``batch [N]``, masks ``node_mask [N]``,
    ``edge_mask [E]``, ``graph_mask [G]`` (``G`` graphs including the padding
    graph). Real rows come first.

    ``batch`` is a :class:`~torch2jax_ops.geometric.BatchVector`: the ids with
    the graph count ``G`` as static data, so a model that pools, densifies or
    normalises per graph the PyG way (``global_mean_pool(x, batch)``, no
    ``size``) compiles under ``jax.jit``; ``batch.ids`` is the plain array.
    Other attributes of the batch (``extras``) read as attributes too:
    ``g.train_mask`` is ``g.extras["train_mask"]``, as ``data.train_mask`` in PyG.

    Optional fields (default None / an empty dict, so older code that builds
    or reads the first seven fields keeps working):

    * ``y``: labels, node-level ``[N, *T]`` (real rows: ``node_mask``) or
      graph-level ``[G, *T]`` (real rows: ``graph_mask``); padding rows are 0;
    * ``seed_mask [N]``: the seed nodes of a ``NeighborLoader`` batch (its
      first ``batch_size`` nodes), where a node-level loss is taken;
    * ``extras``: every other attribute by name (``train_mask``, ``n_id``,
      ``edge_label``, ...), padded by the loaders; see
      :class:`torch2jax_ops.geometric.loader.JaxLoader` for the rules.
    """
    __slots__ = ()

    def __new__(cls, x, edge_index, edge_attr, batch, node_mask, edge_mask, graph_mask,
                y=None, seed_mask=None, extras=None):
        if batch is not None and not isinstance(batch, BatchVector) and \
                hasattr(batch, "shape") and hasattr(graph_mask, "shape"):
            batch = BatchVector(batch, graph_mask.shape[0], padded=True)
        return super().__new__(cls, x, edge_index, edge_attr, batch, node_mask, edge_mask,
                               graph_mask, y, seed_mask, {} if extras is None else extras)

    def __getattr__(self, name: str) -> Any:
        # only reached for names that are not fields: the batch's other attributes
        extras = self.extras
        if not name.startswith("__") and isinstance(extras, dict) and name in extras:
            return extras[name]
        raise AttributeError(
            f"PaddedGraph has no attribute {name!r} (fields: {', '.join(self._fields)}; "
            f"other attributes of the batch: {', '.join(sorted(extras or {})) or 'none'})")

    @property
    def num_nodes(self) -> int:
        """``N``, the padded number of nodes."""
        return self.node_mask.shape[0]

    @property
    def num_edges(self) -> int:
        """``E``, the padded number of edges."""
        return self.edge_mask.shape[0]

    @property
    def num_graphs(self) -> int:
        """``G``, the padded number of graphs (the padding graph included)."""
        return self.graph_mask.shape[0]


def _rows(a: jax.Array, total: int, value: Any = 0) -> jax.Array:
    pad = [(0, total - a.shape[0])] + [(0, 0)] * (a.ndim - 1)
    return jnp.pad(a, pad, constant_values=value)


def label_level(rows: Optional[int], num_nodes: int, num_graphs: int, level: Optional[str] = None,
            name: str = "y", *, op: str) -> str:
    """Whether labels with ``rows`` rows are node-level or graph-level: ``"node"`` or ``"graph"``.

    ``level`` forces the answer (checked against ``rows``). Otherwise one row per
    node means node-level and one per graph graph-level; when a batch has as
    many nodes as graphs (single-node graphs) node-level wins (pass ``level``).
    ``rows=None`` (a 0-d label) is graph-level for a single graph.
    """
    if level not in (None, "node", "graph"):
        raise ValueError(f"{op}: `{name}_level` must be 'node', 'graph' or None (decide from "
                         f"the shape), got {level!r}")
    if rows is None:
        rows = 1
        if level == "node" or num_graphs != 1:
            raise ValueError(f"{op}: `{name}` is 0-d: a single graph-level label, but the batch "
                             f"has {num_graphs} graphs; give it one row per graph")
        return "graph"
    if level is not None:
        expected = num_nodes if level == "node" else num_graphs
        if rows != expected:
            raise ValueError(f"{op}: `{name}` has {rows} rows, but {name}_level={level!r} needs "
                             f"one per {level} ({expected})")
        return level
    if rows == num_nodes:
        return "node"
    if rows == num_graphs:
        return "graph"
    raise ValueError(f"{op}: `{name}` has {rows} rows: neither one per node ({num_nodes}) nor one "
                     f"per graph ({num_graphs}); node- and graph-level labels are padded, other "
                     f"shapes are not (keep such labels in `extras`)")


@sharding_aware
def pad_graph(x: ArrayLike, edge_index: ArrayLike, *, num_nodes: int, num_edges: int,
              edge_attr: Optional[ArrayLike] = None, batch: Optional[ArrayLike] = None,
              num_graphs: Optional[int] = None, y: Optional[ArrayLike] = None,
              y_level: Optional[str] = None,
              num_seeds: Optional[int] = None, out_sharding: OutSharding = None) -> PaddedGraph:
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
      y: labels, ``[n, *T]`` (node-level, padded to ``num_nodes`` rows) or
        ``[graphs, *T]`` (graph-level, padded to ``num_graphs`` rows), padding 0.
      y_level: ``"node"`` or ``"graph"`` to say which (default: from the shape,
        node-level when both fit).
      num_seeds: the first ``num_seeds`` nodes are seeds (a ``NeighborLoader``
        batch's ``batch_size``): sets ``seed_mask [num_nodes]``.

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
    seed_mask = None
    if num_seeds is not None:
        num_seeds = static_int(num_seeds, "num_seeds", op=op)
        if num_seeds > n:
            raise ValueError(f"{op}: `num_seeds`={num_seeds} is more than the {n} real nodes")
        seed_mask = jnp.arange(num_nodes) < num_seeds
    if y is not None:
        y = as_array(y, "y", op=op)
        level = label_level(y.shape[0] if y.ndim else None, n, real_graphs, y_level, op=op)
        y = _rows(y.reshape(1) if y.ndim == 0 else y,
                  num_nodes if level == "node" else num_graphs)
    return PaddedGraph(
        x=_rows(x, num_nodes),
        edge_index=edges,
        edge_attr=edge_attr,
        batch=_rows(batch.astype(edge_index.dtype), num_nodes, real_graphs),
        node_mask=jnp.arange(num_nodes) < n,
        edge_mask=jnp.arange(num_edges) < e,
        graph_mask=jnp.arange(num_graphs) < real_graphs,
        y=y,
        seed_mask=seed_mask,
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
                  min_nodes: int = 16, min_edges: int = 32, multiple: int = 8) -> BucketLadder:
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

    @classmethod
    def from_sizes(cls, nodes, edges, graphs=None, *, quantiles: tuple = (0.5, 0.9, 1.0),
                   headroom: float = 1.0, merge_within: float = 1.2,
                   multiple: int = 8) -> BucketLadder:
        """A short ladder fitted to the batch sizes a loader produces.

        One level per quantile of the observed sizes (each dimension on its own,
        the top one being the largest batch, its nodes and edges times
        ``headroom``); a level within
        ``merge_within`` of the next one in both nodes and edges is merged into
        it, since a compilation costs far more than a few percent of padding.
        Nodes and graphs leave room for the padding node / graph; nodes and
        edges are rounded up to a ``multiple``.

        Args:
          nodes, edges: real nodes / edges per batch (sequences of ints).
          graphs: real graphs per batch (default: 1 each).
        """
        nodes = np.asarray(nodes, np.int64).reshape(-1)
        edges = np.asarray(edges, np.int64).reshape(-1)
        graphs = np.ones_like(nodes) if graphs is None else np.asarray(graphs, np.int64).reshape(-1)
        if not nodes.size or not (nodes.size == edges.size == graphs.size):
            raise ValueError(f"BucketLadder.from_sizes: `nodes`, `edges` and `graphs` need one "
                             f"entry per batch and at least one batch, got {nodes.size}, "
                             f"{edges.size} and {graphs.size}")
        qs = sorted(float(q) for q in quantiles)
        if not qs or qs[0] < 0 or qs[-1] > 1:
            raise ValueError(f"BucketLadder.from_sizes: `quantiles` must lie in [0, 1], got "
                             f"{quantiles}")
        if qs[-1] != 1.0:
            qs.append(1.0)

        def up(v: float) -> int:
            return int(math.ceil(v / multiple) * multiple)

        levels = []
        for q in qs:
            grow = headroom if q == 1.0 else 1.0
            n, e, g = (int(np.quantile(a, q, method="higher")) for a in (nodes, edges, graphs))
            levels.append((up(n * grow + 1), max(up(e * grow), multiple), g + 1))
        kept: list = []
        for level in reversed(levels):  # from the top: merge a level into the one above
            if kept and (level[0] * merge_within >= kept[-1][0]
                         and level[1] * merge_within >= kept[-1][1]):
                continue
            if kept:
                level = tuple(min(a, b) for a, b in zip(level, kept[-1]))
            kept.append(level)
        kept.reverse()
        return cls(*(tuple(v) for v in zip(*kept)))

    def grown(self, num_nodes: int, num_edges: int, num_graphs: int = 1, *,
              factor: float = 1.5, multiple: int = 8) -> BucketLadder:
        """This ladder plus one top level with room for the batch.

        Every dimension becomes ``max(the batch's size * 1.25, the old top *
        factor)``, so a stream of ever larger batches adds few levels. Levels
        never shrink, so :meth:`pick` still finds every batch that fitted
        before at its level.
        """
        def up(v: float) -> int:
            return max(int(math.ceil(v / multiple) * multiple), multiple)

        nodes = up(max((num_nodes + 1) * 1.25, self.nodes[-1] * factor))
        edges = up(max(num_edges * 1.25, self.edges[-1] * factor))
        graphs = int(math.ceil(max((num_graphs + 1) * 1.25, self.graphs[-1] * factor)))
        return BucketLadder(self.nodes + (nodes,), self.edges + (edges,), self.graphs + (graphs,))

    def fits(self, num_nodes: int, num_edges: int, num_graphs: int = 1) -> bool:
        """Whether the top level has room for the batch (padding node and graph included)."""
        return (num_nodes < self.nodes[-1] and num_edges <= self.edges[-1]
                and num_graphs < self.graphs[-1])

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


@sharding_aware
def pad_to_bucket(ladder: BucketLadder, x: ArrayLike, edge_index: ArrayLike, *,
                  edge_attr: Optional[ArrayLike] = None,
                  batch: Optional[ArrayLike] = None,
                  out_sharding: OutSharding = None) -> PaddedGraph:
    """:func:`pad_graph` to the lowest level of ``ladder`` that fits this batch."""
    x = as_array(x, "x", op="pad_to_bucket")
    edge_index = edge_array(edge_index, op="pad_to_bucket")
    graphs = 1 if batch is None else (int(np.asarray(batch).max()) + 1 if x.shape[0] else 0)
    level = ladder.pick(x.shape[0], edge_index.shape[1], graphs)
    return pad_graph(x, edge_index, num_nodes=ladder.nodes[level],
                     num_edges=ladder.edges[level], edge_attr=edge_attr, batch=batch,
                     num_graphs=ladder.graphs[level])
