"""Measure PyG's own example models: build, convert, compare (issue 33, "Checks").

Usage::

    PYG_SRC=/path/to/pytorch_geometric python benchmarks/pyg_examples.py [NAME ...]
    make pyg-examples PYG_SRC=/path/to/pytorch_geometric

For every example file (``$PYG_SRC/examples/*.py`` and ``examples/hetero/*.py``)
the script parses the file with :mod:`ast` and executes only its top-level
imports (each on its own; a failing one is reported as ``import: <error>``) and
its top-level class and function definitions, in a fresh module namespace:
never the training loop, dataset downloads or argparse. What the class bodies
read from the script's globals (``args.*``, ``dataset.num_features``, ``data``
...) comes from the per-example spec in :data:`SPECS`, together with the model
to build at small sizes and synthetic inputs.

Each buildable model then runs once in PyG (eval mode, ``torch.manual_seed(0)``),
is converted with ``torch2jax_ops.nn.from_torch`` and compared with
``torch2jax_ops.parity.compare_modules`` (outputs and every gradient). For
graph-classification examples that match, the port also runs under ``jax.jit``
on ``JaxLoader`` batches of the synthetic dataset, and its real rows are
compared with PyG's output on the same ``Batch``.

Named examples (``pyg_examples.py gat rgcn``) are rerun and merged into the
stored results (``PYG_EXAMPLES.json``) before the table is rewritten.

Every example runs in its own subprocess with a timeout, so a crash, a hang or
a segfault is a row of the table, not the end of the run. The table is printed
and written to ``benchmarks/PYG_EXAMPLES.md``. Not part of CI: it needs the
PyG source checkout (``git clone https://github.com/pyg-team/pytorch_geometric``).
"""
from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import subprocess
import sys
import time
import traceback
import types
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT_MD = HERE / "PYG_EXAMPLES.md"

HOW_TO_GET = """\
PYG_SRC is not set (or has no examples/ folder).
This command measures PyG's own example models; it needs a PyG source checkout:

    git clone --depth 1 https://github.com/pyg-team/pytorch_geometric /tmp/pyg
    make pyg-examples PYG_SRC=/tmp/pyg
"""


# --------------------------------------------------------------------------- synthetic data

def _edges(n: int, e: int, gen, offset: int = 0, undirected: bool = True):
    import torch
    src = torch.randint(0, n, (e,), generator=gen)
    dst = torch.randint(0, n, (e,), generator=gen)
    keep = src != dst
    ei = torch.stack([src[keep], dst[keep]])
    if undirected:
        ei = torch.cat([ei, ei.flip(0)], dim=1)
    ei = torch.unique(ei, dim=1)
    return ei + offset


def node_graph(n: int = 20, f: int = 8, classes: int = 4, e: int = 30, edge_dim: Optional[int] = None,
               seed: int = 0, undirected: bool = True, pos: int = 0):
    """A node-classification graph: ``x [n, f]``, ``edge_index``, ``y [n]``, masks."""
    import torch
    from torch_geometric.data import Data
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, f, generator=gen)
    ei = _edges(n, e, gen, undirected=undirected)
    d = Data(x=x, edge_index=ei, y=torch.randint(0, classes, (n,), generator=gen))
    if edge_dim is not None:
        d.edge_attr = torch.rand(ei.size(1), edge_dim, generator=gen)
    if pos:
        d.pos = torch.rand(n, pos, generator=gen)
    d.train_mask = torch.arange(n) % 2 == 0
    return d


def graph_list(num: int = 6, f: int = 8, classes: int = 2, edge_dim: Optional[int] = None,
               seed: int = 0, pos: int = 0, x_int: Optional[int] = None, edge_int: Optional[int] = None):
    """A graph-classification dataset: ``num`` small graphs of 5..12 nodes."""
    import torch
    from torch_geometric.data import Data
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(num):
        n = int(torch.randint(5, 13, (1,), generator=gen))
        ei = _edges(n, 2 * n, gen)
        if x_int is not None:
            x = torch.randint(0, x_int, (n, 1), generator=gen)
        else:
            x = torch.randn(n, f, generator=gen)
        d = Data(x=x, edge_index=ei, y=torch.randint(0, classes, (1,), generator=gen))
        if edge_dim is not None:
            d.edge_attr = torch.rand(ei.size(1), edge_dim, generator=gen)
        if edge_int is not None:
            d.edge_attr = torch.randint(0, edge_int, (ei.size(1),), generator=gen)
        if pos:
            d.pos = torch.rand(n, pos, generator=gen)
        out.append(d)
    return out


def batch_of(graphs):
    from torch_geometric.data import Batch
    return Batch.from_data_list(graphs)


def hetero_graph(node_types: dict, edge_types: list, seed: int = 0, e: int = 30):
    """A ``HeteroData``: ``node_types`` maps a type to ``(num_nodes, num_features)``."""
    import torch
    from torch_geometric.data import HeteroData
    gen = torch.Generator().manual_seed(seed)
    d = HeteroData()
    for t, (n, f) in node_types.items():
        d[t].x = torch.randn(n, f, generator=gen)
        d[t].num_nodes = n
    for (s, r, t) in edge_types:
        ns, nt = node_types[s][0], node_types[t][0]
        ei = torch.stack([torch.randint(0, ns, (e,), generator=gen),
                          torch.randint(0, nt, (e,), generator=gen)])
        d[s, r, t].edge_index = torch.unique(ei, dim=1)
    return d


def NS(**kw) -> types.SimpleNamespace:
    return types.SimpleNamespace(**kw)


def dataset_ns(f: int = 8, classes: int = 4, **kw) -> types.SimpleNamespace:
    """What the example's classes read off ``dataset``."""
    return NS(num_features=f, num_node_features=f, num_classes=classes, **kw)


# --------------------------------------------------------------------------- the spec table

@dataclass
class Spec:
    """How to build one example's model.

    ``model(ns, d)`` builds the module from the example's namespace ``ns`` and
    the synthetic data ``d`` (what ``data()`` returned); ``inputs(ns, d)`` gives
    the forward's positional arguments. ``graphs`` marks a graph-classification
    example: ``data()`` returns a list of ``Data`` and ``d`` is their ``Batch``;
    ``jax_args(g)`` maps a ``PaddedGraph`` to the port's arguments (``None``:
    the port takes ``g`` itself, a ``forward(self, data)`` model).
    ``globals(d)`` gives the script globals the class bodies read.
    """
    model: Callable[[dict, Any], Any]
    inputs: Callable[[dict, Any], tuple]
    data: Callable[[], Any] = lambda: node_graph()
    globals: Callable[[Any], dict] = lambda d: {}
    graphs: bool = False
    jax_args: Optional[Callable[[Any], tuple]] = None
    cls: str = ""
    note: str = ""


