"""User-style models that read what the fx path of ``from_torch`` once got wrong.

Each is written the way PyG users write theirs (not copied from PyG's
examples): a converted submodule's parameter read in the forward, a leaf that
gets dicts, a torch function in its function form, a custom autograd Function,
a callable handed to a submodule. Imported lazily by ``fx_models.py``.
"""
import torch
import torch.nn.functional as F

N, FEATURES, CLASSES = 12, 5, 3


class WeightPenalty(torch.nn.Module):
    """An attention-style score built from a converted Linear's weight (``self.lin.weight``)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(FEATURES, 8)
        self.att = torch.nn.Parameter(torch.randn(8))
        self.out = torch.nn.Linear(8, CLASSES)

    def forward(self, x):
        h = torch.tanh(self.lin(x))
        score = (h * self.att).sum(-1, keepdim=True)
        penalty = (self.lin.weight ** 2).sum() + self.lin.bias.abs().sum()
        return self.out(h * torch.sigmoid(score)) + 0.01 * penalty


class FunctionalMLP(torch.nn.Module):
    """PMLP style: ModuleList of Linears used through ``F.linear(x, lins[i].weight, ...)``."""

    def __init__(self, hidden=8, layers=3):
        super().__init__()
        sizes = [FEATURES] + [hidden] * (layers - 1) + [CLASSES]
        self.lins = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))

    def forward(self, x):
        for i in range(len(self.lins)):
            x = F.linear(x, self.lins[i].weight, self.lins[i].bias)
            if i < len(self.lins) - 1:
                x = F.relu(x)
        return x


class EmbeddingFeatures(torch.nn.Module):
    """LightGCN style: an Embedding's table is the node features (``self.embedding.weight``)."""

    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(N, FEATURES)
        self.lin = torch.nn.Linear(FEATURES, CLASSES)

    def forward(self, x, edge_index):
        emb = self.embedding.weight
        src, dst = edge_index
        agg = torch.zeros_like(emb).index_add(0, dst, emb[src])
        return self.lin(emb + agg) + x[:, :CLASSES]


#: a small heterogeneous schema (han_imdb.py's shape: movies with two neighbour types)
METADATA = (["movie", "director", "actor"],
            [("movie", "to", "director"), ("director", "to", "movie"),
             ("movie", "to", "actor"), ("actor", "to", "movie")])
HETERO_FEATURES = {"movie": 6, "director": 4, "actor": 3}


class HANNet(torch.nn.Module):
    """A HANConv leaf fed the forward's dicts, then a Linear on one node type's output."""

    def __init__(self, hidden=16):
        from torch_geometric.nn import HANConv

        super().__init__()
        self.han = HANConv(dict(HETERO_FEATURES), hidden, heads=8, dropout=0.6,
                           metadata=METADATA)
        self.lin = torch.nn.Linear(hidden, CLASSES)

    def forward(self, x_dict, edge_index_dict):
        out = self.han(x_dict, edge_index_dict)
        out = self.lin(out["movie"])
        return out


class GaussianSmearingNet(torch.nn.Module):
    """SchNet style: distances expanded on Gaussians with ``torch.pow`` in function form."""

    def __init__(self, gaussians=10, cutoff=3.0):
        super().__init__()
        offset = torch.linspace(0.0, cutoff, gaussians)
        self.coeff = -0.5 / (offset[1] - offset[0]).item() ** 2
        self.register_buffer("offset", offset)
        self.lin = torch.nn.Linear(gaussians, CLASSES)

    def forward(self, x, edge_index):
        src, dst = edge_index
        dist = (x[src] - x[dst]).norm(dim=-1)
        expanded = torch.exp(self.coeff * torch.pow(dist.view(-1, 1) - self.offset.view(1, -1), 2))
        scaled = torch.pow(2.0, -expanded) + torch.where(expanded > 0.5, expanded, 0.0)
        return self.lin(scaled)


class ARMANet(torch.nn.Module):
    """Two ARMAConv layers, the second with a lambda as its activation (arma.py's shape)."""

    def __init__(self, hidden=8):
        from torch_geometric.nn import ARMAConv

        super().__init__()
        self.conv1 = ARMAConv(FEATURES, hidden, num_stacks=3, num_layers=2,
                              shared_weights=True, dropout=0.25)
        self.conv2 = ARMAConv(hidden, CLASSES, num_stacks=3, num_layers=2,
                              shared_weights=True, dropout=0.25, act=lambda x: x)

    def forward(self, x, edge_index):
        x = F.dropout(x, training=self.training)
        x = F.relu(self.conv1(x, edge_index))
        x = F.dropout(x, training=self.training)
        x = self.conv2(x, edge_index)
        return F.log_softmax(x, dim=1)


#: the graph SGCNet reads (sgc.py's shape: a module-level `data`, set by the case's builder)
data = None


