"""Benchmark section "layers": 2-layer GATv2Conv, TransformerConv and PNAConv models, fwd + bwd.

Each model is written as a PyG user writes one (a ``torch.nn.Module`` with its
own ``forward``: conv(64 -> 4 heads x 8) -> ELU -> conv(32 -> 16, 1 head), as
in PyG's GAT examples; PNA: PyG's pna.py layer with four aggregators, three
scalers and 4 towers, 64 -> 64 -> 16) and ported with one ``from_torch`` call. One step is
the forward, ``mean(out ** 2)`` and the gradient of every parameter: PyG
eager (``loss.backward()``) vs the port under ``eqx.filter_jit`` +
``eqx.filter_grad``. Same weights, same graph (100k nodes, 1M random
edges, 64 features; ``quick``: 2k nodes, 10k edges), one process, contenders
timed round-robin after a warm-up (compilation excluded); the medians are
reported. Target: ours / PyG <= 0.5.

``python benchmarks/bench_layers.py [--quick]`` prints the rows.
"""
from __future__ import annotations

import argparse
import statistics
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import torch
import torch.nn.functional as F
import torch_geometric.nn as tnn

import torch2jax_ops as t2j

TARGET = 0.5


class GATv2Net(torch.nn.Module):
    def __init__(self, features: int, classes: int, hidden: int = 8, heads: int = 4):
        super().__init__()
        self.conv1 = tnn.GATv2Conv(features, hidden, heads=heads)
        self.conv2 = tnn.GATv2Conv(hidden * heads, classes, heads=1)

    def forward(self, x, edge_index):
        return self.conv2(F.elu(self.conv1(x, edge_index)), edge_index)


class TransformerNet(torch.nn.Module):
    def __init__(self, features: int, classes: int, hidden: int = 8, heads: int = 4):
        super().__init__()
        self.conv1 = tnn.TransformerConv(features, hidden, heads=heads)
        self.conv2 = tnn.TransformerConv(hidden * heads, classes, heads=1)

    def forward(self, x, edge_index):
        return self.conv2(F.elu(self.conv1(x, edge_index)), edge_index)


class PNANet(torch.nn.Module):
    """PyG's examples/pna.py layer: four aggregators, three scalers, towers, then ReLU."""

    def __init__(self, features: int, classes: int, deg: torch.Tensor):
        super().__init__()
        kw = dict(aggregators=["mean", "min", "max", "std"],
                  scalers=["identity", "amplification", "attenuation"], deg=deg, towers=4,
                  pre_layers=1, post_layers=1, divide_input=False)
        self.conv1 = tnn.PNAConv(features, 64, **kw)
        self.conv2 = tnn.PNAConv(64, classes, **{**kw, "towers": 1})

    def forward(self, x, edge_index):
        return self.conv2(F.relu(self.conv1(x, edge_index)), edge_index)


MODELS = {"GATv2Conv x2": GATv2Net, "TransformerConv x2": TransformerNet, "PNAConv x2": PNANet}


def _medians(runs: dict, repeat: int) -> dict:
    for fn in runs.values():
        fn()  # warm-up: compilation, allocators
    times: dict = {name: [] for name in runs}
    for _ in range(repeat):
        for name, fn in runs.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def run(quick: bool) -> list[dict]:
    """Rows ``{name, ours_ms, pyg_ms, ratio, notes}``, one per model."""
    nodes, edges, features, classes = (2_000, 10_000, 64, 16) if quick else \
        (100_000, 1_000_000, 64, 16)
    repeat = 2 if quick else 5
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((nodes, features)), dtype=torch.float32)
    edge_index = torch.tensor(rng.integers(0, nodes, (2, edges)))
    x_j, edge_index_j = t2j.to_jax(x), jnp.asarray(edge_index.numpy(), jnp.int32)

    @eqx.filter_jit
    def step(m, x, edge_index):
        return eqx.filter_grad(lambda q: jnp.mean(jnp.square(q(x, edge_index))))(m)

    rows = []
    for name, cls in MODELS.items():
        torch.manual_seed(0)
        if cls is PNANet:  # PNA's degree histogram, as PyG's example computes it
            deg = torch.bincount(torch.bincount(edge_index[1], minlength=nodes))
            model = cls(features, classes, deg).eval()
        else:
            model = cls(features, classes).eval()
        port = t2j.nn.from_torch(model)

        def pyg_step(model=model):
            model.zero_grad()
            model(x, edge_index).square().mean().backward()

        def ours_step(port=port):
            jax.block_until_ready(step(port, x_j, edge_index_j))

        times = _medians({"ours": ours_step, "pyg": pyg_step}, repeat)
        rows.append({"name": name, "ours_ms": times["ours"] * 1e3, "pyg_ms": times["pyg"] * 1e3,
                     "ratio": times["ours"] / times["pyg"],
                     "notes": f"fwd+bwd, {nodes:,} nodes, {edges:,} edges, {features} features, "
                              f"{'4 heads x 8 -> 1 head x ' + str(classes) if cls is not PNANet else '4 aggregators x 3 scalers, 4 towers'}; median of {repeat}; "
                              f"target ratio <= {TARGET}"})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    for row in run(args.quick):
        print(f"{row['name']:22s} ours {row['ours_ms']:9.1f} ms  pyg {row['pyg_ms']:9.1f} ms  "
              f"ratio {row['ratio']:.3f}  ({row['notes']})", flush=True)


if __name__ == "__main__":
    main()