@dataclass
class NoModel:
    why: str


@dataclass
class NotMeasured:
    """A model the script does not build yet (a spec to write): not counted."""
    why: str


XE = lambda ns, d: (d.x, d.edge_index)  # noqa: E731
XEB = lambda ns, d: (d.x, d.edge_index, d.batch)  # noqa: E731
DATA = lambda ns, d: (d,)  # noqa: E731
G_XEB = lambda g: (g.x, g.edge_index, g.batch)  # noqa: E731
DS = lambda d: {"dataset": dataset_ns(), "data": d, "train_dataset": dataset_ns(),  # noqa: E731
                "device": "cpu"}


def _small_args(**kw):
    return {"args": NS(**kw)}


def _deg(d):
    import torch
    from torch_geometric.utils import degree
    deg = torch.zeros(8, dtype=torch.long)
    for g in d.to_data_list():
        dg = degree(g.edge_index[1], num_nodes=g.num_nodes, dtype=torch.long)
        deg += torch.bincount(dg, minlength=deg.numel())[:8]
    return deg


def _dense(num=4, f=8, max_nodes=12):
    import torch
    gs = graph_list(num, f)
    from torch_geometric.utils import to_dense_adj, to_dense_batch
    b = batch_of(gs)
    x, mask = to_dense_batch(b.x, b.batch, max_num_nodes=max_nodes)
    adj = to_dense_adj(b.edge_index, b.batch, max_num_nodes=max_nodes)
    return NS(x=x, adj=adj, mask=mask, t=torch)


def _hetero_dblp():
    return hetero_graph({"author": (10, 6), "paper": (12, 5), "term": (8, 4), "conference": (3, 2)},
                        [("author", "to", "paper"), ("paper", "to", "author"),
                         ("paper", "to", "term"), ("term", "to", "paper"),
                         ("paper", "to", "conference"), ("conference", "to", "paper")])


def _hetero_movies():
    return hetero_graph({"user": (10, 6), "movie": (12, 5)},
                        [("user", "rates", "movie"), ("movie", "rev_rates", "user")])


def _label_index(d, s="user", t="movie", k=6):
    import torch
    gen = torch.Generator().manual_seed(1)
    return torch.stack([torch.randint(0, d[s].num_nodes, (k,), generator=gen),
                        torch.randint(0, d[t].num_nodes, (k,), generator=gen)])


def _imdb():
    return hetero_graph({"movie": (12, 6), "director": (5, 4), "actor": (9, 5)},
                        [("movie", "to", "director"), ("director", "to", "movie"),
                         ("movie", "to", "actor"), ("actor", "to", "movie")])


def _pyg_nn(name):
    import torch_geometric.nn
    return getattr(torch_geometric.nn, name)


def _with(d, **kw):
    for k, v in kw.items():
        setattr(d, k, v)
    return d


def _hetero_items():
    return hetero_graph({"user": (10, 6), "item": (12, 5)},
                        [("user", "to", "item"), ("item", "rev_to", "user"), ("item", "to", "item")])


def _randla():
    return {"lrelu02_kwargs": {"negative_slope": 0.2}, "bn099_kwargs": {"momentum": 0.01, "eps": 1e-6}}


def _hetero(*types_and_edges):
    *types, edges = types_and_edges
    d = hetero_graph({t: (n, max(f, 1)) for t, n, f in types}, edges)
    return d


def _ids(d, t):
    import torch
    d[t].x = torch.arange(d[t].num_nodes)
    return d


def _with_weight(d):
    import torch
    d.edge_weight = torch.rand(d.edge_index.size(1), generator=torch.Generator().manual_seed(3))
    return d


def _sparse(d, gcn_norm: bool = False):
    import torch_geometric.transforms as T
    ts = [T.GCNNorm()] if gcn_norm else []
    return T.Compose(ts + [T.ToSparseTensor()])(d)


def _typed(d, r):
    import torch
    d.edge_type = torch.randint(0, r, (d.edge_index.size(1),), generator=torch.Generator().manual_seed(2))
    return d


def _shadow():
    import torch
    d = node_graph()
    d.batch = (torch.arange(d.num_nodes) * 3) // d.num_nodes
    d.root_n_id = torch.tensor([0, 7, 14])
    return d


def _set_aggr(model, aggr):
    model.set_aggr(aggr)
    return model


def _Encode(net):
    """``Net.encode`` as the forward (link_pred.py's Net has no forward)."""
    import torch

    class Encode(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x, edge_index):
            return self.net.encode(x, edge_index)

    return Encode(net)


