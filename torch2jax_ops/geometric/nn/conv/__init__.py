"""``torch_geometric.nn.conv`` on JAX: one private module per conv family, each with its converter."""
from ._gat_conv import GATConv
from ._gcn_conv import GCNConv
from ._gin_conv import GINConv, GINEConv
from ._graph_conv import GraphConv
from ._sage_conv import SAGEConv

__all__ = ["GCNConv", "GraphConv", "SAGEConv", "GINConv", "GINEConv", "GATConv"]
