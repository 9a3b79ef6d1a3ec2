"""Parity cases of GraphUNet-style sparse ops in traced forwards (section "graph_unet"), and the
"functions" cases of the torch sparse entries (torch2jax_ops/nn/_functions_sparse.py).

Every case converts a small torch module with ``nn.from_torch`` and runs
``compare_modules`` (outputs, every parameter's gradient, the floating inputs'):
``torch._convert_indices_from_coo_to_csr``, ``torch.sparse_csr_tensor`` /
``sparse_coo_tensor`` (through PyG's ``to_torch_csr_tensor`` /
``to_torch_coo_tensor``), sparse @ sparse (CSR and COO: torch's pattern and
storage order, a structural entry summing to zero kept), sparse @ dense,
``to_edge_index``, ``to_sparse_coo``, ``coalesce``, ``indices`` / ``values`` /
``crow_indices`` / ``col_indices`` / ``to_dense``; PyG's
``augment_adj`` chain in a user model; and PyG's ``GraphUNet`` itself. Under
``compare_modules``' jit the integer inputs are constants, so the products'
sizes are known; GraphUNet with ``depth >= 2`` squares the adjacency of a
pooled graph, whose edges depend on ``x`` (traced), so it runs eagerly
(``jit=False``): the error under jit is a test of its own.
"""
from __future__ import annotations

import warnings
from typing import Any, Iterable

import numpy as np

from torch2jax_ops import dtypes
from torch2jax_ops.parity._suite import Case, register

WIDE = ("float32", "float64")


def _torch():
    import torch

    warnings.filterwarnings("ignore", message=".*[Ss]parse.*")
    return torch


def graph(name: str, dtype: str) -> tuple:
    """``(x [N, 4], edge_index [2, E])`` as torch tensors."""
    torch = _torch()
    rng = np.random.default_rng(3)
    tdt = dtypes.torch_dtype(dtype)
    if name == "small":  # loops, a repeated edge, an isolated node (7)
        ei = [[0, 1, 1, 2, 3, 4, 5, 6, 2, 2, 3, 1], [1, 0, 2, 1, 4, 3, 6, 5, 5, 2, 3, 0]]
        n = 8
    elif name == "random":
        n = 30
        ei = rng.integers(0, n, (2, 90)).tolist()
    elif name == "empty":
        n, ei = 5, [[], []]
    else:
        raise KeyError(name)
    x = torch.tensor(rng.standard_normal((n, 4))).to(tdt)
    return x, torch.tensor(ei, dtype=torch.long).reshape(2, -1)


def _models() -> dict:
    _torch()
    from torch2jax_ops.parity.cases._sparse_models import MODELS

    return MODELS


def build_model(name: str, dtype: str, gname: str, options: dict | None = None, **kw: Any):
    """(torch module, port, args, kwargs, options) for a case's ``build``."""
    torch = _torch()
    from torch2jax_ops.nn import from_torch

    torch.manual_seed(0)
    model = _models()[name](**kw).to(dtypes.torch_dtype(dtype))
    x, ei = graph(gname, dtype)
    return model, from_torch(model, copy=True), (x, ei), {}, dict(options or {})


def build_graph_unet(dtype: str, depth: int, jit: bool, batched: bool = False, **kw: Any):
    """PyG's GraphUNet (eval mode) on the 30-node random graph (two graphs if ``batched``)."""
    torch = _torch()
    from torch_geometric.nn.models import GraphUNet

    from torch2jax_ops.nn import from_torch

    torch.manual_seed(0)
    model = GraphUNet(4, 8, 3, depth=depth, **kw).to(dtypes.torch_dtype(dtype)).eval()
    x, ei = graph("random", dtype)
    args: tuple = (x, ei)
    if batched:
        args = (x, ei, torch.tensor([0] * 12 + [1] * 18))
    return model, from_torch(model, copy=True), args, {}, {"jit": jit}


