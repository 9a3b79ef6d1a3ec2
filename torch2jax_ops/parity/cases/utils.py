"""Parity cases of the ``torch_geometric.utils`` functions models call (section "utils").

Each case runs :func:`~torch2jax_ops.parity.compare` on a PyG function and its
port over the same graph: integer outputs (edge indices, masks, node lists)
exactly, float outputs (merged edge attributes, dense adjacencies, scattered
values) within the dtype's tolerance, and the gradients w.r.t. the float
inputs (edge weights ``[E]`` and edge attributes ``[E, 3]``). Graphs (from
``torch2jax_ops.parity.cases.geometric``): ``loops-and-repeats`` (8 nodes, self-loops,
a repeated edge, isolated nodes), KarateClub, a seeded 4-graph FakeDataset
batch, a directed Erdos-Renyi graph, and no edges at all; float32 and float64.

The ``*_static`` forms run under ``jax.jit`` and are compared after the
documented recovery outside jit (slice the first ``count`` slots, or keep the
masked ones), so each pins both the static layout and PyG's values. The
random functions (``dropout_edge``/``dropout_node``/``negative_sampling``) are
compared exactly where PyG is deterministic: ``training=False``, ``p=0``,
``p=1``, and negative sampling whose over-sample covers every pair; their
distributions are tested in ``parity_tests/test_utils_parity.py``.

The suite runs a case's port under ``jax.jit`` (:meth:`Case.run`); the functions in
:data:`AS_CALLED` run as called instead: PyG's forms whose output size depends on the
data, and the ``*_static`` cases, which jit the function themselves and recover the
result outside jit.
"""
from __future__ import annotations

from typing import Callable, Iterable

import numpy as np

from torch2jax_ops.parity._suite import Case, register

WIDE = ("float32", "float64")
#: an option variant runs on the small graph; the main form of each function on two or more
ONE = ("loops-and-repeats",)
SMALL = ("loops-and-repeats", "karate")
ALL = ("loops-and-repeats", "karate", "fake", "erdos_renyi", "no-edges")
#: ops (a case's ``op``) whose cases run the port as called, not under the suite's jit
AS_CALLED = frozenset({
    "coalesce", "to_undirected", "subgraph", "dropout_edge", "dropout_node",
    "negative_sampling", "k_hop_subgraph", "coalesce_static", "to_undirected_static",
    "subgraph_static", "negative_sampling_static", "k_hop_subgraph_static"})


def options_for(op: str) -> dict:
    """A case's options: ``jit=False`` for the ops in :data:`AS_CALLED`."""
    return {"jit": False} if op in AS_CALLED else {}


def _graph(name: str, dtype: str) -> dict:
    from torch2jax_ops.parity.cases.geometric import graph
    return graph(name, dtype, features=4, edge_dim=3)


def _jit(fn: Callable, *static: int) -> Callable:
    import jax
    return jax.jit(fn, static_argnums=static)


# -------------------------------------------------- pairs over (ew, ea, ei, n) -> tensors

