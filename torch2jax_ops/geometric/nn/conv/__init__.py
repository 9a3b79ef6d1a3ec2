"""``torch_geometric.nn.conv`` on JAX: one private module per conv family, each with its converter."""
# attention and gating family
from ._agnn_conv import AGNNConv

# propagation and spectral family
from ._appnp import APPNP
from ._arma_conv import ARMAConv

# edge, relational and point family
from ._cg_conv import CGConv
from ._cheb_conv import ChebConv
from ._cluster_gcn_conv import ClusterGCNConv
from ._dna_conv import DNAConv
from ._edge_conv import EdgeConv
from ._film_conv import FiLMConv
from ._gat_conv import GATConv
from ._gated_graph_conv import GatedGraphConv
from ._gatv2_conv import GATv2Conv
from ._gcn2_conv import GCN2Conv
from ._gcn_conv import GCNConv
from ._gen_conv import GENConv
from ._general_conv import GeneralConv
from ._gin_conv import GINConv, GINEConv
from ._graph_conv import GraphConv
from ._heat_conv import HEATConv
from ._hetero_conv import HeteroConv
from ._hgt_conv import HGTConv
from ._le_conv import LEConv
from ._mixhop_conv import MixHopConv
from ._nn_conv import NNConv
from ._pna_conv import PNAConv
from ._point_net_conv import PointNetConv
from ._res_gated_graph_conv import ResGatedGraphConv
from ._rgat_conv import TracedRGATConv  # noqa: F401  (registers RGATConv's converter)
from ._rgcn_conv import FastRGCNConv, RGCNConv
from ._sage_conv import SAGEConv
from ._sg_conv import SGConv
from ._supergat_conv import SuperGATConv
from ._tag_conv import TAGConv
from ._transformer_conv import TransformerConv
from ._wl_conv import WLConv

__all__ = ["GCNConv", "GraphConv", "SAGEConv", "GINConv", "GINEConv", "GATConv",
           # attention and gating family
           "GATv2Conv", "TransformerConv", "SuperGATConv", "AGNNConv", "GeneralConv",
           "ResGatedGraphConv", "GatedGraphConv", "FiLMConv",
           # propagation and spectral family
           "SGConv", "TAGConv", "ChebConv", "APPNP", "GCN2Conv", "ARMAConv", "MixHopConv",
           "DNAConv", "LEConv", "ClusterGCNConv",
           # edge, relational and point family
           "EdgeConv", "PNAConv", "RGCNConv", "FastRGCNConv", "GENConv", "NNConv", "CGConv",
           "PointNetConv",
           # heterogeneous family
           "HGTConv", "HEATConv", "HeteroConv",
           # colour refinement (concrete inputs only)
           "WLConv",
           ]