SPECS: dict = {
    # ---- node classification / link prediction on one graph
    "agnn": Spec(lambda ns, d: ns["Net"](), lambda ns, d: (), globals=DS, cls="Net"),
    "ar_link_pred": Spec(lambda ns, d: ns["GCNEncoder"](8, 16, 8), XE, cls="GCNEncoder"),
    "argva_node_clustering": Spec(lambda ns, d: ns["ARGVA"](ns["Encoder"](8, 16, 8), ns["Discriminator"](8, 16, 8)),
                                  XE, cls="ARGVA(Encoder, Discriminator)"),
    "arma": Spec(lambda ns, d: ns["Net"](8, 16, 4), XE, cls="Net"),
    "autoencoder": Spec(lambda ns, d: ns["VGAE"](ns["VariationalGCNEncoder"](8, 8)), XE,
                        cls="VGAE(VariationalGCNEncoder)"),
    "cluster_gcn_ppi": Spec(lambda ns, d: ns["Net"](8, 16, 4, 3), XE, cls="Net"),
    "cluster_gcn_reddit": Spec(lambda ns, d: ns["Net"](8, 4), XE, globals=DS, cls="Net"),
    "cora": Spec(lambda ns, d: ns["Net"](), lambda ns, d: (),
                 data=lambda: node_graph(edge_dim=1), globals=DS, cls="Net"),
    "correct_and_smooth": Spec(lambda ns, d: ns["MLP"]([8, 16, 16, 4], dropout=0.5, batch_norm=True),
                               lambda ns, d: (d.x,), cls="MLP (PyG)"),
    "dir_gnn": Spec(lambda ns, d: ns["DirGNN"](8, 16, 4, 0.5), XE, data=lambda: node_graph(undirected=False),
                    globals=lambda d: {"Conv": _pyg_nn("GCNConv")}, cls="DirGNN"),
    "dna": Spec(lambda ns, d: ns["Net"](8, 16, 4, num_layers=2, heads=4, groups=2), XE, cls="Net"),
    "film": Spec(lambda ns, d: ns["Net"](8, 16, 4, num_layers=3), XE, cls="Net"),
    "gat": Spec(lambda ns, d: ns["GAT"](8, 8, 4, 2), XE, cls="GAT"),
    "gcn": Spec(lambda ns, d: ns["GCN"](8, 16, 4), XE, globals=lambda d: _small_args(use_gdc=False), cls="GCN"),
    "gcn2_cora": Spec(lambda ns, d: ns["Net"](16, 4, 0.1, 0.5, dropout=0.6),
                      lambda ns, d: (d.x, d.adj_t), data=lambda: _sparse(node_graph(), gcn_norm=True),
                      globals=DS, cls="Net"),
    "gcn2_ppi": Spec(lambda ns, d: ns["Net"](16, 3, 0.5, 1.0, dropout=0.2),
                     lambda ns, d: (d.x, d.adj_t), data=lambda: _sparse(node_graph(), gcn_norm=True),
                     globals=DS, cls="Net"),
    "geniepath": Spec(lambda ns, d: ns["GeniePath"](8, 4), XE,
                      globals=lambda d: {"dim": 16, "lstm_hidden": 16, "layer_num": 2}, cls="GeniePath"),
    "graph_sage_unsup": Spec(lambda ns, d: ns["GraphSAGE"](8, hidden_channels=16, num_layers=2), XE,
                             cls="GraphSAGE (PyG)"),
    "graph_sage_unsup_ppi": Spec(lambda ns, d: ns["GraphSAGE"](8, hidden_channels=16, num_layers=2,
                                                                out_channels=8), XE, cls="GraphSAGE (PyG)"),
    "graph_saint": Spec(lambda ns, d: _set_aggr(ns["Net"](16), "mean"),
                        lambda ns, d: (d.x, d.edge_index, d.edge_weight),
                        data=lambda: _with_weight(node_graph()), globals=DS, cls="Net + set_aggr('mean')"),
    "graph_unet": Spec(lambda ns, d: ns["Net"](), lambda ns, d: (), globals=DS, cls="Net (GraphUNet)"),
    "graphland": Spec(lambda ns, d: ns["Model"](8, 16, 4), XE, cls="Model"),
    "hierarchical_sampling": Spec(lambda ns, d: ns["GraphSAGE"](8, hidden_channels=16, num_layers=2,
                                                                 out_channels=4), XE, cls="GraphSAGE (PyG)"),
    "infomax_inductive": Spec(lambda ns, d: ns["DeepGraphInfomax"](
        16, encoder=ns["Encoder"](8, 16), summary=lambda z, *a, **k: z.mean(dim=0).sigmoid(),
        corruption=ns["corruption"]), lambda ns, d: (d.x, d.edge_index, 10),
        cls="DeepGraphInfomax(Encoder)", note="corruption permutes rows at random"),
    "infomax_transductive": Spec(lambda ns, d: ns["DeepGraphInfomax"](
        16, encoder=ns["Encoder"](8, 16), summary=lambda z, *a, **k: z.mean(dim=0).sigmoid(),
        corruption=ns["corruption"]), XE, cls="DeepGraphInfomax(Encoder)",
        note="corruption permutes rows at random"),
    "label_prop": Spec(lambda ns, d: ns["LabelPropagation"](num_layers=3, alpha=0.9),
                       lambda ns, d: (d.y, d.edge_index, d.train_mask), cls="LabelPropagation (PyG)"),
    "lightgcn": Spec(lambda ns, d: ns["LightGCN"](20, embedding_dim=8, num_layers=2),
                     lambda ns, d: (d.edge_index,), cls="LightGCN (PyG)"),
    "link_pred": Spec(lambda ns, d: _Encode(ns["Net"](8, 16, 8)), XE, cls="Net.encode"),
    "linkx": Spec(lambda ns, d: ns["LINKX"](20, 8, hidden_channels=16, out_channels=4, num_layers=1,
                                            num_edge_layers=1, num_node_layers=1, dropout=0.5), XE,
                  cls="LINKX (PyG)"),
    "lpformer": NotMeasured("LPFormer (PyG): its forward takes link batches and a precomputed PPR "
                            "matrix; no spec written yet"),
    "mixhop": Spec(lambda ns, d: ns["MixHop"](), XE, globals=DS, cls="MixHop"),
    "ogbn_proteins_deepgcn": Spec(lambda ns, d: ns["DeeperGCN"](16, 4),
                                  lambda ns, d: (d.x, d.edge_index, d.edge_attr),
                                  data=lambda: _with(node_graph(edge_dim=8), y=None), globals=lambda d: {
                                      "data": NS(x=d.x, edge_attr=d.edge_attr, y=__import__("torch").zeros(1, 3))},
                                  cls="DeeperGCN"),
    "ogbn_train": Spec(lambda ns, d: ns["SGFormer"](8, 16, 4, trans_num_layers=1, gnn_num_layers=2),
                       lambda ns, d: (d.x, d.edge_index, __import__("torch").zeros(d.num_nodes, dtype=__import__(
                           "torch").long)),
                       cls="SGFormer (PyG)"),
    "ogc": Spec(lambda ns, d: ns["LinearNeuralNetwork"](8, 4), lambda ns, d: (d.x,), cls="LinearNeuralNetwork"),
    "pmlp": Spec(lambda ns, d: ns["PMLP"](8, 16, 4, num_layers=2, dropout=0.5, norm=False), XE,
                 cls="PMLP (PyG)"),
    "ppi": Spec(lambda ns, d: ns["Net"](), XE, globals=DS, cls="Net"),
    "reddit": Spec(lambda ns, d: ns["SAGE"](8, 16, 4), XE, globals=DS, cls="SAGE"),
    "rect": Spec(lambda ns, d: ns["RECT_L"](8, 16, normalize=False, dropout=0.0), XE, cls="RECT_L (PyG)"),
    "relbench_example": Spec(lambda ns, d: ns["GNN"](16), XE, cls="GNN"),
    "rev_gnn": Spec(lambda ns, d: ns["RevGNN"](8, 16, 4, num_layers=2, dropout=0.5, num_groups=2),
                    lambda ns, d: (d.x, d.adj_t), data=lambda: _sparse(node_graph()), cls="RevGNN"),
    "rgat": Spec(lambda ns, d: ns["RGAT"](8, 8, 4, 3), lambda ns, d: (d.x, d.edge_index, d.edge_type),
                 data=lambda: _typed(node_graph(), 3), cls="RGAT"),
    "rgcn": Spec(lambda ns, d: ns["Net"](), lambda ns, d: (d.edge_index, d.edge_type),
                 data=lambda: _typed(node_graph(), 3),
                 globals=lambda d: {"data": d, "dataset": dataset_ns(num_relations=3),
                                    "Conv": _pyg_nn("RGCNConv")}, cls="Net"),
    "rgcn_link_pred": Spec(lambda ns, d: ns["RGCNEncoder"](20, 10, 3), lambda ns, d: (d.edge_index, d.edge_type),
                           data=lambda: _typed(node_graph(), 3), cls="RGCNEncoder"),
    "sgc": Spec(lambda ns, d: ns["Net"](), lambda ns, d: (), globals=DS, cls="Net"),
    "shadow": Spec(lambda ns, d: ns["GNN"](8, 16, 4),
                   lambda ns, d: (d.x, d.edge_index, d.batch, d.root_n_id),
                   data=lambda: _shadow(), cls="GNN"),
    "sign": Spec(lambda ns, d: ns["Net"](), lambda ns, d: ([d.x] * 3,),
                 globals=lambda d: {"dataset": dataset_ns(), "K": 2, "args": NS(K=2)}, cls="Net"),
    "signed_gcn": Spec(lambda ns, d: ns["SignedGCN"](8, 16, num_layers=2, lamb=5),
                       lambda ns, d: (d.x, d.edge_index, d.edge_index.flip(0)), cls="SignedGCN (PyG)"),
    "super_gat": Spec(lambda ns, d: ns["Net"](), XE, globals=DS, cls="Net"),
    "tagcn": Spec(lambda ns, d: ns["Net"](), lambda ns, d: (), globals=DS, cls="Net"),
    "tensorboard_logging": Spec(lambda ns, d: ns["Net"](), XE, globals=DS, cls="Net"),
    "unimp_arxiv": Spec(lambda ns, d: ns["UniMP"](8, 4, hidden_channels=8, num_layers=2, heads=2),
                        lambda ns, d: (d.x, d.y, d.edge_index, d.train_mask),
                        globals=lambda d: {"num_classes": 4}, cls="UniMP"),
    "node2vec": Spec(lambda ns, d: ns["Node2Vec"](d.edge_index, embedding_dim=8, walk_length=4,
                                                  context_size=2, num_nodes=20),
                     lambda ns, d: (), cls="Node2Vec (PyG)"),
    "kge_fb15k_237": Spec(lambda ns, d: ns["TransE"](20, 3, hidden_channels=8),
                          lambda ns, d: (d.edge_index[0], d.edge_type, d.edge_index[1]),
                          data=lambda: _typed(node_graph(), 3), cls="TransE (PyG)"),
    "renet": NoModel("RENet needs an event dataset's history buffers (pre-transform); not built"),
    "tgn": Spec(lambda ns, d: ns["LinkPredictor"](8), lambda ns, d: (d.x[:5], d.x[5:10]),
                cls="LinkPredictor", note="TGN memory is stateful; its link predictor only"),
    "wl_kernel": Spec(lambda ns, d: ns["WL"](2), XEB,
                      data=lambda: [_with(g, x=g.x[:, 0]) for g in graph_list(x_int=3)],
                      graphs=True, jax_args=G_XEB, cls="WL"),
    "equilibrium_median": Spec(lambda ns, d: ns["EquilibriumAggregation"](1, 10, [16, 16], 1),
                               lambda ns, d: (d.x[:, :1], __import__("torch").arange(d.num_nodes) % 3),
                               cls="EquilibriumAggregation (PyG)"),
    # ---- graph classification (a Batch of small graphs)
    "colors_topk_pool": Spec(lambda ns, d: ns["Net"](8), DATA,
                             data=lambda: [_with(g, attn=__import__("torch").rand(g.num_nodes)) for g in graph_list()],
                             graphs=True, cls="Net"),
    "egc": Spec(lambda ns, d: ns["Net"](16, 2, 4, 2), lambda ns, d: (d.x, d.adj_t, d.batch),
                data=lambda: graph_list(x_int=3), graphs=True, globals=lambda d: _small_args(
                    use_multi_aggregators=False), cls="Net", note="x as atom ids; adj_t from the Batch"),
    "lcm_aggr_2nd_min": Spec(lambda ns, d: ns["LCM"](16), lambda ns, d: (d.x, d.batch),
                             data=lambda: [_with(g, x=(g.x > 0).long()[:, :4]) for g in graph_list()],
                             graphs=True, jax_args=lambda g: (g.x, g.batch),
                             globals=lambda d: _small_args(num_bits=4), cls="LCM"),
    "mem_pool": Spec(lambda ns, d: ns["Net"](8, 16, 2, dropout=0.1), XEB, data=lambda: graph_list(),
                     graphs=True, jax_args=G_XEB, cls="Net"),
    "mutag_gin": Spec(lambda ns, d: ns["GIN"](8, 16, 2, 3), XEB, data=lambda: graph_list(), graphs=True,
                      jax_args=G_XEB, cls="GIN"),
    "pna": Spec(lambda ns, d: ns["Net"](), lambda ns, d: (d.x, d.edge_index, d.edge_attr, d.batch),
                data=lambda: graph_list(x_int=21, edge_int=4), graphs=True,
                jax_args=lambda g: (g.x, g.edge_index, g.edge_attr, g.batch),
                globals=lambda d: {"deg": _deg(d)}, cls="Net"),
    "proteins_diff_pool": Spec(lambda ns, d: ns["Net"](), lambda ns, d: (d.x, d.adj, d.mask),
                               data=lambda: _dense(), globals=lambda d: {"dataset": dataset_ns(classes=2),
                                                                         "max_nodes": 12}, cls="Net (dense)"),
    "proteins_dmon_pool": Spec(lambda ns, d: ns["Net"](8, 2), XEB, data=lambda: graph_list(), graphs=True,
                               jax_args=G_XEB, globals=lambda d: {"avg_num_nodes": 8}, cls="Net"),
    "proteins_gmt": Spec(lambda ns, d: ns["Net"](), XEB, data=lambda: graph_list(), graphs=True,
                         jax_args=G_XEB, globals=lambda d: {"dataset": dataset_ns(classes=2)}, cls="Net"),
    "proteins_mincut_pool": Spec(lambda ns, d: ns["Net"](8, 2), XEB, data=lambda: graph_list(), graphs=True,
                                 jax_args=G_XEB, globals=lambda d: {"avg_num_nodes": 8}, cls="Net"),
    "proteins_topk_pool": Spec(lambda ns, d: ns["Net"](), DATA, data=lambda: graph_list(), graphs=True,
                               globals=lambda d: {"dataset": dataset_ns(classes=2)}, cls="Net"),
    "qm9_nn_conv": Spec(lambda ns, d: ns["Net"](), DATA, data=lambda: graph_list(f=11, edge_dim=5),
                        graphs=True, globals=lambda d: {"dataset": dataset_ns(f=11), "dim": 16, "target": 0},
                        cls="Net"),
    "triangles_sag_pool": Spec(lambda ns, d: ns["Net"](8), DATA,
                               data=lambda: [_with(g, attn=__import__("torch").rand(g.num_nodes))
                                             for g in graph_list()], graphs=True, cls="Net"),
    "upfd": Spec(lambda ns, d: ns["Net"]("GCN", 8, 16, 2, concat=True), XEB, data=lambda: graph_list(),
                 graphs=True, jax_args=G_XEB, cls="Net"),
    "graph_gps": Spec(lambda ns, d: ns["GPS"](channels=16, pe_dim=4, num_layers=2, attn_type="multihead",
                                              attn_kwargs={"dropout": 0.5}),
                      lambda ns, d: (d.x, d.pe, d.edge_index, d.edge_attr, d.batch),
                      data=lambda: [_with(g, pe=__import__("torch").rand(g.num_nodes, 20))
                                    for g in graph_list(x_int=28, edge_int=4)], graphs=True,
                      jax_args=lambda g: (g.x, g.extras["pe"], g.edge_index, g.edge_attr, g.batch), cls="GPS"),
    "gpse": Spec(lambda ns, d: ns["GPSEPlusGNN"](dim_emb=16, dim_conv=16, conv_type="gcn", num_layers=2,
                                                 dim_pe_in=20, dim_pe_out=8, encoder="none", gpse=True),
                 DATA, data=lambda: [_with(g, pestat_GPSE=__import__("torch").rand(g.num_nodes, 20))
                                     for g in graph_list()], graphs=True,
                 cls="GPSEPlusGNN", note="random pestat_GPSE in place of the pretrained GPSE encodings"),
    "attentive_fp": Spec(lambda ns, d: ns["AttentiveFP"](in_channels=8, hidden_channels=16, out_channels=1,
                                                         edge_dim=4, num_layers=2, num_timesteps=2, dropout=0.2),
                         lambda ns, d: (d.x, d.edge_index, d.edge_attr, d.batch),
                         data=lambda: graph_list(edge_dim=4), graphs=True,
                         jax_args=lambda g: (g.x, g.edge_index, g.edge_attr, g.batch), cls="AttentiveFP (PyG)"),
    "seal_link_pred": Spec(lambda ns, d: ns["DGCNN"](16, 2, k=10), XEB,
                           data=lambda: [_with(g, z=__import__("torch").randint(0, 10, (g.num_nodes,)))
                                         for g in graph_list()], graphs=True, jax_args=G_XEB,
                           globals=lambda d: {"train_dataset": NS(num_features=8),
                                              "data": NS(num_features=8)}, cls="DGCNN"),
    "qm9_pretrained_schnet": Spec(lambda ns, d: ns["SchNet"](hidden_channels=16, num_filters=16,
                                                             num_interactions=2, num_gaussians=10, cutoff=5.0),
                                  lambda ns, d: (d.z, d.pos, d.batch),
                                  data=lambda: [_with(g, z=g.x[:, 0].abs().mul(5).long() + 1)
                                                for g in graph_list(pos=3)], graphs=True,
                                  jax_args=lambda g: (g.extras["z"], g.extras["pos"], g.batch),
                                  cls="SchNet (PyG)"),
    "qm9_pretrained_dimenet": Spec(lambda ns, d: ns["DimeNetPlusPlus"](
        hidden_channels=16, out_channels=1, num_blocks=2, int_emb_size=8, basis_emb_size=4,
        out_emb_channels=16, num_spherical=3, num_radial=3), lambda ns, d: (d.z, d.pos, d.batch),
        data=lambda: [_with(g, z=g.x[:, 0].abs().mul(5).long() + 1) for g in graph_list(pos=3)], graphs=True,
        jax_args=lambda g: (g.extras["z"], g.extras["pos"], g.batch), cls="DimeNetPlusPlus (PyG)"),
    # ---- point clouds (torch-cluster ops)
    "dgcnn_classification": Spec(lambda ns, d: ns["Net"](4, k=4), DATA,
                                 data=lambda: graph_list(f=3, pos=3), graphs=True, cls="Net"),
    "dgcnn_segmentation": Spec(lambda ns, d: ns["Net"](4, k=4), DATA, data=lambda: graph_list(f=3, pos=3),
                               graphs=True, cls="Net"),
    "faust": Spec(lambda ns, d: ns["Net"](), DATA, data=lambda: _with(node_graph(f=1, edge_dim=3)),
                  globals=lambda d: {"d": NS(num_nodes=20)}, cls="Net"),
    "mnist_graclus": Spec(lambda ns, d: ns["Net"](), DATA, data=lambda: graph_list(f=1, edge_dim=2, pos=2),
                          graphs=True, globals=lambda d: {"d": NS(num_features=1, num_classes=4),
                                                          "transform": None}, cls="Net"),
    "mnist_nn_conv": Spec(lambda ns, d: ns["Net"](), DATA, data=lambda: graph_list(f=1, edge_dim=2, pos=2),
                          graphs=True, globals=lambda d: {"d": NS(num_features=1, num_classes=4),
                                                          "transform": None}, cls="Net"),
    "mnist_voxel_grid": Spec(lambda ns, d: ns["Net"](), DATA, data=lambda: graph_list(f=1, edge_dim=2, pos=2),
                             graphs=True, globals=lambda d: {"d": NS(num_features=1, num_classes=4),
                                                             "transform": None}, cls="Net"),
    "point_transformer_classification": Spec(lambda ns, d: ns["Net"](0, 4, dim_model=[8, 16], k=4),
                                             lambda ns, d: (d.x[:, :1] * 0 + 1, d.pos, d.batch),
                                             data=lambda: graph_list(pos=3), graphs=True, cls="Net"),
    "point_transformer_segmentation": Spec(lambda ns, d: ns["Net"](3, 4, dim_model=[8, 16], k=4),
                                           lambda ns, d: (d.x[:, :3], d.pos, d.batch),
                                           data=lambda: graph_list(pos=3), graphs=True, cls="Net"),
    "pointnet2_classification": Spec(lambda ns, d: ns["Net"](), DATA,
                                     data=lambda: [_with(g, x=None) for g in graph_list(pos=3)],
                                     graphs=True, cls="Net"),
    "pointnet2_segmentation": Spec(lambda ns, d: ns["Net"](4), DATA,
                                   data=lambda: graph_list(f=3, pos=3), graphs=True, cls="Net"),
    "randlanet_classification": Spec(lambda ns, d: ns["Net"](3, 4, decimation=2, num_neighboors=4),
                                     lambda ns, d: (d.x[:, :3], d.pos, d.batch, d.ptr),
                                     data=lambda: graph_list(pos=3), graphs=True, globals=lambda d: _randla(),
                                     cls="Net"),
    "randlanet_segmentation": Spec(lambda ns, d: ns["Net"](3, 4, decimation=2, num_neighbors=4),
                                   lambda ns, d: (d.x[:, :3], d.pos, d.batch, d.ptr),
                                   data=lambda: graph_list(pos=3), graphs=True, globals=lambda d: _randla(),
                                   cls="Net"),
    # ---- heterogeneous graphs
    "hetero/hgt_dblp": Spec(lambda ns, d: ns["HGT"](16, 4, num_heads=2, num_layers=1),
                            lambda ns, d: (d.x_dict, d.edge_index_dict), data=_hetero_dblp,
                            globals=lambda d: {"data": d}, cls="HGT"),
    "hetero/hetero_conv_dblp": Spec(lambda ns, d: ns["HeteroGNN"](d.metadata(), 16, 4, 2),
                                    lambda ns, d: (d.x_dict, d.edge_index_dict), data=_hetero_dblp,
                                    cls="HeteroGNN"),
    "hetero/han_imdb": Spec(lambda ns, d: ns["HAN"](in_channels=-1, out_channels=3, hidden_channels=16, heads=2),
                            lambda ns, d: (d.x_dict, d.edge_index_dict), data=_imdb,
                            globals=lambda d: {"data": d, "metapaths": None}, cls="HAN"),
    "hetero/bipartite_sage": Spec(lambda ns, d: ns["Model"](10, hidden_channels=16, out_channels=16),
                                  lambda ns, d: (d.x_dict, d.edge_index_dict, _label_index(d)),
                                  data=lambda: _ids(_hetero(("user", 10, 0), ("movie", 12, 5), [
                                      ("user", "rates", "movie"), ("movie", "rev_rates", "user"),
                                      ("movie", "metapath_0", "movie")]), "user"), cls="Model"),
    "hetero/bipartite_sage_unsup": Spec(lambda ns, d: ns["Model"](10, 12, hidden_channels=16, out_channels=16),
                                        lambda ns, d: (d.x_dict, d.edge_index_dict, _label_index(d, t="item")),
                                        data=lambda: _ids(_ids(_hetero_items(), "user"), "item"),
                                        globals=lambda d: {"device": "cpu"}, cls="Model"),
    "hetero/hetero_link_pred": Spec(lambda ns, d: ns["Model"](hidden_channels=16),
                                    lambda ns, d: (d.x_dict, d.edge_index_dict, _label_index(d)),
                                    data=_hetero_movies, globals=lambda d: {"data": d}, cls="Model"),
    "hetero/recommender_system": Spec(lambda ns, d: ns["Model"](hidden_channels=16),
                                      lambda ns, d: (d.x_dict, d.edge_index_dict, _label_index(d)),
                                      data=_hetero_movies, globals=lambda d: {"data": d}, cls="Model"),
    "hetero/temporal_link_pred": Spec(lambda ns, d: ns["Model"](hidden_channels=16),
                                      lambda ns, d: (d.x_dict, d.edge_index_dict, _label_index(d)),
                                      data=_hetero_movies, globals=lambda d: {"data": d}, cls="Model"),
    "hetero/dmgi_unsup": Spec(lambda ns, d: ns["DMGI"](12, 5, 8, 2),
                              lambda ns, d: (d["movie"].x, [d["movie", "to", "movie"].edge_index,
                                                            d["movie", "rev", "movie"].edge_index]),
                              data=lambda: hetero_graph({"movie": (12, 5)}, [("movie", "to", "movie"),
                                                                             ("movie", "rev", "movie")]),
                              cls="DMGI", note="corruption permutes rows at random"),
    "hetero/to_hetero_mag": Spec(lambda ns, d: ns["to_hetero"](ns["Sequential"]("x, edge_index", [
        (ns["SAGEConv"]((-1, -1), 16), "x, edge_index -> x"), ns["ReLU"](inplace=True),
        (ns["SAGEConv"]((-1, -1), 4), "x, edge_index -> x")]), d.metadata(), aggr="sum"),
        lambda ns, d: (d.x_dict, d.edge_index_dict), data=_hetero_dblp, cls="to_hetero(Sequential)",
        note="lazy (-1) channels are initialised by the first PyG call"),
    "hetero/hierarchical_sage": Spec(lambda ns, d: ns["HierarchicalHeteroGraphSage"](
        d.edge_types, hidden_channels=16, out_channels=4, num_layers=2),
        lambda ns, d: (d.x_dict, d.edge_index_dict, {k: v.size(1) and [v.size(1), 0] for k, v in
                                                     d.edge_index_dict.items()},
                       {t: [d[t].num_nodes, 0, 0] for t in d.node_types}), data=_hetero_dblp,
        cls="HierarchicalHeteroGraphSage", note="the full graph: every node and edge at hop 0"),
    "hetero/metapath2vec": NoModel("MetaPath2Vec: a random-walk embedding table trained with a sampler, "
                                   "no graph forward"),
    "hetero/load_csv": NoModel("CSV loading utilities (SequenceEncoder wraps sentence-transformers)"),
    "datapipe": NoModel("torchdata pipes, no model"),
    "glnn": Spec(lambda ns, d: ns["MLP"]([8, 16, 4], dropout=0.5), lambda ns, d: (d.x,),
                 cls="MLP (PyG, the student)"),
    "rdl": NoModel("needs relbench + pytorch_frame (a TensorFrame encoder per table); not installed"),
    "tgn_memory": NoModel(""),
}
SPECS.pop("tgn_memory")


