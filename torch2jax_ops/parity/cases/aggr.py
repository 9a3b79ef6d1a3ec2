"""Parity cases of PyG's aggregations (section "aggr"): ``torch_geometric.nn.aggr`` modules
used directly, and as the ``aggr=`` of PyG layers that take an aggregation module.

Direct use: ``aggr(x, index, dim_size=G)`` on 40 elements in 9 groups, one
group empty, two with a single element (Std's masking, Var's exact 0) and a
group holding two identical rows (tied extrema share the gradient, torch's
``scatter_reduce`` rule); plus the other call forms PyG takes: ``ptr`` alone
(sorted elements), ``index`` and ``ptr`` together, no ``index`` (one group),
3-D inputs aggregated along ``dim=0`` and ``dim=-2``. Learnable temperatures,
powers, degree norms, projection, gate networks and LSTM weights are
perturbed away from PyG's initial values. Every case runs
:func:`~torch2jax_ops.parity.compare_modules`: outputs, gradients of each
parameter by its ``state_dict`` name, gradients w.r.t. ``x``; float32 and
float64.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from torch2jax_ops import dtypes
from torch2jax_ops.parity._suite import Case, register

WIDE = ("float32", "float64")
E, F, G = 40, 5, 9


def _elements(dtype: str, kind: str, seed: int = 0, positive: bool = False) -> tuple:
    """(args, kwargs) of one call form (see the module docstring)."""
    import torch

    rng = np.random.default_rng(seed)
    index = rng.integers(0, G, E)
    index[index == 6] = 7                   # group 6 stays empty,
    index[index == 2], index[index == 5] = 3, 4
    index[0], index[1] = 2, 5               # groups 2 and 5 hold one element each,
    index[10], index[11] = 8, 8             # group 8 two identical rows (a tie) among others
    x = rng.standard_normal((E, F))
    x[11] = x[10]
    if positive:
        x = np.abs(x) + 0.1
    t = getattr(torch, dtype)
    if kind in ("ptr", "index+ptr"):
        order = np.argsort(index, kind="stable")
        index, x = index[order], x[order]
    xt, it = torch.tensor(x, dtype=t), torch.tensor(index, dtype=torch.long)
    ptr = torch.tensor(np.concatenate([[0], np.cumsum(np.bincount(index, minlength=G))]))
    if kind == "index":
        return (xt, it), {"dim_size": G}
    if kind == "index-inferred":  # dim_size read from the index (concrete: outside jit too)
        return (xt, it), {}
    if kind == "ptr":
        return (xt,), {"ptr": ptr}
    if kind == "index+ptr":
        return (xt, it), {"ptr": ptr, "dim_size": G}
    if kind == "no-index":
        return (xt,), {}
    if kind == "dim0-3d":  # [E, 2, F] along dim 0
        x3 = torch.tensor(np.stack([x, x[::-1] * 0.5], axis=1).copy(), dtype=t)
        return (x3, it), {"dim_size": G, "dim": 0}
    if kind == "dim-2-3d":  # [2, E, F] along dim -2
        x3 = torch.tensor(np.stack([x, -x[::-1]], axis=0).copy(), dtype=t)
        return (x3, it), {"dim_size": G, "dim": -2}
    raise KeyError(kind)


def _aggregations() -> dict:
    """label -> (make the PyG aggregation, call forms, positive inputs)."""
    import torch
    import torch_geometric.nn as tnn
    import torch_geometric.nn.aggr as A

    deg = torch.tensor([1, 4, 6, 3, 2])  # a degree histogram (PNA's `deg`)
    basic_forms = ("index", "ptr", "index+ptr", "no-index", "dim0-3d", "dim-2-3d")
    return {
        "Sum": (A.SumAggregation, basic_forms, False),
        "Mean": (A.MeanAggregation, basic_forms, False),
        "Max": (A.MaxAggregation, basic_forms, False),
        "Min": (A.MinAggregation, basic_forms, False),
        "Mul": (A.MulAggregation, ("index", "no-index", "dim-2-3d"), False),
        "Var": (A.VarAggregation, basic_forms, False),
        "Var-semi-grad": (lambda: A.VarAggregation(semi_grad=True), ("index",), False),
        "Std": (A.StdAggregation, basic_forms, False),
        "Std-semi-grad": (lambda: A.StdAggregation(semi_grad=True), ("index",), False),
        "Softmax": (A.SoftmaxAggregation, ("index", "ptr", "dim-2-3d"), False),
        "Softmax-t": (lambda: A.SoftmaxAggregation(t=2.5), ("index", "dim0-3d"), False),
        "Softmax-learn": (lambda: A.SoftmaxAggregation(t=0.7, learn=True),
                          ("index", "ptr", "dim-2-3d"), False),
        "Softmax-channels": (lambda: A.SoftmaxAggregation(learn=True, channels=F),
                             ("index",), False),
        "Softmax-semi-grad": (lambda: A.SoftmaxAggregation(t=1.5, semi_grad=True),
                              ("index",), False),
        "PowerMean": (A.PowerMeanAggregation, ("index",), True),
        "PowerMean-p": (lambda: A.PowerMeanAggregation(p=3.0), ("index", "ptr"), True),
        "PowerMean-p-signed": (lambda: A.PowerMeanAggregation(p=2.0), ("index",), False),
        "PowerMean-learn": (lambda: A.PowerMeanAggregation(p=2.0, learn=True),
                            ("index", "dim-2-3d"), True),
        "PowerMean-channels": (lambda: A.PowerMeanAggregation(p=1.5, learn=True, channels=F),
                               ("index",), True),
        "PowerMean-clamp": (lambda: A.PowerMeanAggregation(p=2.0, clamp_min=0.3,
                                                           clamp_max=1.2), ("index",), True),
        "PowerMean-no-min": (lambda: A.PowerMeanAggregation(p=2.0, clamp_min=None),
                             ("index",), True),
        "Multi-cat": (lambda: A.MultiAggregation(["mean", "max", "std"]),
                      ("index", "ptr", "dim-2-3d", "index-inferred"), False),
        "Multi-all-fusable": (lambda: A.MultiAggregation(["sum", "mean", "min", "max", "mul",
                                                          "var", "std"]), ("index",), False),
        "Multi-semi-grad-quirk": (lambda: A.MultiAggregation(
            [A.VarAggregation(semi_grad=True), A.StdAggregation(), "sum"]), ("index",
                                                                             "dim-2-3d"), False),
        "Multi-std-own-semi-grad": (lambda: A.MultiAggregation(
            [A.StdAggregation(semi_grad=True), "mean"]), ("index", "dim-2-3d"), False),
        "Multi-softmax-member": (lambda: A.MultiAggregation(
            ["sum", A.SoftmaxAggregation(learn=True)]), ("index", "ptr"), False),
        "Multi-proj": (lambda: A.MultiAggregation(
            ["mean", "max", "sum"], mode="proj", mode_kwargs=dict(in_channels=F,
                                                                  out_channels=4)),
            ("index",), False),
        **{f"Multi-{mode}": (lambda mode=mode: A.MultiAggregation(["sum", "mean", "max",
                                                                   "min"], mode=mode),
                             ("index",), False)
           for mode in ("sum", "mean", "max", "min", "logsumexp", "std", "var")},
        "Multi-one": (lambda: A.MultiAggregation(["softmax"]), ("index",), False),
        "DegreeScaler": (lambda: A.DegreeScalerAggregation(
            ["mean", "min", "max", "std"], ["identity", "amplification", "attenuation"], deg),
            ("index", "dim0-3d"), False),
        "DegreeScaler-linear": (lambda: A.DegreeScalerAggregation(
            ["sum"], ["linear", "inverse_linear"], deg), ("index", "index+ptr"), False),
        "DegreeScaler-one-scaler": (lambda: A.DegreeScalerAggregation(
            "mean", "amplification", deg), ("index",), False),
        "DegreeScaler-train-norm": (lambda: A.DegreeScalerAggregation(
            ["sum", "max"], ["amplification", "attenuation", "linear"], deg, train_norm=True),
            ("index",), False),
        "Attentional": (lambda: A.AttentionalAggregation(
            torch.nn.Sequential(torch.nn.Linear(F, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)),
            torch.nn.Linear(F, 6)), ("index", "ptr", "no-index"), False),
        "Attentional-gate-only": (lambda: A.AttentionalAggregation(torch.nn.Linear(F, F)),
                                  ("index", "dim-2-3d"), False),
        "Attentional-mlp": (lambda: A.AttentionalAggregation(
            tnn.MLP([F, 8, 1], norm=None), tnn.MLP([F, 8, 4], norm=None)), ("index",), False),
        "Set2Set": (lambda: A.Set2Set(F, processing_steps=3), ("index", "index+ptr"), False),
        "Set2Set-one-step": (lambda: A.Set2Set(F, processing_steps=1), ("index",), False),
        "Set2Set-two-layers": (lambda: A.Set2Set(F, processing_steps=2, num_layers=2),
                               ("index",), False),
        "Set2Set-no-bias": (lambda: A.Set2Set(F, processing_steps=2, bias=False),
                            ("index",), False),
        # PyG's LCM asserts a sorted index: the sorted forms (an empty group, a group of one,
        # odd widths moving a slot up the tree)
        "LCM": (lambda: A.LCMAggregation(F, F), ("index+ptr", "no-index"), False),
        "LCM-project": (lambda: A.LCMAggregation(F, 6, project=True), ("index+ptr",), False),
    }


def _perturbed(module, seed: int):
    from torch2jax_ops.parity.cases.geometric import _perturbed as perturbed
    return perturbed(module, seed)


@register("aggr")
def aggregation_cases() -> Iterable[Case]:
    import torch

    for label, (_, forms, _) in _aggregations().items():
        for form in forms:
            for dtype in WIDE:
                def build(label=label, form=form, dtype=dtype):
                    from torch2jax_ops.nn import from_torch

                    make, _, positive = _aggregations()[label]
                    torch.manual_seed(0)
                    module = _perturbed(make(), 1).to(dtypes.torch_dtype(dtype))
                    args, kwargs = _elements(dtype, form, positive=positive)
                    options = {}
                    if form == "index-inferred":
                        options["jit"] = False  # dim_size read from the (concrete) index
                    return module, from_torch(module, copy=True), args, kwargs, options
                yield Case("aggr", label.split("-")[0] + "Aggregation", dtype,
                           f"{label}/{form}", build)


# ------------------------------------------------------------- as a layer's aggregation

def _layers() -> dict:
    """label -> make a PyG layer whose aggregation is a module (or a name PyG resolves to one)."""
    import torch_geometric.nn as tnn
    import torch_geometric.nn.aggr as A

    return {
        "SAGEConv-softmax-learn": lambda: tnn.SAGEConv(6, 4, aggr=A.SoftmaxAggregation(
            learn=True)),
        "SAGEConv-std": lambda: tnn.SAGEConv(6, 4, aggr="std"),
        "SAGEConv-multi-cat": lambda: tnn.SAGEConv(6, 4, aggr=["mean", "max", "std"]),
        "SAGEConv-powermean": lambda: tnn.SAGEConv(6, 4, aggr=A.PowerMeanAggregation(
            learn=True)),
        "GraphConv-var": lambda: tnn.GraphConv(6, 4, aggr="var"),
        "GraphConv-softmax": lambda: tnn.GraphConv(6, 4, aggr=A.SoftmaxAggregation(
            t=0.5, learn=True, channels=6)),
        "GraphConv-multi-proj": lambda: tnn.GraphConv(6, 4, aggr=A.MultiAggregation(
            ["sum", "max"], mode="proj", mode_kwargs=dict(in_channels=6, out_channels=6))),
        "GraphConv-attentional": lambda: tnn.GraphConv(6, 4, aggr=A.AttentionalAggregation(
            tnn.MLP([6, 5, 1], norm=None))),
    }


@register("aggr")
def layer_aggregation_cases() -> Iterable[Case]:
    import torch

    for label in _layers():
        for dtype in WIDE:
            for graph_name in ("loops-and-repeats", "karate"):
                def build(label=label, dtype=dtype, graph_name=graph_name):
                    from torch2jax_ops.parity.cases.geometric import graph
                    from torch2jax_ops.nn import from_torch

                    torch.manual_seed(0)
                    layer = _perturbed(_layers()[label](), 2).to(dtypes.torch_dtype(dtype))
                    g = graph(graph_name, dtype)
                    args = (g["x"], g["edge_index"])
                    if label.startswith("GraphConv"):
                        args += (g["edge_weight"],)
                    return layer, from_torch(layer, copy=True), args, {}, {}
                yield Case("aggr", label.split("-")[0], dtype, f"aggr={label}/{graph_name}",
                           build)
