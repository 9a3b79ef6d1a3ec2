"""PyG's ``TopKPooling`` and ``SAGPooling`` with static shapes, and their shared selection.

PyG keeps ``k`` nodes of each graph and returns arrays whose length depends on
the data. Here the node budget stays ``N`` (the input's rows): the kept nodes
come first, in PyG's order, and the remaining slots are padding that every op
of :mod:`torch2jax_ops.geometric` ignores:

* ``perm`` ``[N]``: PyG's ``perm`` in its first ``K`` entries (``K`` = the
  number of kept nodes), then ``N`` (the dropped slot);
* ``x`` ``[N, F]``: PyG's rows, then zeros; ``score`` ``[N]``: PyG's, then 0;
* ``batch`` ``[N]``: PyG's, then ``num_graphs`` (the dropped graph id, which
  ``global_mean_pool(x, batch, size=num_graphs)`` ignores);
* ``edge_index`` ``[2, E]``: PyG's relabelled edges (their original order) in
  the first ``E_kept`` columns, then ``(N, N)`` (the dropped slot);
  ``edge_attr`` ``[E, ...]``: PyG's rows, then zeros.

``K = int((perm < N).sum())`` and ``E_kept = int((edge_index[0] < N).sum())``;
outside ``jax.jit``, ``x[:K]``, ``perm[:K]``, ``edge_index[:, :E_kept]`` ... are
exactly PyG's outputs. Nodes whose graph id is ``num_graphs`` (padding) are
never kept, and edges touching the dropped slot are dropped, so the layers
stack (hierarchical pooling) on their own outputs.

When to expect which: the static layout whenever ``num_graphs`` is given or
the call is traced (``jax.jit``, ``vmap``); a call on concrete arrays without
``num_graphs`` (eager, also under ``jax.grad``: the selection never needs a
gradient) returns PyG's own sizes ``[K, F]``, ``[2, E_kept]`` ..., as the
package's data-dependent utilities do on concrete arrays -- so a PyG model
converted with ``from_torch`` (which cannot pass ``num_graphs``) runs exactly as
in torch, readouts such as ``global_mean_pool(x, batch)`` included. Under
``jax.jit`` with a ``batch``, ``num_graphs`` is required.

Ties: torch's CPU ``sort`` is unstable, and PyG's top-k order (which node of
a tie is kept, and the output order) follows it. ``tie_break="torch"``
replays it (on the host: a callback under ``jax.jit``); ``"stable"`` stays on
the device, ties by position. Scores that tie in torch but differ by an ulp in
the port (a float32 GNN's summation order in ``SAGPooling``) can still pick a
different node of the tie; float64 makes that vanishingly rare.
"""
from __future__ import annotations

from typing import Any, Callable, ClassVar, Optional, Union

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._batch_vector import BatchVector, graph_count
from ...._checking import as_array, is_traced
from ...._sharding import OutSharding, sharding_aware
from ....nn import Activation, Converter, register_converter
from ..._core._edges import aggregate, check_ids, edge_array, gather, node_count
from ..._core._torch_sort import host_argsort, stable_argsort
from ...utils._softmax import segment_softmax

__all__ = ["TopKPooling", "SAGPooling", "SelectTopK", "topk", "filter_adj"]

_TIE_BREAKS = ("torch", "stable")


def _check_tie_break(tie_break: str, *, op: str) -> None:
    if tie_break not in _TIE_BREAKS:
        raise ValueError(f"{op}: `tie_break` must be 'torch' (torch's CPU sort order, exact) or "
                         f"'stable' (ties by position, pure JAX), got {tie_break!r}")


def _descending_order(keys: jax.Array, tie_break: str) -> jax.Array:
    """``torch.sort(keys, descending=True)[1]``: torch's tie order, or ties by position."""
    keys = jax.lax.stop_gradient(keys)
    if tie_break == "torch":
        return host_argsort(keys, descending=True)
    return stable_argsort(keys, descending=True).astype(jnp.int32)


def _compact(keep: jax.Array, order: jax.Array, fill: int) -> jax.Array:
    """``order[keep]`` moved to the front (stable), the rest of the slots ``fill``."""
    n = keep.shape[0]
    slot = jnp.cumsum(keep.astype(jnp.int32)) - 1
    slot = jnp.where(keep, slot, n)
    out = jnp.full((n,), fill, order.dtype)
    return out.at[slot].set(order, mode="drop")


