"""Parity cases for torch_geometric: utilities ("geometric"), layers and whole models ("models").

Graphs are offline and seeded: PyG's KarateClub (inline data), FakeDataset
with a fixed seed, networkx generators, and hand-made edge cases (no edges,
isolated nodes, existing self-loops, repeated edges). Layers and models are
compared by :func:`~torch2jax_ops.parity.compare_modules` (the torch module vs
its ``from_torch`` port), so each gradient is checked under its parameter name
(``grad conv1.lin.weight``) next to the gradients w.r.t. the inputs.
"""
from __future__ import annotations

from typing import Any, Iterable, Optional

import equinox as eqx
import jax
import numpy as np

from torch2jax_ops import dtypes
from torch2jax_ops.parity._suite import Case, register

WIDE = ("float32", "float64")


# ------------------------------------------------------------------------------ graphs

def _tensor(a, dtype: str):
    import torch
    return torch.as_tensor(np.asarray(a)).to(dtypes.torch_dtype(dtype))


def graph(name: str, dtype: str = "float32", features: int = 6, edge_dim: int = 3,
          seed: int = 0) -> dict:
    """A named offline graph as torch tensors: x, edge_index, edge_weight, edge_attr (+ batch)."""
    import networkx as nx
    import torch

    rng = np.random.default_rng(seed)
    batch = None
    if name == "karate":
        from torch_geometric.datasets import KarateClub
        data = KarateClub()[0]
        edge_index = data.edge_index
        n = data.num_nodes
    elif name == "fake":
        from torch_geometric.data import Batch
        from torch_geometric.datasets import FakeDataset
        import random  # FakeDataset draws graph sizes with Python's random: seed both
        random.seed(seed)
        torch.manual_seed(seed)
        ds = FakeDataset(num_graphs=4, avg_num_nodes=12, avg_degree=3, num_channels=features,
                         edge_dim=edge_dim, num_classes=3)
        data = Batch.from_data_list([ds[i] for i in range(len(ds))])
        edge_index, n, batch = data.edge_index, data.num_nodes, data.batch
    elif name == "erdos_renyi":
        g = nx.erdos_renyi_graph(20, 0.2, seed=seed, directed=True)
        edge_index, n = torch.tensor(list(g.edges()), dtype=torch.long).T.reshape(2, -1), 20
    elif name == "barabasi_albert":
        g = nx.barabasi_albert_graph(25, 2, seed=seed).to_directed()
        edge_index, n = torch.tensor(list(g.edges()), dtype=torch.long).T.reshape(2, -1), 25
    elif name == "loops-and-repeats":  # existing self-loops, repeated edges, isolated nodes
        edge_index = torch.tensor([[0, 1, 1, 2, 2, 3, 3, 0, 5, 5],
                                   [1, 0, 0, 2, 3, 3, 1, 5, 5, 0]])
        n = 8
    elif name == "no-edges":
        edge_index, n = torch.zeros((2, 0), dtype=torch.long), 5
    else:
        raise KeyError(name)
    e = edge_index.shape[1]
    out = {"x": _tensor(rng.standard_normal((n, features)), dtype),
           "edge_index": edge_index.long(),
           "edge_weight": _tensor(rng.uniform(0.2, 1.5, e), dtype),
           "edge_attr": _tensor(rng.standard_normal((e, edge_dim)), dtype),
           "num_nodes": n}
    if batch is not None:
        out["batch"] = batch
    return out


GRAPHS = ("karate", "fake", "erdos_renyi", "barabasi_albert", "loops-and-repeats", "no-edges")


# --------------------------------------------------------------------------- utilities

#: utilities whose output size depends on the data (self-loops removed or added where
#: missing): their cases run the port as called, not under the suite's jit (Case.run)
AS_CALLED = frozenset({"add_remaining_self_loops", "remove_self_loops", "gcn_norm",
                       "gcn_norm-unweighted"})


