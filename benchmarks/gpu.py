"""GPU benchmarks (``make bench-gpu``): torch2jax_ops on the card vs torch_scatter CUDA, torch
native and PyG CUDA, written as the "GPU" section of ``benchmarks/RESULTS.md``.

Needs CUDA builds of jaxlib and torch and torch_scatter compiled for the card
(``migration_guide/gpu.md``; ``shared/gpu/README.md`` builds torch_scatter in
minutes). On a machine without a GPU it says so and exits 0 without touching
the results, unless ``--allow-cpu`` (a dry run on the CPU, used by the tests).

Rows: the scatter family (values, and max/min with the argmax), segment_csr,
softmax, GCN/GAT forward+backward, each with the achieved bandwidth (bytes
read + written / time) against the card's copy bandwidth (a device-to-device
copy of the same bytes, measured in the same run).
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run import GPU_SECTION, median_seconds  # noqa: E402  (same timing rule as make bench)

import torch2jax_ops as t2j  # noqa: E402


def _sync(x):
    jax.block_until_ready(x)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return x


def copy_bandwidth(nbytes: int, repeat: int) -> float:
    """Bytes per second of a device-to-device copy (read + write) of ``nbytes``."""
    a = jnp.zeros(nbytes // 4, jnp.float32)
    copy = jax.jit(lambda v: v + 0)
    t = median_seconds({"copy": lambda: _sync(copy(a))}, repeat)["copy"]
    return 2 * nbytes / t


def scatter_rows(edges: int, features: int, nodes: int, device: str, repeat: int) -> list:
    import torch_scatter

    rng = np.random.default_rng(0)
    src_t = torch.tensor(rng.standard_normal((edges, features)), dtype=torch.float32,
                         device=device)
    idx_t = torch.tensor(np.sort(rng.integers(0, nodes, edges)), device=device)
    src, idx = t2j.to_jax(src_t), jnp.asarray(idx_t.cpu().numpy(), jnp.int32)
    src = jax.device_put(src, jax.devices()[0])
    idx = jax.device_put(idx, jax.devices()[0])
    expanded = idx_t.view(-1, 1).expand(-1, features)
    nbytes = src_t.numel() * 4 + idx_t.numel() * 4 + nodes * features * 4
    ops = {
        "scatter sum": (jax.jit(lambda s, i: t2j.scatter_sum(s, i, 0, dim_size=nodes)),
                        lambda: torch_scatter.scatter_sum(src_t, idx_t, 0, dim_size=nodes),
                        lambda: torch.zeros(nodes, features, device=device).scatter_add_(
                            0, expanded, src_t)),
        "scatter max (values)": (
            jax.jit(lambda s, i: t2j.scatter(s, i, 0, dim_size=nodes, reduce="max")),
            lambda: torch_scatter.scatter(src_t, idx_t, 0, dim_size=nodes, reduce="max"),
            lambda: torch.zeros(nodes, features, device=device).scatter_reduce_(
                0, expanded, src_t, "amax", include_self=False)),
        "scatter_max (values, argmax)": (
            jax.jit(lambda s, i: t2j.scatter_max(s, i, 0, dim_size=nodes)),
            lambda: torch_scatter.scatter_max(src_t, idx_t, 0, dim_size=nodes), None),
        "scatter_softmax": (
            jax.jit(lambda s, i: t2j.scatter_softmax(s, i, 0, dim_size=nodes)),
            lambda: torch_scatter.scatter_softmax(src_t, idx_t, 0, dim_size=nodes), None),
        "segment_sum (jax.ops)": (
            jax.jit(lambda s, i: jax.ops.segment_sum(s, i, nodes, indices_are_sorted=True)),
            None, None),
    }
    rows = []
    for name, (ours, theirs, native) in ops.items():
        runs = {"ours": lambda: _sync(ours(src, idx))}
        if theirs is not None:
            runs["torch_scatter"] = lambda: _sync(theirs())
        if native is not None:
            runs["torch native"] = lambda: _sync(native())
        rows.append({"op": name, "times": median_seconds(runs, repeat), "bytes": nbytes})
    return rows


def model_rows(nodes: int, edges: int, features: int, device: str, repeat: int) -> list:
    import equinox as eqx

    sys.path.insert(0, os.path.dirname(HERE))
    from torch2jax_ops.parity.cases.geometric import torch_models

    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((nodes, features)), dtype=torch.float32, device=device)
    edge_index = torch.tensor(rng.integers(0, nodes, (2, edges)), device=device)
    edge_attr = torch.tensor(rng.standard_normal((edges, 4)), dtype=torch.float32, device=device)
    arrays = {"x": t2j.to_jax(x), "edge_index": jnp.asarray(edge_index.cpu().numpy(), jnp.int32),
              "edge_attr": t2j.to_jax(edge_attr)}
    setups = {"GCN": ((features, 16, 64), ("x", "edge_index")),
              "GAT": ((features, 16, 4, 8, 4), ("x", "edge_index", "edge_attr"))}

    @eqx.filter_jit
    def step(m, *a):
        return eqx.filter_grad(lambda q: jnp.mean(jnp.square(q(*a))))(m)

    rows = []
    for kind, (shape, inputs) in setups.items():
        torch.manual_seed(0)
        model = torch_models()[kind](*shape).to(device).eval()
        port = t2j.nn.from_torch(model)  # the default device: the GPU, with no hand placement
        args = tuple(arrays[k] for k in inputs)
        targs = tuple({"x": x, "edge_index": edge_index, "edge_attr": edge_attr}[k]
                      for k in inputs)

        def pyg():
            model.zero_grad()
            model(*targs).square().mean().backward()
            return _sync(jnp.zeros(()))

        rows.append({"model": kind, "times": median_seconds(
            {"ours": lambda: _sync(step(port, *args)), "pyg": pyg}, repeat)})
    return rows


def section(scatter: list, models: list, bandwidth: float, args, device_name: str) -> str:
    lines = ["## GPU", "",
             f"{device_name}; written by `make bench-gpu` on {datetime.date.today().isoformat()}; "
             f"jax {jax.__version__}, torch {torch.__version__}. E={args.edges:,} x "
             f"F={args.features} float32 into N={args.nodes:,} groups, sorted index; medians of "
             f"{args.repeat}. Bandwidth: bytes read + written / time, against a device copy "
             f"({bandwidth / 1e9:.0f} GB/s).", "",
             "| op | ours ms | torch_scatter ms | torch native ms | ours / torch_scatter | "
             "ours GB/s | of copy |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in scatter:
        t = r["times"]
        ts = t.get("torch_scatter")
        nat = t.get("torch native")
        lines.append(f"| {r['op']} | {t['ours'] * 1e3:.3f} | "
                     f"{'-' if ts is None else '%.3f' % (ts * 1e3)} | "
                     f"{'-' if nat is None else '%.3f' % (nat * 1e3)} | "
                     f"{'-' if ts is None else '%.2f' % (t['ours'] / ts)} | "
                     f"{r['bytes'] / t['ours'] / 1e9:.0f} | "
                     f"{r['bytes'] / t['ours'] / bandwidth:.0%} |")
    lines += ["", "| model (fwd+bwd) | ours ms | PyG ms | ours / PyG |", "|---|---:|---:|---:|"]
    for r in models:
        t = r["times"]
        lines.append(f"| {r['model']} | {t['ours'] * 1e3:.2f} | {t['pyg'] * 1e3:.2f} | "
                     f"{t['ours'] / t['pyg']:.2f} |")
    return "\n".join(lines) + "\n"


def write_section(path: str, text: str) -> None:
    """Replace the "## GPU" section of ``path`` (or append it)."""
    old = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    new = GPU_SECTION.sub(text.rstrip("\n"), old) if GPU_SECTION.search(old) else \
        old.rstrip("\n") + "\n\n" + text
    with open(path, "w") as handle:
        handle.write(new)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edges", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--nodes", type=int, default=50_000)
    parser.add_argument("--model-nodes", type=int, default=100_000)
    parser.add_argument("--model-edges", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--out", default=os.path.join(HERE, "RESULTS.md"))
    parser.add_argument("--allow-cpu", action="store_true",
                        help="run on the CPU when there is no GPU (a dry run for the tests)")
    args = parser.parse_args(argv)
    gpu = torch.cuda.is_available() and jax.default_backend() == "gpu"
    if not gpu and not args.allow_cpu:
        print(f"bench-gpu: no GPU visible (torch.cuda.is_available()="
              f"{torch.cuda.is_available()}, jax backend {jax.default_backend()!r}); nothing "
              f"written. See migration_guide/gpu.md for the CUDA set-up.")
        return 0
    device = "cuda" if gpu else "cpu"
    name = torch.cuda.get_device_name(0) if gpu else "CPU (dry run, --allow-cpu)"
    bandwidth = copy_bandwidth(args.edges * args.features * 4, args.repeat)
    scatter = scatter_rows(args.edges, args.features, args.nodes, device, args.repeat)
    models = model_rows(args.model_nodes, args.model_edges, args.features, device, args.repeat)
    write_section(args.out, section(scatter, models, bandwidth, args, name))
    print(f"written: GPU section of {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
