"""The speed matrix: every ported conv family as a two-layer user model, ours vs PyG.

Each row is a ``torch.nn.Module`` written as a PyG user writes one (two convs, an
activation between), ported with one ``from_torch`` call and placed by the
placement rule alone. One step is the forward, ``mean(out ** 2)`` and the gradient
of every parameter: PyG eager (``loss.backward()``) against the port under
``jax.jit``; same weights, same graph, one process, contenders timed round-robin
after a warm-up (compilation excluded), medians reported. The achieved bandwidth
is XLA's own count of the step's bytes accessed (``compiled.cost_analysis()``)
over its median time.

Widths: non-attention families ``w -> w -> w`` at ``w`` = 16, 64, 256 (``w``
input features). Attention families (GAT, GATv2, Transformer) ``64 -> heads x C
-> 16`` with ``heads x C`` = 8x8, 4x64, 1x256 (the first layer concatenates its
heads, the second has one head). PNA: 4 aggregators x 3 scalers, one tower;
RGCN: 4 relations; HeteroConv: ``benchmarks/bench_hetero.py``'s three node
types and five edge types, SAGEConv per edge type, ``w`` features and hidden.

Used by ``make bench-gpu`` (``benchmarks/gpu.py``; 1M and 10M edges) and ``make
bench`` (``benchmarks/run.py``; 100k and 1M edges on the CPU).
``python benchmarks/matrix.py --sizes 10k [--families GCN,GAT]`` prints rows.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from typing import Any, Callable, Optional

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

#: RESULTS.md's "## GPU" section, written by ``make bench-gpu`` and kept by ``make bench``
GPU_SECTION = re.compile(r"## GPU\n.*?(?=\n## |\Z)", re.S)
#: size label -> (nodes, edges)
SIZES = {"10k": (1_000, 10_000), "100k": (10_000, 100_000), "1M": (100_000, 1_000_000),
         "10M": (1_000_000, 10_000_000)}
WIDTHS = (16, 64, 256)
#: the attention rows' heads x channels, one per width column
HEADS = {16: (8, 8), 64: (4, 64), 256: (1, 256)}
FAMILIES = ("GCN", "SAGE", "GIN", "GraphConv", "GAT", "GATv2", "Transformer", "PNA", "RGCN",
            "HeteroConv(SAGE)")
ATTENTION = ("GAT", "GATv2", "Transformer")
RELATIONS = 4
#: the issue's lines: every row at or below LINE x PyG; GAT at 4x64 and 1x256 at GAT_LINE
LINE, GAT_LINE = 0.5, 0.3


def label(family: str, width: int) -> str:
    if family in ATTENTION:
        heads, channels = HEADS[width]
        return f"{family} {heads}x{channels}"
    return f"{family} {width}"


def line_for(family: str, width: int) -> float:
    return GAT_LINE if family == "GAT" and width in (64, 256) else LINE


def torch_model(family: str, width: int, deg: Any = None) -> tuple[Any, int]:
    """``(model, input features)`` for one row (torch_geometric built here, lazily)."""
    import torch
    import torch_geometric.nn as tnn

    class TwoLayer(torch.nn.Module):
        def __init__(self, conv1, conv2, act, edge_type: bool = False):
            super().__init__()
            self.conv1, self.conv2, self.act = conv1, conv2, act
            self.edge_type = edge_type

        def forward(self, x, edge_index, edge_type=None):
            if self.edge_type:
                return self.conv2(self.act(self.conv1(x, edge_index, edge_type)), edge_index,
                                  edge_type)
            return self.conv2(self.act(self.conv1(x, edge_index)), edge_index)

    w = width
    relu = torch.nn.ReLU()
    if family in ATTENTION:
        heads, c = HEADS[width]
        cls = {"GAT": tnn.GATConv, "GATv2": tnn.GATv2Conv,
               "Transformer": tnn.TransformerConv}[family]
        return TwoLayer(cls(64, c, heads=heads), cls(heads * c, 16), torch.nn.ELU()), 64
    if family == "GCN":
        return TwoLayer(tnn.GCNConv(w, w), tnn.GCNConv(w, w), relu), w
    if family == "SAGE":
        return TwoLayer(tnn.SAGEConv(w, w), tnn.SAGEConv(w, w), relu), w
    if family == "GraphConv":
        return TwoLayer(tnn.GraphConv(w, w), tnn.GraphConv(w, w), relu), w
    if family == "GIN":
        def mlp():
            return torch.nn.Sequential(torch.nn.Linear(w, w), torch.nn.ReLU(),
                                       torch.nn.Linear(w, w))
        return TwoLayer(tnn.GINConv(mlp()), tnn.GINConv(mlp()), relu), w
    if family == "PNA":
        kw = dict(aggregators=["mean", "min", "max", "std"],
                  scalers=["identity", "amplification", "attenuation"], deg=deg)
        return TwoLayer(tnn.PNAConv(w, w, **kw), tnn.PNAConv(w, w, **kw), relu), w
    if family == "RGCN":
        return TwoLayer(tnn.RGCNConv(w, w, RELATIONS), tnn.RGCNConv(w, w, RELATIONS), relu,
                        edge_type=True), w
    raise ValueError(f"unknown family {family!r}; known: {FAMILIES}")


def _sync(device: str) -> None:
    if device == "cuda":
        import torch
        torch.cuda.synchronize()


def medians(runs: dict, repeat: int, device: str) -> dict:
    """Median seconds per contender, round-robin after one warm-up call each."""
    for fn in runs.values():
        fn()
    _sync(device)
    times: dict = {name: [] for name in runs}
    for _ in range(repeat):
        for name, fn in runs.items():
            _sync(device)
            start = time.perf_counter()
            fn()
            _sync(device)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def _bytes_accessed(compiled: Any) -> Optional[float]:
    cost = compiled.cost_analysis()
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else None
    return None if not cost else cost.get("bytes accessed")


def _jax_step(port: Any, args: tuple) -> tuple[Callable, Optional[float]]:
    """The jitted fwd+bwd of the port and XLA's bytes accessed for it."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    params, static = eqx.partition(port, eqx.is_array)

    def loss(p, *a):
        out = eqx.combine(p, static)(*a)
        leaves = jax.tree_util.tree_leaves(out)
        return sum(jnp.mean(jnp.square(v)) for v in leaves)

    step = jax.jit(jax.grad(loss))
    compiled = step.lower(params, *args).compile()
    return (lambda: jax.block_until_ready(compiled(params, *args))), _bytes_accessed(compiled)


