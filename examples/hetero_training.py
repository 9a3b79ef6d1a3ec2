"""Heterogeneous node classification: a HeteroConv or to_hetero model on a HeteroData, in PyG and in JAX.

The PyG side is the recipe of PyG's ``examples/hetero/`` scripts: a
``HeteroData`` with three node types and six edge types (PyG's
``FakeHeteroDataset``), a ``NeighborLoader`` sampling around seed nodes of
type ``v0``, a model taking ``(x_dict, edge_index_dict)`` -- a user-written
``HeteroConv(SAGEConv)`` network (``--model heteroconv``, as in
``hetero_conv_dblp.py``) or a homogeneous ``Sequential`` turned heterogeneous
with ``to_hetero`` (``--model to_hetero``, as in ``to_hetero_mag.py``) -- and
the loss on the seeds. The JAX side takes the model over with one
``from_torch`` call (same initial weights), wraps the same loader in a
``JaxLoader`` (batches padded per type, ``seed_mask_dict`` marking the
seeds) and trains with optax and a jitted step. Both sides draw the same
subgraphs in the same order and there is no dropout, so they compute the same
thing: in float64 (``--float64``) the curves agree to ~1e-12.

    python examples/hetero_training.py --steps 30 [--model to_hetero] [--float64]
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
from torch_geometric.datasets import FakeHeteroDataset
from torch_geometric.loader import NeighborLoader
from torch_geometric.nn import HeteroConv, Linear, SAGEConv, Sequential, to_hetero

from torch2jax_ops.dtypes import x64
from torch2jax_ops.geometric.loader import JaxLoader
from torch2jax_ops.nn import from_torch

TARGET = "v0"


class HeteroGNN(torch.nn.Module):
    """Two HeteroConv(SAGEConv) layers and a Linear head, as hetero_conv_dblp.py writes it."""

    def __init__(self, edge_types, hidden: int, out_channels: int):
        super().__init__()
        self.convs = torch.nn.ModuleList([
            HeteroConv({edge_type: SAGEConv((-1, -1), hidden) for edge_type in edge_types},
                       aggr="sum")
            for _ in range(2)])
        self.lin = Linear(hidden, out_channels)

    def forward(self, x_dict, edge_index_dict):
        for conv in self.convs:
            x_dict = conv(x_dict, edge_index_dict)
            x_dict = {key: x.relu() for key, x in x_dict.items()}
        return self.lin(x_dict[TARGET])


class Head(torch.nn.Module):
    """The to_hetero model's output for the target type through a Linear."""

    def __init__(self, body, out_channels: int):
        super().__init__()
        self.body = body
        self.lin = Linear(-1, out_channels)

    def forward(self, x_dict, edge_index_dict):
        return self.lin(self.body(x_dict, edge_index_dict)[TARGET])


def make_model(kind: str, data, hidden: int, classes: int) -> torch.nn.Module:
    if kind == "heteroconv":
        return HeteroGNN(data.edge_types, hidden, classes)
    if kind == "to_hetero":
        body = Sequential("x, edge_index", [
            (SAGEConv((-1, -1), hidden), "x, edge_index -> x"), torch.nn.ReLU(inplace=True),
            (SAGEConv((-1, -1), hidden), "x, edge_index -> x"), torch.nn.ReLU(inplace=True)])
        return Head(to_hetero(body, data.metadata(), aggr="sum"), classes)
    raise ValueError(f"--model must be heteroconv or to_hetero, got {kind!r}")


def make_graph(num_nodes: int, features: int, classes: int, seed: int):
    random.seed(seed)  # FakeHeteroDataset draws sizes with `random` and values with torch
    torch.manual_seed(seed)
    data = FakeHeteroDataset(num_graphs=1, num_node_types=3, num_edge_types=6,
                             avg_num_nodes=num_nodes, avg_degree=6, num_channels=features,
                             num_classes=classes)[0]
    return data


def make_loader(data, *, batch_size: int, fanout: tuple) -> NeighborLoader:
    return NeighborLoader(data, num_neighbors=list(fanout), batch_size=batch_size,
                          input_nodes=(TARGET, None), shuffle=True)


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
        seeds = batch[TARGET].batch_size
        out = model(batch.x_dict, batch.edge_index_dict)[:seeds]
        loss = F.cross_entropy(out, batch[TARGET].y[:seeds])
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
            logits = model(g.x_dict, g.edge_index_dict)
            losses = optax.softmax_cross_entropy_with_integer_labels(logits, g.y_dict[TARGET])
            seeds = g.seed_mask_dict[TARGET]
            return jnp.sum(jnp.where(seeds, losses, 0)) / jnp.sum(seeds)

        loss, grads = eqx.filter_value_and_grad(loss_fn)(model)
        updates, state = optimizer.update(grads, state, eqx.filter(model, eqx.is_inexact_array))
        return eqx.apply_updates(model, updates), state, loss

    torch.manual_seed(seed)  # the same seeds and neighbours as the PyG run
    losses = []
    for g in batches(loader, steps):
        port, state, loss = step(port, state, g)
        losses.append(loss)
    return [float(v) for v in losses], loader


def main(steps: int = 30, model: str = "heteroconv", num_nodes: int = 500,
         batch_size: int = 32, fanout: tuple = (5, 5), hidden: int = 16, lr: float = 0.005,
         seed: int = 0, float64: bool = False, progress: bool = False,
         verbose: bool = True) -> dict:
    """Train both sides; returns ``{"pyg": [...], "jax": [...]}`` (one loss per step)."""
    with x64() if float64 else contextlib.nullcontext():
        data = make_graph(num_nodes, features=8, classes=4, seed=seed)
        torch.manual_seed(seed)
        net = make_model(model, data, hidden, int(data[TARGET].y.max()) + 1)
        with torch.no_grad():  # size the lazy (-1) layers, as a user does before training
            net(data.x_dict, data.edge_index_dict)
        if float64:
            net = net.double()
            for node_type in data.node_types:
                data[node_type].x = data[node_type].x.double()
        port = from_torch(net, copy=True)  # the same initial weights, independent copies

        start = time.perf_counter()
        pyg = train_pyg(net, data, steps=steps, batch_size=batch_size, fanout=fanout, lr=lr,
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
              f"{len(loader.ladder.levels)} ladder level(s)")
    return {"pyg": pyg, "jax": ours}


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--model", choices=("heteroconv", "to_hetero"), default="heteroconv")
    parser.add_argument("--nodes", type=int, default=500, help="average nodes per type")
    parser.add_argument("--batch-size", type=int, default=32, help="seed nodes per batch")
    parser.add_argument("--fanout", type=int, nargs="+", default=[5, 5],
                        help="neighbours sampled per layer and edge type")
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.005)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--float64", action="store_true", help="train both sides in float64")
    parser.add_argument("--progress", action="store_true", help="show the loader's progress bar")
    args = parser.parse_args()
    main(steps=args.steps, model=args.model, num_nodes=args.nodes, batch_size=args.batch_size,
         fanout=tuple(args.fanout), hidden=args.hidden, lr=args.lr, seed=args.seed,
         float64=args.float64, progress=args.progress)


if __name__ == "__main__":
    cli()
