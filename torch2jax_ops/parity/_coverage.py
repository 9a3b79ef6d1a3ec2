"""The PyG coverage table: every public layer of ``torch_geometric.nn`` and its status here.

Generated, never typed in: a name is *ported* when the converter registry
(:mod:`torch2jax_ops.nn._registry`) holds a converter for PyG's class (or a
port of PyG's function), and its *parity cases* are counted from the parity
suite (``torch2jax_ops/parity/cases``). A name that is not ported says why
(:data:`NOT_PORTED`). ``torch2jax-ops tables --write`` refreshes the table in
``migration_guide/layers.md``; ``parity_tests/test_coverage.py`` asserts it
matches the registry and that every ported name has parity cases.
"""
from __future__ import annotations

from collections import Counter

__all__ = ["coverage_rows", "coverage_table", "NOT_PORTED", "CASE_OPS", "THROUGH_FX"]

#: parity-case op names that test a PyG name under another label
CASE_OPS: dict[str, tuple[str, ...]] = {"Set2Set": ("Set2SetAggregation",)}

_CLUSTER = ("builds its graph from the data (k-NN / radius / clustering through torch_cluster): "
            "the output size depends on values; build the graph outside jit and pass edge_index")
_CUDA = "a CUDA-kernel twin of a ported layer: port the plain layer instead"
_TODO = "not ported yet: write it on the MessagePassing base (porting.md) or ask for it"
_BASE = "the base class: your own subclasses convert through it (porting.md)"

#: PyG names that are not ported, and why. Anything else missing reads as "not ported yet".
NOT_PORTED: dict[str, str] = {
    "MessagePassing": _BASE, "Aggregation": _BASE,
    "CuGraphSAGEConv": _CUDA, "CuGraphGATConv": _CUDA, "CuGraphRGCNConv": _CUDA,
    "FusedGATConv": _CUDA,
    "DynamicEdgeConv": _CLUSTER, "XConv": _CLUSTER, "GravNetConv": _CLUSTER,
    "knn": _CLUSTER, "knn_graph": _CLUSTER, "radius": _CLUSTER, "radius_graph": _CLUSTER,
    "fps": _CLUSTER, "nearest": _CLUSTER, "graclus": _CLUSTER, "voxel_grid": _CLUSTER,
    "approx_knn": _CLUSTER, "approx_knn_graph": _CLUSTER,
    "KNNIndex": _CLUSTER, "L2KNNIndex": _CLUSTER, "MIPSKNNIndex": _CLUSTER,
    "ApproxL2KNNIndex": _CLUSTER, "ApproxMIPSKNNIndex": _CLUSTER,
    "max_pool": _CLUSTER, "avg_pool": _CLUSTER, "max_pool_x": _CLUSTER, "avg_pool_x": _CLUSTER,
    "max_pool_neighbor_x": _CLUSTER, "avg_pool_neighbor_x": _CLUSTER,
    "SplineConv": "needs torch_spline_conv's B-spline kernels (not installed beside torch 2.13)",
    "LSTMAggregation": "a recurrent cell over each neighbourhood: not ported yet",
    "GRUAggregation": "a recurrent cell over each neighbourhood: not ported yet",
}

#: PyG classes with no converter of their own that convert through the fx path (their
#: forward is traced; the layers inside have converters): ported when the parity suite has
#: cases proving it
THROUGH_FX: dict[str, str] = {
    "HANConv": "through the fx path: traced on the MessagePassing base",
    "HeteroLayerNorm": "through the fx path",
}

#: the PyG namespaces the table covers, in order
PACKAGES = (("conv", "torch_geometric.nn.conv"), ("aggr", "torch_geometric.nn.aggr"),
            ("norm", "torch_geometric.nn.norm"), ("pool", "torch_geometric.nn.pool"))


def _key(obj: object) -> str:
    return f"{obj.__module__}.{getattr(obj, '__qualname__', getattr(obj, '__name__', ''))}"


def coverage_rows(case_counts: Counter[str] | None = None) -> list[tuple[str, str, bool, int, str]]:
    """``(package, name, ported, parity_cases, note)`` for every name of PyG's ``__all__`` lists.

    ``case_counts`` maps a parity-case op name to its number of cases (default:
    counted from the parity suite).
    """
    import importlib

    import torch2jax_ops.geometric  # noqa: F401  (registers the PyG converters)

    from ..nn import _registry

    if case_counts is None:
        from ._suite import cases
        case_counts = Counter(c.op for c in cases())
    converters, functions = _registry.converters(), _registry.functions()
    rows = []
    for package, module_name in PACKAGES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            key = _key(obj)
            ported = key in converters or key in functions or any(
                path.endswith(f".{name}") and path.startswith(module_name)
                for path in functions)
            n = sum(case_counts.get(op, 0) for op in (name, *CASE_OPS.get(name, ())))
            if not ported and name in THROUGH_FX and n:
                rows.append((package, name, True, n, THROUGH_FX[name]))
                continue
            note = "" if ported else NOT_PORTED.get(name, _TODO)
            rows.append((package, name, ported, n, note))
    return rows


def coverage_table() -> str:
    """The coverage table as Markdown (what ``migration_guide/layers.md`` shows)."""
    rows = coverage_rows()
    lines = []
    for package, _ in PACKAGES:
        mine = [r for r in rows if r[0] == package]
        done = sum(r[2] for r in mine)
        lines.append(f"**`torch_geometric.nn.{package}`**: {done} of {len(mine)} ported\n")
        lines += ["| name | status | parity cases | note |", "|---|---|---:|---|"]
        for _, name, ported, n, note in mine:
            lines.append(f"| `{name}` | {'ported' if ported else 'not ported'} | {n} | {note} |")
        lines.append("")
    return "\n".join(lines).rstrip()
