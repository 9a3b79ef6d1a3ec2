"""Parity cases of the propagation and spectral convs (section "convs") and PyG's
``get_laplacian`` (section "geometric").

Layers: SGConv, TAGConv, ChebConv, APPNP, GCN2Conv, ARMAConv, MixHopConv, DNAConv,
LEConv, ClusterGCNConv, each with the option variants that change its math
(edge weights, self-loops, normalisation, bias, hops, stacks, heads/groups,
bipartite input, ``aggr``), on a small graph with self-loops, repeated edges,
isolated nodes and one-way edges ("loops-and-repeats") and on KarateClub
(ChebConv also on a directed Erdos-Renyi graph, where its out-degree
Laplacian differs from gcn_norm's in-degrees), in float32 and float64. Every
case runs :func:`~torch2jax_ops.parity.compare_modules` on the PyG layer in
eval mode and its ``from_torch`` port: the output, the gradient of each
parameter by its ``state_dict`` name, and the gradients w.r.t. the floating
inputs (``x``, ``edge_weight``, ``x_0``, ``lambda_max``).
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from torch2jax_ops import dtypes
from torch2jax_ops.parity._suite import Case, register

WIDE = ("float32", "float64")
GRAPHS = ("loops-and-repeats", "karate")
#: directed (out- and in-degrees differ), symmetric, loops and repeats, no edges at all
LAPLACIAN_GRAPHS = ("erdos_renyi", "karate", "loops-and-repeats", "no-edges")
F_IN, F_OUT = 6, 4


def _graph(name: str, dtype: str) -> dict:
    from torch2jax_ops.parity.cases.geometric import graph
    return graph(name, dtype, features=F_IN)


def _like(g: dict, shape: tuple, seed: int):
    """A seeded standard-normal tensor of ``g``'s float dtype."""
    import torch

    rng = np.random.default_rng(seed)
    return torch.as_tensor(rng.standard_normal(shape)).to(g["x"].dtype)


def _perturbed(module, seed: int):
    from torch2jax_ops.parity.cases.geometric import _perturbed as perturbed
    return perturbed(module, seed)


# ---------------------------------------------------------------- inputs per variant

def plain(g):  # x, edge_index
    return (g["x"], g["edge_index"])


def weighted(g):  # x, edge_index, edge_weight
    return (g["x"], g["edge_index"], g["edge_weight"])


def batched_lambda(g):
    """ChebConv's (x, edge_index, edge_weight, batch, lambda_max [2]): two 'graphs' whose
    edges cross (lambda_max is read at the source node, PyG's rule)."""
    import torch

    n = g["num_nodes"]
    batch = torch.arange(n) * 2 // n
    lam = torch.tensor([1.7, 2.6]).to(g["x"].dtype)
    return (g["x"], g["edge_index"], g["edge_weight"], batch, lam)


def number_lambda(g):  # a Python float lambda_max (PyG: torch.tensor(v, dtype=x.dtype))
    return (g["x"], g["edge_index"], g["edge_weight"], None, 1.5)


def with_x0(g):  # GCN2Conv: x, x_0, edge_index, edge_weight
    return (g["x"], _like(g, tuple(g["x"].shape), 3), g["edge_index"], g["edge_weight"])


def with_longer_x0(g):  # PyG uses x_0[:N]: a longer x_0 is sliced
    n = g["num_nodes"]
    return (g["x"], _like(g, (n + 3, F_IN), 3), g["edge_index"], g["edge_weight"])


def history(g):  # DNAConv: x [N, L=3, C], edge_index, edge_weight
    n = g["num_nodes"]
    return (_like(g, (n, 3, F_IN), 4), g["edge_index"], g["edge_weight"])


def history_plain(g):
    n = g["num_nodes"]
    return (_like(g, (n, 3, F_IN), 4), g["edge_index"])


def bipartite(g):
    """LEConv: (x_src [N + 2, 6], x_dst [N, 5]), edge_index, edge_weight."""
    n = g["num_nodes"]
    return ((_like(g, (n + 2, F_IN), 5), _like(g, (n, 5), 6)), g["edge_index"], g["edge_weight"])