def _edge_pairs() -> dict:
    """label -> (torch fn, jax fn, graphs); both take (edge_weight, edge_attr, edge_index, N)."""
    import jax
    import jax.numpy as jnp
    import torch_geometric.utils as U

    from torch2jax_ops.geometric import utils as G

    pairs: dict = {}

    # scatter: PyG 2.x's own reduce names, over edges into target nodes
    for reduce in ("sum", "add", "mean", "mul", "min", "max", "amin", "amax"):
        pairs[f"scatter-{reduce}"] = (
            lambda ew, ea, ei, n, r=reduce: U.scatter(ea, ei[1], 0, n, r),
            lambda ew, ea, ei, n, r=reduce: G.scatter(ea, ei[1], 0, n, r),
            ALL if reduce == "sum" else SMALL if reduce in ("mean", "max") else ONE)
    pairs["scatter-mean-dim-1"] = (
        lambda ew, ea, ei, n: U.scatter(ea.T * 1.0, ei[0], -1, n, "mean"),
        lambda ew, ea, ei, n: G.scatter(ea.T * 1.0, ei[0], -1, n, "mean"), ONE)
    # a mean of integers is PyG's true division (float32), not a floor
    pairs["scatter-mean-int"] = (
        lambda ew, ea, ei, n: U.scatter(ei[0] * 3 + 1, ei[1], 0, n, "mean"),
        lambda ew, ea, ei, n: G.scatter(ei[0] * 3 + 1, ei[1], 0, n, "mean"), ONE)
    # ties after a ReLU: torch's scatter_reduce_ splits the gradient among tied maxima
    pairs["scatter-amax-relu-ties"] = (
        lambda ew, ea, ei, n: U.scatter(ea.relu(), ei[1], 0, n, "amax"),
        lambda ew, ea, ei, n: G.scatter(jax.nn.relu(ea), ei[1], 0, n, "amax"), ONE)

    # sort_edge_index: stable, by row or by column; attributes follow
    for by_row in (True, False):
        tag = "row" if by_row else "col"
        pairs[f"sort_edge_index-{tag}"] = (
            lambda ew, ea, ei, n, b=by_row: U.sort_edge_index(ei, ea, n, b),
            lambda ew, ea, ei, n, b=by_row: G.sort_edge_index(ei, ea, n, b),
            ALL if by_row else ONE)
    pairs["sort_edge_index-list"] = (
        lambda ew, ea, ei, n: U.sort_edge_index(ei, [ew, ea]),
        lambda ew, ea, ei, n: G.sort_edge_index(ei, [ew, ea]), ONE)
    pairs["sort_edge_index-no-attr"] = (
        lambda ew, ea, ei, n: U.sort_edge_index(ei, num_nodes=n),
        lambda ew, ea, ei, n: _jit(lambda e: G.sort_edge_index(e))(ei), ONE)

    # coalesce: every reduce, by column, the is_sorted quirk, no/list attributes, static form
    for reduce in ("sum", "mean", "min", "max", "mul", "amax"):
        pairs[f"coalesce-{reduce}"] = (
            lambda ew, ea, ei, n, r=reduce: U.coalesce(ei, ea, n, r),
            lambda ew, ea, ei, n, r=reduce: G.coalesce(ei, ea, n, r),
            ALL if reduce == "sum" else SMALL if reduce == "mean" else ONE)
    pairs["coalesce-by-col"] = (
        lambda ew, ea, ei, n: U.coalesce(ei, ew, n, "mean", sort_by_row=False),
        lambda ew, ea, ei, n: G.coalesce(ei, ew, n, "mean", sort_by_row=False), ONE)
    # is_sorted=True on unsorted edges: an edge smaller than its predecessor merges into it
    pairs["coalesce-is-sorted-quirk"] = (
        lambda ew, ea, ei, n: U.coalesce(ei, ea, n, is_sorted=True),
        lambda ew, ea, ei, n: G.coalesce(ei, ea, n, is_sorted=True), ONE)
    pairs["coalesce-no-attr"] = (lambda ew, ea, ei, n: U.coalesce(ei),
                                 lambda ew, ea, ei, n: G.coalesce(ei), ONE)
    pairs["coalesce-list"] = (lambda ew, ea, ei, n: U.coalesce(ei, [ew, ea], n, "max"),
                              lambda ew, ea, ei, n: G.coalesce(ei, [ew, ea], n, "max"), ONE)

    def coalesce_static(ew, ea, ei, n, reduce):
        out, attr = _jit(lambda e, a: G.coalesce_static(e, a, n, reduce))(ei, ea)
        count = int((np.asarray(out[0]) < n).sum())
        return out[:, :count], attr[:count]

    for reduce in ("sum", "mean", "max"):
        pairs[f"coalesce_static-{reduce}"] = (
            lambda ew, ea, ei, n, r=reduce: U.coalesce(ei, ea, n, r),
            lambda ew, ea, ei, n, r=reduce: coalesce_static(ew, ea, ei, n, r),
            ("loops-and-repeats", "fake") if reduce == "sum" else ONE)

    # to_undirected: reduce add/mean/max, no attribute, the int-as-num_nodes quirk, static form
    for reduce in ("add", "mean", "max"):
        pairs[f"to_undirected-{reduce}"] = (
            lambda ew, ea, ei, n, r=reduce: U.to_undirected(ei, ew, n, r),
            lambda ew, ea, ei, n, r=reduce: G.to_undirected(ei, ew, n, r),
            ("loops-and-repeats", "erdos_renyi", "no-edges") if reduce == "add" else ONE)
    pairs["to_undirected-no-attr"] = (lambda ew, ea, ei, n: U.to_undirected(ei),
                                      lambda ew, ea, ei, n: G.to_undirected(ei), ONE)
    pairs["to_undirected-int-num-nodes-quirk"] = (
        lambda ew, ea, ei, n: U.to_undirected(ei, n + 3),
        lambda ew, ea, ei, n: G.to_undirected(ei, n + 3), ONE)

    def to_undirected_static(ew, ea, ei, n):
        out, attr = _jit(lambda e, a: G.to_undirected_static(e, a, n, "mean"))(ei, ea)
        count = int((np.asarray(out[0]) < n).sum())
        return out[:, :count], attr[:count]

    pairs["to_undirected_static"] = (lambda ew, ea, ei, n: U.to_undirected(ei, ea, n, "mean"),
                                     to_undirected_static, SMALL)

    # subgraph: index or mask subset, relabelled or not, with attributes and the edge mask
    def subset_index(n):
        return [i for i in range(n) if i % 3 != 1]

    for kind in ("index", "mask"):
        for relabel in (False, True):
            label = f"subgraph-{kind}{'-relabel' if relabel else ''}"

            def theirs(ew, ea, ei, n, kind=kind, relabel=relabel):
                import torch
                sub = torch.tensor(subset_index(n)[::-1])  # reversed: relabel follows subset
                if kind == "mask":
                    sub = torch.zeros(n, dtype=torch.bool).index_fill_(0, sub, True)
                return U.subgraph(sub, ei, ea, relabel, n, return_edge_mask=True)

            def ours(ew, ea, ei, n, kind=kind, relabel=relabel):
                sub = jnp.asarray(subset_index(n)[::-1])
                if kind == "mask":
                    sub = jnp.zeros(n, bool).at[sub].set(True)
                return G.subgraph(sub, ei, ea, relabel, n, return_edge_mask=True)

            pairs[label] = (theirs, ours, ALL if (kind, relabel) == ("index", False) else ONE)

            def ours_static(ew, ea, ei, n, kind=kind, relabel=relabel):
                sub = jnp.asarray(subset_index(n)[::-1])
                if kind == "mask":
                    sub = jnp.zeros(n, bool).at[sub].set(True)
                out, attr, mask = _jit(lambda s, e, a: G.subgraph_static(
                    s, e, a, relabel, n, return_edge_mask=True))(sub, ei, ea)
                keep = np.flatnonzero(np.asarray(mask))
                return out[:, keep], attr[keep], mask

            pairs[label.replace("subgraph", "subgraph_static")] = (
                theirs, ours_static, SMALL if (kind, relabel) == ("mask", True) else ONE)
    pairs["subgraph-list-subset"] = (
        lambda ew, ea, ei, n: U.subgraph([0, 1, 2, 3], ei, ew, True, n),
        lambda ew, ea, ei, n: G.subgraph([0, 1, 2, 3], ei, ew, True, n), ONE)

    # to_dense_adj of one graph: weights, vector attributes, truncation to max_num_nodes
    pairs["to_dense_adj"] = (lambda ew, ea, ei, n: U.to_dense_adj(ei),
                             lambda ew, ea, ei, n: G.to_dense_adj(ei), ONE)
    pairs["to_dense_adj-weighted"] = (lambda ew, ea, ei, n: U.to_dense_adj(ei, None, ew),
                                      lambda ew, ea, ei, n: G.to_dense_adj(ei, None, ew), SMALL)
    pairs["to_dense_adj-attr-truncated"] = (
        lambda ew, ea, ei, n: U.to_dense_adj(ei, None, ea, max_num_nodes=5, batch_size=2),
        lambda ew, ea, ei, n: _jit(lambda e, a: G.to_dense_adj(
            e, None, a, max_num_nodes=5, batch_size=2))(ei, ea), ("loops-and-repeats", "no-edges"))

    # dropout: deterministic settings only (training=False, p=0, p=1)
    key = jax.random.key(0)
    for p, training, fu in ((0.5, False, False), (0.0, True, True), (1.0, True, False),
                            (1.0, True, True)):
        label = f"dropout_edge-p{p}-{'train' if training else 'eval'}{'-undirected' * fu}"
        pairs[label] = (
            lambda ew, ea, ei, n, p=p, t=training, fu=fu: U.dropout_edge(ei, p, fu, t),
            lambda ew, ea, ei, n, p=p, t=training, fu=fu: G.dropout_edge(ei, p, fu, t, key=key),
            SMALL if not training else ONE)
    for p, training, relabel in ((0.5, False, False), (0.0, True, True), (1.0, True, True)):
        label = f"dropout_node-p{p}-{'train' if training else 'eval'}{'-relabel' * relabel}"
        pairs[label] = (
            lambda ew, ea, ei, n, p=p, t=training, r=relabel: U.dropout_node(ei, p, n, t, r),
            lambda ew, ea, ei, n, p=p, t=training, r=relabel: G.dropout_node(ei, p, n, t, r,
                                                                             key=key), ONE)
    pairs["dropout_node_static-p1"] = (
        lambda ew, ea, ei, n: U.dropout_node(ei, 1.0, n)[1:],
        lambda ew, ea, ei, n: _jit(lambda e, k: G.dropout_node_static(e, 1.0, n, key=k)[1:])(
            ei, key), ONE)

    # negative sampling where PyG's over-sample covers every pair (deterministic): the
    # first k non-edges in pair order, exactly
    for label, size, fu in (("negative_sampling-all-pairs", None, False),
                            ("negative_sampling-all-pairs-undirected", None, True),
                            ("negative_sampling-all-pairs-bipartite", "bipartite", False)):
        def theirs(ew, ea, ei, n, size=size, fu=fu):
            nodes = (n, n + 2) if size else n
            return U.negative_sampling(ei, nodes, 4 * n * n, "sparse", fu)

        def ours(ew, ea, ei, n, size=size, fu=fu):
            nodes = (n, n + 2) if size else n
            return G.negative_sampling(ei, nodes, 4 * n * n, "dense", fu, key=key)

        pairs[label] = (theirs, ours, SMALL if size is None and not fu else ONE)
    pairs["negative_sampling_static-all-pairs"] = (
        lambda ew, ea, ei, n: U.negative_sampling(ei, n, 4 * n * n),
        lambda ew, ea, ei, n: _static_negatives(ei, n, key), SMALL)
    return pairs