def _graph(nodes: int, edges: int, features: int, device: str, seed: int = 0) -> dict:
    import torch
    rng = np.random.default_rng(seed)
    return {"x": torch.tensor(rng.standard_normal((nodes, features)), dtype=torch.float32,
                              device=device),
            "edge_index": torch.tensor(rng.integers(0, nodes, (2, edges)), device=device),
            "edge_type": torch.tensor(rng.integers(0, RELATIONS, edges), device=device)}


def row(family: str, width: int, size: str, device: str, repeat: int) -> dict:
    """One measured row: ``{family, width, label, size, ours_ms, pyg_ms, ratio, gbps, line}``."""
    import jax.numpy as jnp
    import torch

    import torch2jax_ops as t2j

    nodes, edges = SIZES[size]
    torch.manual_seed(0)
    if family == "HeteroConv(SAGE)":
        from bench_hetero import HeteroSAGE, graph
        x, ei = graph(edges / 1_000_000, features=width, edges=1_000_000)
        x = {k: v.to(device) for k, v in x.items()}
        ei = {k: v.to(device) for k, v in ei.items()}
        model = HeteroSAGE(list(ei), hidden=width, out=width).to(device)
        with torch.no_grad():
            model(x, ei)  # size the lazy layers
        targs: tuple = (x, ei)
        args: tuple = ({k: t2j.to_jax(v) for k, v in x.items()},
                       {k: jnp.asarray(v.cpu().numpy(), jnp.int32) for k, v in ei.items()})
    else:
        features = 64 if family in ATTENTION else width
        g = _graph(nodes, edges, features, device)
        deg = None
        if family == "PNA":  # PNA's degree histogram, as PyG's example computes it
            deg = torch.bincount(torch.bincount(g["edge_index"][1], minlength=nodes)).cpu()
        model = torch_model(family, width, deg)[0].to(device)
        keys = ("x", "edge_index", "edge_type") if family == "RGCN" else ("x", "edge_index")
        targs = tuple(g[k] for k in keys)
        args = tuple(t2j.to_jax(g[k]) if k == "x" else
                     jnp.asarray(g[k].cpu().numpy(), jnp.int32) for k in keys)
    model.eval()  # no dropout on either side; gradients still flow
    port = t2j.nn.from_torch(model)
    ours, nbytes = _jax_step(port, args)

    def pyg():
        model.zero_grad()
        out = model(*targs)
        loss = sum(v.square().mean() for v in (out.values() if isinstance(out, dict)
                                                else [out]))
        loss.backward()

    t = medians({"ours": ours, "pyg": pyg}, repeat, device)
    return {"family": family, "width": width, "label": label(family, width), "size": size,
            "nodes": nodes, "edges": edges, "ours_ms": t["ours"] * 1e3,
            "pyg_ms": t["pyg"] * 1e3, "ratio": t["ours"] / t["pyg"],
            "gbps": None if nbytes is None else nbytes / t["ours"] / 1e9,
            "line": line_for(family, width)}