def topk(x: jax.Array, ratio: Optional[Union[float, int]], batch: jax.Array, num_graphs: int,
         min_score: Optional[float] = None, tol: float = 1e-7, *,
         tie_break: str = "torch") -> jax.Array:
    """PyG's ``pool.select.topk`` with a static result: ``perm [N]``, padding ``N``.

    ``x [N]`` scores, ``batch [N]`` graph ids in ``[0, num_graphs]`` (id
    ``num_graphs``: padding, never kept). With ``ratio`` (and no ``min_score``):
    per graph ``k = int(ratio)`` if ``ratio >= 1`` (so ``ratio=1.0`` keeps ONE
    node, PyG's rule), else ``ceil(ratio * n_g)`` computed in ``x``'s dtype (in
    float32 ``ceil(0.6 * 25) = 16``, as in PyG); the kept nodes are ordered by
    graph, then by score descending, ties in torch's CPU ``sort`` order
    (``tie_break="torch"``; ``"stable"``: by position, the same whenever no two
    nodes of a graph tie or ``N <= 16``). With ``min_score``: nodes whose score
    exceeds ``min(max_g - tol, min_score)``, in node order.
    """
    op = "topk"
    x = jax.lax.stop_gradient(x)  # concrete outside jit, even under jax.grad
    n = x.shape[0]
    batch = batch.astype(jnp.int32)
    real = batch < num_graphs
    if min_score is not None:
        scores_max = gather(aggregate(x, batch, num_graphs, "max", op=op), batch) - \
            jnp.asarray(tol, x.dtype)
        scores_min = jnp.minimum(scores_max, jnp.asarray(min_score, x.dtype))
        keep = (jax.lax.stop_gradient(x) > jax.lax.stop_gradient(scores_min)) & real
        return _compact(keep, jnp.arange(n, dtype=jnp.int32), n)
    if ratio is None:
        raise ValueError(f"{op}: at least one of the 'ratio' and 'min_score' parameters must "
                         f"be specified")
    counts = aggregate(jnp.ones((n,), jnp.int32), batch, num_graphs, "sum", op=op)
    if ratio >= 1:
        k = jnp.full((num_graphs,), int(ratio), jnp.int32)
    else:
        k = jnp.ceil(jnp.asarray(float(ratio), x.dtype) * counts.astype(x.dtype)).astype(jnp.int32)
    x_perm = _descending_order(x, tie_break)
    # torch.sort(batch[x_perm], stable=True): graph by graph, score order inside
    sorted_batch, order = jax.lax.sort((batch[x_perm], x_perm), num_keys=1, is_stable=True)
    ptr = jnp.concatenate([jnp.zeros((1,), jnp.int32), jnp.cumsum(counts)])
    rank = jnp.arange(n, dtype=jnp.int32) - ptr[jnp.minimum(sorted_batch, num_graphs)]
    k = jnp.concatenate([k, jnp.zeros((1,), jnp.int32)])  # the padding graph keeps nothing
    keep = (sorted_batch < num_graphs) & (rank < k[jnp.minimum(sorted_batch, num_graphs)])
    return _compact(keep, order, n)


def filter_adj(edge_index: jax.Array, edge_attr: Optional[jax.Array], perm: jax.Array,
               num_nodes: int) -> tuple[jax.Array, Optional[jax.Array]]:
    """PyG's ``filter_adj`` with static shapes: ``edge_index [2, E]`` -> ``[2, E]``.

    ``perm [N]`` (kept node ids first, then ``num_nodes``) relabels node
    ``perm[i]`` to ``i``; an edge is kept when both ends are kept. Kept edges
    come first in their original order, the others are ``(N, N)`` with zero
    ``edge_attr`` rows (``N = perm.shape[0]``, the new dropped slot).
    """
    n_out = perm.shape[0]
    kept_slot = perm < num_nodes
    new_id = jnp.full((num_nodes + 1,), n_out, jnp.int32)
    new_id = new_id.at[jnp.where(kept_slot, perm, num_nodes)].set(
        jnp.where(kept_slot, jnp.arange(n_out, dtype=jnp.int32), n_out))
    new_id = new_id.at[num_nodes].set(n_out)
    ids = jnp.minimum(edge_index.astype(jnp.int32), num_nodes)
    row, col = new_id[ids[0]], new_id[ids[1]]
    keep = (row < n_out) & (col < n_out)
    e = edge_index.shape[1]
    order = _compact(keep, jnp.arange(e, dtype=jnp.int32), e)
    kept = order < e
    src = jnp.minimum(order, max(e - 1, 0))
    out = jnp.where(kept, jnp.stack([row[src], col[src]]) if e else jnp.zeros((2, 0), jnp.int32),
                    n_out).astype(edge_index.dtype)
    if edge_attr is not None:
        edge_attr = gather(edge_attr, jnp.where(kept, order, e))
    return out, edge_attr


