"""Parity cases of the attention and gating convs (section "convs").

Layers: GATv2Conv, TransformerConv, SuperGATConv, AGNNConv, GeneralConv,
ResGatedGraphConv, GatedGraphConv, FiLMConv, each with the option variants
that change its math (heads / concat, edge features and their fill value,
self-loops, shared weights, residual / root / beta terms, bias, attention
type, activation, relations, bipartite input, ``aggr`` names and aggregation
modules), on a small graph with self-loops, repeated edges and isolated
nodes ("loops-and-repeats") and on KarateClub, in float32 and float64. Every
case runs :func:`~torch2jax_ops.parity.compare_modules` on the PyG layer in
eval mode and its ``from_torch`` port: the output, the gradient of each
parameter by its ``state_dict`` name, and the gradients w.r.t. the floating
inputs (``x`` or both sides of a bipartite pair, ``edge_attr``,
``edge_weight``).
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from torch2jax_ops import dtypes
from torch2jax_ops.parity._suite import Case, register

WIDE = ("float32", "float64")
GRAPHS = ("loops-and-repeats", "karate")
F_IN, F_DST, F_OUT, EDGE_DIM = 6, 5, 4, 3


def _like(g: dict, shape: tuple, seed: int):
    import torch

    rng = np.random.default_rng(seed)
    return torch.as_tensor(rng.standard_normal(shape)).to(g["x"].dtype)


# ---------------------------------------------------------------- inputs per variant

def plain(g):
    return (g["x"], g["edge_index"])


def with_attr(g):
    return (g["x"], g["edge_index"], g["edge_attr"])


def with_weight(g):
    return (g["x"], g["edge_index"], g["edge_weight"])


def _pair(g, f_dst: int):
    """(x_src [N + 2, 6], x_dst [N, f_dst]): more sources than targets (bipartite)."""
    n = g["num_nodes"]
    return (_like(g, (n + 2, F_IN), 5), _like(g, (n, f_dst), 6))


def bipartite(g):
    return (_pair(g, F_DST), g["edge_index"])


def bipartite_same_width(g):  # GeneralConv's lin_msg_i / dot product read x_dst with F_src
    return (_pair(g, F_IN), g["edge_index"])


def bipartite_attr(g):
    return (_pair(g, F_DST), g["edge_index"], g["edge_attr"])


def one_dim_attr(g):  # edge_attr [E]: GATv2Conv views it as [E, 1]
    return (g["x"], g["edge_index"], g["edge_attr"][:, 0])


def relations(g):
    """FiLMConv's (x, edge_index, edge_type) with 3 relations."""
    import torch

    rng = np.random.default_rng(4)
    return (g["x"], g["edge_index"], torch.as_tensor(rng.integers(0, 3, g["edge_index"].shape[1])))


def narrow(g):  # GatedGraphConv pads x [N, 6] with zeros to out_channels = 8
    return (g["x"], g["edge_index"], g["edge_weight"])


# ------------------------------------------------------------------------- layers

