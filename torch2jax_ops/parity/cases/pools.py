"""Parity cases of PyG's pooling layers (section "pools"): TopKPooling, SAGPooling,
JumpingKnowledge, global_sort_pool, and torch.nn.Embedding.

The ports of TopKPooling / SAGPooling keep a static node budget (kept nodes
first, padding after, see ``torch2jax_ops.geometric.nn.pool._topk``): a case
runs the port under ``jax.jit`` with ``num_graphs`` and compares PyG's
outputs with the first ``K`` rows / ``E_kept`` edges of the port's (``K`` and
``E_kept`` read off PyG's result), indices exactly, values and gradients (by
parameter name, and w.r.t. ``x``, ``edge_attr``, ``attn``) within the dtype
tolerances. Graphs: the small hand-made graph with self-loops, repeated edges
and isolated nodes, KarateClub, the seeded FakeDataset batch of 4 graphs, and
two quirk graphs: "ties" (a batch whose 40-node graph has only 3 distinct
feature rows: tied scores, ordered as torch's unstable CPU sort orders them)
and "ratio25" (a 25-node graph: ``ceil(0.6 * 25)`` is 16 in float32, 15 in
float64, as PyG computes ``k`` in the scores' dtype).
"""
from __future__ import annotations

import random
import warnings
from typing import Any, Iterable

import equinox as eqx
import numpy as np

from torch2jax_ops import dtypes
from torch2jax_ops.parity._suite import Case, register

WIDE = ("float32", "float64")
C = 5


# --------------------------------------------------------------------------- inputs

def pool_graph(name: str, dtype: str) -> dict:
    """x, edge_index, edge_attr, batch (or None), num_graphs, attn as torch tensors."""
    import torch

    from torch2jax_ops.parity.cases.geometric import graph

    rng = np.random.default_rng(7)
    tdt = dtypes.torch_dtype(dtype)
    if name in ("loops-and-repeats", "karate", "fake"):
        random.seed(0)  # FakeDataset draws the graph sizes with `random`
        g = graph(name, dtype, features=C)
        x, ei, ea = g["x"], g["edge_index"], g["edge_attr"]
        batch = g.get("batch")
        b = 1 if batch is None else int(batch.max()) + 1
    elif name == "ties":  # 40 + 9 nodes; graph 0 has 3 distinct rows only
        rows = rng.standard_normal((3, C))
        x0 = rows[rng.integers(0, 3, 40)]
        x = torch.tensor(np.concatenate([x0, rng.standard_normal((9, C))])).to(tdt)
        batch = torch.tensor([0] * 40 + [1] * 9)
        ei = torch.tensor(np.concatenate([rng.integers(0, 40, (2, 90)),
                                          rng.integers(40, 49, (2, 20))], axis=1))
        ea = torch.tensor(rng.standard_normal((110, 3))).to(tdt)
        b = 2
    elif name == "ratio25":  # graph sizes 7, 25, 1
        x = torch.tensor(rng.standard_normal((33, C))).to(tdt)
        batch = torch.tensor([0] * 7 + [1] * 25 + [2])
        ei = torch.tensor(np.concatenate([rng.integers(0, 7, (2, 15)),
                                          rng.integers(7, 32, (2, 60))], axis=1))
        ea = torch.tensor(rng.standard_normal((75, 3))).to(tdt)
        b = 3
    else:
        raise KeyError(name)
    attn = torch.tensor(rng.standard_normal((x.shape[0], 3))).to(tdt)
    return {"x": x, "edge_index": ei.long(), "edge_attr": ea, "batch": batch, "num_graphs": b,
            "attn": attn}


# ------------------------------------------------------------------ TopK / SAG pooling

