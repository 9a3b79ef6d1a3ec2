"""Benchmark: a training epoch from a PyG DataLoader, PyG eager vs JaxLoader + a jitted step.

One epoch of a 3-layer GIN (hidden 64, mean pooling, Adam) on 2,000 FakeDataset
graphs of about 30 nodes (average degree 4), batches of 64, shuffled:

* PyG: ``DataLoader`` + eager forward, ``cross_entropy``, ``backward``, ``Adam.step``;
* ours: the same ``DataLoader`` wrapped in ``JaxLoader`` (padding to the ladder and
  ``device_put`` in the background thread) + the ``from_torch`` port trained by
  a jitted optax step.

Both loops read the loss every step (``loss.item()`` / ``float(loss)``), as a
training loop that logs does, so the device never runs ahead of the data and
the loader's wait is time the step really waited. Times are medians over
several epochs, the two sides alternating epoch by epoch in one process on the
same data, after one warm-up epoch each (compilation excluded). Rows:

1. epoch time, ours / PyG (target <= 0.5);
2. the loader's time not hidden by prefetching: our loop's wait for the next
   batch as a share of our epoch (target <= 10%); PyG's column holds the time
   PyG's loader alone takes per epoch (all of it on PyG's critical path);
3. iterating the loaders alone (no step): JaxLoader vs PyG's DataLoader.

    python benchmarks/bench_loader.py            # full sizes
    python benchmarks/bench_loader.py --quick    # a smoke run
"""
from __future__ import annotations

import argparse
import random
import statistics
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
import torch
import torch.nn.functional as F
from torch_geometric.datasets import FakeDataset
from torch_geometric.loader import DataLoader
from torch_geometric.nn import MLP, GINConv, global_mean_pool

from torch2jax_ops.geometric.loader import JaxLoader
from torch2jax_ops.nn import from_torch


class GIN(torch.nn.Module):
    def __init__(self, in_channels: int, hidden: int, out_channels: int, num_layers: int = 3):
        super().__init__()
        self.convs = torch.nn.ModuleList(
            GINConv(MLP([in_channels if i == 0 else hidden, hidden, hidden], norm=None))
            for i in range(num_layers))
        self.lin = torch.nn.Linear(hidden, out_channels)

    def forward(self, x, edge_index, batch, size: int = None):
        for conv in self.convs:
            x = F.relu(conv(x, edge_index))
        return self.lin(global_mean_pool(x, batch, size))


def _setup(graphs: int, nodes: int, batch_size: int, hidden: int):
    random.seed(0)
    torch.manual_seed(0)
    dataset = FakeDataset(num_graphs=graphs, avg_num_nodes=nodes, avg_degree=4, num_channels=16,
                          num_classes=4, task="graph")
    model = GIN(dataset.num_features, hidden, dataset.num_classes)
    port = from_torch(model, copy=True)
    return dataset, model, port


def run(quick: bool) -> list[dict]:
    """Rows ``{name, ours_ms, pyg_ms, ratio, notes}`` (module docstring)."""
    graphs, epochs = (300, 2) if quick else (2000, 5)
    nodes, batch_size, hidden = 30, 64, 64
    dataset, model, port = _setup(graphs, nodes, batch_size, hidden)
    # where users train: PyG on the card when there is one (batches moved as PyG's examples
    # move them); the port and JaxLoader's batches on JAX's default device either way
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = model.to(device)

    torch_opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    pyg_loader = DataLoader(dataset, batch_size=batch_size, shuffle=True)

    def pyg_epoch() -> dict:
        start = time.perf_counter()
        for batch in pyg_loader:
            batch = batch.to(device)
            torch_opt.zero_grad()
            out = model(batch.x, batch.edge_index, batch.batch, batch.num_graphs)
            loss = F.cross_entropy(out, batch.y)
            loss.backward()
            torch_opt.step()
            loss.item()
        return {"epoch": time.perf_counter() - start}

    optimizer = optax.adam(1e-3)
    # the step takes the model's arrays, split from the rest once (migration_guide/training.md,
    # "A fast step"): eqx.filter_jit would flatten the whole module on every call
    params, static = eqx.partition(port, eqx.is_inexact_array)
    state = [params, optimizer.init(params)]
    ours_loader = JaxLoader(DataLoader(dataset, batch_size=batch_size, shuffle=True))

    @jax.jit
    def step(params, opt_state, g):
        def loss_fn(params):
            logits = eqx.combine(params, static)(g.x, g.edge_index, g.batch, g.num_graphs)
            ce = optax.softmax_cross_entropy_with_integer_labels(logits, g.y)
            return jnp.sum(jnp.where(g.graph_mask, ce, 0)) / jnp.sum(g.graph_mask)
        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    def ours_epoch() -> dict:
        start = time.perf_counter()
        for g in ours_loader:
            state[0], state[1], loss = step(state[0], state[1], g)
            float(loss)
        seconds = time.perf_counter() - start
        return {"epoch": seconds, "wait": ours_loader.stats.wait_seconds}

    def pyg_loader_only() -> dict:
        start = time.perf_counter()
        for _ in pyg_loader:
            pass
        return {"epoch": time.perf_counter() - start}

    def ours_loader_only() -> dict:
        start = time.perf_counter()
        for g in ours_loader:
            pass
        jax.block_until_ready(g)
        return {"epoch": time.perf_counter() - start}

    runs = {"pyg": pyg_epoch, "ours": ours_epoch, "pyg loader": pyg_loader_only,
            "ours loader": ours_loader_only}
    for fn in runs.values():
        fn()  # warm-up: compilation for every level the data needs, allocators
    times: dict = {name: [] for name in runs}
    for _ in range(epochs):
        for name, fn in runs.items():
            times[name].append(fn())

    def median(name: str, key: str = "epoch") -> float:
        return statistics.median(t[key] for t in times[name]) * 1e3

    ours, pyg = median("ours"), median("pyg")
    where = f"PyG on {device}, ours on {jax.devices()[0].platform}"
    wait = median("ours", "wait")
    share = statistics.median(t["wait"] / t["epoch"] for t in times["ours"])
    steps = len(pyg_loader)
    sizes = f"{graphs} graphs of ~{nodes} nodes, batch {batch_size}, {steps} steps"
    levels = ours_loader.ladder.levels
    return [
        {"name": "GIN epoch: JaxLoader + jit vs DataLoader + eager", "ours_ms": ours,
         "pyg_ms": pyg, "ratio": ours / pyg,
         "notes": f"3-layer GIN, hidden {hidden}, Adam; {sizes}; median of {epochs} epochs; "
                  f"ladder of {levels} level(s); {where}; target <= 0.5"},
        {"name": "JaxLoader wait not hidden by prefetch", "ours_ms": wait,
         "pyg_ms": median("pyg loader"), "ratio": share,
         "notes": "ratio = our loop's wait for batches / our epoch (target <= 0.10); "
                  "pyg_ms = PyG's loader alone per epoch, all on its critical path"},
        {"name": "loader alone: JaxLoader vs DataLoader", "ours_ms": median("ours loader"),
         "pyg_ms": median("pyg loader"), "ratio": median("ours loader") / median("pyg loader"),
         "notes": "iteration only (collate, pad, device_put), no step"},
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    for row in run(args.quick):
        print(f"{row['name']:52s} ours {row['ours_ms']:9.1f} ms  pyg {row['pyg_ms']:9.1f} ms  "
              f"ratio {row['ratio']:.3f}  ({row['notes']})")


if __name__ == "__main__":
    main()