def _utility_pairs() -> dict:
    """op -> (torch fn, jax fn) over (x, edge_index, edge_weight, edge_attr, N) -> tensors."""
    import torch_geometric.nn as tnn
    import torch_geometric.utils as U
    from torch_geometric.nn.conv.gcn_conv import gcn_norm as t_gcn_norm

    from torch2jax_ops import geometric as G

    return {
        "degree": (lambda x, ei, w, ea, n: U.degree(ei[1], n, dtype=x.dtype),
                   lambda x, ei, w, ea, n: G.degree(ei[1], n, dtype=x.dtype)),
        "softmax": (lambda x, ei, w, ea, n: U.softmax(ea, ei[1], num_nodes=n),
                    lambda x, ei, w, ea, n: G.softmax(ea, ei[1], num_nodes=n)),
        "add_self_loops": (lambda x, ei, w, ea, n: U.add_self_loops(ei, ea, "mean", n),
                           lambda x, ei, w, ea, n: G.add_self_loops(ei, ea, "mean", n)),
        "add_remaining_self_loops": (
            lambda x, ei, w, ea, n: U.add_remaining_self_loops(ei, w, 2.0, n),
            lambda x, ei, w, ea, n: G.add_remaining_self_loops(ei, w, 2.0, n)),
        "remove_self_loops": (lambda x, ei, w, ea, n: U.remove_self_loops(ei, ea),
                              lambda x, ei, w, ea, n: G.remove_self_loops(ei, ea)),
        "gcn_norm": (lambda x, ei, w, ea, n: t_gcn_norm(ei, w, n, True, True),
                     lambda x, ei, w, ea, n: G.gcn_norm(ei, w, n, True, True)),
        "gcn_norm-unweighted": (lambda x, ei, w, ea, n: t_gcn_norm(ei, None, n, True, True,
                                                                   dtype=x.dtype),
                                lambda x, ei, w, ea, n: G.gcn_norm(ei, None, n, True, True,
                                                                   dtype=x.dtype)),
        "global_add_pool": (lambda x, ei, w, ea, n: tnn.global_add_pool(x, None),
                            lambda x, ei, w, ea, n: G.global_add_pool(x, None)),
        "global_mean_pool": (lambda x, ei, w, ea, n: tnn.global_mean_pool(x, None),
                             lambda x, ei, w, ea, n: G.global_mean_pool(x, None)),
        "global_max_pool": (lambda x, ei, w, ea, n: tnn.global_max_pool(x, None),
                            lambda x, ei, w, ea, n: G.global_max_pool(x, None)),
    }


def _batch_pairs() -> dict:
    """op -> (torch fn, jax fn) over (x, batch, size)."""
    import torch_geometric.nn as tnn
    import torch_geometric.utils as U

    from torch2jax_ops import geometric as G

    return {
        "global_add_pool": (tnn.global_add_pool, G.global_add_pool),
        "global_mean_pool": (tnn.global_mean_pool, G.global_mean_pool),
        "global_max_pool": (tnn.global_max_pool, G.global_max_pool),
        "to_dense_batch": (lambda x, b, s: U.to_dense_batch(x, b, batch_size=s),
                           lambda x, b, s: G.to_dense_batch(x, b, batch_size=s)),
        "to_dense_batch-truncated": (
            lambda x, b, s: U.to_dense_batch(x, b, -1.0, max_num_nodes=5, batch_size=s + 1),
            lambda x, b, s: G.to_dense_batch(x, b, -1.0, max_num_nodes=5, batch_size=s + 1)),
    }


@register("geometric")
def utility_cases() -> Iterable[Case]:
    for op in _utility_pairs():
        for dtype in WIDE:
            for name in GRAPHS:
                def build(op=op, dtype=dtype, name=name):
                    theirs, ours = _utility_pairs()[op]
                    g = graph(name, dtype)
                    args = (g["x"], g["edge_index"], g["edge_weight"], g["edge_attr"],
                            g["num_nodes"])
                    return theirs, ours, args, {}, ({"jit": False} if op in AS_CALLED else {})
                yield Case("geometric", op, dtype, name, build)
    for op in _batch_pairs():
        for dtype in WIDE:
            def build(op=op, dtype=dtype):
                theirs, ours = _batch_pairs()[op]
                g = graph("fake", dtype)
                return theirs, ours, (g["x"], g["batch"], int(g["batch"].max()) + 1), {}, {}
            yield Case("geometric", op, dtype, "fake-batch", build)


# ------------------------------------------------------------------------------ layers

