"""Models that exercise the fx path's edges (section "fx", parity_tests/test_fx_path.py).

Each model (torch2jax_ops/parity/cases/_fx_models.py) is converted with ``from_torch``
and compared with ``compare_modules``: outputs and the gradient of every
parameter by name, under ``jax.jit`` in float32 and float64, and eagerly (the fx
interpreter run op by op) in float32. An eager case costs 5 to 20 times its jitted
twin (every primitive compiles on its own), and float64 adds nothing the eager path
does differently: its float64 numbers are the jitted float64 case's.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from torch2jax_ops.parity._suite import Case, register

#: name -> (model class name in _fx_models, input kind)
MODELS = {
    "linear-weight-read": ("WeightPenalty", "x"),
    "modulelist-f-linear": ("FunctionalMLP", "x"),
    "embedding-weight": ("EmbeddingFeatures", "graph"),
    "han-dict-leaf": ("HANNet", "hetero"),
    "pow-function-form": ("GaussianSmearingNet", "graph"),
    "arma-lambda-act": ("ARMANet", "graph"),
    "sgc-global-data": ("SGCNet", "global"),
    "label-propagation-post-step": ("LabelSpreading", "labels"),
    "param-view-cdist-inline-loss": ("SoftClusters", "x"),
    "self-loops-none-weight": ("SelfLoopNet", "graph"),
    "pmlp-inference": ("PMLPNet", "graph"),
    "label-propagation-int-labels": ("IntLabelSpreading", "int-labels"),
    "sorted-batch-aggregations": ("SortedBatchReadout", "batch"),
}


#: models whose torch code cannot compile under jax.jit (none now: LabelPropagation's
#: ``out[mask] = y[mask]`` is a masked write-back, which compiles)
EAGER_ONLY: set = set()


def inputs(kind: str, dtype: str, seed: int = 0) -> tuple:
    """Torch inputs of one kind: node features, a graph, ..."""
    import torch

    from torch2jax_ops.parity.cases import _fx_models as fm

    rng = np.random.default_rng(seed)
    t = getattr(torch, dtype)
    x = torch.tensor(rng.standard_normal((fm.N, fm.FEATURES)), dtype=t)
    edge_index = torch.tensor(rng.integers(0, fm.N, (2, 30)), dtype=torch.int64)
    if kind == "x":
        return (x,)
    if kind == "graph":
        return (x, edge_index)
    if kind == "global":  # the forward reads fm.data; it takes no arguments
        from torch_geometric.data import Data

        fm.data = Data(x=x, edge_index=edge_index)
        return ()
    if kind == "labels":  # soft labels (integer labels take one_hot: a size read from data)
        y = torch.tensor(rng.dirichlet(np.ones(fm.CLASSES), fm.N), dtype=t)
        return (y, edge_index, torch.tensor(rng.random(fm.N) < 0.5))
    if kind == "int-labels":  # class ids 0..CLASSES-1, every class present
        y = torch.tensor(rng.permutation(np.arange(fm.N) % fm.CLASSES), dtype=torch.int64)
        weight = torch.tensor(rng.random(edge_index.shape[1]), dtype=t)
        return (y, edge_index, torch.tensor(rng.random(fm.N) < 0.5), weight)
    if kind == "batch":  # three graphs' nodes, sorted by graph
        return (x, torch.tensor(np.sort(rng.integers(0, 3, fm.N)), dtype=torch.int64))
    if kind == "hetero":
        sizes = {"movie": 7, "director": 4, "actor": 5}
        x_dict = {k: torch.tensor(rng.standard_normal((n, fm.HETERO_FEATURES[k])), dtype=t)
                  for k, n in sizes.items()}
        edges = {}
        for src, rel, dst in fm.METADATA[1]:
            pair = np.stack([rng.integers(0, sizes[src], 16), rng.integers(0, sizes[dst], 16)])
            edges[(src, rel, dst)] = torch.tensor(pair, dtype=torch.int64)
        return (x_dict, edges)
    raise ValueError(kind)


def build_model(name: str, dtype: str, seed: int = 0):
    """(torch model in eval mode, its torch inputs)."""
    import torch

    from torch2jax_ops.parity.cases import _fx_models as fm

    cls_name, kind = MODELS[name]
    torch.manual_seed(seed)
    model = getattr(fm, cls_name)().to(getattr(torch, dtype)).eval()
    return model, inputs(kind, dtype, seed)


def _modes(name: str, dtype: str) -> tuple:
    """The ``jit`` values a model's cases run with: eager-only models eagerly; the others
    under jit in both dtypes and eagerly in float32."""
    if name in EAGER_ONLY:
        return (False,)
    return (False, True) if dtype == "float32" else (True,)


@register("fx")
def fx_model_cases() -> Iterable[Case]:
    for name in MODELS:
        for dtype in ("float32", "float64"):
            for jit in _modes(name, dtype):
                def build(name=name, dtype=dtype, jit=jit):
                    from torch2jax_ops.nn import from_torch

                    model, args = build_model(name, dtype)
                    options = {"jit": jit}
                    if dtype == "float32":
                        options.update(rtol=2e-5, atol=2e-5)
                    return model, from_torch(model), args, {}, options
                yield Case("fx", name, dtype, "jit" if jit else "eager", build)