def shuffled_loops(g):
    """Exactly one self-loop per node, in a shuffled edge order (ClusterGCNConv without
    add_self_loops pairs the k-th loop with deg_inv[k]: PyG's quirk shows)."""
    import torch

    ei = g["edge_index"]
    ei = ei[:, ei[0] != ei[1]]
    n = g["num_nodes"]
    loops = torch.from_numpy(np.random.default_rng(7).permutation(n))
    return (g["x"], torch.cat([ei, torch.stack([loops, loops])], dim=1))


# ------------------------------------------------------------------------- layers

def layers() -> dict:
    """label -> (make the PyG layer, inputs(graph) -> args)."""
    import torch
    import torch.nn.functional as F
    import torch_geometric.nn as tnn

    return {
        # SGConv: K, add_self_loops, bias, weights, aggr
        "SGConv": (lambda: tnn.SGConv(F_IN, F_OUT), weighted),
        "SGConv-K3-no-self-loops-no-bias": (
            lambda: tnn.SGConv(F_IN, F_OUT, K=3, add_self_loops=False, bias=False), weighted),
        "SGConv-K2-unweighted": (lambda: tnn.SGConv(F_IN, F_OUT, K=2), plain),
        "SGConv-aggr-mean": (lambda: tnn.SGConv(F_IN, F_OUT, K=2, aggr="mean"), weighted),
        # TAGConv: K, normalize, bias, weights, aggr
        "TAGConv": (lambda: tnn.TAGConv(F_IN, F_OUT), weighted),
        "TAGConv-unnormalized-no-bias": (
            lambda: tnn.TAGConv(F_IN, F_OUT, K=2, normalize=False, bias=False), weighted),
        "TAGConv-K1-unweighted": (lambda: tnn.TAGConv(F_IN, F_OUT, K=1), plain),
        "TAGConv-aggr-max": (lambda: tnn.TAGConv(F_IN, F_OUT, K=2, aggr="max"), weighted),
        # ChebConv: K, normalization, lambda_max (None, number, per graph), bias, aggr
        "ChebConv-sym": (lambda: tnn.ChebConv(F_IN, F_OUT, K=3), weighted),
        "ChebConv-rw-unweighted": (lambda: tnn.ChebConv(F_IN, F_OUT, K=3,
                                                        normalization="rw"), plain),
        "ChebConv-none": (lambda: tnn.ChebConv(F_IN, F_OUT, K=4, normalization=None), weighted),
        "ChebConv-K1-no-bias": (lambda: tnn.ChebConv(F_IN, F_OUT, K=1, bias=False), weighted),
        "ChebConv-lambda-max-number": (lambda: tnn.ChebConv(F_IN, F_OUT, K=3), number_lambda),
        "ChebConv-lambda-max-batch": (
            lambda: tnn.ChebConv(F_IN, F_OUT, K=3, normalization=None), batched_lambda),
        "ChebConv-aggr-mean": (lambda: tnn.ChebConv(F_IN, F_OUT, K=2, aggr="mean"), weighted),
        # APPNP: K, alpha, normalize, add_self_loops, weights (dropout: eval mode = identity)
        "APPNP": (lambda: tnn.APPNP(K=3, alpha=0.1, dropout=0.5), weighted),
        "APPNP-unnormalized": (lambda: tnn.APPNP(K=2, alpha=0.3, normalize=False), weighted),
        "APPNP-no-self-loops-unweighted": (
            lambda: tnn.APPNP(K=4, alpha=0.2, add_self_loops=False), plain),
        "APPNP-aggr-mean": (lambda: tnn.APPNP(K=2, alpha=0.1, aggr="mean"), weighted),
        # GCN2Conv: shared_weights, theta/layer (beta), normalize, add_self_loops, x_0
        "GCN2Conv": (lambda: tnn.GCN2Conv(F_IN, alpha=0.2), with_x0),
        "GCN2Conv-theta-unshared": (
            lambda: tnn.GCN2Conv(F_IN, alpha=0.1, theta=0.5, layer=2, shared_weights=False),
            with_x0),
        "GCN2Conv-unnormalized": (
            lambda: tnn.GCN2Conv(F_IN, alpha=0.3, theta=1.0, layer=1, normalize=False,
                                 add_self_loops=False), with_x0),
        "GCN2Conv-no-self-loops-longer-x0": (
            lambda: tnn.GCN2Conv(F_IN, alpha=0.2, add_self_loops=False), with_longer_x0),
        # ARMAConv: stacks, layers, shared_weights, act (module, function, None), bias, aggr
        "ARMAConv": (lambda: tnn.ARMAConv(F_IN, F_OUT, num_stacks=2, num_layers=3), weighted),
        "ARMAConv-shared-tanh": (
            lambda: tnn.ARMAConv(F_IN, F_OUT, num_stacks=3, num_layers=2, shared_weights=True,
                                 act=torch.nn.Tanh()), weighted),
        "ARMAConv-one-layer-no-act-no-bias": (
            lambda: tnn.ARMAConv(F_IN, F_OUT, act=None, bias=False, dropout=0.3), plain),
        "ARMAConv-act-function": (
            lambda: tnn.ARMAConv(F_IN, F_OUT, num_stacks=2, num_layers=2, act=F.elu), weighted),
        "ARMAConv-aggr-max": (
            lambda: tnn.ARMAConv(F_IN, F_OUT, num_stacks=2, num_layers=2, aggr="max"), weighted),
        # MixHopConv: powers (order, repeats), add_self_loops, bias
        "MixHopConv": (lambda: tnn.MixHopConv(F_IN, F_OUT), weighted),
        "MixHopConv-powers-unordered": (lambda: tnn.MixHopConv(F_IN, F_OUT, powers=[2, 0, 2]),
                                        plain),
        "MixHopConv-no-self-loops-no-bias": (
            lambda: tnn.MixHopConv(F_IN, F_OUT, powers=[1, 3], add_self_loops=False,
                                   bias=False), weighted),
        # DNAConv: heads, groups, normalize, add_self_loops, bias (dropout: eval mode)
        "DNAConv": (lambda: tnn.DNAConv(F_IN, heads=2, dropout=0.5), history),
        "DNAConv-groups": (lambda: tnn.DNAConv(F_IN, heads=3, groups=3), history_plain),
        "DNAConv-heads1-groups2": (lambda: tnn.DNAConv(F_IN, heads=1, groups=2), history),
        "DNAConv-unnormalized-no-bias": (
            lambda: tnn.DNAConv(F_IN, heads=2, normalize=False, bias=False), history),
        "DNAConv-no-self-loops": (lambda: tnn.DNAConv(F_IN, heads=2, add_self_loops=False),
                                  history),
        # LEConv: weights, bias, bipartite, aggr
        "LEConv": (lambda: tnn.LEConv(F_IN, F_OUT), weighted),
        "LEConv-unweighted-no-bias": (lambda: tnn.LEConv(F_IN, F_OUT, bias=False), plain),
        "LEConv-bipartite": (lambda: tnn.LEConv((F_IN, 5), F_OUT), bipartite),
        "LEConv-aggr-mean": (lambda: tnn.LEConv(F_IN, F_OUT, aggr="mean"), weighted),
        "LEConv-aggr-max": (lambda: tnn.LEConv(F_IN, F_OUT, aggr="max"), weighted),
        # ClusterGCNConv: diag_lambda, add_self_loops (PyG's loop-order quirk), bias, aggr
        "ClusterGCNConv": (lambda: tnn.ClusterGCNConv(F_IN, F_OUT, diag_lambda=0.3), plain),
        "ClusterGCNConv-no-bias": (lambda: tnn.ClusterGCNConv(F_IN, F_OUT, bias=False), plain),
        "ClusterGCNConv-no-self-loops": (
            lambda: tnn.ClusterGCNConv(F_IN, F_OUT, diag_lambda=0.7, add_self_loops=False),
            shuffled_loops),
        "ClusterGCNConv-aggr-mean": (
            lambda: tnn.ClusterGCNConv(F_IN, F_OUT, diag_lambda=0.2, aggr="mean"), plain),
    }