#: (label, model, graph, constructor keywords, options)
_AUGMENT = [
    ("csr-to_edge_index/small", "small", {}),
    ("csr-to_edge_index/random", "random", {}),
    ("csr-to_edge_index/empty", "empty", {}),
    ("csr-to_sparse_coo/random", "random", {"read": "to_sparse_coo"}),
    ("csr-zero-sums/small", "small", {"sign": True}),
    ("coo-coalesce/random", "random", {"layout": "coo", "read": "coalesce"}),
    ("coo-to_sparse_coo/small", "small", {"layout": "coo", "read": "to_sparse_coo"}),
    ("csr-eager/random", "random", {"options": {"jit": False}}),
]


@register("graph_unet")
def graph_unet_cases() -> Iterable[Case]:
    for label, gname, kw in _AUGMENT:
        for dtype in WIDE:
            def build(gname=gname, kw=kw, dtype=dtype):
                kw = dict(kw)
                return build_model("Augment", dtype, gname, kw.pop("options", None), **kw)
            yield Case("graph_unet", "augment_adj", dtype, label, build)
    unets = [("depth1", 1, True, {}), ("depth1-batched", 1, True, {"batched": True}),
             ("depth1-concat", 1, True, {"sum_res": False}),
             ("depth2-eager", 2, False, {}), ("depth3-eager-ratio0.7", 3, False,
                                              {"pool_ratios": 0.7})]
    for label, depth, jit, kw in unets:
        # an eager depth-3 case costs about 17 s (every primitive compiles on its own):
        # float32 only; depth 2 runs eagerly in both dtypes
        for dtype in ("float32",) if depth == 3 else WIDE:
            def build(depth=depth, jit=jit, kw=kw, dtype=dtype):
                return build_graph_unet(dtype, depth, jit, **kw)
            yield Case("graph_unet", "GraphUNet", dtype, label, build)


#: the table keys of nn/_functions_sparse.py -> (model, graph, constructor keywords)
_ENTRIES = {
    "torch._convert_indices_from_coo_to_csr": [("Ptr", "small", {}),
                                               ("Ptr", "small", {"out_int32": True}),
                                               ("Ptr", "empty", {})],
    "torch.sparse_csr_tensor": [("Csr", "small", {}), ("Csr", "empty", {})],
    "torch.sparse_coo_tensor": [("Coo", "small", {}), ("Coo", "empty", {})],
    "torch.sparse.mm": [("SparseDense", "small", {"fn": "sparse.mm"}),
                        ("SparseDense", "random", {"fn": "sparse.mm", "layout": "coo"})],
    "Tensor.to_sparse_coo": [("Augment", "random", {"read": "to_sparse_coo"})],
    "Tensor.to_dense": [("Csr", "random", {}), ("Coo", "random", {})],
    "Tensor.indices": [("Coo", "random", {})],
    "Tensor.values": [("Coo", "random", {}), ("Csr", "random", {})],
    "Tensor.crow_indices": [("Csr", "random", {})],
    "Tensor.col_indices": [("Csr", "random", {})],
    "Tensor.coalesce": [("Coo", "small", {}),
                        ("Augment", "small", {"layout": "coo", "read": "coalesce"})],
}


@register("functions")
def sparse_entry_cases() -> Iterable[Case]:
    for key, uses in _ENTRIES.items():
        for name, gname, kw in uses:
            label = "-".join([f"sparse-{name}", gname] + [f"{k}={v}" for k, v in kw.items()])
            for dtype in WIDE:
                def build(name=name, gname=gname, kw=kw, dtype=dtype):
                    return build_model(name, dtype, gname, **kw)
                yield Case("functions", key, dtype, label, build)
    for label, layout in (("sparse-csr-at-dense", "csr"), ("sparse-coo-at-dense", "coo")):
        for dtype in WIDE:
            def build(layout=layout, dtype=dtype):
                return build_model("SparseDense", dtype, "random", layout=layout)
            yield Case("functions", "operator.matmul", dtype, label, build)
