"""Models built from PyG's own model classes, ported with one ``from_torch`` call (section
"pyg_models").

The classes of ``torch_geometric.nn.models`` users build models from -- the BasicGNN
family (GCN, GraphSAGE, GIN, GAT, PNA, EdgeCNN) with the options users set, the
autoencoders (GAE, VGAE, ARGA, ARGVA), LightGCN, MLP, PyG's Linear -- and the
explanation wrapper ``to_captum_model(..., mask_type='node')``. Each case compares the
port with the torch model through ``compare_modules`` (outputs and the gradient of every
parameter by name and of the floating inputs, under jit) in float32 and float64, on a
small synthetic graph (self-loops, an isolated node), models in eval mode with batch-norm
statistics moved away from 0 / 1.

What cannot port is asserted as an error in parity_tests/test_pyg_models.py
(``to_captum_model`` with edge masks).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

import numpy as np

from torch2jax_ops.parity._suite import Case, register

FEATURES, HIDDEN, CLASSES, EDGE_DIM, NODES, EDGES = 5, 8, 3, 2, 12, 36


def graph(dtype: str, seed: int = 0) -> dict:
    """x [12, 5], edge_index [2, 36] (self-loops, node 11 isolated), edge_weight [36],
    edge_attr [36, 2], batch [12] of 2 graphs, label pairs [2, 7], as torch tensors."""
    import torch

    rng = np.random.default_rng(seed)
    src = rng.integers(0, NODES - 1, EDGES)
    dst = rng.integers(0, NODES - 1, EDGES)
    src[:3] = dst[:3]
    t = getattr(torch, dtype)
    return {
        "x": torch.tensor(rng.standard_normal((NODES, FEATURES)), dtype=t),
        "edge_index": torch.tensor(np.stack([src, dst]), dtype=torch.int64),
        "edge_weight": torch.tensor(rng.uniform(0.1, 1.0, EDGES), dtype=t),
        "edge_attr": torch.tensor(rng.standard_normal((EDGES, EDGE_DIM)), dtype=t),
        "batch": torch.tensor([0] * 7 + [1] * 5),
        "pairs": torch.tensor(rng.integers(0, NODES, (2, 7)), dtype=torch.int64),
    }


def perturb(model: Any, seed: int = 0) -> Any:
    """Batch-norm running statistics away from 0 / 1, so eval mode is really exercised."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.3)
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
    return model


def _deg() -> Any:
    """PNA's in-degree histogram of the test graph."""
    import torch
    from torch_geometric.utils import degree

    d = degree(graph("float64")["edge_index"][1], NODES, dtype=torch.long)
    return torch.bincount(d)


# ------------------------------------------------------------------ the BasicGNN family