def graphs_of(label: str) -> tuple:
    if label.startswith("ChebConv"):
        return GRAPHS + ("erdos_renyi",)
    return GRAPHS


def build_layer(label: str, dtype: str, name: str) -> tuple:
    """(PyG layer in eval mode, its port, args) for a case."""
    import torch

    from torch2jax_ops.nn import from_torch

    make, inputs = layers()[label]
    torch.manual_seed(0)
    g = _graph(name, dtype)
    layer = _perturbed(make(), 1).to(dtypes.torch_dtype(dtype))
    return layer, from_torch(layer, copy=True), inputs(g)


@register("convs")
def propagation_cases() -> Iterable[Case]:
    for label in layers():
        for dtype in WIDE:
            for name in graphs_of(label):
                def build(label=label, dtype=dtype, name=name):
                    layer, port, args = build_layer(label, dtype, name)
                    return layer, port, args, {}, {}
                yield Case("convs", label.split("-")[0], dtype, f"{label}/{name}", build)


# ------------------------------------------------------------------ get_laplacian

def _laplacian_pairs() -> dict:
    import jax
    import jax.numpy as jnp
    from torch_geometric.utils import get_laplacian as t_laplacian
    from torch_geometric.utils import scatter as t_scatter

    from torch2jax_ops.geometric.utils import get_laplacian, get_laplacian_static, scatter

    def t_apply(x, ei, w, n, norm):  # L x: every entry (i, j, w) sends w * x_i to j
        lei, lw = t_laplacian(ei, w, norm, x.dtype, n)
        return t_scatter(lw[:, None] * x[lei[0]], lei[1], 0, n, "sum")

    def j_apply(x, ei, w, n, norm):  # the static form under jit
        @jax.jit
        def run(x, ei, w):
            lei, lw = get_laplacian_static(ei, w, norm, x.dtype, num_nodes=n)
            src = jnp.take(x, jnp.clip(lei[0], 0, n - 1), axis=0)  # dropped slots: weight 0
            return scatter(lw[:, None] * src, lei[1], 0, n + 1, "sum")[:n]
        return run(x, ei, w)

    pairs: dict = {}
    for norm in (None, "sym", "rw"):
        tag = "" if norm is None else f"-{norm}"
        pairs[f"get_laplacian{tag}"] = (
            lambda x, ei, w, n, norm=norm: t_laplacian(ei, w, norm, num_nodes=n),
            lambda x, ei, w, n, norm=norm: get_laplacian(ei, w, norm, num_nodes=n))
        pairs[f"get_laplacian{tag}-unweighted"] = (
            lambda x, ei, w, n, norm=norm: t_laplacian(ei, None, norm, x.dtype, n),
            lambda x, ei, w, n, norm=norm: get_laplacian(ei, None, norm, x.dtype, n))
        pairs[f"get_laplacian_static{tag}-apply"] = (
            lambda x, ei, w, n, norm=norm: t_apply(x, ei, w, n, norm),
            lambda x, ei, w, n, norm=norm: j_apply(x, ei, w, n, norm))
    return pairs


@register("geometric")
def laplacian_cases() -> Iterable[Case]:
    for op in _laplacian_pairs():
        for dtype in WIDE:
            for name in LAPLACIAN_GRAPHS:
                def build(op=op, dtype=dtype, name=name):
                    theirs, ours = _laplacian_pairs()[op]
                    g = _graph(name, dtype)
                    args = (g["x"], g["edge_index"], g["edge_weight"], g["num_nodes"])
                    # get_laplacian's edge count depends on the data (it drops self-loops):
                    # PyG's form runs as called; the static form jits itself
                    return theirs, ours, args, {}, {"jit": False}
                yield Case("geometric", op.split("-")[0], dtype, f"{op}/{name}", build)
