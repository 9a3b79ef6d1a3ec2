"""Benchmarks: torch2jax_ops (under jax.jit) vs torch_scatter vs torch's native scatter.

All contenders run in one process on the same data; each time is the median of
``--repeat`` runs after a warm-up (compilation excluded). Ratios, not absolute
times, are what to read on a noisy 2-core machine.

    python benchmarks/run.py --out benchmarks/RESULTS.md
"""
from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import torch
import torch_scatter

import torch2jax_ops as t2j

OPS = ("sum", "mean", "max", "mul")


def median_seconds(runs: dict, repeat: int) -> dict:
    """Median time per contender, measured round-robin so machine drift hits all alike."""
    for fn in runs.values():
        fn()  # warm-up: compilation / allocator
    times: dict = {name: [] for name in runs}
    for _ in range(repeat):
        for name, fn in runs.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def contenders(op: str, src_t, idx_t, src_j, idx_j, n: int) -> dict:
    """name -> zero-argument callable that runs the op to completion."""
    f = src_t.shape[1]
    idx_expanded = idx_t.view(-1, 1).expand(-1, f)
    ours = {
        "sum": lambda s, i: t2j.scatter_sum(s, i, 0, dim_size=n),
        "mean": lambda s, i: t2j.scatter_mean(s, i, 0, dim_size=n),
        "max": lambda s, i: t2j.scatter_max(s, i, 0, dim_size=n),
        "mul": lambda s, i: t2j.scatter_mul(s, i, 0, dim_size=n),
    }[op]
    ours_jit = jax.jit(ours)
    theirs = getattr(torch_scatter, f"scatter_{op}")
    native_reduce = {"sum": "sum", "mean": "mean", "max": "amax", "mul": "prod"}[op]
    runs = {
        "torch2jax_ops (jit)": lambda: jax.block_until_ready(ours_jit(src_j, idx_j)),
        "torch_scatter": lambda: theirs(src_t, idx_t, 0, dim_size=n),
        "torch native": lambda: torch.zeros(n, f, dtype=src_t.dtype).scatter_reduce_(
            0, idx_expanded, src_t, native_reduce, include_self=False),
    }
    if op == "sum":
        plain = jax.jit(lambda s, i: jax.ops.segment_sum(s, i, n))
        runs["jax.ops.segment_sum (jit)"] = lambda: jax.block_until_ready(plain(src_j, idx_j))
    return runs


def run(edges: int, features: int, nodes: int, repeat: int) -> list[dict]:
    rng = np.random.default_rng(0)
    rows = []
    for order in ("sorted", "unsorted"):
        index = rng.integers(0, nodes, edges)
        if order == "sorted":
            index = np.sort(index)
        for op in OPS:
            data = rng.uniform(0.99, 1.01, (edges, features)) if op == "mul" else \
                rng.standard_normal((edges, features))
            src_t = torch.tensor(data, dtype=torch.float32)
            idx_t = torch.tensor(index, dtype=torch.int64)
            src_j, idx_j = jnp.asarray(data, jnp.float32), jnp.asarray(index, jnp.int32)
            times = median_seconds(contenders(op, src_t, idx_t, src_j, idx_j, nodes), repeat)
            rows.append({"op": op, "order": order, "times": times})
            print(f"{op:5s} {order:8s} " + "  ".join(f"{k}: {v * 1e3:8.2f} ms"
                                                     for k, v in times.items()), flush=True)
    return rows


def markdown(rows: list[dict], args: argparse.Namespace) -> str:
    ours = "torch2jax_ops (jit)"
    lines = [
        "# Benchmarks", "",
        f"Scatter family, float32, E={args.edges:,} edges x F={args.features} features into "
        f"N={args.nodes:,} groups (dim=0). Median of {args.repeat} runs after a warm-up, all "
        f"contenders in one process on the same data, timed round-robin; written by `make bench` on "
        f"{datetime.date.today().isoformat()}.", "",
        f"Machine: {platform.machine()}, {torch.get_num_threads()} torch threads, "
        f"Python {platform.python_version()}, jax {jax.__version__}, torch {torch.__version__}, "
        f"torch_scatter {torch_scatter.__version__}.", "",
        "| op | index | torch2jax_ops (jit) ms | torch_scatter ms | torch native ms | "
        "ours / torch_scatter | ours / native | ours / segment_sum |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        t = r["times"]
        seg = t.get("jax.ops.segment_sum (jit)")
        lines.append(
            f"| {r['op']} | {r['order']} | {t[ours] * 1e3:.1f} | {t['torch_scatter'] * 1e3:.1f} | "
            f"{t['torch native'] * 1e3:.1f} | {t[ours] / t['torch_scatter']:.2f} | "
            f"{t[ours] / t['torch native']:.2f} | "
            f"{'-' if seg is None else '%.2f' % (t[ours] / seg)} |")
    lines += ["", "torch native = `torch.Tensor.scatter_reduce_` (sum/mean/amax/prod, "
              "include_self=False; amax has no argmax). Ratios below 1.0 mean torch2jax_ops "
              "is faster.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edges", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--nodes", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--out", default="benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    rows = run(args.edges, args.features, args.nodes, args.repeat)
    with open(args.out, "w") as handle:
        handle.write(markdown(rows, args))
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
