"""``torch_geometric.nn`` on JAX: convolution layers and MLP as equinox modules.

``GCNConv``, ``GraphConv``, ``SAGEConv``, ``GINConv``, ``GINEConv``,
``GATConv`` and ``MLP`` compute what the PyG layers of the same names compute
in eval mode, with their call signatures and parameter names. Get one from a
trained PyG layer (weights shared zero-copy over DLPack) with
:func:`torch2jax_ops.nn.from_torch`; older PyG checkpoints load with
``GCNConv.from_state_dict`` / ``GATConv.from_state_dict``.
"""
from .conv import GCNConv, GINConv, GINEConv, GraphConv, SAGEConv
from .gat import GATConv
from .models import MLP, BatchNorm

__all__ = ["GCNConv", "GraphConv", "SAGEConv", "GINConv", "GINEConv", "GATConv", "MLP",
           "BatchNorm"]
