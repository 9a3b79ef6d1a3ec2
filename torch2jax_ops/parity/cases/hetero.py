"""Parity cases of heterogeneous graphs (section "hetero").

A small offline heterogeneous graph in the style of PyG's DBLP / IMDB / MAG
examples: three node types with different feature widths (author 6, paper 8,
term 4), five edge types (writes / rev_writes, cites with self-loops and
repeated edges, has / rev_has), isolated nodes, and a variant with a fourth
node type that sends but never receives (``venue``) and an edge type without
edges. Layers and models take ``(x_dict, edge_index_dict)`` as PyG's do; each
case runs :func:`~torch2jax_ops.parity.compare_modules` on the PyG module in
eval mode (weights perturbed away from PyG's initial values) and its
``from_torch`` port: every output node type, the gradient of each parameter by
its ``state_dict`` name, and the gradient w.r.t. every node type's features.

Other case files of this section (one per layer family) build on
:func:`hetero_graph` and :func:`built`.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

import numpy as np

from torch2jax_ops import dtypes
from torch2jax_ops.parity._suite import Case, register

WIDE = ("float32", "float64")
GRAPHS = ("dblp-like", "with-venue")

#: node type -> (number of nodes, feature width)
NODES = {"author": (7, 6), "paper": (9, 8), "term": (5, 4)}
WRITES, REV_WRITES = ("author", "writes", "paper"), ("paper", "rev_writes", "author")
CITES = ("paper", "cites", "paper")
HAS, REV_HAS = ("paper", "has", "term"), ("term", "rev_has", "paper")
PUBLISHES = ("venue", "publishes", "paper")


def hetero_graph(name: str = "dblp-like", dtype: str = "float32", seed: int = 0) -> Any:
    """A named offline ``HeteroData`` (torch tensors, features in ``dtype``).

    ``"dblp-like"``: author / paper / term; author 6 and term 4 receive
    messages, one author and one term are isolated, ``cites`` holds self-loops
    and a repeated edge. ``"with-venue"``: the same plus a ``venue`` type (3
    nodes, width 5) that only sends (``venue -> paper``), and a ``term -> term``
    edge type with no edges.
    """
    import torch
    from torch_geometric.data import HeteroData

    rng = np.random.default_rng(seed)
    data = HeteroData()
    nodes = dict(NODES)
    if name == "with-venue":
        nodes["venue"] = (3, 5)
    elif name != "dblp-like":
        raise KeyError(name)
    for node_type, (n, f) in nodes.items():
        data[node_type].x = torch.as_tensor(rng.standard_normal((n, f))).to(
            dtypes.torch_dtype(dtype))

    def edges(pairs):
        return torch.tensor(pairs, dtype=torch.long).T.reshape(2, -1).contiguous()

    # author 6 writes nothing; paper 8 is written by nobody
    writes = edges([(0, 0), (0, 1), (1, 1), (2, 2), (3, 2), (3, 3), (4, 4), (5, 5), (0, 6),
                    (1, 7), (2, 7), (2, 7)])
    data[WRITES].edge_index = writes
    data[REV_WRITES].edge_index = writes.flip(0)
    data[CITES].edge_index = edges([(0, 1), (1, 2), (2, 0), (3, 3), (4, 3), (4, 3), (5, 6),
                                    (6, 5), (7, 0), (8, 8)])
    has = edges([(0, 0), (1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (6, 1), (7, 3), (8, 0)])
    data[HAS].edge_index = has  # term 4 is isolated
    data[REV_HAS].edge_index = has.flip(0)
    if name == "with-venue":
        data[PUBLISHES].edge_index = edges([(0, 0), (0, 1), (1, 2), (2, 3), (2, 4), (1, 8)])
        data["term", "related", "term"].edge_index = torch.zeros((2, 0), dtype=torch.long)
    return data


def inputs(data: Any) -> tuple:
    """``(x_dict, edge_index_dict)`` as PyG's hetero layers take them."""
    return (dict(data.x_dict), dict(data.edge_index_dict))