def pool_layers() -> dict:
    """label -> (make the PyG layer, graphs, call inputs: which of edge_attr/batch/attn)."""
    import torch_geometric.nn as tnn

    all_graphs = ("loops-and-repeats", "fake")
    return {
        "TopKPooling": (lambda: tnn.TopKPooling(C), all_graphs + ("ties",), "ea,batch"),
        "TopKPooling-no-batch": (lambda: tnn.TopKPooling(C, 0.3), ("loops-and-repeats",
                                                                   "karate"), ""),
        "TopKPooling-ratio-int": (lambda: tnn.TopKPooling(C, 3), ("ties",), "batch"),
        # ratio >= 1 is an absolute k: ratio=1.0 keeps ONE node per graph
        "TopKPooling-ratio-1.0": (lambda: tnn.TopKPooling(C, 1.0), ("fake",), "batch"),
        "TopKPooling-ratio-0.6": (lambda: tnn.TopKPooling(C, 0.6), ("ratio25",), "ea,batch"),
        "TopKPooling-min-score": (lambda: tnn.TopKPooling(C, min_score=0.1), ("ratio25",),
                                  "ea,batch"),
        "TopKPooling-multiplier-sigmoid": (
            lambda: tnn.TopKPooling(C, 0.5, multiplier=2.5, nonlinearity="sigmoid"),
            ("fake",), "batch"),
        "TopKPooling-attn": (lambda: tnn.TopKPooling(3, 0.5), ("fake",), "ea,batch,attn"),
        "SAGPooling": (lambda: tnn.SAGPooling(C), all_graphs + ("ties",), "ea,batch"),
        "SAGPooling-gcn": (lambda: tnn.SAGPooling(C, 0.4, GNN=tnn.GCNConv), ("karate",),
                           "batch"),
        "SAGPooling-gat-min-score": (
            lambda: tnn.SAGPooling(C, GNN=tnn.GATConv, min_score=0.2, heads=1),
            ("fake",), "ea,batch"),
        "SAGPooling-mean-ratio-int": (lambda: tnn.SAGPooling(C, 4, aggr="mean", multiplier=0.5),
                                      ("ratio25",), "batch"),
        "SAGPooling-attn-tanh-1d": (lambda: tnn.SAGPooling(1, 0.5, nonlinearity="tanh"),
                                    ("fake",), "batch,attn1d"),
    }


class TorchPool:
    """Builds the torch wrapper: ``pool``'s outputs without the ``None`` entries."""

    @staticmethod
    def make(pool):
        import torch

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.pool = pool

            def forward(self, x, edge_index, edge_attr=None, batch=None, attn=None,
                        num_graphs=None):
                out = self.pool(x, edge_index, edge_attr, batch, attn)
                return tuple(o for o in out if o is not None)

        return Wrapped()


class SlicedPool(eqx.Module):
    """The port under the name ``pool``, its static outputs cut to PyG's sizes."""
    pool: Any
    kept: int = eqx.field(static=True)
    kept_edges: int = eqx.field(static=True)

    def __call__(self, x, edge_index, edge_attr=None, batch=None, attn=None, num_graphs=None):
        x, ei, ea, b, perm, score = self.pool(x, edge_index, edge_attr, batch, attn,
                                              num_graphs=num_graphs)
        k, e = self.kept, self.kept_edges
        out = [x[:k], ei[:, :e], None if ea is None else ea[:e], None if b is None else b[:k],
               perm[:k], score[:k]]
        return tuple(o for o in out if o is not None)


def pool_call(label: str, gname: str, dtype: str) -> tuple:
    """(args, kwargs) for the wrapped layer ``label`` on graph ``gname``."""
    _, _, use = pool_layers()[label]
    g = pool_graph(gname, dtype)
    use = use.split(",")
    attn = None
    if "attn" in use:
        attn = g["attn"]
    elif "attn1d" in use:
        attn = g["attn"][:, 0].contiguous()
    batch = g["batch"] if "batch" in use else None
    args = (g["x"], g["edge_index"], g["edge_attr"] if "ea" in use else None, batch, attn)
    return args, {"num_graphs": None if batch is None else g["num_graphs"]}


def build_pool(label: str, dtype: str):
    import torch

    from torch2jax_ops.parity.cases.geometric import _perturbed

    torch.manual_seed(0)
    return _perturbed(pool_layers()[label][0](), 1).to(dtypes.torch_dtype(dtype))


def pool_pair(label: str, gname: str, dtype: str) -> tuple:
    """(torch wrapper, JAX wrapper, args, kwargs) of one case."""
    import torch

    from torch2jax_ops.nn import from_torch

    pool = build_pool(label, dtype)
    args, kwargs = pool_call(label, gname, dtype)
    with torch.no_grad():
        ref = pool(*args)
    wrapped = TorchPool.make(pool)
    port = SlicedPool(from_torch(pool, copy=True), int(ref[0].shape[0]), int(ref[1].shape[1]))
    return wrapped, port, args, kwargs


@register("pools")
def pool_cases() -> Iterable[Case]:
    for label, (_, graphs, _) in pool_layers().items():
        for gname in graphs:
            for dtype in WIDE:
                def build(label=label, gname=gname, dtype=dtype):
                    wrapped, port, args, kwargs = pool_pair(label, gname, dtype)
                    return wrapped, port, args, kwargs, {}
                yield Case("pools", label.split("-")[0], dtype, f"{label}/{gname}", build)


# ------------------------------------------------------------------ JumpingKnowledge

def jk_inputs(kind: str, dtype: str) -> tuple:
    """Three layers' node features; "ties" repeats entries across layers (max's gradient)."""
    import torch

    rng = np.random.default_rng(11)
    xs = [rng.standard_normal((20, 4)) for _ in range(3)]
    if kind == "ties":
        xs[1][:10] = xs[0][:10]
        xs[2][5:15] = xs[1][5:15]
    return tuple(torch.tensor(a).to(dtypes.torch_dtype(dtype)) for a in xs)


