"""Many devices and hosts: graphs split over a ``jax.sharding.Mesh``, data parallelism, bytes moved.

* :func:`shard_graph` places one graph on a mesh (edges split over the
  devices, node rows replicated or split); every ``geometric.nn`` layer takes
  its arrays as they are -- ``jax.jit(lambda m, g: m(g.x, g.edge_index))(layer, g)``
  -- and runs on the shard_map path: each device aggregates the edges into
  the node rows it owns, one collective per aggregation brings the rows to
  every device, so a layer communicates O(N * F), never O(E * F).
* :func:`segment_aggregate` / :func:`segment_softmax`: aggregations of your
  own messages over edges split in any order (``psum`` / ``pmax`` / ``pmin``
  of per-device partials).
* Data parallelism over padded graphs: :func:`stack_graphs`,
  :func:`shard_batch` (the batch axis over a data axis), :func:`replicate`
  (the model on every device); ``jax.vmap`` a per-graph model over the batch.
* :func:`collective_bytes`: the bytes a compiled program hands to collectives.

Every other op of the package (``torch_scatter``, ``geometric``) already works
on sharded arrays under ``jax.jit``, in Auto and Explicit sharding mode, and
takes ``out_sharding=``.
"""
from ._aggregate import segment_aggregate, segment_softmax
from ._data import replicate, shard_batch, stack_graphs
from ._graph import ShardedGraph, place, shard_graph
from ._hlo import collective_bytes, collective_summary, collectives
from ._layout import GraphLayout

__all__ = ["ShardedGraph", "GraphLayout", "shard_graph", "place", "segment_aggregate",
           "segment_softmax", "stack_graphs", "shard_batch", "replicate", "collective_bytes",
           "collective_summary", "collectives"]
