"""Whatever PyG computes after a public mutation of a layer is what the port computes, or
the conversion refuses naming the attribute (issue: GraphSAINT-style `conv.aggr = 'mean'`
after construction, explanation masks). Models of our own in the style of PyG's examples."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch_geometric.nn import GraphConv, SAGEConv, GCNConv, MessagePassing
from torch_geometric.explain.algorithm.utils import clear_masks, set_masks

from torch2jax_ops import to_jax
from torch2jax_ops.nn import UnsupportedModuleError, from_torch
from torch2jax_ops.parity import assert_modules_parity, compare_modules


class SaintNet(torch.nn.Module):
    """Three GraphConv layers and a helper that changes their `.aggr` afterwards."""

    def __init__(self, cin=4, hidden=8, out=3):
        super().__init__()
        self.conv1 = GraphConv(cin, hidden)
        self.conv2 = GraphConv(hidden, hidden)
        self.conv3 = SAGEConv(hidden, hidden)
        self.lin = torch.nn.Linear(3 * hidden, out)

    def set_aggr(self, aggr):
        self.conv1.aggr = aggr
        self.conv2.aggr = aggr
        self.conv3.aggr = aggr

    def forward(self, x, edge_index, edge_weight=None):
        x1 = F.relu(self.conv1(x, edge_index, edge_weight))
        x2 = F.relu(self.conv2(x1, edge_index, edge_weight))
        x3 = F.relu(self.conv3(x2, edge_index))
        return self.lin(torch.cat([x1, x2, x3], dim=-1))


class Scaled(MessagePassing):
    """A user layer (traced through fx): PyG's propagate with the default aggregate."""

    def __init__(self):
        super().__init__(aggr="add")
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, edge_index):
        return self.propagate(edge_index, x=self.lin(x))

    def message(self, x_j):
        return 2 * x_j


def _graph(seed=0, n=12, e=40):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    edge_index = torch.randint(0, n, (2, e), generator=g)
    weight = torch.rand(e, generator=g) + 0.5
    return x, edge_index, weight


def test_aggr_reassigned_after_construction_computes_what_pyg_computes():
    torch.manual_seed(0)
    model = SaintNet().eval()
    model.set_aggr("mean")  # PyG keeps running the sum it built: `.aggr` is not read
    x, edge_index, weight = _graph()
    sums = SaintNet().eval()
    sums.load_state_dict(model.state_dict())
    with torch.no_grad():  # the change really does nothing in PyG (what the port must copy)
        np.testing.assert_allclose(model(x, edge_index, weight).numpy(),
                                   sums(x, edge_index, weight).numpy(), rtol=1e-6)
    port = from_torch(model)
    assert_modules_parity(model, port, x, edge_index, weight)


def test_aggr_reassigned_on_a_traced_layer():
    torch.manual_seed(0)
    layer = Scaled()
    layer.aggr = "max"
    x, edge_index, _ = _graph(1)
    assert_modules_parity(layer, from_torch(layer), x, edge_index)


def test_aggr_reassigned_then_a_sparse_adj_t_is_refused():
    """PyG's fused sparse path reads `.aggr` (mean here) while its edge-list path sums:
    the port follows the edge list and refuses the sparse input instead of guessing."""
    torch.manual_seed(0)
    conv = GraphConv(4, 4)
    conv.aggr = "mean"
    x, edge_index, _ = _graph(2)
    adj = torch.sparse_coo_tensor(edge_index.flip(0), torch.ones(edge_index.shape[1]),
                                  (12, 12)).coalesce().to_sparse_csr()
    port = from_torch(conv)
    with pytest.raises(ValueError, match=r"`.aggr` was set to 'mean' after construction"):
        port(to_jax(x), to_jax(adj))


def test_explain_masks_are_refused_naming_the_fix():
    torch.manual_seed(0)
    model = SaintNet().eval()
    x, edge_index, weight = _graph(3)
    set_masks(model, torch.rand(edge_index.shape[1]), edge_index, apply_sigmoid=True)
    with torch.no_grad():  # the mask changes PyG's numbers: ignoring it would be wrong
        masked = model(x, edge_index, weight)
    with pytest.raises(UnsupportedModuleError, match=r"explain mode is on.*clear_masks"):
        from_torch(model.conv1)
    port = from_torch(model)  # the refusal is deferred to the call of the masked layer
    with pytest.raises(UnsupportedModuleError, match=r"explain mode is on.*clear_masks"):
        port(to_jax(x), to_jax(edge_index, allow_downcast=True), to_jax(weight))
    clear_masks(model)
    with torch.no_grad():
        assert not torch.allclose(masked, model(x, edge_index, weight))
    assert compare_modules(model, from_torch(model), x, edge_index, weight).passed


def test_gcn_aggr_reassigned_still_sums():
    torch.manual_seed(0)
    conv = GCNConv(4, 4)
    conv.aggr = "max"
    x, edge_index, _ = _graph(4)
    assert_modules_parity(conv, from_torch(conv), x, edge_index)