class SelectTopK(eqx.Module):
    """PyG's ``pool.select.SelectTopK``: the projection ``weight [1, C]`` and the activation.

    ``score = act((x * weight).sum(-1) / ||weight||)`` (no ``min_score``) or
    ``softmax(x * weight).sum(-1)`` per graph (``min_score``), then :func:`topk`.
    """
    weight: jax.Array
    act: Any = None
    in_channels: int = eqx.field(static=True, default=1)
    ratio: Optional[Union[float, int]] = eqx.field(static=True, default=0.5)
    min_score: Optional[float] = eqx.field(static=True, default=None)

    def scores(self, x: jax.Array, batch: jax.Array, num_graphs: int) -> jax.Array:
        """The score of every node ``[N]`` (before selection)."""
        x = x.reshape(-1, 1) if x.ndim == 1 else x
        score = jnp.sum(x * self.weight, axis=-1)
        if self.min_score is None:
            return self.act(score / jnp.linalg.norm(self.weight, axis=-1))
        return segment_softmax(score, batch, num_graphs)


def _graph_ids(x: jax.Array, batch: Any, num_graphs: Optional[int], *, op: str):
    if batch is None:
        return jnp.zeros((x.shape[0],), jnp.int32), 1
    batch = as_array(batch, "batch", op=op)
    if batch.shape != (x.shape[0],) or not jnp.issubdtype(batch.dtype, jnp.integer):
        raise ValueError(f"{op}: `batch` must be a 1-D integer array with one graph id per row "
                         f"of x ({x.shape[0]}), got shape {tuple(batch.shape)}, dtype "
                         f"{batch.dtype}")
    b = node_count(num_graphs, batch, name="num_graphs", index_name="batch",
                   hint="the number of graphs B; graph id B marks padding nodes; padded "
                        "batches: PaddedGraph.num_graphs", op=op)
    check_ids(batch, b, "batch", op=op)
    return batch, b


def _pool(select: SelectTopK, x, edge_index, edge_attr, batch, attn, num_graphs, multiplier,
          tie_break, *, op: str, score_input: Optional[Callable] = None):
    """What TopKPooling and SAGPooling share: select, scale, filter the edges."""
    _check_tie_break(tie_break, op=op)
    x = as_array(x, "x", op=op)
    if x.ndim == 0:
        raise ValueError(f"{op}: `x` must have a node axis, got a 0-d array")
    n = x.shape[0]
    edge_index = edge_array(edge_index, n, op=op)
    if edge_attr is not None:
        edge_attr = as_array(edge_attr, "edge_attr", op=op)
        if edge_attr.shape[:1] != (edge_index.shape[1],):
            raise ValueError(f"{op}: `edge_attr` must have one row per edge "
                             f"({edge_index.shape[1]}), got shape {tuple(edge_attr.shape)}")
    # the pooled batch carries the count on when it came with one or was read off the data
    carried = isinstance(batch, BatchVector) or (batch is not None and num_graphs is None)
    padded = isinstance(batch, BatchVector) and batch.padded  # the padding graph stays last
    num_graphs = graph_count(batch, num_graphs)
    batch, b = _graph_ids(x, batch, num_graphs, op=op)
    attn = x if attn is None else as_array(attn, "attn", op=op)
    if score_input is not None:
        attn = score_input(attn)
    score = select.scores(attn, batch, b)
    perm = topk(score, select.ratio, batch, b, select.min_score, tie_break=tie_break)
    kept = perm < n
    score = jnp.where(kept, gather(score, perm), jnp.zeros((), score.dtype))
    x = gather(x, perm) * score.reshape((-1,) + (1,) * (x.ndim - 1))
    if multiplier != 1:
        x = multiplier * x
    edge_index, edge_attr = filter_adj(edge_index, edge_attr, perm, n)
    # PyG fills batch=None with zeros before pooling: the pooled batch is never None
    out_batch = jnp.where(kept, gather(batch, perm), b).astype(batch.dtype)
    if num_graphs is None and not any(is_traced(a) for a in (perm, edge_index, out_batch)):
        # concrete call without a static size: PyG's own (data-dependent) sizes
        k, e = int(jnp.sum(kept)), int(jnp.sum(edge_index[0] < n))
        return (x[:k], edge_index[:, :e], None if edge_attr is None else edge_attr[:e],
                out_batch[:k], perm[:k], score[:k])
    pooled: Any = BatchVector(out_batch, b, padded=padded) if carried else out_batch
    return x, edge_index, edge_attr, pooled, perm, score


