"""Whole user-style models ported with one ``from_torch`` call (section "models", label port-*).

Each model is written the way PyG users write theirs (its own ``forward``,
its own ``MessagePassing`` layers), not copied from PyG's examples. The case
compares the port with the torch model through ``compare_modules``: the
output, and the gradient of every parameter by its ``state_dict`` name and of
the floating inputs, in float32 and float64.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from torch2jax_ops.parity._suite import Case, register


def _models() -> dict:
    from torch2jax_ops.parity.cases._user_models import MODELS
    return MODELS


FEATURES, CLASSES, EDGE_DIM = 5, 3, 2


def _inputs(kind: str, dtype: str, seed: int = 0) -> tuple:
    """A small graph of two components (14 nodes), loops and an isolated node included."""
    import torch

    rng = np.random.default_rng(seed)
    n, e = 14, 40
    src = rng.integers(0, n - 1, e)
    dst = rng.integers(0, n - 1, e)
    src[:3] = dst[:3]  # self-loops; node n - 1 stays isolated
    t = getattr(torch, dtype)
    x = torch.tensor(rng.standard_normal((n, FEATURES)), dtype=t)
    if kind == "bipartite":  # sources anywhere, targets among the first half
        dst = rng.integers(0, n // 2, e)
    edge_index = torch.tensor(np.stack([src, dst]), dtype=torch.int64)
    if kind == "edge_attr":
        return (x, edge_index, torch.tensor(rng.standard_normal((e, EDGE_DIM)), dtype=t)), {}
    if kind == "edge_weight":
        return (x, edge_index, torch.tensor(rng.uniform(0.1, 1.0, e), dtype=t)), {}
    if kind == "batched":
        batch = torch.tensor([0] * 6 + [1] * 5 + [2] * 3)
        return (x, edge_index, batch, 3), {}
    return (x, edge_index), {}


def _perturb(model, seed: int):
    """Move batch-norm statistics away from 0/1 so eval mode is really exercised."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm1d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.3)
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
    return model


def model_names() -> list:
    return list(_models())


def build_model(name: str, dtype: str, seed: int = 0):
    """(torch model in eval mode, its inputs as torch tensors)."""
    import torch

    cls, kind = _models()[name]
    torch.manual_seed(seed)
    model = cls(FEATURES, CLASSES, EDGE_DIM) if kind == "edge_attr" else cls(FEATURES, CLASSES)
    model = _perturb(model.to(getattr(torch, dtype)), seed).eval()
    args, kwargs = _inputs(kind, dtype, seed)
    return model, args, kwargs


@register("models")
def port_model_cases() -> Iterable[Case]:
    for name in model_names():
        for dtype in ("float32", "float64"):
            def build(name=name, dtype=dtype):
                from torch2jax_ops.nn import from_torch

                model, args, kwargs = build_model(name, dtype)
                options = {} if dtype == "float64" else {"rtol": 2e-5, "atol": 2e-5}
                return model, from_torch(model), args, kwargs, options
            yield Case("models", f"port-{name}", dtype, "user-model", build)
