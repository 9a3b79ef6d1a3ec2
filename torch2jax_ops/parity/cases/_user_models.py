"""User-style models for the parity suite, written the way PyG users write theirs.

Module-level imports, classes with their own ``forward`` and their own
``MessagePassing`` layers (imported lazily by ``port_models.py``, so that
loading the suite does not import torch).
"""
from typing import Tuple

import torch
import torch.nn.functional as F
import torch_scatter
from torch import Tensor
from torch_geometric.nn import (GATConv, GCNConv, GINConv, GraphConv, MessagePassing,
                                SAGEConv, global_add_pool, global_max_pool, global_mean_pool)
from torch_geometric.utils import degree, scatter, softmax

#: a tensor read from outside the model (the global-constant case)
OFFSET = torch.linspace(-1, 1, 16)


class ResidualGCN(torch.nn.Module):
    """Residual blocks in a loop over a ModuleList; log-softmax head."""

    def __init__(self, f, c, hidden=16, layers=3):
        super().__init__()
        self.inp = torch.nn.Linear(f, hidden)
        self.convs = torch.nn.ModuleList([GCNConv(hidden, hidden) for _ in range(layers)])
        self.head = torch.nn.Linear(hidden, c)

    def forward(self, x, edge_index):
        x = self.inp(x).relu()
        for conv in self.convs:
            x = x + F.dropout(conv(x, edge_index).relu(), p=0.3, training=self.training)
        return F.log_softmax(self.head(x), dim=-1)

class JumpingSAGE(torch.nn.Module):
    """Jumping knowledge: every layer's output concatenated; batch norm between."""

    def __init__(self, f, c, hidden=12, layers=3):
        super().__init__()
        self.convs = torch.nn.ModuleList()
        self.norms = torch.nn.ModuleList()
        for i in range(layers):
            self.convs.append(SAGEConv(f if i == 0 else hidden, hidden))
            self.norms.append(torch.nn.BatchNorm1d(hidden))
        self.out = torch.nn.Linear(layers * hidden, c)

    def forward(self, x, edge_index):
        outs = []
        for conv, norm in zip(self.convs, self.norms):
            x = F.elu(norm(conv(x, edge_index)))
            outs.append(x)
        return self.out(torch.cat(outs, dim=-1))

class PooledGIN(torch.nn.Module):
    """Graph classification: GIN layers, sum and max readouts side by side."""

    def __init__(self, f, c, hidden=16):
        super().__init__()
        mlp = torch.nn.Sequential(torch.nn.Linear(f, hidden), torch.nn.ReLU(),
                                  torch.nn.Linear(hidden, hidden))
        self.conv1 = GINConv(mlp, train_eps=True)
        self.conv2 = GINConv(torch.nn.Sequential(torch.nn.Linear(hidden, hidden),
                                                 torch.nn.Tanh()))
        self.cls = torch.nn.Linear(2 * hidden, c)

    def forward(self, x, edge_index, batch, num_graphs: int):
        h = self.conv2(self.conv1(x, edge_index).relu(), edge_index)
        pooled = torch.cat([global_add_pool(h, batch, num_graphs),
                            global_max_pool(h, batch, num_graphs)], dim=1)
        return self.cls(pooled)

class SkipGAT(torch.nn.Module):
    """Multi-head attention with a linear skip connection around each layer."""

    def __init__(self, f, c, hidden=6, heads=3):
        super().__init__()
        self.gat1 = GATConv(f, hidden, heads=heads)
        self.skip1 = torch.nn.Linear(f, hidden * heads)
        self.gat2 = GATConv(hidden * heads, c, heads=2, concat=False)
        self.skip2 = torch.nn.Linear(hidden * heads, c)

    def forward(self, x, edge_index):
        x = F.elu(self.gat1(x, edge_index) + self.skip1(x))
        return self.gat2(x, edge_index) + self.skip2(x)

class EdgeMLPConv(MessagePassing):
    """A user layer with edge features and an MLP inside message; max aggregation."""

    def __init__(self, f, e, out):
        super().__init__(aggr="max")
        self.mlp = torch.nn.Sequential(torch.nn.Linear(2 * f + e, out), torch.nn.ReLU(),
                                       torch.nn.Linear(out, out))

    def forward(self, x, edge_index, edge_attr):
        return self.propagate(edge_index, x=x, edge_attr=edge_attr)

    def message(self, x_i, x_j, edge_attr):
        return self.mlp(torch.cat([x_i, x_j - x_i, edge_attr], dim=-1))

class EdgeNet(torch.nn.Module):
    def __init__(self, f, c, e):
        super().__init__()
        self.conv = EdgeMLPConv(f, e, 8)
        self.lin = torch.nn.Linear(8, c)

    def forward(self, x, edge_index, edge_attr):
        return self.lin(self.conv(x, edge_index, edge_attr))

class MeanUpdateConv(MessagePassing):
    """Weighted mean of neighbours, then an update that mixes in the node itself."""

    def __init__(self, f, out):
        super().__init__(aggr="mean")
        self.lin = torch.nn.Linear(2 * f, out)

    def forward(self, x, edge_index, edge_weight):
        return self.propagate(edge_index, x=x, edge_weight=edge_weight)

    def message(self, x_j, edge_weight):
        return edge_weight.view(-1, 1) * x_j

    def update(self, aggr_out, x):
        return self.lin(torch.cat([aggr_out, x], dim=-1))

