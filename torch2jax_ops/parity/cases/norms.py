"""Parity cases of PyG's normalisation layers (section "norms"): ``torch_geometric.nn.norm``.

Inputs: one graph (``batch=None``), the seeded FakeDataset batch of 4 graphs,
and a hand-made batch of 4 graphs where graph 1 has a single node and graph 2
is empty (PyG's ``clamp(min=1)`` of empty graphs, single-node variances). The
graph-wise norms get ``batch_size`` (a static int under jit). Parameters and
running statistics are perturbed away from PyG's initial values; training-mode
variants (batch statistics) run where PyG has them. Every case runs
:func:`~torch2jax_ops.parity.compare_modules`: outputs, gradients by parameter
name, gradients w.r.t. ``x``; float32 and float64.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from torch2jax_ops import dtypes
from torch2jax_ops.parity._suite import Case, register

WIDE = ("float32", "float64")
C = 6


def inputs(kind: str, dtype: str) -> tuple:
    """(x, batch or None, batch_size or None) as torch tensors."""
    import torch

    from torch2jax_ops.parity.cases.geometric import graph

    if kind == "single":
        g = graph("karate", dtype, features=C)
        return g["x"], None, None
    if kind == "fake":
        g = graph("fake", dtype, features=C)
        return g["x"], g["batch"], int(g["batch"].max()) + 1
    if kind == "uneven":  # graph 1: one node, graph 2: empty
        rng = np.random.default_rng(3)
        x = torch.tensor(2.0 + 1.5 * rng.standard_normal((12, C))).to(dtypes.torch_dtype(dtype))
        batch = torch.tensor([0, 0, 0, 0, 1, 3, 3, 3, 3, 3, 3, 3])
        return x, batch, 4
    raise KeyError(kind)


def _perturb_buffers(module, seed: int):
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, b in module.named_buffers():
            if name.endswith("running_mean"):
                b.add_(0.3 * torch.randn(b.shape, generator=gen, dtype=b.dtype))
            elif name.endswith("running_var"):
                b.mul_(torch.rand(b.shape, generator=gen, dtype=b.dtype) + 0.5)
    return module


def norms() -> dict:
    """label -> (make the PyG norm, input kinds, train mode, passes batch)."""
    import torch_geometric.nn.norm as N

    graphwise = ("single", "fake", "uneven")
    return {
        "BatchNorm": (lambda: N.BatchNorm(C), ("fake",), False, False),
        "BatchNorm-train": (lambda: N.BatchNorm(C), ("fake", "uneven"), True, False),
        "BatchNorm-no-affine-untracked": (
            lambda: N.BatchNorm(C, affine=False, track_running_stats=False), ("fake",), False,
            False),
        "BatchNorm-momentum-none-train": (lambda: N.BatchNorm(C, momentum=None), ("fake",), True,
                                          False),
        "LayerNorm-graph": (lambda: N.LayerNorm(C), graphwise, False, True),
        "LayerNorm-graph-no-affine": (lambda: N.LayerNorm(C, affine=False, eps=1e-3),
                                      graphwise, False, True),
        "LayerNorm-node": (lambda: N.LayerNorm(C, mode="node"), ("single", "fake"), False, True),
        "LayerNorm-node-no-affine": (lambda: N.LayerNorm(C, affine=False, mode="node"),
                                     ("fake",), False, True),
        "GraphNorm": (lambda: N.GraphNorm(C), graphwise, False, True),
        "GraphNorm-eps": (lambda: N.GraphNorm(C, eps=0.1), ("uneven",), False, True),
        "InstanceNorm": (lambda: N.InstanceNorm(C), graphwise, False, True),
        "InstanceNorm-affine": (lambda: N.InstanceNorm(C, affine=True), graphwise, False, True),
        "InstanceNorm-tracked-eval": (
            lambda: N.InstanceNorm(C, affine=True, track_running_stats=True), graphwise, False,
            True),
        "InstanceNorm-tracked-train": (
            lambda: N.InstanceNorm(C, affine=True, track_running_stats=True, momentum=0.3),
            graphwise, True, True),
        "PairNorm": (lambda: N.PairNorm(), graphwise, False, True),
        "PairNorm-scale": (lambda: N.PairNorm(scale=2.5, eps=1e-3), graphwise, False, True),
        "PairNorm-individually": (lambda: N.PairNorm(scale=0.7, scale_individually=True),
                                  graphwise, False, True),
        "GraphSizeNorm": (lambda: N.GraphSizeNorm(), graphwise, False, True),
        "MeanSubtractionNorm": (lambda: N.MeanSubtractionNorm(), graphwise, False, True),
        "MessageNorm": (lambda: N.MessageNorm(learn_scale=True), ("single",), False, False),
        "DiffGroupNorm": (lambda: N.DiffGroupNorm(C, 3, lamda=0.3), ("fake",), False, False),
        "DiffGroupNorm-train": (lambda: N.DiffGroupNorm(C, 2, lamda=0.5), ("fake",), True,
                                False),
    }


def build_norm(label: str, dtype: str):
    """The perturbed PyG norm of ``label`` in its mode, as the cases build it."""
    import torch

    from torch2jax_ops.parity.cases.geometric import _perturbed

    make, _, train, _ = norms()[label]
    torch.manual_seed(0)
    module = _perturb_buffers(_perturbed(make(), 1), 2).to(dtypes.torch_dtype(dtype))
    return module.train(train)


def call_args(label: str, kind: str, dtype: str) -> tuple:
    """(args, kwargs) of the call of ``label`` on input ``kind``."""
    import torch

    _, _, _, batched = norms()[label]
    x, batch, size = inputs(kind, dtype)
    if label == "MessageNorm":
        rng = np.random.default_rng(4)
        msg = torch.tensor(rng.standard_normal(tuple(x.shape))).to(x.dtype)
        return (x, msg), {}
    if not batched or batch is None:
        return (x,), {}
    if label == "MeanSubtractionNorm":
        return (x, batch, size), {}
    return (x, batch, size), {}


@register("norms")
def norm_cases() -> Iterable[Case]:
    for label, (_, kinds, _, _) in norms().items():
        for kind in kinds:
            for dtype in WIDE:
                def build(label=label, kind=kind, dtype=dtype):
                    from torch2jax_ops.nn import from_torch

                    module = build_norm(label, dtype)
                    args, kwargs = call_args(label, kind, dtype)
                    return module, from_torch(module, copy=True), args, kwargs, {}
                yield Case("norms", label.split("-")[0], dtype, f"{label}/{kind}", build)
