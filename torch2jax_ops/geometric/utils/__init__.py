"""``torch_geometric.utils`` on JAX: PyG's graph utilities with its signatures and numerics.

The same functions are importable from :mod:`torch2jax_ops.geometric`; this
namespace mirrors PyG's (``from torch_geometric.utils import softmax`` ->
``from torch2jax_ops.geometric.utils import softmax``).
"""
from .._dense import to_dense_batch
from .._laplacian import get_laplacian, get_laplacian_static
from .._loops import (add_remaining_self_loops, add_remaining_self_loops_static, add_self_loops,
                      remove_self_loops, remove_self_loops_static)
from .._norm import degree
from .._scatter import scatter
from .._softmax import softmax

__all__ = ["scatter", "degree", "softmax", "add_self_loops", "add_remaining_self_loops",
           "add_remaining_self_loops_static", "remove_self_loops", "remove_self_loops_static",
           "to_dense_batch"]

__all__ += ["get_laplacian", "get_laplacian_static"]  # propagation and spectral family

from .._coalesce import (coalesce, coalesce_static, sort_edge_index,  # noqa: E402
                         to_undirected, to_undirected_static)
from .._dropout import (dropout_edge, dropout_edge_static, dropout_node,  # noqa: E402
                        dropout_node_static)
from .._negative_sampling import negative_sampling, negative_sampling_static  # noqa: E402
from .._segment import segment  # noqa: E402
from .._subgraph import (k_hop_subgraph, k_hop_subgraph_static, subgraph,  # noqa: E402
                         subgraph_static)
from .._to_dense_adj import to_dense_adj  # noqa: E402
from .._spmm import spmm, to_edge_index  # noqa: E402

__all__ += ["segment", "sort_edge_index", "coalesce", "coalesce_static", "to_undirected",
            "to_undirected_static", "subgraph", "subgraph_static", "k_hop_subgraph",
            "k_hop_subgraph_static", "dropout_edge", "dropout_edge_static", "dropout_node",
            "dropout_node_static", "negative_sampling", "negative_sampling_static",
            "to_dense_adj"]  # edge utilities family (issue 16: utils)
__all__ += ["spmm", "to_edge_index"]  # sparse adjacency (BCOO / BCSR from to_jax)

from .._segment_matmul import segment_matmul  # noqa: E402

__all__ += ["segment_matmul"]  # pyg_lib.ops.segment_matmul (HeteroLinear's kernel)