def _static_negatives(ei, n, key):
    import jax

    from torch2jax_ops.geometric import utils as G

    out = jax.jit(lambda e, k: G.negative_sampling_static(e, n, 4 * n * n, key=k))(ei, key)
    return out[:, np.flatnonzero(np.asarray(out[0]) < n)]


# ----------------------------------------------------------- k-hop neighbourhoods (ints)

def _k_hop_pairs() -> dict:
    import jax.numpy as jnp
    import torch
    import torch_geometric.utils as U

    from torch2jax_ops.geometric import utils as G

    pairs: dict = {}
    variants = ((1, "source_to_target", False, False, SMALL),
                (2, "source_to_target", False, True, ONE),
                (2, "target_to_source", False, False, ONE),
                (1, "source_to_target", True, False, ONE),
                (2, "target_to_source", True, True, ONE))
    for hops, flow, directed, relabel, graphs in variants:
        label = (f"k_hop_subgraph-{hops}-{flow.split('_')[0]}"
                 f"{'-directed' * directed}{'-relabel' * relabel}")
        pairs[label] = (
            lambda ew, ea, ei, n, h=hops, f=flow, d=directed, r=relabel:
                U.k_hop_subgraph(torch.tensor([1, 3]), h, ei, r, n, f, d),
            lambda ew, ea, ei, n, h=hops, f=flow, d=directed, r=relabel:
                G.k_hop_subgraph(jnp.asarray([1, 3]), h, ei, r, n, f, d), graphs)

    def static(ew, ea, ei, n):
        mask, out, mapping, edge_mask = _jit(lambda e: G.k_hop_subgraph_static(
            [0], 2, e, True, n))(ei)
        keep = np.flatnonzero(np.asarray(edge_mask))
        return jnp.flatnonzero(mask), out[:, keep], mapping, edge_mask

    pairs["k_hop_subgraph_static-2-relabel"] = (
        lambda ew, ea, ei, n: U.k_hop_subgraph(0, 2, ei, True, n), static, SMALL)
    pairs["k_hop_subgraph-int-node"] = (lambda ew, ea, ei, n: U.k_hop_subgraph(5, 3, ei),
                                        lambda ew, ea, ei, n: G.k_hop_subgraph(5, 3, ei), ONE)
    return pairs