def _layers() -> dict:
    """label -> (make PyG layer(in, edge_dim), extra inputs: None, 'edge_weight' or 'edge_attr')."""
    import torch
    import torch_geometric.nn as tnn

    def seq(i, o):
        return torch.nn.Sequential(torch.nn.Linear(i, 16), torch.nn.ReLU(),
                                   torch.nn.Linear(16, o))

    return {
        "GCNConv": (lambda f, d: tnn.GCNConv(f, 8), "edge_weight"),
        "GCNConv-improved": (lambda f, d: tnn.GCNConv(f, 8, improved=True), "edge_weight"),
        "GCNConv-unweighted": (lambda f, d: tnn.GCNConv(f, 8), None),
        "GCNConv-no-normalize": (lambda f, d: tnn.GCNConv(f, 8, normalize=False), "edge_weight"),
        "GraphConv-add": (lambda f, d: tnn.GraphConv(f, 8), "edge_weight"),
        "GraphConv-mean": (lambda f, d: tnn.GraphConv(f, 8, aggr="mean"), None),
        "GraphConv-max": (lambda f, d: tnn.GraphConv(f, 8, aggr="max"), "edge_weight"),
        "SAGEConv": (lambda f, d: tnn.SAGEConv(f, 8), None),
        # out < in: the port projects before aggregating (sum / mean commute with lin_l)
        "SAGEConv-narrowing-mean": (lambda f, d: tnn.SAGEConv(f, 3), None),
        "SAGEConv-narrowing-sum-no-root": (lambda f, d: tnn.SAGEConv(f, 3, aggr="sum",
                                                                     root_weight=False), None),
        "SAGEConv-project-normalize": (
            lambda f, d: tnn.SAGEConv(f, 8, project=True, normalize=True), None),
        "SAGEConv-max-no-root": (lambda f, d: tnn.SAGEConv(f, 8, aggr="max", root_weight=False),
                                 None),
        "GINConv-mlp": (lambda f, d: tnn.GINConv(tnn.MLP([f, 16, 8]), eps=0.2), None),
        "GINConv-train-eps": (lambda f, d: tnn.GINConv(seq(f, 8), train_eps=True), None),
        "GINEConv-edge-dim": (lambda f, d: tnn.GINEConv(seq(f, 8), edge_dim=d), "edge_attr"),
        "GINEConv": (lambda f, d: tnn.GINEConv(seq(f, 8), train_eps=True), "edge_attr-f"),
        "GATConv": (lambda f, d: tnn.GATConv(f, 4), None),
        "GATConv-4-heads-edge-features": (
            lambda f, d: tnn.GATConv(f, 4, heads=4, edge_dim=d), "edge_attr"),
        "GATConv-mean-heads-residual": (
            lambda f, d: tnn.GATConv(f, 4, heads=3, concat=False, residual=True), None),
        "GATConv-fill-value": (
            lambda f, d: tnn.GATConv(f, 4, heads=2, edge_dim=d, fill_value=0.5,
                                     negative_slope=0.1), "edge_attr"),
        "GATConv-no-self-loops": (lambda f, d: tnn.GATConv(f, 4, heads=2, add_self_loops=False),
                                  None),
    }


def _perturbed(module, seed: int):
    """Non-trivial weights everywhere (PyG inits some to zero: biases, GIN's eps)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return module.eval()


def _layer_inputs(g: dict, extra: Optional[str], features: int) -> tuple:
    if extra is None:
        return ()
    if extra == "edge_attr-f":  # GINE without edge_dim: edge features as wide as x
        rng = np.random.default_rng(5)
        return (_tensor(rng.standard_normal((g["edge_index"].shape[1], features)),
                        dtypes.name_of(g["x"].dtype)),)
    return (g[extra],)


@register("models")
def layer_cases() -> Iterable[Case]:
    import torch

    for label in _layers():
        for dtype in WIDE:
            for name in ("karate", "fake", "loops-and-repeats", "no-edges"):
                def build(label=label, dtype=dtype, name=name):
                    from torch2jax_ops.nn import from_torch

                    make, extra = _layers()[label]
                    torch.manual_seed(0)
                    g = graph(name, dtype)
                    layer = _perturbed(make(6, 3), 1).to(dtypes.torch_dtype(dtype))
                    args = (g["x"], g["edge_index"]) + _layer_inputs(g, extra, 6)
                    # modules: compare_modules (grads: parameters by name, x, edge values)
                    return layer, from_torch(layer, copy=True), args, {}, {}
                yield Case("models", label.split("-")[0], dtype, f"{label}/{name}", build)


# ------------------------------------------------------------------------ whole models

def torch_models() -> dict:
    """Four PyG models as users write them (the originals of :data:`JAX_MODELS`)."""
    import torch
    import torch.nn.functional as F
    import torch_geometric.nn as tnn

    class GCN(torch.nn.Module):
        def __init__(self, features, classes, hidden=16, dropout=0.5):
            super().__init__()
            self.conv1 = tnn.GCNConv(features, hidden)
            self.conv2 = tnn.GCNConv(hidden, classes)
            self.dropout = dropout

        def forward(self, x, edge_index):
            x = F.relu(self.conv1(x, edge_index))
            x = F.dropout(x, p=self.dropout, training=self.training)
            return self.conv2(x, edge_index)

    class GraphSAGE(torch.nn.Module):
        def __init__(self, features, classes, hidden=32):
            super().__init__()
            self.conv1 = tnn.SAGEConv(features, hidden)
            self.conv2 = tnn.SAGEConv(hidden, classes)

        def forward(self, x, edge_index):
            return self.conv2(F.relu(self.conv1(x, edge_index)), edge_index)

    class GIN(torch.nn.Module):
        def __init__(self, features, classes, hidden=32, layers=3):
            super().__init__()
            self.convs = torch.nn.ModuleList(
                tnn.GINConv(tnn.MLP([features if i == 0 else hidden, hidden, hidden]))
                for i in range(layers))
            self.head = tnn.MLP([hidden, hidden, classes], norm=None)

        def forward(self, x, edge_index, batch, num_graphs: int):
            for conv in self.convs:
                x = F.relu(conv(x, edge_index))
            return self.head(tnn.global_add_pool(x, batch, num_graphs))

    class GAT(torch.nn.Module):
        def __init__(self, features, classes, edge_dim, hidden=8, heads=4):
            super().__init__()
            self.conv1 = tnn.GATConv(features, hidden, heads=heads, edge_dim=edge_dim)
            self.conv2 = tnn.GATConv(hidden * heads, classes, heads=1, concat=False,
                                     edge_dim=edge_dim)

        def forward(self, x, edge_index, edge_attr):
            x = F.elu(self.conv1(x, edge_index, edge_attr))
            return self.conv2(x, edge_index, edge_attr)

    return {"GCN": GCN, "GraphSAGE": GraphSAGE, "GIN": GIN, "GAT": GAT}


class GCN(eqx.Module):
    """The JAX port of :func:`torch_models`' GCN (eval mode)."""
    conv1: Any
    conv2: Any

    def __call__(self, x, edge_index):
        return self.conv2(jax.nn.relu(self.conv1(x, edge_index)), edge_index)