def _basic_gnns() -> dict:
    """label -> (factory, names of the graph() inputs, keyword inputs)."""
    from torch_geometric.nn import models as M

    xe = ("x", "edge_index")
    return {
        "GCN-2layers": (lambda: M.GCN(FEATURES, HIDDEN, 2, CLASSES), xe, ()),
        "GCN-jk_cat-edge_weight": (lambda: M.GCN(FEATURES, HIDDEN, 3, CLASSES, jk="cat"),
                                   xe + ("edge_weight",), ()),
        "GCN-jk_max-batch_norm": (lambda: M.GCN(FEATURES, HIDDEN, 3, CLASSES, jk="max",
                                                norm="batch_norm", dropout=0.5), xe, ()),
        "GCN-jk_lstm": (lambda: M.GCN(FEATURES, HIDDEN, 3, CLASSES, jk="lstm"), xe, ()),
        "GCN-jk_last-no_out": (lambda: M.GCN(FEATURES, HIDDEN, 2, jk="last",
                                             act="tanh"), xe, ()),
        "GraphSAGE-layer_norm-elu-no_out": (
            lambda: M.GraphSAGE(FEATURES, HIDDEN, 2, None, norm="layer_norm", act="elu",
                                dropout=0.3), xe, ()),
        "GraphSAGE-graph_norm-batch": (
            lambda: M.GraphSAGE(FEATURES, HIDDEN, 2, CLASSES, norm="graph_norm",
                                act="leaky_relu", act_kwargs={"negative_slope": 0.1}),
            xe, ("batch",)),
        "GraphSAGE-act_first-jk_cat": (
            lambda: M.GraphSAGE(FEATURES, HIDDEN, 3, CLASSES, act_first=True, jk="cat",
                                norm="batch_norm", aggr="max"), xe, ()),
        "GIN-jk_cat-batch_norm": (lambda: M.GIN(FEATURES, HIDDEN, 3, CLASSES, jk="cat",
                                                norm="batch_norm", act="gelu"), xe, ()),
        "GAT-heads": (lambda: M.GAT(FEATURES, HIDDEN, 2, CLASSES, heads=2), xe, ()),
        "GAT-concat_false-jk_max": (lambda: M.GAT(FEATURES, HIDDEN, 3, CLASSES, heads=3,
                                                  concat=False, jk="max"), xe, ()),
        "GATv2-heads-edge_attr-jk_cat": (
            lambda: M.GAT(FEATURES, HIDDEN, 2, CLASSES, v2=True, heads=2, edge_dim=EDGE_DIM,
                          jk="cat"), xe, ("edge_attr",)),
        "PNA-edge_attr": (
            lambda: M.PNA(FEATURES, HIDDEN, 2, CLASSES, aggregators=["mean", "min", "max", "std"],
                          scalers=["identity", "amplification", "attenuation"], deg=_deg(),
                          edge_dim=EDGE_DIM), xe, ("edge_attr",)),
        "PNA-towers-jk_max": (
            lambda: M.PNA(FEATURES, HIDDEN, 2, CLASSES, aggregators=["mean", "sum"],
                          scalers=["identity", "linear"], deg=_deg(), towers=2,
                          divide_input=False, jk="max"), xe, ()),
        "EdgeCNN-jk_cat": (lambda: M.EdgeCNN(FEATURES, HIDDEN, 2, CLASSES, jk="cat"), xe, ()),
    }


# ---------------------------------------------------------------- autoencoders and others

def _encoder(variational: bool) -> Any:
    """A user's small GCN encoder: (mu, logstd) for the variational autoencoders."""
    import torch
    from torch_geometric.nn import GCNConv

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = GCNConv(FEATURES, HIDDEN)
            self.conv_mu = GCNConv(HIDDEN, 4)
            self.conv_logstd = GCNConv(HIDDEN, 4) if variational else None

        def forward(self, x, edge_index):
            h = self.conv(x, edge_index).relu()
            mu = self.conv_mu(h, edge_index)
            return (mu, self.conv_logstd(h, edge_index)) if variational else mu

    return Encoder()