def _perturbed(module, seed: int):
    from torch2jax_ops.parity.cases.geometric import _perturbed as perturbed
    return perturbed(module, seed)


def built(make: Callable, dtype: str, graph_name: str, args: Callable = inputs) -> tuple:
    """(PyG module in eval mode, its inputs): lazy sizes materialised by one torch forward
    in float32 first (as a user's model is before it is ported), then weights perturbed."""
    import torch

    torch.manual_seed(0)
    data = hetero_graph(graph_name, "float32")
    module = make(data)
    with torch.no_grad():
        module(*args(data))  # materialise Linear(-1, ...) and lazy convs
    module = _perturbed(module, 1).to(dtypes.torch_dtype(dtype))
    return module, args(hetero_graph(graph_name, dtype))


# ------------------------------------------------------------------------ the layers

def _heteroconv(aggr: Optional[str]) -> Callable:
    def make(data):
        import torch_geometric.nn as tnn

        convs = {WRITES: tnn.SAGEConv((-1, -1), 8), REV_WRITES: tnn.GATConv(
                     (-1, -1), 8, heads=2, concat=False, add_self_loops=False),
                 CITES: tnn.GCNConv(-1, 8), HAS: tnn.SAGEConv((-1, -1), 8, aggr="max"),
                 REV_HAS: tnn.GraphConv((-1, -1), 8, aggr="mean")}
        if PUBLISHES in data.edge_types:
            convs[PUBLISHES] = tnn.SAGEConv((-1, -1), 8)
        convs = {k: v for k, v in convs.items() if k in data.edge_types}
        return tnn.HeteroConv(convs, aggr=aggr)
    return make


def _heteroconv_linear(aggr: str) -> Callable:
    """Every relation into ``paper`` a SAGEConv / GraphConv with a sum or mean ``aggr``: the
    port sums their matmuls as one (root terms on ``x_dict["paper"]`` merged, aggregations
    concatenated); projected first where ``out < in`` (``author`` 6 -> 4), ``project=True``,
    no root weight, GraphConv ``add`` and ``mean``. ``author`` and ``term`` get one relation."""
    def make(data):
        import torch_geometric.nn as tnn

        convs = {WRITES: tnn.SAGEConv((-1, -1), 4),
                 CITES: tnn.SAGEConv(-1, 4, aggr="sum", root_weight=False),
                 REV_HAS: tnn.SAGEConv((4, 8), 4, project=True),
                 REV_WRITES: tnn.GraphConv((-1, -1), 4, aggr="mean"),
                 HAS: tnn.SAGEConv((-1, -1), 4)}
        if PUBLISHES in data.edge_types:
            convs[PUBLISHES] = tnn.GraphConv((-1, -1), 4)
        return tnn.HeteroConv(convs, aggr=aggr)
    return make


def _to_hetero(aggr: str) -> Callable:
    # (a torch_geometric.nn.Sequential goes through to_hetero only when created in a module
    # importable by its file's base name -- PyG compiles its forward from a template that
    # imports that module --: the hetero example script covers it)
    def make(data):
        import torch_geometric.nn as tnn
        return tnn.to_hetero(_TwoLayer(), data.metadata(), aggr=aggr)
    return make


def _to_hetero_with_bases(num_bases: int) -> Callable:
    def make(data):
        import torch
        import torch_geometric.nn as tnn

        class GNN(torch.nn.Module):  # to_hetero_with_bases needs sized (not lazy) layers
            def __init__(self):
                super().__init__()
                self.conv1 = tnn.SAGEConv(8, 8)
                self.conv2 = tnn.GraphConv(8, 4)

            def forward(self, x, edge_index):
                return self.conv2(self.conv1(x, edge_index).relu(), edge_index)
        return tnn.to_hetero_with_bases(GNN(), data.metadata(), num_bases=num_bases,
                                        in_channels={"x": 8})
    return make


