"""Benchmark section "hetero": a two-layer HeteroConv(SAGEConv) model, forward + backward.

The model is written as PyG's ``hetero_conv_dblp.py`` writes one: a
``torch.nn.Module`` taking ``(x_dict, edge_index_dict)``, two
``HeteroConv({edge_type: SAGEConv((-1, -1), 64)}, aggr="sum")`` layers with a
ReLU between, ported with one ``from_torch`` call. The graph has three node
types (author 40k, paper 50k, term 10k nodes; 64 features each) and five edge
types, 1,000,000 random edges in all (``quick``: 1/100 of everything). One
step is the forward, ``mean(out ** 2)`` summed over node types and the
gradient of every parameter: PyG eager (``loss.backward()``) vs the port
under ``eqx.filter_jit`` + ``eqx.filter_grad``; same weights, same graph, one
process, contenders timed round-robin after a warm-up (compilation excluded);
medians reported. Target: ours / PyG <= 0.5.

``python benchmarks/bench_hetero.py [--quick]`` prints the rows.
"""
from __future__ import annotations

import argparse

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import torch
import torch_geometric.nn as tnn
from bench_layers import _medians  # the contenders timed round-robin, medians

import torch2jax_ops as t2j

TARGET = 0.5
NODES = {"author": 40_000, "paper": 50_000, "term": 10_000}
#: edge type -> share of the edges
EDGES = {("author", "writes", "paper"): 0.25, ("paper", "rev_writes", "author"): 0.25,
         ("paper", "cites", "paper"): 0.3, ("paper", "has", "term"): 0.1,
         ("term", "rev_has", "paper"): 0.1}


class HeteroSAGE(torch.nn.Module):
    def __init__(self, edge_types, hidden: int = 64, out: int = 16):
        super().__init__()
        self.conv1 = tnn.HeteroConv({r: tnn.SAGEConv((-1, -1), hidden) for r in edge_types},
                                    aggr="sum")
        self.conv2 = tnn.HeteroConv({r: tnn.SAGEConv((-1, -1), out) for r in edge_types},
                                    aggr="sum")

    def forward(self, x_dict, edge_index_dict):
        x_dict = {k: v.relu() for k, v in self.conv1(x_dict, edge_index_dict).items()}
        return self.conv2(x_dict, edge_index_dict)


def graph(scale: float, features: int = 64, edges: int = 1_000_000, seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    nodes = {t: max(int(n * scale), 2) for t, n in NODES.items()}
    x = {t: torch.tensor(rng.standard_normal((n, features)), dtype=torch.float32)
         for t, n in nodes.items()}
    ei = {}
    for (src, rel, dst), share in EDGES.items():
        e = int(edges * scale * share)
        ei[(src, rel, dst)] = torch.tensor(np.stack([rng.integers(0, nodes[src], e),
                                                     rng.integers(0, nodes[dst], e)]))
    return x, ei


def run(quick: bool) -> list[dict]:
    """One row ``{name, ours_ms, pyg_ms, ratio, notes}``."""
    scale, repeat = (0.01, 2) if quick else (1.0, 11)  # the median of 11: PyG varies a lot
    x, ei = graph(scale)
    torch.manual_seed(0)
    model = HeteroSAGE(list(ei))
    with torch.no_grad():
        model(x, ei)  # size the lazy layers
    port = t2j.nn.from_torch(model)
    x_j = {k: t2j.to_jax(v) for k, v in x.items()}
    ei_j = {k: jnp.asarray(v.numpy(), jnp.int32) for k, v in ei.items()}

    def loss(out: dict):
        return sum(jnp.mean(jnp.square(v)) for v in out.values())

    @eqx.filter_jit
    def step(m, x, ei):
        return eqx.filter_grad(lambda q: loss(q(x, ei)))(m)

    def pyg_step():
        model.zero_grad()
        sum(v.square().mean() for v in model(x, ei).values()).backward()

    def ours_step():
        jax.block_until_ready(step(port, x_j, ei_j))

    times = _medians({"ours": ours_step, "pyg": pyg_step}, repeat)
    edges = sum(v.shape[1] for v in ei.values())
    return [{"name": "HeteroConv(SAGEConv) x2", "ours_ms": times["ours"] * 1e3,
             "pyg_ms": times["pyg"] * 1e3, "ratio": times["ours"] / times["pyg"],
             "notes": f"fwd+bwd, 3 node types ({sum(v.shape[0] for v in x.values()):,} nodes), "
                      f"5 edge types ({edges:,} edges), 64 features -> 64 -> 16; median of "
                      f"{repeat}; target ratio <= {TARGET}"}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    for row in run(args.quick):
        print(f"{row['name']:26s} ours {row['ours_ms']:9.1f} ms  pyg {row['pyg_ms']:9.1f} ms  "
              f"ratio {row['ratio']:.3f}  ({row['notes']})", flush=True)


if __name__ == "__main__":
    main()