class MeanNet(torch.nn.Module):
    def __init__(self, f, c):
        super().__init__()
        self.conv1 = MeanUpdateConv(f, 10)
        self.conv2 = MeanUpdateConv(10, c)

    def forward(self, x, edge_index, edge_weight):
        return self.conv2(self.conv1(x, edge_index, edge_weight).tanh(), edge_index,
                          edge_weight)

class BipartiteConv(MessagePassing):
    """Messages from one node set to another, sizes given explicitly."""

    def __init__(self, f_src, f_dst, out):
        super().__init__(aggr="add")
        self.src_lin = torch.nn.Linear(f_src, out)
        self.dst_lin = torch.nn.Linear(f_dst, out)

    def forward(self, x: Tuple[Tensor, Tensor], edge_index):
        h = (self.src_lin(x[0]), self.dst_lin(x[1]))
        return self.propagate(edge_index, x=h, size=(x[0].size(0), x[1].size(0)))

    def message(self, x_i, x_j):
        return torch.sigmoid(x_i) * x_j

class Bipartite(torch.nn.Module):
    def __init__(self, f, c):
        super().__init__()
        self.conv = BipartiteConv(f, f, c)

    def forward(self, x, edge_index):
        half = x.size(0) // 2
        keep = edge_index[1] < half
        del keep  # the edges below are bipartite by construction
        return self.conv((x, x[:half]), edge_index)

class AttentionConv(MessagePassing):
    """Attention over incoming edges with PyG's softmax (index and size_i)."""

    def __init__(self, f, out):
        super().__init__(aggr="add", node_dim=0)
        self.lin = torch.nn.Linear(f, out)
        self.att = torch.nn.Parameter(torch.randn(2 * out) * 0.3)

    def forward(self, x, edge_index):
        return self.propagate(edge_index, x=self.lin(x))

    def message(self, x_i, x_j, index, size_i):
        score = F.leaky_relu((torch.cat([x_i, x_j], dim=-1) * self.att).sum(dim=-1), 0.2)
        return x_j * softmax(score, index, num_nodes=size_i).unsqueeze(-1)

class NestedNet(torch.nn.Module):
    """User layers nested in a user model: attention layers, a residual, a mean readout."""

    def __init__(self, f, c):
        super().__init__()
        self.layers = torch.nn.ModuleList([AttentionConv(f, 8), AttentionConv(8, 8)])
        self.norm = torch.nn.LayerNorm(8)
        self.head = torch.nn.Linear(8, c)

    def forward(self, x, edge_index, batch, num_graphs: int):
        h = self.layers[0](x, edge_index).relu()
        h = self.norm(h + self.layers[1](h, edge_index))
        return self.head(global_mean_pool(h, batch, num_graphs))

class ScatterReadout(torch.nn.Module):
    """torch_scatter called directly in forward: max and mean per graph."""

    def __init__(self, f, c):
        super().__init__()
        self.conv = GraphConv(f, 12, aggr="mean")
        self.lin = torch.nn.Linear(24, c)

    def forward(self, x, edge_index, batch, num_graphs: int):
        h = self.conv(x, edge_index).relu()
        top = torch_scatter.scatter(h, batch, dim=0, dim_size=num_graphs, reduce="max")
        avg = torch_scatter.scatter_mean(h, batch, dim=0, dim_size=num_graphs)
        return self.lin(torch.cat([top, avg], dim=-1))

class DegreeScaled(torch.nn.Module):
    """Symmetric normalisation computed in forward with PyG's degree and scatter."""

    def __init__(self, f, c):
        super().__init__()
        self.lin = torch.nn.Linear(f, c)

    def forward(self, x, edge_index):
        row, col = edge_index
        deg = degree(col, x.size(0), dtype=x.dtype)
        norm = deg.clamp(min=1).pow(-0.5)
        h = self.lin(x)
        msg = h[row] * (norm[row] * norm[col]).view(-1, 1)
        return scatter(msg, col, dim=0, dim_size=x.size(0), reduce="sum") + h

class HeadsAndMasks(torch.nn.Module):
    """Shape work: split into heads, max over them with its indices, masked fill."""

    def __init__(self, f, c):
        super().__init__()
        self.conv = GCNConv(f, 12)
        self.lin = torch.nn.Linear(4, c)

    def forward(self, x, edge_index):
        h = self.conv(x, edge_index)
        heads = torch.stack(h.chunk(3, dim=-1), dim=1)  # [N, 3, 4]
        best, which = heads.max(dim=1)
        best = best.masked_fill(which == 0, 0.0)
        return self.lin(best) + which.float().mean()

class WithConstant(torch.nn.Module):
    """Reads a tensor from outside its parameters (a global, like PyG's sgc.py)."""

    def __init__(self, f, c):
        super().__init__()
        self.conv = GraphConv(f, c)

    def forward(self, x, edge_index):
        return self.conv(x + OFFSET[: x.size(-1)], edge_index)


MODELS = {
    "residual-gcn": (ResidualGCN, "plain"),
    "jumping-sage": (JumpingSAGE, "plain"),
    "pooled-gin": (PooledGIN, "batched"),
    "skip-gat": (SkipGAT, "plain"),
    "edge-mlp-max": (EdgeNet, "edge_attr"),
    "mean-update": (MeanNet, "edge_weight"),
    "bipartite": (Bipartite, "bipartite"),
    "nested-attention": (NestedNet, "batched"),
    "scatter-readout": (ScatterReadout, "batched"),
    "degree-scaled": (DegreeScaled, "plain"),
    "heads-and-masks": (HeadsAndMasks, "plain"),
    "global-constant": (WithConstant, "plain"),
}
