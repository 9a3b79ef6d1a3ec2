"""GPU benchmarks (``make bench-gpu``): torch2jax_ops on the card vs torch_scatter CUDA, torch
native and PyG CUDA, written as the "GPU" section of ``benchmarks/RESULTS.md``.

Needs CUDA builds of jaxlib and torch and torch_scatter compiled for the card
(``migration_guide/gpu.md``; ``shared/gpu/README.md`` builds torch_scatter in
minutes). On a machine without a GPU it says so and exits 0 without touching
the results, unless ``--allow-cpu`` (a dry run on the CPU, used by the tests).

Rows: the scatter family (values, and max/min with the argmax), segment_csr,
softmax, each with the achieved bandwidth (bytes read + written / time) against
the card's copy bandwidth (a device-to-device copy of the same bytes, measured
in the same run); the speed matrix of ``benchmarks/matrix.py`` (every conv
family as a two-layer user model at three widths, 1M and 10M edges, against
PyG CUDA); GCN against jraphx's GCNConv on the same graph when jraphx is
installed. Each row is also appended to ``--log`` as a JSON line as soon as it
is measured, and ``--from-log`` renders the section from such a log (a run cut
short by a time limit keeps what it measured).

Known-bad jaxlib releases (0.10.2 to 0.11.0: GPU float scatter-adds compiled
to a compare-and-swap loop, up to 2000x slower under index contention;
jax-ml/jax#38806, openxla/xla#46225, fixed in 0.11.1) get a warning printed
and written into the section.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import matrix  # noqa: E402  (the speed matrix; the timing rule of make bench)

import torch2jax_ops as t2j  # noqa: E402

#: jaxlib releases whose GPU float scatter-add is a compare-and-swap loop (inclusive)
KNOWN_BAD = ((0, 10, 2), (0, 11, 0))


def known_bad_jaxlib(version: str) -> bool:
    """Whether ``version`` (``jaxlib.__version__``) has the GPU scatter-add slowdown."""
    parts = tuple(int(p) for p in version.split("+")[0].split(".")[:3] if p.isdigit())
    return KNOWN_BAD[0] <= parts <= KNOWN_BAD[1]


def jaxlib_warning() -> str:
    version = jax.lib.__version__ if hasattr(jax.lib, "__version__") else jax.__version__
    if not known_bad_jaxlib(version):
        return ""
    return (f"WARNING: jaxlib {version} compiles GPU float scatter-adds to a compare-and-swap "
            f"loop (jax-ml/jax#38806, openxla/xla#46225; 0.10.2 to 0.11.0): scatter-heavy "
            f"rows run up to 2000x slower than on jaxlib 0.10.1 or >= 0.11.1. Upgrade jaxlib.")


def _sync(x):
    jax.block_until_ready(x)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return x


def copy_bandwidth(nbytes: int, repeat: int) -> float:
    """Bytes per second of a device-to-device copy (read + write) of ``nbytes``."""
    a = jnp.zeros(nbytes // 4, jnp.float32)
    copy = jax.jit(lambda v: v + 0)
    t = matrix.medians({"copy": lambda: _sync(copy(a))}, repeat, "cpu")["copy"]
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
        rows.append({"op": name, "times": matrix.medians(runs, repeat, device),
                     "bytes": nbytes})
    return rows


def jraphx_rows(sizes: list, repeat: int, device: str, width: int = 64) -> list:
    """GCN (2 layers, ``width`` wide) as our ``from_torch`` port vs jraphx's ``GCNConv``
    (flax nnx) on the same graph, fwd+bwd under jit each; ``[]`` without jraphx."""
    try:
        from flax import nnx
        from jraphx.nn.conv import GCNConv as JraphxGCN
    except ImportError:
        return []
    rows = []
    for size in sizes:
        nodes, edges = matrix.SIZES[size]
        try:
            torch.manual_seed(0)
            model = matrix.torch_model("GCN", width)[0].to(device).eval()
            g = matrix._graph(nodes, edges, width, device)
            x = t2j.to_jax(g["x"])
            ei = jnp.asarray(g["edge_index"].cpu().numpy(), jnp.int32)
            ours, _ = matrix._jax_step(t2j.nn.from_torch(model), (x, ei))

            class Net(nnx.Module):
                def __init__(self, rngs):
                    self.conv1 = JraphxGCN(width, width, rngs=rngs)
                    self.conv2 = JraphxGCN(width, width, rngs=rngs)

                def __call__(self, x, ei):
                    return self.conv2(jax.nn.relu(self.conv1(x, ei)), ei)

            net = Net(nnx.Rngs(0))

            @nnx.jit
            def step(m, x, ei):
                return nnx.grad(lambda q: jnp.mean(jnp.square(q(x, ei))))(m)

            t = matrix.medians({"ours": ours,
                                "jraphx": lambda n=net, a=x, e=ei: jax.block_until_ready(step(n, a, e))},
                               repeat, device)
            rows.append({"kind": "jraphx", "size": size, "ours_ms": t["ours"] * 1e3,
                         "jraphx_ms": t["jraphx"] * 1e3, "ratio": t["ours"] / t["jraphx"]})
        except Exception as err:  # noqa: BLE001 -- reported in the table
            rows.append({"kind": "jraphx", "size": size,
                         "error": f"{type(err).__name__}: {err}"[:300]})
    return rows


def section(log: list, device_name: str) -> str:
    """The "## GPU" section from the logged rows (``kind``: meta, scatter, matrix, jraphx)."""
    meta = next((r for r in log if r.get("kind") == "meta"), {})
    scatter = [r for r in log if r.get("kind") == "scatter"]
    models = [r for r in log if r.get("kind") == "matrix"]
    jraphx = [r for r in log if r.get("kind") == "jraphx"]
    bandwidth = meta.get("copy_bandwidth")
    lines = ["## GPU", "",
             f"{meta.get('device', device_name)}; written by `make bench-gpu` on "
             f"{meta.get('date', datetime.date.today().isoformat())}; jax "
             f"{meta.get('jax', jax.__version__)}, torch {meta.get('torch', torch.__version__)}."
             f" Medians, contenders round-robin in one process on the same data."]
    if meta.get("warning"):
        lines += ["", f"**{meta['warning']}**"]
    if scatter:
        lines += ["", f"Scatter ops: E={meta['edges']:,} x F={meta['features']} float32 into "
                  f"N={meta['nodes']:,} groups, sorted index; medians of {meta['repeat']}. "
                  f"Bandwidth: bytes read + written / time, against a device copy "
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
    if models:
        lines += ["", "The speed matrix (`benchmarks/matrix.py`: two-layer user models ported "
                  "by `from_torch`, fwd+bwd, ours under `jax.jit` vs PyG CUDA eager; GB/s is "
                  "XLA's bytes accessed over our time; **above** marks a row over its line)."]
        lines += [""] + matrix.markdown(models, bandwidth)
    if jraphx:
        lines += ["GCN (2 layers, 64 wide) vs jraphx's GCNConv on the same graph:", "",
                  "| edges | ours ms | jraphx ms | ours / jraphx |", "|---|---:|---:|---:|"]
        for r in jraphx:
            if "error" in r:
                lines.append(f"| {r['size']} | error: {r['error']} | | |")
            else:
                lines.append(f"| {r['size']} | {r['ours_ms']:.2f} | {r['jraphx_ms']:.2f} | "
                             f"{r['ratio']:.2f} |")
    return "\n".join(lines).rstrip("\n") + "\n"


def write_section(path: str, text: str) -> None:
    """Replace the "## GPU" section of ``path`` (or append it)."""
    old = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    new = matrix.GPU_SECTION.sub(text.rstrip("\n"), old) if matrix.GPU_SECTION.search(old) else \
        old.rstrip("\n") + "\n\n" + text
    with open(path, "w") as handle:
        handle.write(new)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edges", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--nodes", type=int, default=50_000)
    parser.add_argument("--sizes", default="1M,10M", help="matrix sizes (benchmarks/matrix.py)")
    parser.add_argument("--families", default=",".join(matrix.FAMILIES))
    parser.add_argument("--widths", default=",".join(map(str, matrix.WIDTHS)))
    parser.add_argument("--parts", default="scatter,matrix,jraphx")
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--matrix-repeat", type=int, default=7)
    parser.add_argument("--budget-s", type=float, default=None,
                        help="start no matrix row after this many seconds")
    parser.add_argument("--log", default=None, help="append each row here as a JSON line")
    parser.add_argument("--from-log", default=None,
                        help="render the section from a log of an earlier run; measure nothing")
    parser.add_argument("--out", default=os.path.join(HERE, "RESULTS.md"))
    parser.add_argument("--allow-cpu", action="store_true",
                        help="run on the CPU when there is no GPU (a dry run for the tests)")
    args = parser.parse_args(argv)
    if args.from_log:
        with open(args.from_log) as handle:
            log = [json.loads(line) for line in handle if line.strip()]
        write_section(args.out, section(log, "?"))
        print(f"written: GPU section of {args.out} from {args.from_log}")
        return 0
    gpu = torch.cuda.is_available() and jax.default_backend() == "gpu"
    if not gpu and not args.allow_cpu:
        print(f"bench-gpu: no GPU visible (torch.cuda.is_available()="
              f"{torch.cuda.is_available()}, jax backend {jax.default_backend()!r}); nothing "
              f"written. See migration_guide/gpu.md for the CUDA set-up.")
        return 0
    warning = jaxlib_warning()
    if warning:
        print(warning, flush=True)
    device = "cuda" if gpu else "cpu"
    log: list = []

    def keep(rows):
        for r in rows:
            log.append(r)
            if args.log:
                with open(args.log, "a") as handle:
                    handle.write(json.dumps(r) + "\n")

    parts = args.parts.split(",")
    keep([{"kind": "meta", "device": torch.cuda.get_device_name(0) if gpu else
           "CPU (dry run, --allow-cpu)", "date": datetime.date.today().isoformat(),
           "jax": jax.__version__, "torch": torch.__version__, "warning": warning,
           "edges": args.edges, "features": args.features, "nodes": args.nodes,
           "repeat": args.repeat,
           "copy_bandwidth": copy_bandwidth(args.edges * args.features * 4, args.repeat)}])
    if "scatter" in parts:
        keep([dict(r, kind="scatter") for r in
              scatter_rows(args.edges, args.features, args.nodes, device, args.repeat)])
    if "jraphx" in parts:
        keep(jraphx_rows(args.sizes.split(","), args.matrix_repeat, device))
    if "matrix" in parts:
        keep([dict(r, kind="matrix") for r in matrix.run(
            args.sizes.split(","), args.families.split(","),
            [int(w) for w in args.widths.split(",")], device, args.matrix_repeat,
            args.budget_s)])
    write_section(args.out, section(log, ""))
    print(f"written: GPU section of {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