def jk_wrappers(jk, port) -> tuple:
    import torch

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.jk = jk

        def forward(self, *xs):
            return self.jk(list(xs))

    class Ported(eqx.Module):
        jk: Any

        def __call__(self, *xs):
            return self.jk(list(xs))

    return Wrapped(), Ported(port)


@register("pools")
def jk_cases() -> Iterable[Case]:
    variants = {"cat": ("plain",), "max": ("plain", "ties"), "lstm": ("plain",)}
    for mode, kinds in variants.items():
        for kind in kinds:
            for dtype in WIDE:
                def build(mode=mode, kind=kind, dtype=dtype):
                    import torch
                    import torch_geometric.nn as tnn

                    from torch2jax_ops.parity.cases.geometric import _perturbed
                    from torch2jax_ops.nn import from_torch

                    torch.manual_seed(0)
                    jk = tnn.JumpingKnowledge(mode, 4, 3) if mode == "lstm" else \
                        tnn.JumpingKnowledge(mode)
                    jk = _perturbed(jk, 2).to(dtypes.torch_dtype(dtype))
                    wrapped, ported = jk_wrappers(jk, from_torch(jk, copy=True))
                    return wrapped, ported, jk_inputs(kind, dtype), {}, {}
                yield Case("pools", "JumpingKnowledge", dtype, f"{mode}/{kind}", build)


# ------------------------------------------------------------------ global_sort_pool

def sort_inputs(kind: str, dtype: str) -> tuple:
    """(x, batch or None, num_graphs)."""
    import torch

    rng = np.random.default_rng(5)
    tdt = dtypes.torch_dtype(dtype)
    if kind == "fake":
        from torch2jax_ops.parity.cases.geometric import graph
        random.seed(0)
        g = graph("fake", dtype, features=C)
        return g["x"], g["batch"], int(g["batch"].max()) + 1
    if kind == "single":
        return torch.tensor(rng.standard_normal((9, C))).to(tdt), None, 1
    if kind == "ties":  # last channel with many ties in a 30-node graph
        x = rng.standard_normal((36, C))
        x[:30, -1] = rng.integers(0, 3, 30)
        return torch.tensor(x).to(tdt), torch.tensor([0] * 30 + [1] * 6), 2
    if kind == "fill-rounds":  # float32: x.min() - 1 == x.min(), so PyG zeroes the minima
        x = 1e8 + rng.integers(0, 64, (12, C)) * 8.0
        x[3, 2] = x[7, 0] = 1e8
        return torch.tensor(x).to(tdt), torch.tensor([0] * 5 + [1] * 7), 2
    raise KeyError(kind)


@register("pools")
def sort_pool_cases() -> Iterable[Case]:
    variants = (("fake", 6), ("fake", 20), ("single", 4), ("single", 12), ("ties", 10),
                ("fill-rounds", 6))
    for kind, k in variants:
        for dtype in WIDE:
            def build(kind=kind, k=k, dtype=dtype):
                from torch_geometric.nn import global_sort_pool as t_sort_pool

                from torch2jax_ops.geometric.nn.pool import global_sort_pool

                x, batch, b = sort_inputs(kind, dtype)

                def theirs(x, batch):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        return t_sort_pool(x, batch, k)

                def ours(x, batch):
                    return global_sort_pool(x, batch, k, size=b)
                return theirs, ours, (x, batch), {}, {}
            yield Case("pools", "global_sort_pool", dtype, f"{kind}/k={k}", build)


# ------------------------------------------------------------------ torch.nn.Embedding

def embedding_variants() -> dict:
    import torch

    return {
        "plain": lambda: torch.nn.Embedding(10, 4),
        "padding_idx": lambda: torch.nn.Embedding(10, 4, padding_idx=2),
        "padding_idx-negative": lambda: torch.nn.Embedding(10, 4, padding_idx=-1),
        "scale_grad_by_freq": lambda: torch.nn.Embedding(10, 4, padding_idx=0,
                                                         scale_grad_by_freq=True),
    }


@register("pools")
def embedding_cases() -> Iterable[Case]:
    for label in embedding_variants():
        for dtype in WIDE:
            def build(label=label, dtype=dtype):
                import torch

                from torch2jax_ops.nn import from_torch

                torch.manual_seed(0)
                emb = embedding_variants()[label]().to(dtypes.torch_dtype(dtype))
                ids = torch.tensor([[0, 2, 9, 2], [2, 2, 5, 0], [9, 1, 3, 3]])
                return emb, from_torch(emb, copy=True), (ids,), {}, {}
            yield Case("pools", "Embedding", dtype, label, build)
