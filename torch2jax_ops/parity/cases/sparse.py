"""Section "sparse": PyG layers on a torch_sparse.SparseTensor adj_t (to_jax gives a
torch2jax_ops.geometric.SparseTensor): values absent / present, repeated and diagonal
entries, an empty matrix, float32 / float64, forward and gradients; and a user model in
PyG's EGConv-example style (adj.set_value(...), conv(x, adj.t()) inside the forward)."""
from __future__ import annotations

from typing import Iterable

from torch2jax_ops.parity._suite import Case, register

DTYPES = ("float32", "float64")


def _graph(name: str, dtype: str) -> tuple:
    """(x [6, 4], row, col, weights): ``dupes`` repeats (1, 2) and (3, 3) and stores loops."""
    import numpy as np
    import torch

    rng = np.random.default_rng(3)
    torch_dtype = getattr(torch, dtype)
    x = torch.tensor(rng.standard_normal((6, 4)), dtype=torch_dtype)
    if name == "empty":
        row = col = torch.zeros(0, dtype=torch.long)
    else:
        row = torch.tensor([0, 1, 1, 2, 3, 3, 3, 4, 5, 5, 0, 2])
        col = torch.tensor([1, 2, 2, 0, 3, 3, 4, 5, 0, 5, 0, 3])
    w = torch.tensor(rng.uniform(0.5, 2.0, len(row)), dtype=torch_dtype)
    return x, row, col, w


def layers() -> dict:
    import torch
    from torch_geometric import nn as gnn

    return {
        "GCNConv": lambda: gnn.GCNConv(4, 3),
        "GCNConv-improved": lambda: gnn.GCNConv(4, 3, improved=True),
        "GCNConv-no_loops": lambda: gnn.GCNConv(4, 3, add_self_loops=False),
        "GCNConv-no_norm": lambda: gnn.GCNConv(4, 3, normalize=False),
        "GINConv": lambda: gnn.GINConv(torch.nn.Linear(4, 3), train_eps=True),
        "SAGEConv": lambda: gnn.SAGEConv(4, 3),
        "SAGEConv-max": lambda: gnn.SAGEConv(4, 3, aggr="max"),
        "GraphConv": lambda: gnn.GraphConv(4, 3),
        "GraphConv-mean": lambda: gnn.GraphConv(4, 3, aggr="mean"),
    }


def user_model():
    """EGConv-example style: the adjacency's values set in the forward, convs on adj.t()."""
    import torch
    from torch_geometric import nn as gnn

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = gnn.GCNConv(4, 8)
            self.conv2 = gnn.GraphConv(8, 8)
            self.conv3 = gnn.GINConv(torch.nn.Linear(8, 3))

        def forward(self, x, adj, w):
            a = adj.set_value(None)  # a structure-only adjacency (ones)
            h = self.conv1(x, a.t()).relu()
            h = self.conv2(h, adj.set_value(w, layout="coo").t()).relu()
            return self.conv3(h, adj.fill_value(2.0).t())

    return Net()


def fused_propagate_safe(model):
    """Give ``model``'s PyG layers a propagate that honours their own ``fuse`` flag.

    PyG generates a class's ``propagate`` once, from the first instance built in the
    process: when that one cannot fuse (an aggregation list or module, ``explain``), the
    generated code of every later instance raises "'message_and_aggregate' not
    implemented" on a SparseTensor, although the layer can fuse (deviation
    ``pyg-fused-propagate-template``). Which instance came first depends on the cases run
    before in the worker, so each layer whose flag disagrees with its class's generated
    code gets PyG's own undecorated ``MessagePassing.propagate`` (same values, no
    template)."""
    from torch_geometric.nn.conv import MessagePassing

    for layer in model.modules():
        cls = type(layer)
        if not (isinstance(layer, MessagePassing) and layer.fuse
                and hasattr(cls, "_orig_propagate")):
            continue
        # every fusable layer: which generated code its class got is process state
        layer.propagate = _undecorated_propagate(cls).__get__(layer, cls)
    return model


def _undecorated_propagate(cls):
    """The nearest ``propagate`` in ``cls``'s MRO that PyG did not generate.

    ``cls._orig_propagate`` is not it for a subclass: PyG stores there whatever
    ``cls.propagate`` was when the first instance was built, which for a subclass of an
    already-built layer is the parent's generated code, with the parent's ``fuse``."""
    for klass in cls.__mro__:
        fn = klass.__dict__.get("propagate")
        if fn is None:
            continue
        module = getattr(fn, "__module__", "") or ""
        if module.endswith("_propagate") and module != klass.__module__:
            continue  # code PyG generated from its propagate.jinja template
        return fn
    raise AssertionError(f"{cls.__name__} has no propagate")  # MessagePassing has one


def _build(label: str, dtype: str, graph: str, values: bool):
    import torch
    from torch_sparse import SparseTensor

    from torch2jax_ops.nn import from_torch

    torch.manual_seed(0)
    x, row, col, w = _graph(graph, dtype)
    adj = SparseTensor(row=row, col=col, value=w if values else None, sparse_sizes=(6, 6))
    if label == "user_model":
        model = user_model().to(getattr(torch, dtype)).eval()
        port = from_torch(model, copy=True)
        return fused_propagate_safe(model), port, (x, adj, w), {}, {}
    layer = layers()[label]().to(getattr(torch, dtype)).eval()
    port = from_torch(layer, copy=True)
    return fused_propagate_safe(layer), port, (x, adj.t()), {}, {}


@register("sparse")
def sparse_tensor_cases() -> Iterable[Case]:
    for label in (*layers(), "user_model"):
        for dtype in DTYPES:
            for graph in ("dupes", "empty"):
                for values in (False, True):
                    if label == "user_model" and values:
                        continue  # it sets the values itself
                    def build(label=label, dtype=dtype, graph=graph, values=values):
                        return _build(label, dtype, graph, values)
                    tag = "values" if values else "no_values"
                    yield Case("sparse", f"SparseTensor-{label.split('-')[0]}", dtype,
                               f"{label}/{graph}/{tag}", build)
