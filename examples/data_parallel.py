"""Data parallelism over a batch of graphs with torch2jax_ops: one device's numbers on many devices.

A graph-regression model (GCNConv -> relu -> GATConv -> global mean pool ->
Linear) is trained on a batch of small random graphs. Each graph is padded
to the same sizes (``pad_graph``), the batch is stacked (``stack_graphs``)
and its leading axis split over a ``"data"`` mesh axis (``shard_batch``); the
model is replicated (``replicate``) and ``jax.vmap``-ed over the graphs. The
loss and the gradients equal those of one device (checked here), in Auto
and in Explicit sharding mode; then a few SGD steps run on the mesh.

    python examples/data_parallel.py            # 8 CPU devices are forced if JAX has 1
    python examples/data_parallel.py --small    # what tests/ runs

On a machine with accelerators the mesh spans them instead. On a 2-core CPU
the 8 forced devices share 2 cores: this shows the numbers, not a speed-up.
"""
from __future__ import annotations

import argparse
import os
import sys

if "jax" not in sys.modules and "--xla_force_host_platform_device_count" not in \
        os.environ.get("XLA_FLAGS", ""):
    # must happen before JAX creates its CPU backend
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_force_host_platform_device_count=8").strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import AxisType  # noqa: E402

from torch2jax_ops.distributed import replicate, shard_batch, stack_graphs  # noqa: E402
from torch2jax_ops.geometric import global_mean_pool, pad_graph  # noqa: E402
from torch2jax_ops.geometric.nn import GATConv, GCNConv  # noqa: E402
from torch2jax_ops.nn import Linear  # noqa: E402


def make_model(features: int, hidden: int, key: jax.Array) -> tuple:
    """(GCNConv, GATConv with 2 heads, Linear): the arrays PyG's layers of those sizes hold."""
    k = jax.random.split(key, 6)
    glorot = lambda key, shape: jax.random.normal(key, shape) / np.sqrt(shape[-1])  # noqa: E731
    heads, channels = 2, hidden // 2
    gcn = GCNConv(Linear(glorot(k[0], (hidden, features))), jnp.zeros(hidden))
    gat = GATConv(lin=Linear(glorot(k[1], (heads * channels, hidden))), lin_src=None,
                  lin_dst=None, att_src=glorot(k[2], (1, heads, channels)),
                  att_dst=glorot(k[3], (1, heads, channels)), att_edge=None, lin_edge=None,
                  res=None, bias=jnp.zeros(heads * channels), heads=heads,
                  out_channels=channels)
    head = Linear(glorot(k[4], (1, hidden)), jnp.zeros(1))
    return gcn, gat, head


def predict(model: tuple, x: jax.Array, edge_index: jax.Array, batch: jax.Array) -> jax.Array:
    """One padded graph -> a scalar. Graph 0 is the real graph, graph 1 the padding."""
    gcn, gat, head = model
    h = jax.nn.relu(gcn(x, edge_index))
    h = gat(h, edge_index)
    return head(global_mean_pool(h, batch, size=2)[0])[0]


def loss_fn(model: tuple, graphs, y: jax.Array) -> jax.Array:
    pred = jax.vmap(predict, in_axes=(None, 0, 0, 0))(model, graphs.x, graphs.edge_index,
                                                      graphs.batch)
    return jnp.mean((pred - y) ** 2)


def random_batch(size: int, max_nodes: int, max_edges: int, features: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    graphs = []
    for _ in range(size):
        n = int(rng.integers(4, max_nodes))
        e = int(rng.integers(n, max_edges))
        x = rng.standard_normal((n, features)).astype(np.float32)
        edge_index = rng.integers(0, n, (2, e)).astype(np.int32)
        graphs.append(pad_graph(x, edge_index, num_nodes=max_nodes, num_edges=max_edges,
                                num_graphs=2))
    return stack_graphs(graphs), rng.standard_normal(size).astype(np.float32)


def main(argv: list | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="a tiny batch (for the tests)")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args(argv)
    devices = len(jax.devices())
    per_device = 1 if args.small else 4
    size, nodes, edges, features, hidden = devices * per_device, 16, 48, 8, 16
    if not args.small:
        nodes, edges = 40, 160
    graphs, y = random_batch(size, nodes, edges, features)
    model = make_model(features, hidden, jax.random.key(0))
    step = jax.jit(jax.value_and_grad(loss_fn))
    ref_loss, ref_grads = step(model, jax.tree.map(jnp.asarray, graphs), jnp.asarray(y))
    report = {"devices": devices, "graphs": size}
    for kind in (AxisType.Auto, AxisType.Explicit):
        mesh = jax.make_mesh((devices,), ("data",), axis_types=(kind,))
        with jax.set_mesh(mesh):
            batch, targets = shard_batch((graphs, y), mesh=mesh)
            placed = replicate(model, mesh=mesh)
            loss, grads = step(placed, batch, targets)
            worst = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)) /
                                     (np.abs(np.asarray(b)) + 1e-6)))
                        for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(ref_grads)))
            for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(ref_grads)):
                np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(float(loss), float(ref_loss), rtol=1e-5)
            shards = {s.data.shape[0] for s in batch.x.addressable_shards}
            print(f"{kind.name:8s}: loss {float(loss):.6f} (one device {float(ref_loss):.6f}), "
                  f"gradients equal one device's (max relative difference {worst:.1e}); "
                  f"{size} graphs, {shards.pop()} per device on {devices} devices")
            report[kind.name] = {"loss": float(loss), "max_rel_grad_diff": worst}
            if kind == AxisType.Explicit:
                sgd = jax.jit(lambda m, b, t: jax.tree.map(
                    lambda p, g: p - 0.05 * g, m, jax.grad(loss_fn)(m, b, t)))
                for i in range(args.steps):
                    placed = sgd(placed, batch, targets)
                final = float(jax.jit(loss_fn)(placed, batch, targets))
                print(f"after {args.steps} SGD steps on the mesh: loss {final:.6f}")
                report["trained_loss"] = final
    return report


if __name__ == "__main__":
    main()