_SHAPES = """
    Call: ``(x [N, F], edge_index [2, E], edge_attr=None [E, *], batch=None [N],
    attn=None [N, C])`` -> ``(x [N, F], edge_index [2, E], edge_attr [E, *] or None,
    batch [N] or None, perm [N], score [N])``, the kept nodes and edges first (see
    :mod:`torch2jax_ops.geometric.nn.pool._topk`); ``batch=None`` is one graph
    (the returned ``batch`` is then 0 for kept nodes and 1 for padding, as PyG
    returns zeros). Under ``jax.jit`` pass ``num_graphs`` (B, static) with a
    ``batch``; graph id B marks padding nodes. ``tie_break="torch"`` (default)
    orders tied scores as torch's CPU sort does (a host callback under jit);
    ``"stable"`` stays on the device and orders ties by position (identical
    unless two nodes of one graph tie in a graph batch of more than 16 nodes)."""


#: the pools' outputs with one row per node (x, batch, perm, score)
ROW_OUTPUTS = (0, 3, 4, 5)


def kept_rows(out: tuple, x: jax.Array) -> jax.Array:
    """How many nodes a pool's output keeps: ``perm`` entries that are ids of ``x``'s rows
    (the static form pads with ``N``)."""
    return jnp.sum(out[4] < x.shape[0]).astype(jnp.int32)


class TopKPooling(eqx.Module):
    """``torch_geometric.nn.TopKPooling`` with a static node budget.

    ``score = tanh((attn * p).sum(-1) / ||p||)`` (``nonlinearity``; with
    ``min_score``: the per-graph softmax of ``(attn * p).sum(-1)``), the top
    ``k`` nodes of each graph (:func:`topk`: ``ratio >= 1`` means ``k = int(ratio)``,
    so ``ratio=1.0`` keeps one node per graph, PyG's rule), ``x' = x[perm] *
    score[perm] * multiplier``, edges between kept nodes relabelled. Arrays:
    ``select.weight [1, in_channels]``.
    """ + _SHAPES
    select: SelectTopK
    in_channels: int = eqx.field(static=True, default=1)
    ratio: Optional[Union[float, int]] = eqx.field(static=True, default=0.5)
    min_score: Optional[float] = eqx.field(static=True, default=None)
    multiplier: float = eqx.field(static=True, default=1.0)
    tie_break: str = eqx.field(static=True, default="torch")

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x: jax.Array, edge_index: jax.Array, edge_attr: Optional[jax.Array] = None,
                 batch: Optional[jax.Array] = None, attn: Optional[jax.Array] = None, *,
                 num_graphs: Optional[int] = None, out_sharding: OutSharding = None) -> tuple:
        return _pool(self.select, x, edge_index, edge_attr, batch, attn, num_graphs,
                     self.multiplier, self.tie_break, op="TopKPooling")

    # a traced forward's `out.size(0)`: PyG's kept count, not the budget (nn/_pooled.py)
    row_outputs: ClassVar[tuple] = ROW_OUTPUTS

    def kept_rows(self, out: tuple, x: jax.Array) -> jax.Array:
        return kept_rows(out, x)


