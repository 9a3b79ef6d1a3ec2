"""Benchmarks: torch2jax_ops (under jax.jit) vs torch_scatter vs torch's native scatter.

All contenders run in one process on the same data; each time is the median of
``--repeat`` runs after a warm-up (compilation excluded). Ratios, not absolute
times, are what to read on a noisy 2-core machine. Parts: the scatter
family, segment/gather and the composites (sorted index), a sweep of E
from 10^4 to 10^6 for sum, max and softmax, plotted to ``--plot``, the
torch <-> JAX exchange (to_jax / to_torch on 1 KB and 1 GB), and the
overhead of ``as_torch`` on small inputs.

    python benchmarks/run.py --out benchmarks/RESULTS.md --plot benchmarks/scaling.png
"""
from __future__ import annotations

import argparse
import datetime
import os
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # the suite's test models live in the checkout (torch2jax_ops/parity/cases)
    sys.path.insert(0, ROOT)

OPS = ("sum", "mean", "max", "mul")
#: the parts of a run, in the order of RESULTS.md (--only picks some)
PARTS = ("scatter", "scatter-extreme", "segments", "sweep", "small", "exchange", "as-torch",
         "models", "converted", "layers", "hetero", "loader", "matrix", "scale")
DEFAULT_OUT = "benchmarks/RESULTS.md"


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


#: segment/gather/composite op -> (target ratio ours / torch_scatter, its two contenders)
SEGMENT_OPS = ("segment_csr sum", "segment_csr mean", "segment_csr max", "segment_coo sum",
               "segment_coo mean", "segment_coo max", "gather_csr", "gather_coo",
               "scatter_std", "scatter_logsumexp", "scatter_softmax", "scatter_log_softmax")
FUSED = ("scatter_std", "scatter_logsumexp", "scatter_softmax", "scatter_log_softmax")


def segment_pair(op: str, data: dict, n: int) -> dict:
    """The op on our side (jitted) and torch_scatter's, as zero-argument callables."""
    name, _, reduce = op.partition(" ")
    src_t, idx_t, ptr_t = data["src_t"], data["idx_t"], data["ptr_t"]
    src_j, idx_j, ptr_j = data["src_j"], data["idx_j"], data["ptr_j"]
    if name == "segment_csr":
        ours = jax.jit(lambda s, p: t2j.segment_csr(s, p, reduce=reduce))
        return {"ours": lambda: jax.block_until_ready(ours(src_j, ptr_j)),
                "torch_scatter": lambda: torch_scatter.segment_csr(src_t, ptr_t, reduce=reduce)}
    if name == "segment_coo":
        ours = jax.jit(lambda s, i: t2j.segment_coo(s, i, dim_size=n, reduce=reduce))
        return {"ours": lambda: jax.block_until_ready(ours(src_j, idx_j)),
                "torch_scatter": lambda: torch_scatter.segment_coo(src_t, idx_t, dim_size=n,
                                                                   reduce=reduce)}
    per_t, per_j = src_t[:n], src_j[:n]  # gathers read one row per group
    edges = src_t.shape[0]
    if name == "gather_csr":
        ours = jax.jit(lambda s, p: t2j.gather_csr(s, p, dim_size=edges))
        return {"ours": lambda: jax.block_until_ready(ours(per_j, ptr_j)),
                "torch_scatter": lambda: torch_scatter.gather_csr(per_t, ptr_t)}
    if name == "gather_coo":
        ours = jax.jit(lambda s, i: t2j.gather_coo(s, i))
        return {"ours": lambda: jax.block_until_ready(ours(per_j, idx_j)),
                "torch_scatter": lambda: torch_scatter.gather_coo(per_t, idx_t)}
    ours = jax.jit(lambda s, i: getattr(t2j, name)(s, i, 0, dim_size=n))
    theirs = getattr(torch_scatter, name)
    return {"ours": lambda: jax.block_until_ready(ours(src_j, idx_j)),
            "torch_scatter": lambda: theirs(src_t, idx_t, 0, dim_size=n)}


def problem(edges: int, features: int, nodes: int, seed: int = 0) -> dict:
    """float32 src [E, F], a sorted index into N groups, and its CSR pointer, both sides."""
    rng = np.random.default_rng(seed)
    index = np.sort(rng.integers(0, nodes, edges))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(index, minlength=nodes))])
    data = rng.standard_normal((edges, features)).astype(np.float32)
    return {"src_t": torch.tensor(data), "idx_t": torch.tensor(index),
            "ptr_t": torch.tensor(indptr), "src_j": jnp.asarray(data),
            "idx_j": jnp.asarray(index, jnp.int32), "ptr_j": jnp.asarray(indptr, jnp.int32)}


def run_segments(edges: int, features: int, nodes: int, repeat: int) -> list[dict]:
    data = problem(edges, features, nodes)
    rows = []
    for op in SEGMENT_OPS:
        times = median_seconds(segment_pair(op, data, nodes), repeat)
        rows.append({"op": op, "times": times})
        print(f"{op:20s} ours {times['ours'] * 1e3:8.2f} ms  torch_scatter "
              f"{times['torch_scatter'] * 1e3:8.2f} ms", flush=True)
    return rows


SWEEP_OPS = (("sum", "scatter_sum"), ("max", "scatter_max"), ("softmax", "scatter_softmax"))


