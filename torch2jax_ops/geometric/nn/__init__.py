"""``torch_geometric.nn`` on JAX: layers as equinox modules, with PyG's math and parameter names.

``GCNConv``, ``GraphConv``, ``SAGEConv``, ``GINConv``, ``GINEConv``,
``GATConv`` and ``MLP`` compute what the PyG layers of the same names
compute, with their call signatures and parameter names. Importing this
package registers their converters, so :func:`torch2jax_ops.nn.from_torch`
turns a trained PyG layer into its port (weights shared zero-copy over
DLPack); older PyG checkpoints load with ``GCNConv.from_state_dict`` /
``GATConv.from_state_dict``. The graph readouts ``global_*_pool`` are here
too, as in PyG.
"""
from .._pool import global_add_pool, global_max_pool, global_mean_pool
from ._message_passing import MessagePassing
from ._models import MLP, BatchNorm
from .conv import GATConv, GCNConv, GINConv, GINEConv, GraphConv, SAGEConv

__all__ = ["MessagePassing", "GCNConv", "GraphConv", "SAGEConv", "GINConv", "GINEConv", "GATConv", "MLP",
           "BatchNorm", "global_add_pool", "global_mean_pool", "global_max_pool"]
