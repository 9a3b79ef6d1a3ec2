"""``torch_geometric.utils`` on JAX: PyG's graph utilities with its signatures and numerics.

The same functions are importable from :mod:`torch2jax_ops.geometric`; this
namespace mirrors PyG's (``from torch_geometric.utils import softmax`` ->
``from torch2jax_ops.geometric.utils import softmax``).
"""
from .._dense import to_dense_batch
from .._loops import (add_remaining_self_loops, add_remaining_self_loops_static, add_self_loops,
                      remove_self_loops, remove_self_loops_static)
from .._norm import degree
from .._scatter import scatter
from .._softmax import softmax

__all__ = ["scatter", "degree", "softmax", "add_self_loops", "add_remaining_self_loops",
           "add_remaining_self_loops_static", "remove_self_loops", "remove_self_loops_static",
           "to_dense_batch"]