def layers() -> dict:
    """label -> (make the PyG layer, inputs(graph) -> args)."""
    import torch
    import torch_geometric.nn as tnn
    from torch_geometric.nn import aggr

    return {
        # GATv2Conv: heads/concat, edge features + fill_value, self-loops, share_weights,
        # residual, bias, negative_slope, bipartite, aggr
        "GATv2Conv": (lambda: tnn.GATv2Conv(F_IN, F_OUT), plain),
        "GATv2Conv-4-heads-edge-features": (
            lambda: tnn.GATv2Conv(F_IN, F_OUT, heads=4, edge_dim=EDGE_DIM), with_attr),
        "GATv2Conv-mean-heads-residual-shared": (
            lambda: tnn.GATv2Conv(F_IN, F_OUT, heads=3, concat=False, residual=True,
                                  share_weights=True), plain),
        "GATv2Conv-fill-value-slope": (
            lambda: tnn.GATv2Conv(F_IN, F_OUT, heads=2, edge_dim=EDGE_DIM, fill_value=0.5,
                                  negative_slope=0.1), with_attr),
        "GATv2Conv-fill-max-1d-edge": (
            lambda: tnn.GATv2Conv(F_IN, F_OUT, edge_dim=1, fill_value="max"), one_dim_attr),
        "GATv2Conv-no-self-loops-no-bias": (
            lambda: tnn.GATv2Conv(F_IN, F_OUT, heads=2, add_self_loops=False, bias=False),
            plain),
        "GATv2Conv-bipartite": (
            lambda: tnn.GATv2Conv((F_IN, F_DST), F_OUT, heads=2, edge_dim=EDGE_DIM,
                                  residual=True), bipartite_attr),
        "GATv2Conv-aggr-mean": (lambda: tnn.GATv2Conv(F_IN, F_OUT, heads=2, aggr="mean"),
                                plain),
        # TransformerConv: heads/concat, edge features, beta, root_weight, bias, bipartite, aggr
        "TransformerConv": (lambda: tnn.TransformerConv(F_IN, F_OUT), plain),
        "TransformerConv-heads-edge-beta": (
            lambda: tnn.TransformerConv(F_IN, F_OUT, heads=3, edge_dim=EDGE_DIM, beta=True),
            with_attr),
        "TransformerConv-mean-heads-beta-no-bias": (
            lambda: tnn.TransformerConv(F_IN, F_OUT, heads=2, concat=False, beta=True,
                                        bias=False), plain),
        "TransformerConv-no-root-beta-ignored": (
            lambda: tnn.TransformerConv(F_IN, F_OUT, heads=2, root_weight=False, beta=True),
            plain),
        "TransformerConv-bipartite": (
            lambda: tnn.TransformerConv((F_IN, F_DST), F_OUT, heads=2, beta=True), bipartite),
        "TransformerConv-aggr-mean": (
            lambda: tnn.TransformerConv(F_IN, F_OUT, heads=2, aggr="mean"), plain),
        "TransformerConv-aggr-softmax-module": (
            lambda: tnn.TransformerConv(F_IN, F_OUT, heads=2,
                                        aggr=aggr.SoftmaxAggregation(learn=True)), plain),
        # SuperGATConv: attention type, heads/concat, self-loops, bias, aggr
        "SuperGATConv-MX": (lambda: tnn.SuperGATConv(F_IN, F_OUT, heads=2), plain),
        "SuperGATConv-SD-mean-heads": (
            lambda: tnn.SuperGATConv(F_IN, F_OUT, heads=3, concat=False, attention_type="SD"),
            plain),
        "SuperGATConv-MX-one-head-no-self-loops-no-bias": (
            lambda: tnn.SuperGATConv(F_IN, F_OUT, add_self_loops=False, bias=False,
                                     negative_slope=0.3), plain),
        "SuperGATConv-aggr-max": (lambda: tnn.SuperGATConv(F_IN, F_OUT, heads=2, aggr="max"),
                                  plain),
        # AGNNConv: beta parameter or buffer, self-loops, aggr
        "AGNNConv": (lambda: tnn.AGNNConv(), plain),
        "AGNNConv-beta-buffer": (lambda: tnn.AGNNConv(requires_grad=False), plain),
        "AGNNConv-no-self-loops": (lambda: tnn.AGNNConv(add_self_loops=False), plain),
        "AGNNConv-aggr-mean": (lambda: tnn.AGNNConv(aggr="mean"), plain),
        # GeneralConv: lin_self identity/linear, edge features, directed_msg, heads,
        # attention (additive, dot product), l2_normalize, bias, bipartite, aggr
        "GeneralConv": (lambda: tnn.GeneralConv(F_IN, F_OUT), plain),
        "GeneralConv-identity-self-no-bias": (lambda: tnn.GeneralConv(F_IN, F_IN, bias=False),
                                              plain),
        "GeneralConv-additive-edge-undirected-l2": (
            lambda: tnn.GeneralConv(F_IN, F_OUT, in_edge_channels=EDGE_DIM, heads=2,
                                    attention=True, directed_msg=False, l2_normalize=True),
            with_attr),
        "GeneralConv-dot-product-skip-linear": (
            lambda: tnn.GeneralConv(F_IN, F_IN, heads=3, attention=True,
                                    attention_type="dot_product", skip_linear=True), plain),
        "GeneralConv-bipartite-dot-undirected": (
            lambda: tnn.GeneralConv((F_IN, F_IN), F_OUT, heads=2, attention=True,
                                    attention_type="dot_product", directed_msg=False),
            bipartite_same_width),
        "GeneralConv-aggr-mean": (lambda: tnn.GeneralConv(F_IN, F_OUT, aggr="mean"), plain),
        "GeneralConv-aggr-max-attention": (
            lambda: tnn.GeneralConv(F_IN, F_OUT, heads=2, attention=True, aggr="max"), plain),
        # ResGatedGraphConv: act, edge features, root_weight, bias, bipartite, aggr
        "ResGatedGraphConv": (lambda: tnn.ResGatedGraphConv(F_IN, F_OUT), plain),
        "ResGatedGraphConv-edge-tanh": (
            lambda: tnn.ResGatedGraphConv(F_IN, F_OUT, edge_dim=EDGE_DIM, act=torch.nn.Tanh()),
            with_attr),
        "ResGatedGraphConv-no-root-no-bias-function-act": (
            lambda: tnn.ResGatedGraphConv(F_IN, F_OUT, root_weight=False, bias=False,
                                          act=torch.sigmoid), plain),
        "ResGatedGraphConv-bipartite-edge": (
            lambda: tnn.ResGatedGraphConv((F_IN, F_DST), F_OUT, edge_dim=EDGE_DIM),
            bipartite_attr),
        "ResGatedGraphConv-aggr-mean": (
            lambda: tnn.ResGatedGraphConv(F_IN, F_OUT, aggr="mean"), plain),
        # GatedGraphConv: layers, padding of x, edge weights, bias, aggr
        "GatedGraphConv": (lambda: tnn.GatedGraphConv(F_IN, num_layers=2), with_weight),
        "GatedGraphConv-padded-x-unweighted": (
            lambda: tnn.GatedGraphConv(8, num_layers=3), plain),
        "GatedGraphConv-no-bias": (lambda: tnn.GatedGraphConv(8, num_layers=2, bias=False),
                                   narrow),
        "GatedGraphConv-aggr-mean": (
            lambda: tnn.GatedGraphConv(F_IN, num_layers=2, aggr="mean"), with_weight),
        "GatedGraphConv-aggr-softmax-module": (
            lambda: tnn.GatedGraphConv(F_IN, num_layers=2,
                                       aggr=aggr.SoftmaxAggregation(learn=True)), with_weight),
        # FiLMConv: relations, nn, act (module, function, None), bipartite, aggr
        "FiLMConv": (lambda: tnn.FiLMConv(F_IN, F_OUT), plain),
        "FiLMConv-3-relations": (lambda: tnn.FiLMConv(F_IN, F_OUT, num_relations=3),
                                 relations),
        "FiLMConv-nn-function-act-max": (
            lambda: tnn.FiLMConv(F_IN, F_OUT, num_relations=3, aggr="max", act=torch.tanh,
                                 nn=torch.nn.Sequential(torch.nn.Linear(F_IN, 2 * F_OUT),
                                                        torch.nn.Tanh())), relations),
        "FiLMConv-no-act-add": (lambda: tnn.FiLMConv(F_IN, F_OUT, act=None, aggr="add"), plain),
        "FiLMConv-bipartite": (lambda: tnn.FiLMConv((F_IN, F_DST), F_OUT), bipartite),
    }


