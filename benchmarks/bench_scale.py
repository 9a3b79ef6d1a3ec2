"""Benchmark section "scale": graphs split over 8 devices (torch2jax_ops.distributed).

* per-device memory of the edge arrays of a graph with E = 8M edges placed by
  ``shard_graph`` over 8 devices, against one device holding them all;
* bytes communicated per layer (read from the compiled HLO's collectives:
  ``collective_summary``: the operand bytes one device hands to collectives,
  and the bytes it sends under a ring model), forward and forward+backward, by the shard_map path
  (a ``ShardedGraph``) and by JAX's automatic partitioning (GSPMD: the same
  layer on edge-sharded arrays), at E and 4E edges for a fixed N: the
  shard_map path stays O(N*F);
* time of a GCN layer's forward+backward on one device, on the shard_map path
  and on GSPMD. The 8 devices are forced CPU devices sharing this machine's
  cores: any speed-up is bounded by the number of cores (2 here), not 8.

``run(quick)`` runs the measurements in a subprocess with
``XLA_FLAGS=--xla_force_host_platform_device_count=8`` (the flag must be set
before JAX creates its backend) and returns the rows;
``python benchmarks/bench_scale.py [--quick]`` prints them as JSON lines.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

DEVICES = 8


def run(quick: bool) -> list[dict]:
    """The rows of section "scale" (measured in a child process with 8 CPU devices)."""
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS=f"--xla_force_host_platform_device_count={DEVICES}")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, os.path.abspath(__file__)] + (["--quick"] if quick else [])
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600, cwd=root)
    if done.returncode != 0:
        raise RuntimeError(f"bench_scale failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _measure(quick: bool) -> list[dict]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

    from torch2jax_ops.distributed import collective_summary, replicate, shard_graph
    from torch2jax_ops.geometric.nn import GATConv, GCNConv, GINConv, GraphConv, SAGEConv
    from torch2jax_ops.nn import Linear

    if len(jax.devices()) < DEVICES:
        raise RuntimeError(f"bench_scale needs {DEVICES} devices, JAX has {len(jax.devices())}: "
                           f"run it through run() or with XLA_FLAGS="
                           f"--xla_force_host_platform_device_count={DEVICES}")
    rows: list = []
    mesh = jax.make_mesh((DEVICES,), ("e",), axis_types=(AxisType.Auto,))
    rng = np.random.default_rng(0)

    # -- memory: E = 8M edges over 8 devices
    edges = 8_000_000
    n_mem = 100_000
    ei = rng.integers(0, n_mem, (2, edges)).astype(np.int32)
    g = shard_graph(np.zeros((n_mem, 1), np.float32), ei, mesh=mesh)
    per_device = {}
    for array in (g.edge_index, g.edge_id):
        for shard in array.addressable_shards:
            per_device[shard.device.id] = per_device.get(shard.device.id, 0) + shard.data.nbytes
    total = ei.nbytes + edges * 4  # edge_index + edge_id on one device
    rows.append(dict(section="scale", metric="edge memory per device", edges=edges,
                     devices=DEVICES, value=max(per_device.values()), one_device=total,
                     unit="bytes",
                     note=f"edge_index [2, E] int32 + edge_id [E] int32; max over devices "
                          f"(balance: {min(per_device.values())}..{max(per_device.values())})"))
    del g, ei

    # -- bytes per layer: shard_map path vs GSPMD, at E and 4E for a fixed N
    n, f = (2_000, 32) if quick else (10_000, 64)
    base = 40_000 if quick else 200_000

    def w(*shape):
        return jnp.asarray(rng.standard_normal(shape).astype(np.float32) / np.sqrt(shape[-1]))

    layers = {
        "GCNConv": GCNConv(Linear(w(f, f)), jnp.zeros(f)),
        "GATConv(heads=4)": GATConv(lin=Linear(w(f, f)), lin_src=None, lin_dst=None,
                                    att_src=w(1, 4, f // 4), att_dst=w(1, 4, f // 4),
                                    att_edge=None, lin_edge=None, res=None,
                                    bias=jnp.zeros(f), heads=4, out_channels=f // 4),
        "SAGEConv(mean)": SAGEConv(Linear(w(f, f), jnp.zeros(f)), Linear(w(f, f))),
        "GraphConv(max)": GraphConv(Linear(w(f, f), jnp.zeros(f)), Linear(w(f, f)), aggr="max"),
        "GINConv": GINConv(Linear(w(f, f), jnp.zeros(f)), jnp.zeros(1)),
    }
    x = rng.standard_normal((n, f)).astype(np.float32)
    r = jnp.asarray(rng.standard_normal((n, f)).astype(np.float32))
    with jax.set_mesh(mesh):
        for scale in (1, 4):
            e = base * scale
            ei = rng.integers(0, n, (2, e)).astype(np.int32)
            g = shard_graph(x, ei, mesh=mesh)
            plain_x = jax.device_put(x, NamedSharding(mesh, P()))
            plain_ei = jax.device_put(ei, NamedSharding(mesh, P(None, "e")))
            for name, layer in layers.items():
                layer = replicate(layer, mesh=mesh)
                for path, xs, eis in (("shard_map", g.x, g.edge_index),
                                      ("GSPMD", plain_x, plain_ei)):
                    def fwd(m, x_, e_):
                        return m(x_, e_)

                    def loss(m, x_, e_):
                        return jnp.sum(jnp.sin(m(x_, e_))[:n] * r)

                    for what, fn in (("forward", fwd), ("forward+backward", jax.grad(loss))):
                        if path == "shard_map":
                            compiled = jax.jit(lambda m, g_, fn=fn: fn(m, g_.x, g_.edge_index)
                                               ).lower(layer, g).compile()
                        else:
                            compiled = jax.jit(fn).lower(layer, xs, eis).compile()
                        summary = collective_summary(compiled)
                        rows.append({"section": "scale", "metric": "bytes per layer",
                                     "layer": name, "path": path, "pass": what, "nodes": n,
                                     "edges": e, "features": f,
                                     "value": summary["operand_bytes"], "unit": "bytes",
                                     "wire_bytes": summary["wire_bytes"],
                                     "node_rows_bytes": n * f * 4,
                                     "messages_bytes": e * f * 4})

    # -- time: GCN forward+backward, one device vs 8 devices
    e = base
    ei = rng.integers(0, n, (2, e)).astype(np.int32)
    gcn = layers["GCNConv"]
    loss = jax.jit(jax.grad(lambda m, x_, e_: jnp.sum(jnp.sin(m(x_, e_))[:n] * r)))
    one = jax.devices()[0]

    def timed(fn, *args, repeat=3 if quick else 7):
        jax.block_until_ready(fn(*args))
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times.append(time.perf_counter() - start)
        return sorted(times)[len(times) // 2]

    r = jax.device_put(r, one)
    t_one = timed(loss, jax.device_put(gcn, one), jax.device_put(x, one),
                  jax.device_put(ei, one))
    with jax.set_mesh(mesh):
        r = jax.device_put(r, NamedSharding(mesh, P()))
        g = shard_graph(x, ei, mesh=mesh)
        placed = replicate(gcn, mesh=mesh)
        t_map = timed(jax.jit(jax.grad(lambda m, g_: jnp.sum(jnp.sin(m(g_.x, g_.edge_index))[:n]
                                                          * r))), placed, g)
        t_gspmd = timed(loss, placed, jax.device_put(x, NamedSharding(mesh, P())),
                        jax.device_put(ei, NamedSharding(mesh, P(None, "e"))))
    cores = os.cpu_count()
    for path, t in (("one device", t_one), ("shard_map, 8 devices", t_map),
                    ("GSPMD, 8 devices", t_gspmd)):
        rows.append(dict(section="scale", metric="GCNConv forward+backward time",
                         path=path, nodes=n, edges=e, features=f, value=t, unit="s",
                         note=f"{DEVICES} forced CPU devices share {cores} cores: a "
                              f"speed-up is bounded by the {cores} cores (one device's XLA:CPU "
                              f"scatter runs on one thread), never {DEVICES}x"))
    return rows


if __name__ == "__main__":
    if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   f" --xla_force_host_platform_device_count={DEVICES}").strip()
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for row in _measure("--quick" in sys.argv[1:]):
        print(json.dumps(row))