def run_sweep(sizes: list[int], features: int, repeat: int) -> list[dict]:
    """Time vs E (N = E / 20 groups) for sum, max and softmax."""
    rows = []
    for edges in sizes:
        nodes = max(edges // 20, 1)
        data = problem(edges, features, nodes, seed=edges)
        for label, op in SWEEP_OPS:
            times = median_seconds(segment_pair(op, data, nodes), repeat)
            rows.append({"edges": edges, "op": label, "times": times})
            print(f"sweep E={edges:>9,} {label:8s} ours {times['ours'] * 1e3:8.2f} ms  "
                  f"torch_scatter {times['torch_scatter'] * 1e3:8.2f} ms", flush=True)
    return rows


def plot(sweep: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(SWEEP_OPS), figsize=(12, 3.6), sharex=True)
    for ax, (label, _) in zip(axes, SWEEP_OPS):
        rows = [r for r in sweep if r["op"] == label]
        edges = [r["edges"] for r in rows]
        for who, style in (("ours", "o-"), ("torch_scatter", "s--")):
            ax.plot(edges, [r["times"][who] * 1e3 for r in rows], style,
                    label="torch2jax_ops (jit)" if who == "ours" else who)
        ax.set(xscale="log", yscale="log", title=f"scatter {label}", xlabel="edges E",
               ylabel="median ms")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend()
    fig.suptitle("float32, F=64 features, N=E/20 groups, sorted index")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


#: values-only and with-arg min/max rows: label -> (ours, torch_scatter), "sum" the base
EXTREME_OPS = ("scatter max", "scatter_max", "scatter min", "scatter_min",
               "segment_csr max", "segment_max_csr", "segment_coo max", "segment_max_coo")


def extreme_pair(op: str, data: dict, n: int) -> dict:
    """One row of the min/max table: ours (jitted), torch_scatter, and torch's native
    ``scatter_reduce_`` (amax/amin, values only) for the scatter rows."""
    src_t, idx_t, ptr_t = data["src_t"], data["idx_t"], data["ptr_t"]
    src_j, idx_j, ptr_j = data["src_j"], data["idx_j"], data["ptr_j"]
    name, _, kind = op.partition(" ")
    if name == "scatter":
        ours = jax.jit(lambda s, i: t2j.scatter(s, i, 0, dim_size=n, reduce=kind))
        theirs = lambda: torch_scatter.scatter(src_t, idx_t, 0, dim_size=n, reduce=kind)
    elif name in ("scatter_max", "scatter_min"):
        ours = jax.jit(lambda s, i: getattr(t2j, name)(s, i, 0, dim_size=n))
        theirs = lambda: getattr(torch_scatter, name)(src_t, idx_t, 0, dim_size=n)
    elif name == "segment_csr":
        ours = jax.jit(lambda s, p: t2j.segment_csr(s, p, reduce=kind))
        theirs = lambda: torch_scatter.segment_csr(src_t, ptr_t, reduce=kind)
    elif name.endswith("_csr"):
        ours = jax.jit(lambda s, p: getattr(t2j, name)(s, p))
        theirs = lambda: getattr(torch_scatter, name)(src_t, ptr_t)
    elif name == "segment_coo":
        ours = jax.jit(lambda s, i: t2j.segment_coo(s, i, dim_size=n, reduce=kind))
        theirs = lambda: torch_scatter.segment_coo(src_t, idx_t, dim_size=n, reduce=kind)
    else:
        ours = jax.jit(lambda s, i: getattr(t2j, name)(s, i, dim_size=n))
        theirs = lambda: getattr(torch_scatter, name)(src_t, idx_t, dim_size=n)
    second = ptr_j if "csr" in name else idx_j
    runs = {"ours": lambda: jax.block_until_ready(ours(src_j, second)),
            "torch_scatter": theirs}
    if name.startswith("scatter"):
        amax = "amax" if name.endswith("max") or kind == "max" else "amin"
        expanded = idx_t.view(-1, 1).expand(-1, src_t.shape[1])
        runs["torch native"] = lambda: torch.zeros(n, src_t.shape[1]).scatter_reduce_(
            0, expanded, src_t, amax, include_self=False)
    return runs


def run_extreme(edges: int, features: int, nodes: int, repeat: int) -> list[dict]:
    """min/max with and without the arg, each timed round-robin with our scatter_sum on
    the same data (the ratio to sum is measured in the same loop)."""
    data = problem(edges, features, nodes)
    ours_sum = jax.jit(lambda s, i: t2j.scatter_sum(s, i, 0, dim_size=nodes))
    primitive = {kind: jax.jit(lambda s, i, f=getattr(jax.ops, f"segment_{kind}"):
                               f(s, i, nodes, indices_are_sorted=True))
                 for kind in ("max", "min")}
    rows = []
    for op in EXTREME_OPS:
        runs = extreme_pair(op, data, nodes)
        runs["ours sum"] = lambda: jax.block_until_ready(ours_sum(data["src_j"], data["idx_j"]))
        # the XLA primitive our values pass is built on: the floor of `ours / sum`
        kind = primitive["max" if "max" in op else "min"]
        runs["xla primitive"] = lambda kind=kind: jax.block_until_ready(
            kind(data["src_j"], data["idx_j"]))
        times = median_seconds(runs, repeat)
        rows.append({"op": op, "times": times})
        print(f"{op:16s} " + "  ".join(f"{k}: {v * 1e3:8.2f} ms" for k, v in times.items())
              + f"  ours/sum {times['ours'] / times['ours sum']:.2f}", flush=True)
    return rows


def run_small(repeat: int, edges: int = 10_000, features: int = 64) -> dict:
    """The fixed cost per call: scatter sum at E=10,000 vs torch_scatter, and the floor
    under it (an empty jitted call; the same with a checkify debug check, which every
    op with a traced index records)."""
    from jax.experimental import checkify

    nodes = edges // 20
    data = problem(edges, features, nodes, seed=edges)
    src_t, idx_t, src_j, idx_j = data["src_t"], data["idx_t"], data["src_j"], data["idx_j"]
    ours = jax.jit(lambda s, i: t2j.scatter_sum(s, i, 0, dim_size=nodes))
    plain = jax.jit(lambda s, i: jax.ops.segment_sum(s, i, nodes))

    def with_check(s, i):
        checkify.debug_check(jnp.all((i >= 0) & (i < nodes)), "index out of range")
        return jax.ops.segment_sum(s, i, nodes)

    checked_plain = jax.jit(with_check)
    tiny = jnp.ones(4)
    empty = jax.jit(lambda x: x + 1)

    def empty_check(x, i):
        checkify.debug_check(jnp.all(i >= 0), "negative")
        return x + 1

    empty_checked = jax.jit(empty_check)
    calls = 50
    runs = {
        "ours scatter_sum (jit)": lambda: ours(src_j, idx_j).block_until_ready(),
        "jax.ops.segment_sum (jit)": lambda: plain(src_j, idx_j).block_until_ready(),
        "segment_sum + debug_check (jit)": lambda: checked_plain(src_j, idx_j)
        .block_until_ready(),
        "empty jit (x + 1, 4 floats)": lambda: empty(tiny).block_until_ready(),
        "empty jit + debug_check": lambda: empty_checked(tiny, idx_j).block_until_ready(),
        "torch_scatter.scatter_sum": lambda: torch_scatter.scatter_sum(src_t, idx_t, 0,
                                                                       dim_size=nodes),
        "torch empty op (x + 1, 4 floats)": (lambda x=torch.ones(4): x + 1),
    }
    # torch's OpenMP threads keep spinning for a few ms after its ops, and whatever runs next
    # on this 2-core machine pays for it (a jitted call following torch_scatter's loop took
    # 70 us more per call, whichever it was): a settling loop of jitted no-ops follows the
    # torch rows in every round, untimed in the table
    runs["_settle"] = lambda: [empty(tiny) for _ in range(200)][-1].block_until_ready()
    times = median_seconds({k: (lambda f=f: per_call(f, calls)) for k, f in runs.items()},
                           repeat)
    times.pop("_settle")
    return {"edges": edges, "features": features, "nodes": nodes,
            "times": {k: v / calls for k, v in times.items()}}


def small_markdown(small: dict) -> list[str]:
    t = small["times"]
    ts, ours = t["torch_scatter.scatter_sum"], t["ours scatter_sum (jit)"]
    lines = [f"## Small inputs: the fixed cost per call (E={small['edges']:,})", "",
             f"scatter sum of {small['edges']:,} x {small['features']} float32 into "
             f"{small['nodes']} groups, sorted index; microseconds per call (median of loops "
             f"of 50 calls).", "",
             "| call | us | / torch_scatter |", "|---|---:|---:|"]
    for name, value in t.items():
        lines.append(f"| {name} | {value * 1e6:.1f} | {value / ts:.2f} |")
    check_cost = t["empty jit + debug_check"] - t["empty jit (x + 1, 4 floats)"]
    lines += ["", f"ours / torch_scatter = {ours / ts:.2f}. The floor: an empty jitted call "
              f"costs {t['empty jit (x + 1, 4 floats)'] * 1e6:.0f} us, "
              f"{t['empty jit + debug_check'] * 1e6:.0f} us with a `checkify.debug_check` "
              f"(+{check_cost * 1e6:.0f} us): a jitted function with an effect leaves JAX's "
              f"C++ fast dispatch path. Our ops record their index checks only while "
              f"tracing under `torch2jax_ops.checked` (a trace-time flag in the jit cache key), "
              f"so a plain jitted call pays none of it: `jax.ops.segment_sum` takes "
              f"{t['jax.ops.segment_sum (jit)'] * 1e6:.0f} us, with a recorded check "
              f"{t['segment_sum + debug_check (jit)'] * 1e6:.0f} us, ours "
              f"{ours * 1e6:.0f} us. Ours compiles to the same program as "
              f"`jax.ops.segment_sum` (one scatter-add; tests/test_scatter_jax.py compares "
              f"the optimised HLO), so the gap to torch_scatter here is XLA's own. The torch "
              f"rows run last in each round, followed by an untimed loop of jitted no-ops: "
              f"torch's OpenMP threads spin for a few ms after its ops, and the jitted call "
              f"that followed torch_scatter's loop measured about 70 us more per call, "
              f"whichever it was.", ""]
    return lines


def per_call(fn, calls: int) -> float:
    """Seconds per call of ``fn`` over a loop of ``calls`` (for microsecond-scale work)."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def run_exchange(big_bytes: int, repeat: int) -> list[dict]:
    """to_jax / to_torch on a 1 KB and a ``big_bytes`` float32 buffer, timed round-robin,
    and a copy of the big one for scale."""
    big_label = (f"{big_bytes / 2**30:g} GB" if big_bytes >= 2**30 else f"{big_bytes // 1024} KB")
    sizes = {"1 KB": 1024, big_label: big_bytes}
    tensors = {label: torch.empty(n // 4).fill_(1.0) for label, n in sizes.items()}
    arrays = {label: jnp.ones(n // 4, jnp.float32).block_until_ready()
              for label, n in sizes.items()}
    for label in sizes:  # what is timed is the zero-copy path
        assert t2j.shares_memory(tensors[label], t2j.to_jax(tensors[label], copy=False))
        assert t2j.shares_memory(t2j.to_torch(arrays[label]), arrays[label])
    calls = 50
    runs = {}
    for label in sizes:
        tensor, array = tensors[label], arrays[label]
        runs[("to_jax", label)] = lambda t=tensor: per_call(lambda: t2j.to_jax(t), calls)
        runs[("to_torch", label)] = lambda a=array: per_call(lambda: t2j.to_torch(a), calls)
    times = median_seconds(runs, repeat)
    copy = median_seconds({"clone": lambda: tensors[big_label].clone()}, 3)["clone"]
    return [{"size": label, "bytes": n, "copy": copy,
             "times": {call: times[(call, label)] / calls for call in ("to_jax", "to_torch")}}
            for label, n in sizes.items()]


def run_as_torch(repeat: int) -> dict:
    """Small inputs: as_torch(f) vs the jitted JAX function vs the same math in torch, and
    where an as_torch call spends its time (each step alone)."""
    from torch2jax_ops.bridge._common import split_call

    def f_jax(x, w):
        return jnp.tanh(x @ w).sum()

    def f_torch(x, w):
        return torch.tanh(x @ w).sum()

    x_t, w_t = torch.randn(16, 16), torch.randn(16, 16)
    x_j, w_j = t2j.to_jax(x_t), t2j.to_jax(w_t)
    bridged, jitted = t2j.as_torch(f_jax), jax.jit(f_jax)
    grad_jitted = jax.jit(jax.grad(f_jax, argnums=(0, 1)))
    value_and_grad = jax.jit(jax.value_and_grad(f_jax, argnums=(0, 1)))
    out_j = jitted(x_j, w_j).block_until_ready()
    w_req = w_t.clone().requires_grad_()
    calls = 50

    class Nop(torch.autograd.Function):
        @staticmethod
        def forward(a, b):
            return a.new_empty(())

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx, g):
            return None, None

    def backward(fn, general=False):
        w_req.grad = None  # a keyword argument sends as_torch down its general path
        (fn(x_t, w=w_req) if general else fn(x_t, w_req)).backward()

    times = median_seconds({name: (lambda f=f: per_call(f, calls)) for name, f in {
        "jax.jit(f)": lambda: jitted(x_j, w_j).block_until_ready(),
        "jax.jit(value_and_grad(f))": lambda: jax.block_until_ready(value_and_grad(x_j, w_j)),
        "jax.jit(grad(f))": lambda: jax.block_until_ready(grad_jitted(x_j, w_j)),
        "as_torch(f)": lambda: bridged(x_t, w_t),
        "as_torch(f) + backward": lambda: backward(bridged),
        "as_torch(f), general path": lambda: bridged(x_t, w=w_t),
        "as_torch(f) + backward, general path": lambda: backward(bridged, general=True),
        "torch f": lambda: f_torch(x_t, w_t),
        "torch f + backward": lambda: backward(f_torch),
        "step: to_jax(t), one tensor": lambda: t2j.to_jax(x_t),
        "step: jax.jit(f) on 2 fresh to_jax imports": lambda: jitted(
            t2j.to_jax(x_t), t2j.to_jax(w_t)).block_until_ready(),
        "step: jax.jit(f) on 2 NumPy views (t.numpy())": lambda: jitted(
            x_t.numpy(), w_t.numpy()).block_until_ready(),
        "step: to_torch(result)": lambda: t2j.to_torch(out_j),
        "step: torch.from_numpy(np.array(result))": lambda: torch.from_numpy(
            np.array(out_j)),
        "step: split_call (flatten + hash the key)": lambda: split_call(
            (x_t, w_t), {}, lambda v: isinstance(v, torch.Tensor), op="as_torch"),
        "step: autograd.Function.apply, no-op": lambda: Nop.apply(x_t, w_req),
    }.items()}, repeat)
    return {k: v / calls for k, v in times.items()}


def run_models(nodes: int, edges: int, features: int, repeat: int) -> list[dict]:
    """2-layer GCN and GAT (4 heads, edge features), forward + backward: PyG eager vs the port.

    Both sides get the same weights (the port is ``from_torch`` of the PyG
    model) and the same graph; the step is ``mean(out ** 2)`` and its gradient
    w.r.t. every parameter (``loss.backward()`` / ``eqx.filter_grad`` under jit).
    """
    import equinox as eqx

    from torch2jax_ops.parity.cases.geometric import port, torch_models

    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((nodes, features)), dtype=torch.float32)
    edge_index = torch.tensor(rng.integers(0, nodes, (2, edges)))
    edge_attr = torch.tensor(rng.standard_normal((edges, 4)), dtype=torch.float32)
    jax_inputs = {"x": t2j.to_jax(x), "edge_index": jnp.asarray(edge_index.numpy(), jnp.int32),
                  "edge_attr": t2j.to_jax(edge_attr)}
    setups = {"GCN": ((features, 16, 64), ("x", "edge_index")),
              "GAT": ((features, 16, 4, 8, 4), ("x", "edge_index", "edge_attr"))}
    rows = []
    for kind, (shape, inputs) in setups.items():
        torch.manual_seed(0)
        model = torch_models()[kind](*shape).eval()
        ported = port(model)
        torch_args = tuple({"x": x, "edge_index": edge_index, "edge_attr": edge_attr}[k]
                           for k in inputs)
        jax_args = tuple(jax_inputs[k] for k in inputs)

        def pyg_step():
            model.zero_grad()
            model(*torch_args).square().mean().backward()

        @eqx.filter_jit
        def jax_step(m, *args):
            return eqx.filter_grad(lambda q: jnp.mean(jnp.square(q(*args))))(m)

        runs = {"ours": lambda: jax.block_until_ready(jax_step(ported, *jax_args)),
                "pyg": pyg_step}
        rows.append({"model": kind, "times": median_seconds(runs, repeat)})
    return rows


def run_converted(nodes: int, edges: int, features: int, repeat: int) -> dict:
    """One ``from_torch`` call vs the hand-composed port of the same layers, and conversion time.

    The converted model replays the torch forward while JAX traces, so under
    ``jax.jit`` both compile to the same program: the ratio should be 1 up to
    noise. Conversion: ``from_torch`` of a 10-layer model (GCNConv + Linear +
    LayerNorm + residual per layer), and the forward's trace (``jax.make_jaxpr``).
    """
    import equinox as eqx

    from torch2jax_ops.parity.cases.geometric import port, torch_models

    rng = np.random.default_rng(1)
    x = torch.tensor(rng.standard_normal((nodes, features)), dtype=torch.float32)
    edge_index = torch.tensor(rng.integers(0, nodes, (2, edges)))
    edge_attr = torch.tensor(rng.standard_normal((edges, 4)), dtype=torch.float32)
    arrays = {"x": t2j.to_jax(x), "edge_index": jnp.asarray(edge_index.numpy(), jnp.int32),
              "edge_attr": t2j.to_jax(edge_attr)}
    setups = {"GCN": ((features, 16, 64), ("x", "edge_index")),
              "GAT": ((features, 16, 4, 8, 4), ("x", "edge_index", "edge_attr"))}

    @eqx.filter_jit
    def step(m, *args):
        return eqx.filter_grad(lambda q: jnp.mean(jnp.square(q(*args))))(m)

    rows = []
    for kind, (shape, inputs) in setups.items():
        torch.manual_seed(0)
        model = torch_models()[kind](*shape).eval()
        hand, converted = port(model), t2j.nn.from_torch(model)
        args = tuple(arrays[k] for k in inputs)
        times = median_seconds({
            "hand": lambda: jax.block_until_ready(step(hand, *args)),
            "converted": lambda: jax.block_until_ready(step(converted, *args))}, repeat)
        rows.append({"model": kind, "times": times})

    class Block(torch.nn.Module):
        def __init__(self, width):
            super().__init__()
            import torch_geometric.nn as tnn
            self.conv = tnn.GCNConv(width, width)
            self.lin = torch.nn.Linear(width, width)
            self.norm = torch.nn.LayerNorm(width)

        def forward(self, x, edge_index):
            return self.norm(x + self.lin(self.conv(x, edge_index).relu()))

    class Deep(torch.nn.Module):
        def __init__(self, width=32, depth=10):
            super().__init__()
            self.blocks = torch.nn.ModuleList([Block(width) for _ in range(depth)])

        def forward(self, x, edge_index):
            for block in self.blocks:
                x = block(x, edge_index)
            return x

    deep = Deep().eval()
    small_x = jnp.ones((100, 32))
    small_e = jnp.asarray(rng.integers(0, 100, (2, 400)), jnp.int32)
    convert, trace = [], []
    for _ in range(max(3, repeat // 2)):
        start = time.perf_counter()
        ported = t2j.nn.from_torch(deep)
        convert.append(time.perf_counter() - start)
        start = time.perf_counter()
        jax.make_jaxpr(lambda a, b: ported(a, b))(small_x, small_e)
        trace.append(time.perf_counter() - start)
    return {"models": rows, "convert": statistics.median(convert),
            "trace": statistics.median(trace)}


def extreme_markdown(extreme: list[dict], args: argparse.Namespace) -> list[str]:
    lines = [
        "## min / max: values only and with the arg", "",
        f"Same data (E={args.edges:,} x F={args.features} into N={args.nodes:,}, sorted "
        f"index; its CSR pointer for the csr rows). Each row is timed round-robin with our "
        f"`scatter_sum` on the same data (`ours / sum`). Values-only calls "
        f"(`scatter(reduce=...)`, `segment_*(reduce=...)`) never compute the arg in the "
        f"forward (the backward finds the winners); `scatter_max` & co. return it. Targets: "
        f"values only <= 2x our sum, with the arg <= 3x. torch_scatter's `scatter(reduce='max')` "
        f"runs its `scatter_max` kernel (arg included); torch native = "
        f"`scatter_reduce_('amax'/'amin', include_self=False)`, values only.", "",
        "| op | ours ms | our sum ms | ours / sum | target | met | XLA segment_max/min ms | "
        "XLA primitive / sum | torch_scatter ms | ours / torch_scatter | torch native ms | "
        "ours / native |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    floors, over = [], []
    for r in extreme:
        t = r["times"]
        values_only = " " in r["op"]
        target = 2.0 if values_only else 3.0
        ratio = t["ours"] / t["ours sum"]
        native = t.get("torch native")
        lines.append(
            f"| {r['op']} | {t['ours'] * 1e3:.1f} | {t['ours sum'] * 1e3:.1f} | {ratio:.2f} | "
            f"{target:.0f} | {'yes' if ratio <= target else 'NO'} | "
            f"{t['xla primitive'] * 1e3:.1f} | {t['xla primitive'] / t['ours sum']:.2f} | "
            f"{t['torch_scatter'] * 1e3:.1f} | {t['ours'] / t['torch_scatter']:.2f} | "
            f"{'-' if native is None else '%.1f' % (native * 1e3)} | "
            f"{'-' if native is None else '%.2f' % (t['ours'] / native)} |")
        floors.append(t["xla primitive"] / t["ours sum"])
        if values_only:
            over.append(t["ours"] / t["xla primitive"])
    lines += ["", f"The floor: the XLA primitive every values-only row is built on "
              f"(`jax.ops.segment_max` / `segment_min`, sorted indices, same data) takes "
              f"{min(floors):.2f}x to {max(floors):.2f}x our sum in this run, so `ours / sum` "
              f"cannot go below that without a faster primitive; our values-only calls take "
              f"{min(over):.2f}x to {max(over):.2f}x the primitive (the csr rows include "
              f"turning `indptr` into per-row ids). A bit-cast to order-preserving int32 keys "
              f"was tried: XLA:CPU's integer scatter-max is slower still (about 3x the float "
              f"one).", "", "On XLA:CPU every fresh E-sized temporary costs page faults (a 128 MB "
              "buffer: more than the reduction itself), so the values pass reduces the rows "
              "as they are (a NaN-cleaned copy only when a NaN reached a result) and the arg "
              "pass runs over blocks of rows of a few MB.", ""]
    return lines


#: the "GPU" section of RESULTS.md, up to the next section (benchmarks/gpu.py writes it)
from matrix import GPU_SECTION  # noqa: E402  (one pattern, shared with gpu.py)


def _keep_gpu_section(text: str, path: str) -> str:
    """``text`` plus the "## GPU" section of the file it replaces: ``make bench-gpu`` writes
    that section on a CUDA machine (benchmarks/gpu.py), and a CPU run must not drop it."""
    if not os.path.exists(path):
        return text
    with open(path) as handle:
        found = GPU_SECTION.search(handle.read())
    if found is None or "## GPU\n" in text:
        return text
    return text.rstrip("\n") + "\n\n" + found.group(0).rstrip("\n") + "\n"


def ratio_markdown(title: str, intro: str, rows: list[dict], after: str = "") -> list[str]:
    """A section of ``{name, ours_ms, pyg_ms, ratio, notes}`` rows (bench_layers, bench_loader),
    then ``after`` (what the numbers are made of, measured separately)."""
    lines = [f"## {title}", "", intro, "", "| row | ours ms | PyG ms | ratio | notes |",
             "|---|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['ours_ms']:.1f} | {r['pyg_ms']:.1f} | "
                     f"{r['ratio']:.3f} | {r['notes']} |")
    return lines + [""] + ([after, ""] if after else [])


#: Profiles behind the layers rows (2026-11-25, this machine; not re-measured by make bench).
LAYERS_NOTES = (
    "Where TransformerConv's time goes (profiles of one step, 2026-11-25): memory-bound "
    "passes over E-sized buffers (one [E, 4, 8] float32 buffer is 128 MB): the gathers of "
    "keys, values and queries, the softmax's exp and weighted messages, their cotangents "
    "and four scatters, 10-34 ms each. What took it from 0.77 to about 0.5 of PyG: keys "
    "and values gathered separately (one [k, v] gather was sliced, and XLA:CPU copied each "
    "slice out for the reduction that reads it), gathers with no mask after them "
    "(take_rows: the table gets a zero row for dropped ids; jnp.take's fill mode selects "
    "after the gather, another copy), the softmax's numerator and denominator summed "
    "separately into a slot for dropped ids (slot_sum: the gradient's gathers are "
    "unmasked too, and the score cotangent's reduction no longer reads a sliced [E, 4, 1] "
    "operand, 45 -> 23 ms). The unmasked gather is not faster everywhere: as the default it "
    "made PNAConv 25% slower (XLA stored its two 1 GB gathered message arrays instead of "
    "re-gathering inside each consumer), so only the attention convs use it. Part of both "
    "sides' time is the kernel zeroing fresh pages: a step of ours takes 210k minor page "
    "faults (0.33 s of system CPU), PyG's 500k (0.76 s), as large buffers are mmap'd anew "
    "on every call. Tried and dropped: a custom VJP that recomputes the gathers in the "
    "backward (slower), the per-edge dot as a chain of multiply-adds or as a matmul with a "
    "block-diagonal ones matrix (slower in the model), XLA without its YNNPACK fusions "
    "(-3.5%).")

#: Profiles behind the loader rows (2026-11-25, this machine; not re-measured by make bench).
LOADER_NOTES = (
    "Where the epoch goes (2026-11-25): the 32 jitted steps alone, on batches made "
    "beforehand, take 135-146 ms, 0.51-0.55 of PyG's epoch before any loading: XLA "
    "executes a step in 3.8 ms (17 matmuls of 1944 x 64 x 64, about 2.3 ms, at ~170 "
    "GFLOP/s; scatters 0.64 ms, gathers 0.48 ms) and dispatches it in about 0.4 ms (0.5 ms "
    "more with eqx.filter_jit, which flattens the module on every call). XLA's threads keep "
    "1.6 of the 2 cores busy during a step, so the loader thread's 0.55-0.65 ms of CPU "
    "per batch (gather, pad, place) is not hidden by prefetching: it adds 25-35 ms to "
    "the epoch (dispatch waits for the GIL, the step for a core). The 0.5 target needs a "
    "faster step than XLA:CPU gives this model on this machine.")


#: Profile behind the hetero row (2026-11-26, this machine; not re-measured by make bench).
HETERO_NOTES = (
    "HeteroConv is a Python loop over edge types on both sides; PyG runs every SAGEConv of "
    "it eagerly, op by op, while the port's loop runs once, at trace time, and the step is "
    "one compiled XLA program for all five edge types. The port adds the relations into one "
    "node type with one matmul (migration_guide/hetero.md, \"One matmul per node type\": "
    "root weights summed, aggregations concatenated): compiled both ways in one process and "
    "timed alternately (2026-11-26, median of 9), 228 ms fused vs 271 ms conv by conv with "
    "the streamed loop, and XLA's temporaries 215 MB vs 289 MB. Each SAGEConv aggregation "
    "runs through the CPU kernel (migration_guide/layers.md, \"Speed on the CPU\"), which "
    "adds each source row into its target row with no [E, 64] buffer: the step took "
    "132-133 ms with it vs 199-200 ms with the streamed loop it replaces "
    "(TORCH2JAX_OPS_NATIVE=0), two runs each of bench_hetero.py. Where the step goes now "
    "(2026-11-26, jitted parts timed alone, median of 11): the first layer's forward 59 ms, "
    "the model's forward 81 ms, the whole step 142 ms; in XLA's per-op trace of the first "
    "layer, the five kernel calls take 52 ms of thread time (two independent calls running "
    "at once take 13-15 ms vs 4.9 ms for one alone: they share the two cores and the "
    "caches) and the matmul fusions 20 ms. Tried and dropped before the kernel: separate "
    "matmuls per relation with only the root weights merged (249 vs 216 ms), the root term "
    "kept out of the concatenation (233 vs 225 ms), stream thresholds of 256k and 1M "
    "elements (no change), splitting each streamed loop in two for the two threads (137 vs "
    "111 ms for the first layer), XLA's concurrency-optimized scheduler (no gain), sorting "
    "the edges by target (a 300k argsort alone takes 70 ms). PyG's time moved between 310 "
    "and 675 ms from run to run on 2026-11-26: on this machine the row's ratio says as much "
    "about PyG's state as about ours.")


def scale_markdown(rows: list[dict]) -> list[str]:
    """The "scale" section (bench_scale: 8 forced CPU devices)."""
    lines = ["## Scale: one graph over 8 devices (`torch2jax_ops.distributed`)", "",
             "8 forced CPU devices in one process (`XLA_FLAGS=--xla_force_host_platform_device"
             "_count=8`). Bytes are read from the compiled HLO's collectives.", ""]
    memory = [r for r in rows if r["metric"] == "edge memory per device"]
    for r in memory:
        lines.append(f"- Edge arrays of E = {r['edges']:,} over {r['devices']} devices: "
                     f"{r['value'] / 2**20:.1f} MiB on the fullest device vs "
                     f"{r['one_device'] / 2**20:.1f} MiB on one device ({r['note']}).")
    lines += ["", "| layer | path | pass | E | bytes to collectives per device | "
              "ring wire bytes | N*F*4 | E*F*4 |", "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        if r["metric"] == "bytes per layer":
            lines.append(f"| {r['layer']} | {r['path']} | {r['pass']} | {r['edges']:,} | "
                         f"{r['value']:,} | {r['wire_bytes']:,} | {r['node_rows_bytes']:,} | "
                         f"{r['messages_bytes']:,} |")
    lines += ["", "| GCNConv forward+backward | ms |", "|---|---:|"]
    note = ""
    for r in rows:
        if r["metric"] == "GCNConv forward+backward time":
            lines.append(f"| {r['path']} (N={r['nodes']:,}, E={r['edges']:,}) | "
                         f"{r['value'] * 1e3:.0f} |")
            note = r["note"]
    return lines + ["", note, ""]


def markdown(rows: list[dict], args: argparse.Namespace, segments: list[dict] = (),
             sweep: list[dict] = (), exchange: list[dict] = (), bridge: dict = None,
             models: list[dict] = (), converted: dict = None, extreme: list[dict] = (),
             small_inputs: dict = None) -> str:
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
    ]
    if rows:
        lines += [
            "| op | index | torch2jax_ops (jit) ms | torch_scatter ms | torch native ms | "
            "ours / torch_scatter | ours / native | ours / segment_sum |",
            "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        t = r["times"]
        seg = t.get("jax.ops.segment_sum (jit)")
        lines.append(
            f"| {r['op']} | {r['order']} | {t[ours] * 1e3:.1f} | {t['torch_scatter'] * 1e3:.1f} | "
            f"{t['torch native'] * 1e3:.1f} | {t[ours] / t['torch_scatter']:.2f} | "
            f"{t[ours] / t['torch native']:.2f} | "
            f"{'-' if seg is None else '%.2f' % (t[ours] / seg)} |")
    if rows:
        lines += ["", "torch native = `torch.Tensor.scatter_reduce_` (sum/mean/amax/prod, "
                  "include_self=False; amax has no argmax). Ratios below 1.0 mean torch2jax_ops "
                  "is faster.", ""]
    if extreme:
        lines += extreme_markdown(extreme, args)
    if small_inputs:
        lines += small_markdown(small_inputs)
    if segments:
        lines += [
            "## segment / gather / composites", "",
            f"Same data sizes, sorted index (its CSR pointer for the csr ops); gathers read "
            f"N={args.nodes:,} rows out to E. Target: ours / torch_scatter <= 1.0, and <= 0.5 "
            f"for the composites (torch_scatter runs them as several eager passes).", "",
            "| op | torch2jax_ops (jit) ms | torch_scatter ms | ours / torch_scatter | target | met |",
            "|---|---:|---:|---:|---:|---|"]
        for r in segments:
            t = r["times"]
            ratio, target = t["ours"] / t["torch_scatter"], 0.5 if r["op"] in FUSED else 1.0
            lines.append(f"| {r['op']} | {t['ours'] * 1e3:.1f} | {t['torch_scatter'] * 1e3:.1f} "
                         f"| {ratio:.2f} | {target:.1f} | {'yes' if ratio <= target else 'NO'} |")
        lines.append("")
    if sweep:
        lines += ["## scaling with E", "",
                  f"![time vs E]({os.path.basename(args.plot)})", "",
                  "| E | op | torch2jax_ops (jit) ms | torch_scatter ms | ours / torch_scatter |",
                  "|---:|---|---:|---:|---:|"]
        for r in sweep:
            t = r["times"]
            lines.append(f"| {r['edges']:,} | {r['op']} | {t['ours'] * 1e3:.2f} | "
                         f"{t['torch_scatter'] * 1e3:.2f} | {t['ours'] / t['torch_scatter']:.2f} |")
        slower = [f"{r['op']} at E={r['edges']:,} ({r['times']['ours'] / r['times']['torch_scatter']:.2f})"
                  for r in sweep if r["times"]["ours"] > r["times"]["torch_scatter"]]
        lines += ["", "Slower than torch_scatter in this run: " + (
            ", ".join(slower) + ". A jitted call has a fixed dispatch cost of a few hundred "
            "microseconds, which dominates the cheapest op on small inputs." if slower
            else "none.")]
        lines.append("")
    if exchange:
        small, big = exchange
        lines += ["## torch <-> JAX exchange (DLPack)", "",
                  f"float32 buffers; microseconds per call (median of {args.repeat} loops of 50 "
                  f"calls). Target: {big['size']} / 1 KB under 2 (a copy would scale with the "
                  f"size: `tensor.clone()` column).", "",
                  "| call | 1 KB us | " + big["size"] + " us | ratio | met | clone of " +
                  big["size"] + " us |", "|---|---:|---:|---:|---|---:|"]
        for call in ("to_jax", "to_torch"):
            ratio = big["times"][call] / small["times"][call]
            lines.append(f"| {call} | {small['times'][call] * 1e6:.1f} | "
                         f"{big['times'][call] * 1e6:.1f} | {ratio:.2f} | "
                         f"{'yes' if ratio < 2 else 'NO'} | {big['copy'] * 1e6:,.0f} |")
        lines.append("")
    if bridge:
        jit, vg = bridge["jax.jit(f)"], bridge["jax.jit(value_and_grad(f))"]
        lines += ["## as_torch overhead on small inputs", "",
                  "`f(x, w) = tanh(x @ w).sum()` with x, w of 16 x 16 float32; microseconds per "
                  "call (median of loops of 50 calls). Targets: `as_torch(f)` <= 4x `jax.jit(f)`, "
                  "`as_torch(f) + backward` <= 4x `jax.jit(value_and_grad(f))`. The general "
                  "path (what a call with keyword arguments, static arguments, non-CPU or "
                  "strided tensors, or under `torch.func` takes) is shown for comparison; "
                  "`step:` rows time one ingredient of a call alone.", "",
                  "| call | us | ratio | target | met |", "|---|---:|---:|---:|---|"]
        for name, value in bridge.items():
            base = {"as_torch(f)": jit, "as_torch(f), general path": jit,
                    "as_torch(f) + backward": vg,
                    "as_torch(f) + backward, general path": vg}.get(name)
            if base is None:
                lines.append(f"| {name} | {value * 1e6:.1f} | | | |")
                continue
            ratio = value / base
            target = "4.0" if "general" not in name else "-"
            met = ("yes" if ratio <= 4 else "NO") if "general" not in name else "-"
            lines.append(f"| {name} | {value * 1e6:.1f} | {ratio:.2f}x "
                         f"{'jit(f)' if base is jit else 'jit(value_and_grad)'} | {target} "
                         f"| {met} |")
        lines += ["", "Where the general path's time goes: a DLPack import per tensor, then "
                  "JAX's slow dispatch on freshly imported buffers (compare the two `jax.jit(f) "
                  "on ...` steps), `to_torch` per result, the key's flattening and hashing, and "
                  "an `autograd.Function` even without a gradient; its backward recomputes the "
                  "forward inside `jax.vjp`. The fast path (positional CPU tensors, no "
                  "`torch.func`) passes small tensors as NumPy views (the jitted call copies "
                  "them on JAX's C++ dispatch path), returns small results through NumPy, "
                  "keys its cache by the number of tensors, skips the `autograd.Function` when "
                  "nothing needs a gradient, and keeps `jax.vjp`'s residuals from the forward "
                  "for the first backward (one jitted call, no recomputation).", ""]
    if models:
        lines += ["## PyG models: forward + backward", "",
                  f"Synthetic graph of {args.model_nodes:,} nodes, {args.model_edges:,} random "
                  f"edges, {args.features} features (4 edge features for GAT). GCN: 2 x GCNConv "
                  f"(64 hidden, 16 out); GAT: GATConv(4 heads x 8, edge_dim=4) -> ELU -> "
                  f"GATConv(1 head, 16 out). One step = forward, mean(out^2), gradient of every "
                  f"parameter: PyG eager (`loss.backward()`) vs the `from_torch` port under "
                  f"`jax.jit`. Target: ours / PyG <= 0.5.", "",
                  "| model | torch2jax_ops (jit) ms | PyG eager ms | ours / PyG | target | met |",
                  "|---|---:|---:|---:|---:|---|"]
        for r in models:
            t = r["times"]
            ratio = t["ours"] / t["pyg"]
            lines.append(f"| {r['model']} | {t['ours'] * 1e3:.0f} | {t['pyg'] * 1e3:.0f} | "
                         f"{ratio:.2f} | 0.5 | {'yes' if ratio <= 0.5 else 'NO'} |")
        lines.append("")
    if converted:
        lines += ["## Whole models in one call: `from_torch` vs the hand-composed port", "",
                  f"The same two models and graph ({args.model_nodes:,} nodes, "
                  f"{args.model_edges:,} edges), forward + backward under `jax.jit`: the "
                  f"`from_torch` port of the whole torch model (its forward replayed through the "
                  f"fx mapping table while JAX traces) vs an equinox module written by hand "
                  f"around the same ported layers. Target: converted / hand <= 1.05.", "",
                  "| model | converted ms | hand-composed ms | converted / hand | target | met |",
                  "|---|---:|---:|---:|---:|---|"]
        for r in converted["models"]:
            t = r["times"]
            ratio = t["converted"] / t["hand"]
            lines.append(f"| {r['model']} | {t['converted'] * 1e3:.0f} | {t['hand'] * 1e3:.0f} | "
                         f"{ratio:.3f} | 1.05 | {'yes' if ratio <= 1.05 else 'NO'} |")
        met = converted["convert"] < 1.0
        lines += ["", f"Converting a 10-layer model (GCNConv, Linear, LayerNorm and a residual "
                      f"per layer, 40 submodules): `from_torch` {converted['convert'] * 1e3:.0f} ms "
                      f"(target < 1 s: {'met' if met else 'NOT met'}); tracing its forward once "
                      f"(`jax.make_jaxpr`, what jit adds before XLA compiles) "
                      f"{converted['trace'] * 1e3:.0f} ms.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edges", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--nodes", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--out", default=None,
                        help=f"where the markdown goes (default {DEFAULT_OUT}; with --only: "
                             f"stdout)")
    parser.add_argument("--plot", default="benchmarks/scaling.png",
                        help="where the time-vs-E plot goes (next to --out)")
    parser.add_argument("--sweep", default="10000,30000,100000,300000,1000000",
                        help="comma-separated E values for the scaling sweep")
    parser.add_argument("--model-nodes", type=int, default=100_000)
    parser.add_argument("--model-edges", type=int, default=1_000_000)
    parser.add_argument("--exchange-bytes", type=int, default=2**30,
                        help="the large buffer for the to_jax/to_torch timing (1 GB)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke sizes for the parts with fixed sizes (layers, loader, scale)")
    parser.add_argument("--only", default=None,
                        help=f"comma-separated parts to run ({', '.join(PARTS)}); the "
                             f"markdown goes to stdout unless --out is given")
    args = parser.parse_args(argv)
    only = set(PARTS) if args.only is None else set(args.only.split(","))
    unknown = only - set(PARTS)
    if unknown:
        parser.error(f"--only: unknown part(s) {sorted(unknown)}; choose from {PARTS}")
    out = args.out if args.out is not None else (None if args.only else DEFAULT_OUT)
    part = {name: name in only for name in PARTS}
    rows = run(args.edges, args.features, args.nodes, args.repeat) if part["scatter"] else []
    extreme = (run_extreme(args.edges, args.features, args.nodes, args.repeat)
               if part["scatter-extreme"] else [])
    segments = (run_segments(args.edges, args.features, args.nodes, args.repeat)
                if part["segments"] else [])
    sweep = []
    if part["sweep"]:
        sweep = run_sweep([int(e) for e in args.sweep.split(",")], args.features, args.repeat)
        plot(sweep, args.plot)
    small = run_small(args.repeat) if part["small"] else None
    exchange = run_exchange(args.exchange_bytes, args.repeat) if part["exchange"] else []
    bridge = run_as_torch(args.repeat) if part["as-torch"] else None
    models = (run_models(args.model_nodes, args.model_edges, args.features, args.repeat)
              if part["models"] else [])
    converted = (run_converted(args.model_nodes, args.model_edges, args.features, args.repeat)
                 if part["converted"] else None)
    text = markdown(rows, args, segments, sweep, exchange, bridge, models, converted,
                    extreme, small)
    extra: list[str] = []
    if part["layers"]:
        import bench_layers
        extra += ratio_markdown(
            "PyG layers as users' models: GATv2Conv, TransformerConv, PNAConv",
            "Two-layer models ported with one `from_torch` call, forward + backward: the port "
            "under `eqx.filter_jit` vs PyG eager, same weights and graph (100,000 nodes, "
            "1,000,000 edges, 64 features). Target: ours / PyG <= 0.5.",
            bench_layers.run(quick=args.quick), LAYERS_NOTES)
    if part["hetero"]:
        import bench_hetero
        extra += ratio_markdown(
            "Heterogeneous graphs: a two-layer HeteroConv(SAGEConv) model",
            "A user's model on `(x_dict, edge_index_dict)` (PyG's hetero_conv_dblp.py style), "
            "ported with one `from_torch` call, forward + backward: the port under "
            "`eqx.filter_jit` vs PyG eager, same weights and graph (three node types, 100,000 "
            "nodes, five edge types, 1,000,000 edges, 64 features; "
            "benchmarks/bench_hetero.py). Target: ours / PyG <= 0.5.",
            bench_hetero.run(quick=args.quick), HETERO_NOTES)
    if part["loader"]:
        import bench_loader
        extra += ratio_markdown(
            "Training from a PyG DataLoader: JaxLoader + a jitted step vs PyG",
            "One epoch of a 3-layer GIN on 2,000 FakeDataset graphs (batch 64), the two "
            "sides alternating epoch by epoch (benchmarks/bench_loader.py); our step "
            "jits the port's arrays split once from the rest (migration_guide/training.md, "
            "\"A fast step\").",
            bench_loader.run(quick=args.quick), LOADER_NOTES)
    if part["matrix"]:
        import matrix
        sizes, widths = (["10k"], [16]) if args.quick else (["100k", "1M"], list(matrix.WIDTHS))
        families = ["GCN", "GAT"] if args.quick else list(matrix.FAMILIES)
        extra += ["## The speed matrix on the CPU", "",
                  "Every ported conv family as a two-layer user model (`benchmarks/matrix.py`: "
                  "widths, heads and what a step is are in its docstring), ported by "
                  "`from_torch`, fwd+bwd under `jax.jit` vs PyG eager on this machine's "
                  "cores; GB/s is XLA's bytes accessed over our time; **above** marks a row "
                  "over its line (0.5 of PyG; GAT at 4x64 and 1x256: 0.3).", ""]
        extra += matrix.markdown(matrix.run(sizes, families, widths, "cpu",
                                            1 if args.quick else 5))
    if part["scale"]:
        import bench_scale
        extra += scale_markdown(bench_scale.run(quick=args.quick))
    if extra:
        text = text.rstrip("\n") + "\n\n" + "\n".join(extra)
    if out is None:
        print(text)
        return 0
    text = _keep_gpu_section(text, out)
    with open(out, "w") as handle:
        handle.write(text)
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