# Examples whose file holds no model at all (utilities, non-Python folders).
NO_MODEL_DIRS = ("cpp", "compile", "contrib", "distributed", "explain", "jit", "llm", "multi_gpu",
                 "pytorch_ignite", "pytorch_lightning", "quiver")

NEEDS = (("torch_cluster", "torch-cluster"), ("torch-cluster", "torch-cluster"), ("pyg_lib", "pyg-lib"),
         ("pyg-lib", "pyg-lib"), ("'ogb'", "ogb"), ("ogb.", "ogb"), ("torch_spline_conv", "torch-spline-conv"),
         ("torch-spline-conv", "torch-spline-conv"), ("rdkit", "rdkit"), ("transformers", "transformers"),
         ("sentence_transformers", "sentence-transformers"), ("torch_frame", "pytorch-frame"),
         ("relbench", "relbench"), ("sklearn", "scikit-learn"), ("'fps'", "torch-cluster"),
         ("'knn'", "torch-cluster"), ("'radius'", "torch-cluster"), ("graclus", "torch-cluster"),
         ("voxel_grid", "torch-cluster"), ("knn_graph", "torch-cluster"))


# --------------------------------------------------------------------------- one example

def load_namespace(path: Path, extra: dict) -> tuple[dict, list]:
    """Execute ``path``'s top-level imports and definitions only; returns (namespace, import errors)."""
    src = path.read_text()
    tree = ast.parse(src, filename=str(path))
    mod_name = "pyg_example_" + path.stem
    ns: dict = {"__name__": mod_name, "__file__": str(path), "__builtins__": __builtins__}
    module = types.ModuleType(mod_name)
    sys.modules[mod_name] = module
    ns.update(extra)
    errors = []
    for node in tree.body:
        # `from pointnet2_classification import SAModule`: a sibling example is loaded the same way
        # (definitions only), never executed as a script.
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and \
                (path.parent / f"{node.module}.py").is_file() and node.module not in sys.modules:
            sib_ns, _ = load_namespace(path.parent / f"{node.module}.py", extra)
            sib = types.ModuleType(node.module)
            sib.__dict__.update(sib_ns)
            sys.modules[node.module] = sib
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            try:
                exec(compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec"), ns)
            except BaseException as e:  # noqa: BLE001 - an import may raise anything
                errors.append(f"import: {type(e).__name__}: {e}")
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            try:
                exec(compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec"), ns)
            except BaseException as e:  # noqa: BLE001
                errors.append(f"definition {node.name}: {type(e).__name__}: {e}")
    ns.update(extra)   # the spec wins over a definition of the same name
    module.__dict__.update(ns)
    return ns, errors


def _one_line(e: BaseException) -> str:
    msg = f"{type(e).__name__}: {e}".replace("\n", " ").replace("|", "\\|")
    return " ".join(msg.split())


def _first_leaf(out):
    if isinstance(out, (tuple, list)):
        return _first_leaf(out[0])
    return out


def _jit_loader(spec: Spec, model, port, graphs: list) -> str:
    import equinox as eqx
    import numpy as np
    import torch

    from torch2jax_ops.geometric import BucketLadder
    from torch2jax_ops.geometric.loader import JaxLoader

    k = 3
    batches = [batch_of(graphs[i:i + k]) for i in range(0, len(graphs), k)]
    ladder = BucketLadder((max(b.num_nodes for b in batches) + 4,),
                          (max(b.num_edges for b in batches) + 8,), (k + 1,))
    call = (lambda p, g, **kw: p(*spec.jax_args(g), **kw)) if spec.jax_args else (
        lambda p, g, **kw: p(g, **kw))
    fn = eqx.filter_jit(call)
    first = next(iter(JaxLoader(batches[:1], ladder=ladder)))
    try:
        fn(port, first)
    except ValueError as error:  # a model that draws in eval mode (F.dropout(x, p))
        if "needs a PRNG key" not in str(error):
            raise
        return _jit_loader_random(fn, port, batches, ladder)
    worst = 0.0
    for b, g in zip(batches, JaxLoader(batches, ladder=ladder)):
        torch.manual_seed(0)
        with torch.no_grad():
            ref = _first_leaf(model(*spec.inputs({}, copy.deepcopy(b)))).detach().numpy()
        out = np.asarray(_first_leaf(fn(port, g)))
        got = out[:b.num_graphs]
        if got.shape != ref.shape:
            return f"shape {got.shape} vs PyG {ref.shape}"
        if not np.allclose(got, ref, rtol=1e-4, atol=1e-5):
            return f"differs: max abs {float(np.max(np.abs(got - ref))):.3g}"
        worst = max(worst, float(np.max(np.abs(got - ref))) if got.size else 0.0)
    return f"ok ({len(batches)} batches, max abs {worst:.1e})"


def _jit_loader_random(fn, port, batches: list, ladder) -> str:
    """A model that draws random numbers in eval mode: under jit with a key per batch. The
    draws cannot be PyG's on padded shapes, so the real rows are checked for their shape
    and finiteness (compare_modules checks the values, replaying torch's draws)."""
    import jax
    import numpy as np

    from torch2jax_ops.geometric.loader import JaxLoader

    for i, (b, g) in enumerate(zip(batches, JaxLoader(batches, ladder=ladder))):
        out = np.asarray(_first_leaf(fn(port, g, key=jax.random.key(i))))
        if out.shape[0] < b.num_graphs or not np.isfinite(out[:b.num_graphs]).all():
            return f"random: shape {out.shape} or non-finite rows"
    return (f"ok, random ({len(batches)} batches with key=; values by compare_modules' "
            f"replay)")


def run_one(name: str, src: Path) -> dict:
    """Build, run, convert, compare one example; every step's first error is recorded."""
    row = {"example": name, "model": "", "runs": None, "ports": None, "matches": None, "jit": "",
           "error": "", "status": ""}
    spec = SPECS.get(name)
    if isinstance(spec, NoModel):
        row.update(status="no model", error=spec.why)
        return row
    if isinstance(spec, NotMeasured):
        row.update(status="not measured", error=spec.why)
        return row
    if spec is None:
        row.update(status="no spec", error="no spec in SPECS: the file defines no model the script knows")
        return row
    row["model"] = spec.cls
    try:
        import torch
        torch.manual_seed(0)
        raw = spec.data()
        d = batch_of(raw) if spec.graphs else raw
        extra = spec.globals(d)
    except BaseException as e:  # noqa: BLE001
        row.update(status="error", error="synthetic data: " + _one_line(e))
        return row
    ns, errors = load_namespace(src / "examples" / f"{name}.py", extra)
    try:
        torch.manual_seed(0)
        model = spec.model(ns, d).eval()
        torch.manual_seed(0)
        inputs = spec.inputs(ns, d)
        torch.manual_seed(0)
        with torch.no_grad():
            model(*copy.deepcopy(inputs))   # a forward may write to its data object (gpse.py)
        row["runs"] = True
    except BaseException as e:  # noqa: BLE001
        row["runs"] = False
        msg = _one_line(e)
        if errors:
            msg = errors[0] + " -> " + msg
        need = next((pkg for key, pkg in NEEDS if key in msg), None)
        if need:
            row.update(status=f"skipped: needs {need}", error=msg)
        else:
            row.update(status="error", error="PyG: " + msg + "\n" + traceback.format_exc(limit=-3))
        return row
    import torch2jax_ops.nn as tnn
    from torch2jax_ops.parity import compare_modules
    try:
        port = tnn.from_torch(model)
        row["ports"] = True
    except BaseException as e:  # noqa: BLE001
        row.update(ports=False, status="error", error="from_torch: " + _one_line(e))
        return row
    try:
        torch.manual_seed(0)
        res = compare_modules(model, port, *inputs)
        row["matches"] = bool(res.passed)
        if not res.passed:
            worst = res.failures()[0]
            row.update(status="error", error=f"compare_modules: {len(res.failures())} leaves differ, worst "
                       f"{worst.path}: max abs {worst.max_abs:.3g} ({worst.tol_ratio:.3g}x tol)")
            return row
    except BaseException as e:  # noqa: BLE001
        row.update(matches=False, status="error", error="compare_modules: " + _one_line(e))
        return row
    row["status"] = "ok"
    if spec.graphs:
        try:
            row["jit"] = _jit_loader(spec, model, port, raw)
        except BaseException as e:  # noqa: BLE001
            row["jit"] = _one_line(e)
    return row


# --------------------------------------------------------------------------- the driver

def example_names(src: Path) -> list:
    ex = src / "examples"
    names = sorted(p.stem for p in ex.glob("*.py"))
    names += sorted("hetero/" + p.stem for p in (ex / "hetero").glob("*.py"))
    return names


def run_subprocess(name: str, src: Path, timeout: float) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--one", name]
    env = dict(os.environ, PYG_SRC=str(src))
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"example": name, "model": getattr(SPECS.get(name), "cls", ""), "runs": None, "ports": None,
                "matches": None, "jit": "", "status": "error", "error": f"timeout after {timeout:.0f} s",
                "seconds": timeout}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            row = json.loads(line)
            row["seconds"] = round(time.time() - t0, 1)
            return row
    tail = " ".join((p.stderr or "").strip().splitlines()[-2:])[:200]
    return {"example": name, "model": getattr(SPECS.get(name), "cls", ""), "runs": None, "ports": None,
            "matches": None, "jit": "", "status": "error",
            "error": f"process died (exit {p.returncode}): {tail}", "seconds": round(time.time() - t0, 1)}


def _yn(v) -> str:
    return "-" if v is None else ("yes" if v else "**no**")


def render(rows: list, src: Path) -> str:
    counted = [r for r in rows if r.get("runs")]
    good = [r for r in counted if r.get("matches")]
    pct = 100.0 * len(good) / len(counted) if counted else 0.0
    summary = (f"**{len(good)} of {len(counted)}** examples whose model runs in PyG on the CPU port and "
               f"match ({pct:.0f} %).")
    lines = ["# PyG's example models through `from_torch` + `compare_modules`", "",
             "Generated by `make pyg-examples PYG_SRC=...` (`benchmarks/pyg_examples.py`); "
             f"source: `{src.name}` examples, torch2jax_ops at `{_git_head()}`.", "",
             summary, "",
             "\"runs in PyG\": the model runs on the CPU with the installed packages (the denominator); "
             "\"ports\": `from_torch` returned (a submodule with no converter is reported when first "
             "traced, by `compare_modules`); \"matches\": `compare_modules` passed (outputs and every "
             "gradient); \"jit+JaxLoader\": graph-classification ports under `jax.jit` on `JaxLoader` "
             "batches, real rows against PyG's output.", "",
             "| example | model | runs in PyG | ports | matches | jit+JaxLoader | status / first error |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        err = (r.get("error") or "").splitlines()[0] if r.get("error") else ""
        err = err if len(err) <= 150 else err[:147] + "..."
        status = r["status"] if r["status"] in ("ok",) else (r["status"] + (": " + err if err else ""))
        jit = (r.get("jit") or "").replace("|", "\\|")
        jit = jit if len(jit) <= 100 else jit[:97] + "..."
        lines.append(f"| {r['example']} | {r.get('model', '')} | {_yn(r.get('runs'))} | {_yn(r.get('ports'))} | "
                     f"{_yn(r.get('matches'))} | {jit} | {status} |")
    lines += ["", summary, ""]
    return "\n".join(lines)


def _git_head() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True).stdout.strip()
    except OSError:
        return "?"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*", help="examples to run (default: all)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per example (default 180)")
    ap.add_argument("--jobs", type=int, default=1, help="examples run at once (default 1)")
    ap.add_argument("--out", default=str(OUT_MD), help="where to write the Markdown table")
    a = ap.parse_args(argv)
    src_env = os.environ.get("PYG_SRC", "")
    src = Path(src_env) if src_env else None
    if src is None or not (src / "examples").is_dir():
        sys.stderr.write(HOW_TO_GET)
        return 2
    if a.one:
        sys.path.insert(0, str(ROOT))
        row = run_one(a.one, src)
        print(json.dumps(row))
        return 0
    names = a.names or example_names(src)
    store = Path(a.out).with_suffix(".json")
    known = json.loads(store.read_text()) if store.exists() else {}
    done = {}

    def work(name):
        return name, run_subprocess(name, src, a.timeout)

    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        for name, row in pool.map(work, names):
            done[name] = row
            first = (row.get("error") or "").splitlines()[0][:150] if row.get("error") else ""
            print(f"{name:40s} {row['status']:28s} {row.get('jit') or '':24s} {row.get('seconds', 0):6.1f}s "
                  f"{first}", flush=True)
            known[name] = row          # written after every example: an interrupted run keeps its rows
            store.write_text(json.dumps(known, indent=1, sort_keys=True))
            md = render([known[n] for n in example_names(src) if n in known], src)
            Path(a.out).write_text(md)
    print()
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