# ------------------------------------------------------------ batched: to_dense_adj, segment

def _batch_pairs() -> dict:
    """label -> (torch fn, jax fn) over (edge_weight, edge_attr, edge_index, batch, B)."""
    import torch_geometric.utils as U

    from torch2jax_ops.geometric import utils as G

    return {
        "to_dense_adj-batch": (lambda ew, ea, ei, b, s: U.to_dense_adj(ei, b, ew),
                               lambda ew, ea, ei, b, s: G.to_dense_adj(ei, b, ew)),
        "to_dense_adj-batch-attr": (lambda ew, ea, ei, b, s: U.to_dense_adj(ei, b, ea),
                                    lambda ew, ea, ei, b, s: G.to_dense_adj(ei, b, ea)),
        "to_dense_adj-batch-jit-truncated": (
            lambda ew, ea, ei, b, s: U.to_dense_adj(ei, b, ew, 6, s + 1),
            lambda ew, ea, ei, b, s: _jit(lambda e, bb, w: G.to_dense_adj(e, bb, w, 6, s + 1))(
                ei, b, ew)),
    }


def _segment_args(g: dict) -> tuple:
    """(edge_attr sorted by target, ptr over the N targets: isolated nodes -> empty)."""
    import torch

    target = g["edge_index"][1]
    order = torch.argsort(target, stable=True)
    counts = torch.bincount(target, minlength=g["num_nodes"])
    ptr = torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)])
    return g["edge_attr"][order].contiguous(), ptr