class SAGPooling(eqx.Module):
    """``torch_geometric.nn.SAGPooling`` with a static node budget.

    As :class:`TopKPooling`, the scores coming from ``gnn(attn, edge_index)``
    (``attn`` defaults to ``x``; 1-D ``attn`` is a column; PyG passes no edge
    attributes to the GNN), a one-channel conv (``GraphConv`` by default, any
    ported conv). Arrays: ``gnn.*`` (the conv's names) and ``select.weight [1, 1]``.
    """ + _SHAPES
    gnn: Any
    select: SelectTopK
    in_channels: int = eqx.field(static=True, default=1)
    ratio: Optional[Union[float, int]] = eqx.field(static=True, default=0.5)
    min_score: Optional[float] = eqx.field(static=True, default=None)
    multiplier: float = eqx.field(static=True, default=1.0)
    tie_break: str = eqx.field(static=True, default="torch")

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x: jax.Array, edge_index: jax.Array, edge_attr: Optional[jax.Array] = None,
                 batch: Optional[jax.Array] = None, attn: Optional[jax.Array] = None, *,
                 num_graphs: Optional[int] = None, out_sharding: OutSharding = None) -> tuple:
        def gnn(a):
            a = a.reshape(-1, 1) if a.ndim == 1 else a
            return self.gnn(a, edge_index)
        return _pool(self.select, x, edge_index, edge_attr, batch, attn, num_graphs,
                     self.multiplier, self.tie_break, op="SAGPooling", score_input=gnn)

    row_outputs: ClassVar[tuple] = ROW_OUTPUTS

    def kept_rows(self, out: tuple, x: jax.Array) -> jax.Array:
        return kept_rows(out, x)


# ------------------------------------------------------------------ converters

def _functional_activations() -> dict:
    import torch
    import torch.nn.functional as F

    return {torch.tanh: "Tanh", F.tanh: "Tanh", torch.sigmoid: "Sigmoid",
            F.sigmoid: "Sigmoid", torch.relu: "ReLU", F.relu: "ReLU", F.elu: "ELU",
            F.leaky_relu: "LeakyReLU", F.gelu: "GELU", F.silu: "SiLU", F.softplus: "Softplus"}


def _activation(act: Any, ctx: Converter, owner: Any) -> Any:
    import torch

    if isinstance(act, torch.nn.Module):
        if isinstance(act, torch.nn.Softmax):
            raise ctx.unsupported(owner, "nonlinearity='softmax' (torch.nn.Softmax over every "
                                         "node of the batch) is not ported; use 'tanh', "
                                         "'sigmoid' or another elementwise activation")
        return ctx.child(act, "act")
    name = _functional_activations().get(act)
    if name is None:
        raise ctx.unsupported(owner, f"nonlinearity={act!r} is a callable with no port; pass "
                                     f"its name ('tanh', 'sigmoid', 'relu' ...) or a torch.nn "
                                     f"activation module")
    return Activation(name)


def _ratio(value: Any) -> Any:
    return None if value is None else (int(value) if isinstance(value, int) else float(value))


@register_converter("torch_geometric.nn.pool.select.topk.SelectTopK")
def _select_topk(m, ctx: Converter) -> SelectTopK:
    return SelectTopK(ctx.array(m.weight), _activation(m.act, ctx, m),
                      in_channels=int(m.in_channels), ratio=_ratio(m.ratio),
                      min_score=None if m.min_score is None else float(m.min_score))


def _check_connect(m, ctx: Converter) -> None:
    if type(m.connect).__name__ != "FilterEdges":
        raise ctx.unsupported(m, f"its connect is {type(m.connect).__name__}; only PyG's "
                                 f"FilterEdges is ported")
    if type(m.select).__name__ != "SelectTopK":
        raise ctx.unsupported(m, f"its select is {type(m.select).__name__}; only PyG's "
                                 f"SelectTopK is ported")


@register_converter("torch_geometric.nn.pool.topk_pool.TopKPooling")
def _topk_pooling(m, ctx: Converter) -> TopKPooling:
    _check_connect(m, ctx)
    return TopKPooling(ctx.child(m.select, "select"), in_channels=int(m.in_channels),
                       ratio=_ratio(m.ratio),
                       min_score=None if m.min_score is None else float(m.min_score),
                       multiplier=float(m.multiplier))


@register_converter("torch_geometric.nn.pool.sag_pool.SAGPooling")
def _sag_pooling(m, ctx: Converter) -> SAGPooling:
    _check_connect(m, ctx)
    return SAGPooling(ctx.child(m.gnn, "gnn"), ctx.child(m.select, "select"),
                      in_channels=int(m.in_channels), ratio=_ratio(m.ratio),
                      min_score=None if m.min_score is None else float(m.min_score),
                      multiplier=float(m.multiplier))
