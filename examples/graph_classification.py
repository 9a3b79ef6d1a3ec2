"""Graph classification: a GIN on a PyG FakeDataset, trained in PyG and as its JAX port.

The PyG side is a plain PyG script: a ``DataLoader``, the model, ``torch.optim.Adam``.
The JAX side takes the same model over with ``from_torch`` (same initial
weights), wraps the same ``DataLoader`` in a ``JaxLoader`` (padded batches,
prepared by a background thread) and trains with optax and a jitted step.
Both sides see the same batches in the same order (the same torch seed before
each run) and there is no dropout, so the two runs compute the same thing.
In float32 the curves agree to rounding, until a ReLU input within rounding
of 0 falls on the other side of the kink in one run (Adam then amplifies the
different gradient); in float64 (``--float64``) they agree to ~1e-15.

    python examples/graph_classification.py --steps 30 [--float64]
"""
from __future__ import annotations

import argparse
import contextlib
import random
import time

import equinox as eqx
import jax.numpy as jnp
import optax
import torch
import torch.nn.functional as F
from torch_geometric.datasets import FakeDataset
from torch_geometric.loader import DataLoader
from torch_geometric.nn import MLP, GINConv, global_mean_pool

from torch2jax_ops.dtypes import x64
from torch2jax_ops.geometric.loader import JaxLoader
from torch2jax_ops.nn import from_torch


class GIN(torch.nn.Module):
    """A GIN as PyG users write it: GINConv layers, mean pooling, a linear head."""

    def __init__(self, in_channels: int, hidden: int, out_channels: int, num_layers: int = 3):
        super().__init__()
        self.convs = torch.nn.ModuleList()
        for layer in range(num_layers):
            mlp = MLP([in_channels if layer == 0 else hidden, hidden, hidden], norm=None)
            self.convs.append(GINConv(mlp))
        self.lin = torch.nn.Linear(hidden, out_channels)

    def forward(self, x, edge_index, batch, size: int = None):
        for conv in self.convs:
            x = F.relu(conv(x, edge_index))
        # `size` (the number of graphs) is a Python int: a static shape under jax.jit
        return self.lin(global_mean_pool(x, batch, size))


def to_float64(data):
    data.x = data.x.double()
    return data


def make_data(num_graphs: int, avg_nodes: int, features: int, classes: int, seed: int,
              float64: bool = False):
    random.seed(seed)  # FakeDataset draws sizes with `random` and values with torch
    torch.manual_seed(seed)
    return FakeDataset(num_graphs=num_graphs, avg_num_nodes=avg_nodes, avg_degree=4,
                       num_channels=features, num_classes=classes, task="graph",
                       transform=to_float64 if float64 else None)


def batches(loader, steps: int):
    """``steps`` batches, epoch after epoch."""
    done = 0
    while done < steps:
        for batch in loader:
            if done == steps:
                return
            yield batch
            done += 1


def train_pyg(model, dataset, *, steps: int, batch_size: int, lr: float, seed: int) -> list:
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True)
    torch.manual_seed(seed)  # the shuffling order
    losses = []
    for batch in batches(loader, steps):
        optimizer.zero_grad()
        out = model(batch.x, batch.edge_index, batch.batch, batch.num_graphs)
        loss = F.cross_entropy(out, batch.y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def train_jax(port, dataset, *, steps: int, batch_size: int, lr: float, seed: int,
              progress: bool = False) -> tuple:
    loader = JaxLoader(DataLoader(dataset, batch_size=batch_size, shuffle=True),
                       progress=progress)
    optimizer = optax.adam(lr)
    state = optimizer.init(eqx.filter(port, eqx.is_inexact_array))

    @eqx.filter_jit
    def step(model, state, g):
        def loss_fn(model):
            logits = model(g.x, g.edge_index, g.batch, g.num_graphs)
            losses = optax.softmax_cross_entropy_with_integer_labels(logits, g.y)
            return jnp.sum(jnp.where(g.graph_mask, losses, 0)) / jnp.sum(g.graph_mask)

        loss, grads = eqx.filter_value_and_grad(loss_fn)(model)
        updates, state = optimizer.update(grads, state, eqx.filter(model, eqx.is_inexact_array))
        return eqx.apply_updates(model, updates), state, loss

    torch.manual_seed(seed)  # the same shuffling order as the PyG run
    losses = []
    for g in batches(loader, steps):
        port, state, loss = step(port, state, g)
        losses.append(loss)
    return [float(v) for v in losses], loader


def main(steps: int = 30, num_graphs: int = 300, avg_nodes: int = 20, batch_size: int = 32,
         hidden: int = 32, lr: float = 0.001, seed: int = 0, float64: bool = False,
         progress: bool = False, verbose: bool = True) -> dict:
    """Train both sides; returns ``{"pyg": [...], "jax": [...]}`` (one loss per step).

    ``float64=True`` runs both in float64 (JAX's 64-bit mode on for the run).
    """
    with x64() if float64 else contextlib.nullcontext():
        return _run(steps, num_graphs, avg_nodes, batch_size, hidden, lr, seed, float64,
                    progress, verbose)


def _run(steps, num_graphs, avg_nodes, batch_size, hidden, lr, seed, float64, progress,
         verbose) -> dict:
    dataset = make_data(num_graphs, avg_nodes, features=8, classes=4, seed=seed,
                        float64=float64)
    torch.manual_seed(seed)
    model = GIN(dataset.num_features, hidden, dataset.num_classes)
    if float64:
        model = model.double()
    port = from_torch(model, copy=True)  # the same initial weights, independent copies

    start = time.perf_counter()
    pyg = train_pyg(model, dataset, steps=steps, batch_size=batch_size, lr=lr, seed=seed + 1)
    pyg_seconds = time.perf_counter() - start
    start = time.perf_counter()
    ours, loader = train_jax(port, dataset, steps=steps, batch_size=batch_size, lr=lr,
                             seed=seed + 1, progress=progress)
    jax_seconds = time.perf_counter() - start
    if verbose:
        print(f"{'step':>4}  {'PyG loss':>10}  {'JAX loss':>10}")
        for i, (a, b) in enumerate(zip(pyg, ours)):
            print(f"{i:4d}  {a:10.6f}  {b:10.6f}")
        print(f"PyG {pyg_seconds:.2f} s, JAX {jax_seconds:.2f} s (compilations included); "
              f"ladder {loader.ladder}")
    return {"pyg": pyg, "jax": ours}


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--graphs", type=int, default=300, help="graphs in the dataset")
    parser.add_argument("--nodes", type=int, default=20, help="average nodes per graph")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.001)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--float64", action="store_true", help="train both sides in float64")
    parser.add_argument("--progress", action="store_true", help="show the loader's progress bar")
    args = parser.parse_args()
    main(steps=args.steps, num_graphs=args.graphs, avg_nodes=args.nodes,
         batch_size=args.batch_size, hidden=args.hidden, lr=args.lr, seed=args.seed,
         float64=args.float64, progress=args.progress)


if __name__ == "__main__":
    cli()