@register("utils")
def utils_cases() -> Iterable[Case]:
    import torch_geometric.utils as U

    from torch2jax_ops.geometric import utils as G

    for table in (_edge_pairs, _k_hop_pairs):
        for label, entry in table().items():
            graphs = entry[2]
            for dtype in WIDE:
                for name in graphs:
                    def build(table=table, label=label, dtype=dtype, name=name):
                        theirs, ours = table()[label][:2]
                        g = _graph(name, dtype)
                        args = (g["edge_weight"], g["edge_attr"], g["edge_index"],
                                g["num_nodes"])
                        return theirs, ours, args, {}, options_for(label.split("-")[0])
                    yield Case("utils", label.split("-")[0], dtype, f"{label}/{name}", build)
    for label in _batch_pairs():
        for dtype in WIDE:
            def build(label=label, dtype=dtype):
                theirs, ours = _batch_pairs()[label]
                g = _graph("fake", dtype)
                b = g["batch"]
                args = (g["edge_weight"], g["edge_attr"], g["edge_index"], b, int(b.max()) + 1)
                return theirs, ours, args, {}, {}
            yield Case("utils", label.split("-")[0], dtype, f"{label}/fake", build)
    for reduce in ("sum", "add", "mean", "min", "max"):
        for dtype in WIDE:
            for name in (("loops-and-repeats", "karate", "no-edges") if reduce == "sum" else ONE):
                def build(reduce=reduce, dtype=dtype, name=name):
                    src, ptr = _segment_args(_graph(name, dtype))
                    return (lambda s, p: U.segment(s, p, reduce),
                            lambda s, p: G.segment(s, p, reduce), (src, ptr), {}, {})
                yield Case("utils", "segment", dtype, f"segment-{reduce}/{name}", build)