class GraphSAGE(eqx.Module):
    conv1: Any
    conv2: Any

    def __call__(self, x, edge_index):
        return self.conv2(jax.nn.relu(self.conv1(x, edge_index)), edge_index)


class GIN(eqx.Module):
    convs: Any
    head: Any

    def __call__(self, x, edge_index, batch, num_graphs: int):
        from torch2jax_ops.geometric import global_add_pool

        for conv in self.convs:
            x = jax.nn.relu(conv(x, edge_index))
        return self.head(global_add_pool(x, batch, num_graphs))


class GAT(eqx.Module):
    conv1: Any
    conv2: Any

    def __call__(self, x, edge_index, edge_attr):
        x = jax.nn.elu(self.conv1(x, edge_index, edge_attr))
        return self.conv2(x, edge_index, edge_attr)


def port(model) -> eqx.Module:
    """The JAX port of one of :func:`torch_models`' models: its layers through from_torch."""
    from torch2jax_ops.nn import from_torch

    kind = type(model).__name__
    if kind == "GIN":
        return GIN(from_torch(model.convs, copy=True), from_torch(model.head, copy=True))
    cls = {"GCN": GCN, "GraphSAGE": GraphSAGE, "GAT": GAT}[kind]
    return cls(from_torch(model.conv1, copy=True), from_torch(model.conv2, copy=True))


@register("models")
def model_cases() -> Iterable[Case]:
    import torch

    setups = {  # model -> (graph, constructor arguments, inputs after x, static arguments)
        "GCN": ("karate", (6, 4), ("edge_index",)),
        "GraphSAGE": ("erdos_renyi", (6, 4), ("edge_index",)),
        "GIN": ("fake", (6, 3), ("edge_index", "batch")),
        "GAT": ("fake", (6, 3, 3), ("edge_index", "edge_attr")),
    }
    for kind, (name, shape, inputs) in setups.items():
        for dtype in WIDE:
            def build(kind=kind, name=name, shape=shape, inputs=inputs, dtype=dtype):
                torch.manual_seed(0)
                model = _perturbed(torch_models()[kind](*shape), 2).to(dtypes.torch_dtype(dtype))
                g = graph(name, dtype)
                extra = (int(g["batch"].max()) + 1,) if kind == "GIN" else ()
                args = (g["x"],) + tuple(g[k] for k in inputs) + extra
                options = {}
                if kind == "GIN" and dtype == "float32":
                    # 3 sum-aggregations + sum pooling: gradients are sums of large terms whose
                    # float32 rounding cancels unevenly element by element (float64 is exact
                    # to 1e-7 elementwise), so float32 compares them norm-wise.
                    options["normwise"] = True
                return model, port(model), args, {}, options
            yield Case("models", kind, dtype, f"model/{name}", build)
