"""``torch_geometric.utils`` on JAX: PyG's graph utilities with its signatures and numerics.

The same functions are importable from :mod:`torch2jax_ops.geometric`; this
namespace mirrors PyG's (``from torch_geometric.utils import softmax`` ->
``from torch2jax_ops.geometric.utils import softmax``). One module per family, each on
the scatter core (:mod:`torch2jax_ops.torch_scatter`) and the graph core
(:mod:`torch2jax_ops.geometric._core`); the ops whose output shape depends on the data
have ``*_static`` forms for jit.
"""
from ._coalesce import coalesce, coalesce_static, sort_edge_index, to_undirected, to_undirected_static
from ._dense import to_dense_batch
from ._dropout import dropout_edge, dropout_edge_static, dropout_node, dropout_node_static
from ._laplacian import get_laplacian, get_laplacian_static
from ._loops import (add_remaining_self_loops, add_remaining_self_loops_static, add_self_loops,
                     remove_self_loops, remove_self_loops_static)
from ._negative_sampling import negative_sampling, negative_sampling_static
from ._norm import degree
from ._scatter import scatter
from ._segment import segment
from ._segment_matmul import segment_matmul  # pyg_lib.ops.segment_matmul
from ._softmax import softmax
from ._spmm import spmm, to_edge_index
from ._subgraph import k_hop_subgraph, k_hop_subgraph_static, subgraph, subgraph_static
from ._to_dense_adj import to_dense_adj

__all__ = [
    # scatter, degrees, softmax
    "scatter", "segment", "degree", "softmax",
    # self-loops, ordering and merging, subgraphs, dropout, sampling
    "add_self_loops", "add_remaining_self_loops", "add_remaining_self_loops_static",
    "remove_self_loops", "remove_self_loops_static", "sort_edge_index", "coalesce",
    "coalesce_static", "to_undirected", "to_undirected_static", "subgraph", "subgraph_static",
    "k_hop_subgraph", "k_hop_subgraph_static", "dropout_edge", "dropout_edge_static",
    "dropout_node", "dropout_node_static", "negative_sampling", "negative_sampling_static",
    # dense and sparse forms, spectral
    "to_dense_batch", "to_dense_adj", "spmm", "to_edge_index", "get_laplacian",
    "get_laplacian_static",
    # pyg_lib
    "segment_matmul",
]