def _autoencoder_user(cls_name: str) -> Any:
    """A module whose forward calls the autoencoder's ``encode`` and ``decode`` (a port
    runs ``forward``: the methods are reached through it)."""
    import torch
    from torch_geometric.nn import models as M

    variational = cls_name in ("VGAE", "ARGVA")
    encoder = _encoder(variational)
    if cls_name in ("ARGA", "ARGVA"):
        ae = getattr(M, cls_name)(encoder, torch.nn.Sequential(
            torch.nn.Linear(4, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, 1)))
    else:
        ae = getattr(M, cls_name)(encoder)

    class LinkPredictor(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ae = ae

        def forward(self, x, edge_index, pairs):
            z = self.ae.encode(x, edge_index)  # VGAE / ARGVA in eval: mu, no sampling
            out = (z, self.ae.decode(z, pairs), self.ae.decode(z, pairs, sigmoid=False),
                   self.ae.decoder.forward_all(z))
            if cls_name in ("ARGA", "ARGVA"):
                out += (self.ae.discriminator(z),)
            return out

    return LinkPredictor()


def _lightgcn_embedding() -> Any:
    import torch
    from torch_geometric.nn import models as M

    class Embed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rec = M.LightGCN(NODES, 6, 2, alpha=torch.tensor([0.5, 0.3, 0.2]))

        def forward(self, edge_index, edge_weight):
            return self.rec.get_embedding(edge_index, edge_weight)

    return Embed()


def _pyg_linear_user() -> Any:
    import torch
    from torch_geometric.nn import Linear

    class Head(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin1 = Linear(FEATURES, HIDDEN, weight_initializer="glorot",
                               bias_initializer="zeros")
            self.lin2 = Linear(HIDDEN, CLASSES, bias=False, weight_initializer="kaiming_uniform")

        def forward(self, x):
            return self.lin2(self.lin1(x).relu()).log_softmax(dim=-1)

    return Head()


def _captum_node() -> Any:
    from torch_geometric.nn import models as M, to_captum_model

    return to_captum_model(M.GCN(FEATURES, HIDDEN, 2, CLASSES), mask_type="node",
                           output_idx=3)


def _others() -> dict:
    """label -> (factory, names of the graph() inputs, keyword inputs)."""
    import torch
    from torch_geometric.nn import models as M

    xe = ("x", "edge_index")
    return {
        "GAE-forward_is_encode": (lambda: M.GAE(_encoder(False)), xe, ()),
        "GAE-encode_decode": (lambda: _autoencoder_user("GAE"), xe + ("pairs",), ()),
        "VGAE-eval_encode_decode": (lambda: _autoencoder_user("VGAE"), xe + ("pairs",), ()),
        "ARGA-encode_decode_discriminate": (lambda: _autoencoder_user("ARGA"),
                                            xe + ("pairs",), ()),
        "ARGVA-eval_encode_decode": (lambda: _autoencoder_user("ARGVA"), xe + ("pairs",), ()),
        "LightGCN-label_pairs": (lambda: M.LightGCN(NODES, 6, 2), ("edge_index", "pairs"), ()),
        "LightGCN-all_edges": (lambda: M.LightGCN(NODES, 6, 3), ("edge_index",), ()),
        "LightGCN-get_embedding-alpha-edge_weight": (_lightgcn_embedding,
                                                     ("edge_index", "edge_weight"), ()),
        "MLP-batch_norm-dropouts": (
            lambda: M.MLP([FEATURES, HIDDEN, HIDDEN, CLASSES], norm="batch_norm",
                          act="leaky_relu", dropout=[0.1, 0.2, 0.3]), ("x",), ()),
        "MLP-layer_norm-not_plain_last": (
            lambda: M.MLP(in_channels=FEATURES, hidden_channels=HIDDEN, out_channels=CLASSES,
                          num_layers=3, norm="layer_norm", act="elu", act_first=True,
                          plain_last=False, bias=[True, False, True]), ("x",), ()),
        "Linear-user_head": (_pyg_linear_user, ("x",), ()),
        "Sequential-GCN_then_MLP": (
            lambda: _GCNThenMLP(torch), xe + ("batch",), ()),
        "to_captum_model-node": (_captum_node, ("x1", "edge_index"), ()),
    }


def _GCNThenMLP(torch: Any) -> Any:
    """BasicGNN embeddings pooled per graph, then an MLP: a graph classifier of PyG parts."""
    from torch_geometric.nn import global_mean_pool, models as M

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gnn = M.GIN(FEATURES, HIDDEN, 2, jk="cat", norm="batch_norm")
            self.head = M.MLP([HIDDEN, HIDDEN, CLASSES], norm=None, dropout=0.5)

        def forward(self, x, edge_index, batch):
            h = self.gnn(x, edge_index, batch=batch)
            return self.head(global_mean_pool(h, batch, 2))

    return Net()


def build_case(factory: Callable, inputs: tuple, dtype: str) -> tuple:
    """(torch model in eval mode, its port, args, kwargs, options) for one model."""
    import torch

    from torch2jax_ops.nn import from_torch

    torch.manual_seed(0)
    model = perturb(factory().to(getattr(torch, dtype))).eval()
    data = graph(dtype)
    data["x1"] = data["x"].unsqueeze(0)  # captum's [1, N, F] input mask
    args = tuple(data[name] for name in inputs)
    return model, from_torch(model), args, {}, {}


def models() -> dict:
    """Every model of the section: label -> (factory, input names, keyword inputs)."""
    return {**_basic_gnns(), **_others()}


@register("pyg_models")
def pyg_model_cases() -> Iterable[Case]:
    for label, (factory, inputs, keywords) in models().items():
        for dtype in ("float32", "float64"):
            def build(factory=factory, inputs=inputs, keywords=keywords, dtype=dtype):
                model, port, args, kwargs, options = build_case(factory, inputs, dtype)
                kwargs.update({name: graph(dtype)[name] for name in keywords})
                return model, port, args, kwargs, options
            yield Case("pyg_models", label, dtype, "pyg-model", build)
