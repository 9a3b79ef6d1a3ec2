"""torch_geometric on JAX: PyG's graph utilities with its signatures and numerics.

* edges and messages: ``edge_index [2, E]``, messages flow
  ``edge_index[0] -> edge_index[1]`` (PyG's ``source_to_target``);
* utilities: :func:`degree`, :func:`softmax`, :func:`add_self_loops`,
  :func:`add_remaining_self_loops`, :func:`remove_self_loops`, :func:`gcn_norm`,
  :func:`to_dense_batch`, and the pools :func:`global_add_pool`,
  :func:`global_mean_pool`, :func:`global_max_pool`;
* jit: sizes PyG reads off the data (``num_nodes``, ``size``, ``batch_size``,
  ``max_num_nodes``) are Python ints here, and the ops whose output shape
  depends on the data have ``*_static`` versions that route deleted edges to
  the dropped node id ``num_nodes``;
* padding (:mod:`.data`): :func:`pad_graph`, :class:`BucketLadder`,
  :func:`pad_to_bucket`, so a stream of graphs compiles a few times;
* layers: :mod:`torch2jax_ops.geometric.nn`.

Layout: ``utils/`` (PyG's utilities), ``nn/`` (``conv``, ``aggr``, ``norm``, ``pool``),
``data/`` (PyG's Data and batches, padding), ``loader/``, and ``_core/``, the private
graph core they share (edge checks and aggregation, adjacency, ``EdgeIndex``,
``SparseTensor``, the CPU kernel). ``_table*.py`` register PyG's functions in the
converter's fx table.
"""
from . import _table, nn, utils  # noqa: F401  (the fx table's PyG entries; nn's converters)
from . import _table_torch  # noqa: F401  (the fx table's entries for torch2jax_ops.torch)
from . import data, loader
from .._batch_vector import BatchVector
from ._core._edge_index import EdgeIndex
from ._core._sparse_tensor import SparseTensor
from .utils._norm import gcn_norm, gcn_norm_static
from .data._padding import BucketLadder, PaddedGraph, pad_graph, pad_to_bucket
from .nn.pool._global import global_add_pool, global_max_pool, global_mean_pool
# PyG's utilities: one list, in utils (the same function objects as there)
from .utils import (add_remaining_self_loops, add_remaining_self_loops_static, add_self_loops,
                    coalesce, coalesce_static, degree, dropout_edge, dropout_edge_static,
                    dropout_node, dropout_node_static, k_hop_subgraph, k_hop_subgraph_static,
                    negative_sampling, negative_sampling_static, remove_self_loops,
                    remove_self_loops_static, scatter, segment, softmax, sort_edge_index,
                    subgraph, subgraph_static, to_dense_adj, to_dense_batch, to_undirected,
                    to_undirected_static)
from .utils import segment_matmul  # pyg_lib.ops.segment_matmul

__all__ = [
    "nn", "utils", "data", "loader",
    "scatter", "degree", "softmax", "gcn_norm", "gcn_norm_static",
    "add_self_loops", "add_remaining_self_loops", "add_remaining_self_loops_static",
    "remove_self_loops", "remove_self_loops_static", "to_dense_batch",
    "global_add_pool", "global_mean_pool", "global_max_pool",
    "PaddedGraph", "BucketLadder", "pad_graph", "pad_to_bucket",
    "segment", "sort_edge_index", "coalesce", "coalesce_static", "to_undirected",
    "to_undirected_static", "subgraph", "subgraph_static", "k_hop_subgraph",
    "k_hop_subgraph_static", "dropout_edge", "dropout_edge_static", "dropout_node",
    "dropout_node_static", "negative_sampling", "negative_sampling_static", "to_dense_adj",
    "EdgeIndex", "BatchVector",
    "SparseTensor", "segment_matmul",
]