class _TwoLayer:
    """A user's homogeneous GNN (GAT then SAGE with a skip Linear), as in to_hetero_mag.py."""

    def __new__(cls):
        import torch
        import torch_geometric.nn as tnn

        class GNN(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv1 = tnn.GATConv((-1, -1), 8, add_self_loops=False)
                self.lin1 = tnn.Linear(-1, 8)
                self.conv2 = tnn.SAGEConv((-1, -1), 4)
                self.lin2 = tnn.Linear(-1, 4)

            def forward(self, x, edge_index):
                x = self.conv1(x, edge_index) + self.lin1(x)
                x = x.relu()
                return self.conv2(x, edge_index) + self.lin2(x)
        return GNN()


def _han(**kw) -> Callable:
    def make(data):
        import torch_geometric.nn as tnn
        return tnn.HANConv(-1, 8, data.metadata(), **kw)
    return make


def _dict_linear(**kw) -> Callable:
    def make(data):
        import torch_geometric.nn as tnn
        return tnn.HeteroDictLinear(-1, 5, types=data.node_types, **kw)
    return make


def x_only(data: Any) -> tuple:
    return (dict(data.x_dict),)


def _layers() -> dict[str, tuple[Callable, Callable]]:
    """label -> (make(data) -> PyG module, inputs(data) -> args)."""
    return {
        **{f"HeteroConv-{aggr}": (_heteroconv(aggr), inputs)
           for aggr in ("sum", "mean", "max", "min", "cat")},
        "HeteroConv-stack": (_heteroconv(None), inputs),  # aggr=None: stacked on dim 1
        "HeteroConv-fused-sum": (_heteroconv_linear("sum"), inputs),
        "HeteroConv-fused-mean": (_heteroconv_linear("mean"), inputs),
        "to_hetero-sum": (_to_hetero("sum"), inputs),
        "to_hetero-mean": (_to_hetero("mean"), inputs),
        "to_hetero-max": (_to_hetero("max"), inputs),
        "to_hetero_with_bases-2-bases": (_to_hetero_with_bases(2), inputs),
        "to_hetero_with_bases-4-bases": (_to_hetero_with_bases(4), inputs),
        "HANConv": (_han(heads=2), inputs),
        "HANConv-1-head": (_han(heads=1, negative_slope=0.1), inputs),
        "HeteroDictLinear": (_dict_linear(), x_only),
        "HeteroDictLinear-no-bias": (_dict_linear(bias=False), x_only),
    }


def _options(label: str, dtype: str) -> dict:
    return {}


def register_layers(layers: Callable[[], dict], options: Callable[[str, str], dict] = _options,
                    graphs_of: Callable[[str], Iterable[str]] = lambda label: GRAPHS,
                    ) -> Callable[[], Iterable[Case]]:
    """A case generator for the "hetero" section: every label of ``layers()`` x float32 /
    float64 x ``graphs_of(label)`` (each case a PyG module vs its ``from_torch`` port)."""

    def cases() -> Iterable[Case]:
        for label, (make, args) in layers().items():
            for dtype in WIDE:
                for graph_name in graphs_of(label):
                    def build(make=make, args=args, label=label, dtype=dtype,
                              graph_name=graph_name):
                        from torch2jax_ops.nn import from_torch

                        module, a = built(make, dtype, graph_name, args)
                        return module, from_torch(module, copy=True), a, {}, options(label,
                                                                                    dtype)
                    yield Case("hetero", label.split("-")[0], dtype, f"{label}/{graph_name}",
                               build)
    return register("hetero")(cases)


# ------------------------------------------------- typed homogeneous inputs (RGAT, norms)

TYPED_GRAPHS = ("karate", "loops-and-repeats")
NUM_TYPES = 3


def typed_inputs(graph_name: str, dtype: str) -> dict:
    """A homogeneous graph with node and edge types: ``x [N, 6]``, ``edge_index``,
    ``node_type [N]`` (unsorted, type 2 on no node of the small graph), ``edge_type [E]``."""
    import torch

    from torch2jax_ops.parity.cases.geometric import graph

    g = graph(graph_name, dtype, features=6, edge_dim=3)
    n, e = g["num_nodes"], g["edge_index"].shape[1]
    rng = np.random.default_rng(7)
    kinds = 2 if graph_name == "loops-and-repeats" else NUM_TYPES
    g["node_type"] = torch.as_tensor(rng.integers(0, kinds, n))
    g["edge_type"] = torch.as_tensor(rng.integers(0, NUM_TYPES, e))
    return g


def _typed_layers() -> dict[str, tuple[Callable, Callable]]:
    """label -> (make() -> PyG module, args(g) -> inputs)."""
    import torch_geometric.nn as tnn

    def conv(g):
        return (g["x"], g["edge_index"], g["edge_type"])

    def norm(g):
        return (g["x"], g["node_type"])
    return {
        "RGATConv": (lambda: tnn.RGATConv(6, 4, NUM_TYPES), conv),
        "RGATConv-2-heads-f-scaled": (lambda: tnn.RGATConv(
            6, 4, NUM_TYPES, heads=2, attention_mode="multiplicative-self-attention",
            mod="f-scaled"), conv),
        # within-relation: PyG softmaxes alpha[edge_type == r] per relation in a Python loop
        # (a data-dependent shape); the port groups by (target, relation) instead, under jit
        "RGATConv-within-relation": (lambda: tnn.RGATConv(
            6, 4, NUM_TYPES, heads=2, attention_mechanism="within-relation"), conv),
        "RGATConv-within-relation-f-scaled": (lambda: tnn.RGATConv(
            6, 4, NUM_TYPES, attention_mechanism="within-relation", mod="f-scaled"), conv),
        "RGATConv-additive-edge-dim": (lambda: tnn.RGATConv(
            6, 4, NUM_TYPES, heads=2, concat=False, edge_dim=3, mod="additive"),
            lambda g: conv(g) + (g["edge_attr"],)),
        "HeteroLayerNorm": (lambda: tnn.HeteroLayerNorm(6, NUM_TYPES), norm),
        "HeteroLayerNorm-no-affine": (lambda: tnn.HeteroLayerNorm(6, NUM_TYPES, affine=False),
                                      norm),
        "HeteroBatchNorm": (lambda: tnn.HeteroBatchNorm(6, NUM_TYPES), norm),
    }


@register("hetero")
def typed_cases() -> Iterable[Case]:
    for label, (make, args) in _typed_layers().items():
        for dtype in WIDE:
            for graph_name in TYPED_GRAPHS:
                def build(make=make, args=args, label=label, dtype=dtype, graph_name=graph_name):
                    import torch

                    from torch2jax_ops.parity.cases.convs_edge import _perturb_buffers
                    from torch2jax_ops.nn import from_torch

                    torch.manual_seed(0)
                    module = make()
                    if isinstance(module, tnn_hetero_batch_norm()):  # eval: running stats
                        module.running_mean.copy_(0.3 * torch.randn(module.running_mean.shape))
                        module.running_var.copy_(torch.rand(module.running_var.shape) + 0.5)
                    module = _perturb_buffers(_perturbed(module, 1), 2).to(
                        dtypes.torch_dtype(dtype))
                    return module, from_torch(module, copy=True), \
                        args(typed_inputs(graph_name, dtype)), {}, _typed_options(label, dtype)
                yield Case("hetero", label.split("-")[0], dtype, f"{label}/{graph_name}", build)


def _typed_options(label: str, dtype: str) -> dict:
    if dtype == "float32" and "f-scaled" in label:
        # "f-scaled" multiplies each attention weight by its target's degree (up to 17 on
        # KarateClub): float32 rounding of the softmax, amplified that much, moves a few
        # gradient entries past the elementwise float32 tolerance on both sides alike
        # (float64 agrees elementwise at 1e-7); compared norm-wise at 1e-4, as PNA's std
        return {"normwise": True, "rtol": 1e-4}
    return {}


def tnn_hetero_batch_norm() -> type:
    from torch_geometric.nn import HeteroBatchNorm
    return HeteroBatchNorm


def _graphs_of(label: str) -> tuple:
    # to_hetero needs every node type to receive messages (PyG raises for "venue")
    return ("dblp-like",) if label.startswith("to_hetero") else GRAPHS


hetero_cases = register_layers(_layers, graphs_of=_graphs_of)