def run(sizes: list[str], families: list[str], widths: list[int], device: str, repeat: int,
        budget_s: Optional[float] = None, log: Optional[str] = None) -> list[dict]:
    """Every (size, family, width) row, smallest size first; rows that raise are kept with
    their error (one failing family does not hide the others). ``budget_s`` stops starting
    rows once spent; ``log`` appends each row as a JSON line as soon as it is measured."""
    rows = []
    start = time.perf_counter()
    for size in sizes:
        for family in families:
            for width in widths:
                if budget_s is not None and time.perf_counter() - start > budget_s:
                    return rows
                try:
                    r = row(family, width, size, device, repeat)
                except Exception as err:  # noqa: BLE001 -- reported in the table
                    r = {"family": family, "width": width, "label": label(family, width),
                         "size": size, "error": f"{type(err).__name__}: {err}"[:300]}
                rows.append(r)
                print(json.dumps(r), flush=True)
                if log:
                    with open(log, "a") as handle:
                        handle.write(json.dumps(r) + "\n")
    return rows


def markdown(rows: list[dict], bandwidth: Optional[float] = None) -> list[str]:
    """One table per size: a row per model, ours / PyG, GB/s and the line it must meet."""
    lines: list[str] = []
    for size in dict.fromkeys(r["size"] for r in rows):
        nodes, edges = SIZES[size]
        lines += [f"{nodes:,} nodes / {edges:,} edges:", "",
                  "| model (2 layers, fwd+bwd) | ours ms | PyG ms | ours / PyG | line | "
                  "ours GB/s" + (" | of copy |" if bandwidth else " |"),
                  "|---|---:|---:|---:|---:|---:|" + ("---:|" if bandwidth else "")]
        for r in (r for r in rows if r["size"] == size):
            if "error" in r:
                lines.append(f"| {r['label']} | error: {r['error']} | | | | |"
                             + (" |" if bandwidth else ""))
                continue
            mark = "" if r["ratio"] <= r["line"] else " **above**"
            gbps = "-" if r["gbps"] is None else f"{r['gbps']:.0f}"
            of = "" if not bandwidth else (
                " - |" if r["gbps"] is None else f" {r['gbps'] * 1e9 / bandwidth:.0%} |")
            lines.append(f"| {r['label']} | {r['ours_ms']:.2f} | {r['pyg_ms']:.2f} | "
                         f"{r['ratio']:.2f}{mark} | {r['line']} | {gbps} |{of}")
        lines.append("")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100k,1M")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--widths", default=",".join(map(str, WIDTHS)))
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--budget-s", type=float, default=None)
    parser.add_argument("--log", default=None, help="append each row here as a JSON line")
    args = parser.parse_args(argv)
    import torch
    device = "cuda" if torch.cuda.is_available() else "cpu"
    rows = run(args.sizes.split(","), args.families.split(","),
               [int(w) for w in args.widths.split(",")], device, args.repeat, args.budget_s,
               args.log)
    print("\n".join(markdown(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