def build_layer(label: str, dtype: str, name: str) -> tuple:
    """(PyG layer in eval mode, its port, args) for a case."""
    import torch

    from torch2jax_ops.parity.cases.geometric import _perturbed, graph
    from torch2jax_ops.nn import from_torch

    make, inputs = layers()[label]
    torch.manual_seed(0)
    g = graph(name, dtype, features=F_IN, edge_dim=EDGE_DIM)
    layer = _perturbed(make(), 1).to(dtypes.torch_dtype(dtype))
    return layer, from_torch(layer, copy=True), inputs(g)


@register("convs")
def attention_cases() -> Iterable[Case]:
    for label in layers():
        for dtype in WIDE:
            for name in GRAPHS:
                # GatedGraphConv's gradients run back through num_layers GRU steps of
                # sums over the graph: float32 reduction order (XLA vs torch's kernels, which
                # differ between CPUs) moves them by ~2e-5 absolute
                options = ({"atol": 5e-5} if label.startswith("GatedGraphConv")
                           and dtype == "float32" else {})

                def build(label=label, dtype=dtype, name=name, options=options):
                    layer, port, args = build_layer(label, dtype, name)
                    return layer, port, args, {}, options
                yield Case("convs", label.split("-")[0], dtype, f"{label}/{name}", build)
