"""Parity cases of the typed linear layers and HEATConv (section "hetero").

* ``HeteroLinear``: sorted and unsorted ``type_vec``, a type with no rows, one
  type only, no bias, ``is_sorted=True`` (with a sorted ``type_vec``, PyG's
  contract), many types (the port's per-row weight strategy), lazy
  ``in_channels=-1``;
* ``HeteroDictLinear``: per-type input widths, an ``x_dict`` with a type the
  layer lacks and without one it has, ten types (PyG's fused-kernel threshold);
* ``HEATConv``: every option (heads, concat, root weight, bias, slope, eval-mode
  dropout, ``aggr``, lazy sizes) on typed homogeneous graphs (node and edge
  types drawn per node / edge, edge features), incl. one without edges;
* ``segment_matmul``: against PyG's own ``HeteroLinear.forward_naive`` (what
  PyG runs without pyg_lib; pyg_lib is not installed here), and against a
  per-segment torch matmul for a ``ptr`` that does not cover every row
  (the rows outside are 0, the port's documented rule).

Each case runs :func:`~torch2jax_ops.parity.compare_modules` in float32 and
float64: outputs, the gradient of every parameter by its ``state_dict`` name
and the gradients w.r.t. the floating inputs (``x``, ``edge_attr``, the
feature dicts, ``inputs``).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

import numpy as np

from torch2jax_ops import dtypes
from torch2jax_ops.parity._suite import Case, register

WIDE = ("float32", "float64")
F_IN, F_OUT, TYPES, ROWS = 6, 5, 4, 23
HEAT_GRAPHS = ("loops-and-repeats", "karate")
NODE_TYPES, EDGE_TYPES, EDGE_DIM = 3, 4, 3


def _tensor(values: Any, dtype: str) -> Any:
    import torch

    return torch.as_tensor(np.asarray(values)).to(dtypes.torch_dtype(dtype))


def _perturbed(module: Any, seed: int) -> Any:
    from torch2jax_ops.parity.cases.geometric import _perturbed as perturbed
    return perturbed(module, seed)


def _materialised(module: Any, args: tuple) -> Any:
    """One float32 torch forward (lazy sizes), then weights perturbed, in eval mode."""
    import torch

    with torch.no_grad():
        module(*args)
    return _perturbed(module, 1)


# ------------------------------------------------------------------ HeteroLinear

def _type_vec(kind: str, rows: int = ROWS, types: int = TYPES) -> np.ndarray:
    rng = np.random.default_rng(2)
    if kind == "one-type":
        return np.full(rows, 1)
    pool = [0, 1, 3] if kind == "empty-type" else list(range(types))
    vec = np.concatenate([pool, rng.choice(pool, rows - len(pool))])  # every type of pool
    return np.sort(vec) if kind == "sorted" else rng.permutation(vec)


def _hetero_linear_layers() -> dict[str, tuple[Callable, str, int]]:
    """label -> (make() -> PyG layer, type_vec kind, number of types)."""
    import torch_geometric.nn as tnn

    return {
        "HeteroLinear-sorted": (lambda: tnn.HeteroLinear(F_IN, F_OUT, TYPES), "sorted", TYPES),
        "HeteroLinear-unsorted": (lambda: tnn.HeteroLinear(F_IN, F_OUT, TYPES), "unsorted",
                                  TYPES),
        "HeteroLinear-empty-type": (lambda: tnn.HeteroLinear(F_IN, F_OUT, TYPES), "empty-type",
                                    TYPES),
        "HeteroLinear-one-type": (lambda: tnn.HeteroLinear(F_IN, F_OUT, TYPES), "one-type",
                                  TYPES),
        "HeteroLinear-no-bias": (lambda: tnn.HeteroLinear(F_IN, F_OUT, TYPES, bias=False),
                                 "unsorted", TYPES),
        "HeteroLinear-is_sorted": (lambda: tnn.HeteroLinear(F_IN, F_OUT, TYPES, is_sorted=True),
                                   "sorted", TYPES),
        # 16 types of [6, 5]: past the project-all crossover, per-row weights
        "HeteroLinear-many-types": (lambda: tnn.HeteroLinear(F_IN, F_OUT, 16), "unsorted", 16),
        "HeteroLinear-lazy": (lambda: tnn.HeteroLinear(-1, F_OUT, TYPES), "unsorted", TYPES),
    }


def _hetero_linear_case(label: str, dtype: str) -> tuple:
    import torch

    from torch2jax_ops.nn import from_torch

    make, kind, types = _hetero_linear_layers()[label]
    torch.manual_seed(0)
    x = np.random.default_rng(1).standard_normal((ROWS, F_IN))
    type_vec = torch.as_tensor(_type_vec(kind, types=types))
    layer = _materialised(make(), (_tensor(x, "float32"), type_vec))
    layer = layer.to(dtypes.torch_dtype(dtype))
    return layer, from_torch(layer, copy=True), (_tensor(x, dtype), type_vec), {}, {}


# ------------------------------------------------------------------ HeteroDictLinear

def _dict_inputs(widths: dict, dtype: str) -> dict:
    rng = np.random.default_rng(3)
    return {key: _tensor(rng.standard_normal((3 + i, f)), dtype)
            for i, (key, f) in enumerate(widths.items())}


def _hetero_dict_layers() -> dict[str, tuple[Callable, dict]]:
    """label -> (make() -> PyG layer, the x_dict's widths)."""
    import torch_geometric.nn as tnn

    widths = {"author": 6, "paper": 8, "term": 4}
    ten = {f"type{i}": 2 + i % 3 for i in range(10)}
    return {
        "HeteroDictLinear-dict-channels": (lambda: tnn.HeteroDictLinear(widths, 5), widths),
        "HeteroDictLinear-dict-no-bias": (lambda: tnn.HeteroDictLinear(widths, 5, bias=False),
                                          widths),
        # the layer has a "venue" the input lacks; the input has a "term" the layer lacks
        "HeteroDictLinear-missing-and-extra": (
            lambda: tnn.HeteroDictLinear({"author": 6, "paper": 8, "venue": 2}, 5),
            widths),
        # ten types: PyG's grouped-matmul threshold (the loop without pyg_lib; same math)
        "HeteroDictLinear-ten-types": (lambda: tnn.HeteroDictLinear(ten, 3), ten),
    }


def _hetero_dict_case(label: str, dtype: str) -> tuple:
    import torch

    from torch2jax_ops.nn import from_torch

    make, widths = _hetero_dict_layers()[label]
    torch.manual_seed(0)
    layer = _perturbed(make(), 1).to(dtypes.torch_dtype(dtype))
    return layer, from_torch(layer, copy=True), (_dict_inputs(widths, dtype),), {}, {}


# ------------------------------------------------------------------ HEATConv

def _heat(**kw: Any) -> Callable:
    def make():
        import torch_geometric.nn as tnn

        options = dict(in_channels=F_IN, out_channels=4, num_node_types=NODE_TYPES,
                       num_edge_types=EDGE_TYPES, edge_type_emb_dim=3, edge_dim=EDGE_DIM,
                       edge_attr_emb_dim=5)
        options.update(kw)
        return tnn.HEATConv(**options)
    return make


def _heat_layers() -> dict[str, Callable]:
    return {
        "HEATConv": _heat(),
        "HEATConv-heads-3": _heat(heads=3),
        "HEATConv-mean-heads": _heat(heads=2, concat=False),
        "HEATConv-no-root": _heat(heads=2, root_weight=False),
        "HEATConv-mean-heads-no-root": _heat(heads=2, concat=False, root_weight=False),
        "HEATConv-no-bias": _heat(heads=2, bias=False),
        "HEATConv-slope-dropout-eval": _heat(heads=2, negative_slope=0.1, dropout=0.5),
        "HEATConv-aggr-mean": _heat(heads=2, aggr="mean"),
        "HEATConv-aggr-max": _heat(aggr="max"),
        "HEATConv-aggr-softmax": _heat(heads=2, aggr="softmax"),  # an aggregation module
        # more node types than the graph uses: a weight matrix with no rows
        "HEATConv-unused-node-type": _heat(heads=2, num_node_types=NODE_TYPES + 2),
        "HEATConv-lazy": _heat(in_channels=-1, edge_dim=-1, heads=2),
    }


def _heat_inputs(graph_name: str, dtype: str) -> tuple:
    import torch

    from torch2jax_ops.parity.cases.geometric import graph

    g = graph(graph_name, dtype, features=F_IN, edge_dim=EDGE_DIM)
    rng = np.random.default_rng(4)
    n, e = g["num_nodes"], g["edge_index"].shape[1]
    node_type = torch.as_tensor(rng.integers(0, NODE_TYPES, n))
    edge_type = torch.as_tensor(rng.integers(0, EDGE_TYPES, e))
    return (g["x"], g["edge_index"], node_type, edge_type, g["edge_attr"])


def _heat_case(label: str, dtype: str, graph_name: str) -> tuple:
    import torch

    from torch2jax_ops.nn import from_torch

    torch.manual_seed(0)
    layer = _materialised(_heat_layers()[label](), _heat_inputs(graph_name, "float32"))
    layer = layer.to(dtypes.torch_dtype(dtype))
    return layer, from_torch(layer, copy=True), _heat_inputs(graph_name, dtype), {}, {}


# ------------------------------------------------------------------ segment_matmul

#: label -> (rows, K, M, ptr)
SEGMENT_LAYOUTS = {
    "segment_matmul-empty-segment": (10, 4, 3, [0, 3, 3, 7, 10]),
    "segment_matmul-one-segment": (6, 4, 3, [0, 6]),
    # 20 segments of [3, 2]: past the project-all crossover, per-row weights
    "segment_matmul-many-segments": (30, 3, 2, [0] + sorted(
        np.random.default_rng(5).integers(0, 30, 19).tolist()) + [30]),
    # rows 0, 1 and 9.. belong to no segment: 0 here (pyg_lib and forward_naive leave them
    # undefined), so the reference is a per-segment torch matmul into zeros
    "segment_matmul-partial-range": (12, 4, 3, [2, 5, 5, 9]),
}


def _segment_modules() -> tuple:
    """(torch module whose forward is PyG's forward_naive, one into zeros, the JAX module)."""
    import equinox as eqx
    import jax
    import torch
    import torch_geometric.nn as tnn

    from torch2jax_ops.geometric import segment_matmul

    class NaiveSegmentMatmul(tnn.HeteroLinear):
        """PyG's own loop over segments: ``forward_naive(inputs, ptr)`` (weight = other)."""

        def forward(self, inputs, ptr):
            return self.forward_naive(inputs, ptr)

    class ZeroFilledSegmentMatmul(tnn.HeteroLinear):
        """``inputs[ptr[t]:ptr[t + 1]] @ other[t]``, rows outside every segment 0."""

        def forward(self, inputs, ptr):
            out = inputs.new_zeros(inputs.size(0), self.out_channels)
            for t, (start, end) in enumerate(zip(ptr[:-1].tolist(), ptr[1:].tolist())):
                out[start:end] = inputs[start:end] @ self.weight[t]
            return out

    class SegmentMatmul(eqx.Module):
        weight: jax.Array  # PyG's name for ``other``

        def __call__(self, inputs, ptr):
            return segment_matmul(inputs, ptr, self.weight)

    return NaiveSegmentMatmul, ZeroFilledSegmentMatmul, SegmentMatmul, torch


def _segment_case(label: str, dtype: str) -> tuple:
    from torch2jax_ops.dlpack import to_jax

    naive, zeros, port, torch = _segment_modules()
    rows, k, m, ptr = SEGMENT_LAYOUTS[label]
    torch.manual_seed(0)
    cls = zeros if ptr[0] != 0 or ptr[-1] != rows else naive
    layer = _perturbed(cls(k, m, len(ptr) - 1, bias=False), 1).to(dtypes.torch_dtype(dtype))
    inputs = _tensor(np.random.default_rng(6).standard_normal((rows, k)), dtype)
    jax_layer = port(to_jax(layer.weight.detach(), copy=True))
    return layer, jax_layer, (inputs, torch.tensor(ptr, dtype=torch.int64)), {}, {}


# ------------------------------------------------------------------ the cases

@register("hetero")
def hetero_linear_cases() -> Iterable[Case]:
    def case(op: str, dtype: str, label: str, build: Callable) -> Case:
        return Case("hetero", op, dtype, label, build)

    for dtype in WIDE:
        for label in _hetero_linear_layers():
            yield case("HeteroLinear", dtype, label,
                       lambda label=label, dtype=dtype: _hetero_linear_case(label, dtype))
        for label in _hetero_dict_layers():
            yield case("HeteroDictLinear", dtype, label,
                       lambda label=label, dtype=dtype: _hetero_dict_case(label, dtype))
        for label in _heat_layers():
            graphs = HEAT_GRAPHS + (("no-edges",) if label == "HEATConv" else ())
            for graph_name in graphs:
                yield case("HEATConv", dtype, f"{label}/{graph_name}",
                           lambda label=label, dtype=dtype, graph_name=graph_name:
                           _heat_case(label, dtype, graph_name))
        for label in SEGMENT_LAYOUTS:
            yield case("segment_matmul", dtype, label,
                       lambda label=label, dtype=dtype: _segment_case(label, dtype))
