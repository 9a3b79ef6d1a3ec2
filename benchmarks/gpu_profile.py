"""Per-kernel GPU time of one speed-matrix row's step (``benchmarks/matrix.py``).

Runs the port's jitted fwd+bwd a few times under ``jax.profiler.trace`` (with a
Perfetto trace), reads the device's kernel events back and prints the kernels
by total time: what a row above its line spends its time on.

    python benchmarks/gpu_profile.py --family GAT --width 64 --size 1M
"""
from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import matrix  # noqa: E402


def kernel_times(trace_dir: str) -> dict:
    """Kernel name -> (total microseconds, calls) from the Perfetto trace of a run."""
    path = sorted(glob.glob(os.path.join(trace_dir, "**", "*.trace.json.gz"), recursive=True)
                  + glob.glob(os.path.join(trace_dir, "**", "perfetto_trace.json.gz"),
                              recursive=True))
    if not path:
        raise FileNotFoundError(f"no trace under {trace_dir}")
    with gzip.open(path[-1]) as handle:
        trace = json.load(handle)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    names = {(e.get("pid"), e.get("tid")): e.get("args", {}).get("name", "")
             for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    pids = {e.get("pid"): e.get("args", {}).get("name", "")
            for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    out: dict = collections.defaultdict(lambda: [0.0, 0])
    for e in events:
        if e.get("ph") != "X":
            continue
        where = (pids.get(e.get("pid"), "") + " " + names.get((e.get("pid"), e.get("tid")), ""))
        if "GPU" not in where and "gpu" not in where and "Stream" not in where:
            continue
        out[e["name"]][0] += float(e.get("dur", 0))
        out[e["name"]][1] += 1
    return dict(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", default="GAT")
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--size", default="1M")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args(argv)
    import jax
    import jax.numpy as jnp
    import torch

    import torch2jax_ops as t2j

    device = "cuda" if torch.cuda.is_available() else "cpu"
    nodes, edges = matrix.SIZES[args.size]
    torch.manual_seed(0)
    features = 64 if args.family in matrix.ATTENTION else args.width
    g = matrix._graph(nodes, edges, features, device)
    model = matrix.torch_model(args.family, args.width)[0].to(device).eval()
    step, _ = matrix._jax_step(t2j.nn.from_torch(model),
                               (t2j.to_jax(g["x"]), jnp.asarray(g["edge_index"].cpu().numpy(),
                                                                jnp.int32)))
    step()
    with tempfile.TemporaryDirectory() as tmp:
        with jax.profiler.trace(tmp, create_perfetto_trace=True):
            for _ in range(args.steps):
                step()
        times = kernel_times(tmp)
    total = sum(t for t, _ in times.values())
    print(f"{matrix.label(args.family, args.width)} at {args.size}: "
          f"{total / args.steps / 1e3:.3f} ms of kernels per step")
    for name, (t, calls) in sorted(times.items(), key=lambda kv: -kv[1][0])[:args.top]:
        print(f"  {t / args.steps / 1e3:8.3f} ms  x{calls // args.steps:<3d} {name[:90]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
