"""Node classification: GraphSAGE with a NeighborLoader on one large graph, in PyG and in JAX.

The PyG side is the usual mini-batch recipe: a ``NeighborLoader`` samples a
subgraph around ``batch_size`` seed nodes, the model runs on it, and the loss
is taken on the seeds only (the first ``batch.batch_size`` rows). The JAX side
takes the model over with ``from_torch`` (same initial weights), wraps the
same ``NeighborLoader`` in a ``JaxLoader`` (padded subgraphs, ``seed_mask``
marking the seeds) and trains with optax and a jitted step. Both sides draw
the same subgraphs in the same order (the same torch seed before each run)
and there is no dropout, so the two runs compute the same thing. In float32
the curves agree to rounding, until a ReLU input within rounding of 0 falls
on the other side of the kink in one run (Adam then amplifies the different
gradient); in float64 (``--float64``) they agree to ~1e-15.

NeighborLoader samples with ``pyg-lib`` or ``torch-sparse``: one of them must
be installed.

    python examples/node_classification.py --steps 30 [--float64]
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
from torch_geometric.loader import NeighborLoader
from torch_geometric.nn import SAGEConv

from torch2jax_ops.dtypes import x64
from torch2jax_ops.geometric.loader import JaxLoader
from torch2jax_ops.nn import from_torch


class GraphSAGE(torch.nn.Module):
    """A two-layer GraphSAGE as PyG users write it."""

    def __init__(self, in_channels: int, hidden: int, out_channels: int):
        super().__init__()
        self.conv1 = SAGEConv(in_channels, hidden)
        self.conv2 = SAGEConv(hidden, out_channels)

    def forward(self, x, edge_index):
        x = F.relu(self.conv1(x, edge_index))
        return self.conv2(x, edge_index)


def make_graph(num_nodes: int, features: int, classes: int, seed: int, float64: bool = False):
    random.seed(seed)  # FakeDataset draws sizes with `random` and values with torch
    torch.manual_seed(seed)
    data = FakeDataset(num_graphs=1, avg_num_nodes=num_nodes, avg_degree=8,
                       num_channels=features, num_classes=classes, task="node")[0]
    if float64:
        data.x = data.x.double()
    return data


def make_loader(data, *, batch_size: int, fanout: tuple) -> NeighborLoader:
    return NeighborLoader(data, num_neighbors=list(fanout), batch_size=batch_size, shuffle=True)


def batches(loader, steps: int):
    """``steps`` batches, epoch after epoch."""
    done = 0
    while done < steps:
        for batch in loader:
            if done == steps:
                return
            yield batch
            done += 1


def train_pyg(model, data, *, steps: int, batch_size: int, fanout: tuple, lr: float,
              seed: int) -> list:
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loader = make_loader(data, batch_size=batch_size, fanout=fanout)
    torch.manual_seed(seed)  # the seed order and the sampled neighbours
    losses = []
    for batch in batches(loader, steps):
        optimizer.zero_grad()
        out = model(batch.x, batch.edge_index)[:batch.batch_size]
        loss = F.cross_entropy(out, batch.y[:batch.batch_size])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def train_jax(port, data, *, steps: int, batch_size: int, fanout: tuple, lr: float, seed: int,
              progress: bool = False) -> tuple:
    loader = JaxLoader(make_loader(data, batch_size=batch_size, fanout=fanout),
                       progress=progress)
    loader.ladder  # sized now by one pass of sampling, before the seed below
    optimizer = optax.adam(lr)
    state = optimizer.init(eqx.filter(port, eqx.is_inexact_array))

    @eqx.filter_jit
    def step(model, state, g):
        def loss_fn(model):
            logits = model(g.x, g.edge_index)
            losses = optax.softmax_cross_entropy_with_integer_labels(logits, g.y)
            return jnp.sum(jnp.where(g.seed_mask, losses, 0)) / jnp.sum(g.seed_mask)

        loss, grads = eqx.filter_value_and_grad(loss_fn)(model)
        updates, state = optimizer.update(grads, state, eqx.filter(model, eqx.is_inexact_array))
        return eqx.apply_updates(model, updates), state, loss

    torch.manual_seed(seed)  # the same seeds and neighbours as the PyG run
    losses = []
    for g in batches(loader, steps):
        port, state, loss = step(port, state, g)
        losses.append(loss)
    return [float(v) for v in losses], loader


def main(steps: int = 30, num_nodes: int = 2000, batch_size: int = 64, fanout: tuple = (10, 5),
         hidden: int = 32, lr: float = 0.001, seed: int = 0, float64: bool = False,
         progress: bool = False, verbose: bool = True) -> dict:
    """Train both sides; returns ``{"pyg": [...], "jax": [...]}`` (one loss per step).

    ``float64=True`` runs both in float64 (JAX's 64-bit mode on for the run).
    """
    with x64() if float64 else contextlib.nullcontext():
        return _run(steps, num_nodes, batch_size, fanout, hidden, lr, seed, float64, progress,
                    verbose)


def _run(steps, num_nodes, batch_size, fanout, hidden, lr, seed, float64, progress,
         verbose) -> dict:
    data = make_graph(num_nodes, features=16, classes=5, seed=seed, float64=float64)
    torch.manual_seed(seed)
    model = GraphSAGE(data.num_features, hidden, int(data.y.max()) + 1)
    if float64:
        model = model.double()
    port = from_torch(model, copy=True)  # the same initial weights, independent copies

    start = time.perf_counter()
    pyg = train_pyg(model, data, steps=steps, batch_size=batch_size, fanout=fanout, lr=lr,
                    seed=seed + 1)
    pyg_seconds = time.perf_counter() - start
    start = time.perf_counter()
    ours, loader = train_jax(port, data, steps=steps, batch_size=batch_size, fanout=fanout,
                             lr=lr, seed=seed + 1, progress=progress)
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
    parser.add_argument("--nodes", type=int, default=2000, help="nodes in the graph")
    parser.add_argument("--batch-size", type=int, default=64, help="seed nodes per batch")
    parser.add_argument("--fanout", type=int, nargs="+", default=[10, 5],
                        help="neighbours sampled per layer")
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.001)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--float64", action="store_true", help="train both sides in float64")
    parser.add_argument("--progress", action="store_true", help="show the loader's progress bar")
    args = parser.parse_args()
    main(steps=args.steps, num_nodes=args.nodes, batch_size=args.batch_size,
         fanout=tuple(args.fanout), hidden=args.hidden, lr=args.lr, seed=args.seed,
         float64=args.float64, progress=args.progress)


if __name__ == "__main__":
    cli()