class SGCNet(torch.nn.Module):
    """SGConv with cached=True whose forward takes no arguments: it reads the global `data`."""

    def __init__(self):
        from torch_geometric.nn import SGConv

        super().__init__()
        self.conv1 = SGConv(FEATURES, CLASSES, K=2, cached=True)

    def forward(self):
        x, edge_index = data.x, data.edge_index
        x = self.conv1(x, edge_index)
        return F.log_softmax(x, dim=1)


class LabelSpreading(torch.nn.Module):
    """LabelPropagation called with a Python function for its post_step."""

    def __init__(self):
        from torch_geometric.nn import LabelPropagation

        super().__init__()
        self.prop = LabelPropagation(num_layers=3, alpha=0.8)

    def forward(self, y, edge_index, mask):
        return self.prop(y, edge_index, mask, post_step=lambda y: y.clamp(0.0, 0.9) * 1.1)


class SoftClusters(torch.nn.Module):
    """Soft cluster assignment against learned keys, with a KL regulariser (the shape of
    PyG's MemPooling): a parameter reshaped in torch before any op (``self.keys.view``), a
    ``torch.cdist`` of 30 keys (torch's matmul form) and a loss module built in the forward."""

    def __init__(self):
        super().__init__()
        self.keys = torch.nn.Parameter(torch.rand(3, 10, FEATURES) * 2 - 1)
        self.lin = torch.nn.Linear(FEATURES, FEATURES)

    def forward(self, x):
        h = self.lin(x)
        dist = torch.cdist(self.keys.view(30, -1), h, p=2) ** 2   # [30, N]
        s = (1.0 + dist).pow(-1.0).t()
        s = s / s.sum(dim=-1, keepdim=True)
        p = s ** 2 / s.sum(dim=0, keepdim=True)
        p = p / p.sum(dim=-1, keepdim=True)
        kl = torch.nn.KLDivLoss(reduction="batchmean")(s.clamp(1e-15).log(), p)
        return s @ self.keys.view(30, -1), kl


class SelfLoopNet(torch.nn.Module):
    """``edge_index, weight = add_self_loops(edge_index, None, ...)`` gives a None weight: the
    forward (and SimpleConv's ``message``) test ``weight is None``, as in torch."""

    def __init__(self, hidden=8):
        from torch_geometric.nn import SimpleConv

        super().__init__()
        self.lin = torch.nn.Linear(FEATURES, hidden)
        self.conv = SimpleConv(aggr="mean", combine_root="self_loop")
        self.out = torch.nn.Linear(hidden, CLASSES)

    def forward(self, x, edge_index):
        from torch_geometric.utils import add_self_loops

        h = self.conv(self.lin(x), edge_index)
        edge_index, weight = add_self_loops(edge_index, None, num_nodes=x.size(0))
        src, dst = edge_index
        msg = h[src] if weight is None else h[src] * weight.view(-1, 1)
        h = torch.zeros_like(h).index_add(0, dst, msg)
        return self.out(h)


def PMLPNet():
    """PyG's PMLP at inference: ``x @ self.lins[i].weight.t()``, then a SimpleConv with
    self-loops (whose edge weight is None), batch-normed hidden layers."""
    from torch_geometric.nn.models import PMLP

    return PMLP(FEATURES, 8, CLASSES, num_layers=3, dropout=0.5, norm=True)


class IntLabelSpreading(torch.nn.Module):
    """LabelPropagation on integer labels: one_hot's class count is ``int(y.max()) + 1``, known
    when ``y`` is a constant (compare_modules' jit keeps integer inputs constant)."""

    def __init__(self):
        from torch_geometric.nn import LabelPropagation

        super().__init__()
        self.prop = LabelPropagation(num_layers=3, alpha=0.9)

    def forward(self, y, edge_index, mask, edge_weight):
        plain = self.prop(y, edge_index, mask)
        weighted = self.prop(y, edge_index, mask, edge_weight=edge_weight,
                             post_step=lambda out: out.clamp(0.0, 0.8))
        return plain + weighted


class SortedBatchReadout(torch.nn.Module):
    """PyG aggregations that check ``batch`` is sorted (``if not torch.all(index[:-1] <=
    index[1:])``): a constant ``batch`` decides the test as torch does. LCMAggregation also
    flips with ``x.flip(dims=[1])``."""

    def __init__(self, hidden=8):
        from torch_geometric.nn.aggr import LCMAggregation, SortAggregation

        super().__init__()
        self.lin = torch.nn.Linear(FEATURES, hidden)
        self.lcm = LCMAggregation(hidden, hidden, project=False)
        self.sort = SortAggregation(k=3)
        self.out = torch.nn.Linear(hidden + 3 * hidden, CLASSES)

    def forward(self, x, batch):
        h = self.lin(x).relu()
        return self.out(torch.cat([self.lcm(h, batch), self.sort(h, batch)], dim=-1))
