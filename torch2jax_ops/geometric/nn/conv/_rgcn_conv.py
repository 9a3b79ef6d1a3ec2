"""PyG's ``RGCNConv`` and ``FastRGCNConv`` (relational GCN, Schlichtkrull et al.).

The relational matmul. PyG's ``RGCNConv`` aggregates each relation's
messages and multiplies by that relation's weight (a loop over relations);
``FastRGCNConv`` multiplies every message by its relation's weight first.
For ``sum``/``mean`` both are linear, and the port computes them the way that
measured fastest per platform (``jax.jit``, forward + backward):

- On the CPU, where the gather-scatter kernel is built (``_core/_cpu_kernel``):
  PyG's order. The kernel sums each edge's source row into its (target,
  relation) row with no ``[E, F_in]`` buffer, the mean divides by the group's
  count, and one matmul ``[N, R * F_in] @ [R * F_in, F_out]`` applies every
  relation's weight. Two-layer RGCN, 100k nodes / 1M edges / 4 relations
  (``benchmarks/matrix.py``, 2026-11-27): 124 / 437 / 3087 ms at widths 16 /
  64 / 256, against 151 / 1229 (487 on a rerun) / 3514 ms the projected form
  below took in the previous run of the matrix.
- Elsewhere (a GPU, several devices, the kernel switched off): every node is
  projected by every relation's weight in one matmul (``[N, F_in] @ [F_in,
  R * F_out]``) and each edge gathers its ``(source, relation)`` row, scaled by
  ``1 / count(target, relation)`` for ``mean``. On XLA:CPU without the kernel
  this was 1.3-1.5x faster than aggregating per (target, relation) first
  (AIFB, MUTAG, FB15k-237 and a 100k-node / 1M-edge / 8-relation graph), and
  than gathering a weight per edge (``[E, F_in, F_out]``: also far more
  memory); ``jax.lax.ragged_dot`` (a segment matmul over edges sorted by
  relation) is lowered densely on CPU (``R`` full matmuls: 4-15x slower, and
  out of memory at FB15k-237's size). Where the projected nodes would take
  more memory than per-edge weights (``N * R * F_out > E * F_in * F_out``) the
  per-edge weights are used instead.

``max``/``min``/``mul`` and aggregation modules keep PyG's order (aggregate
per (target, relation), then multiply), as their results depend on it.
"""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._checking import as_array
from ...._sharding import sharding_aware
from ....nn import Converter, register_converter
from ..._core._edges import aggregate, edge_array, gather, gather_aggregate, kernel_sums, valid
from .._common import check_flow
from ..aggr._base import aggregate_messages

__all__ = ["RGCNConv", "FastRGCNConv"]

_LINEAR = ("add", "sum", "mean")


class RGCNConv(eqx.Module):
    """``torch_geometric.nn.RGCNConv``:
    ``x'_i = root^T x_i + sum_r W_r^T aggr_{j in N_r(i)} x_j + bias``.

    ``__call__(x, edge_index [2, E], edge_type [E]) -> [N_dst, F_out]``. ``x``:
    node features ``[N, F_in]``, integer node ids (featureless: the relation
    weights act as embeddings, ``W_r[x_j]``), ``None`` (ids ``arange(F_in)``,
    so ``N = F_in``), or a ``(x_src, x_dst)`` pair of those. Arrays as PyG:
    ``weight`` ``[R, F_in, F_out]`` (``num_bases``: ``[B, F_in, F_out]`` bases
    and ``comp [R, B]``; ``num_blocks``: ``[R, nb, F_in/nb, F_out/nb]``),
    ``root [F_in, F_out]``, ``bias``. ``aggr`` (default ``"mean"``, per
    relation) or an aggregation module ``aggr_module``. The relational matmul
    is described in the module docs. Block-diagonal weights need float
    features (PyG raises otherwise).
    """
    weight: jax.Array
    comp: Optional[jax.Array] = None
    root: Optional[jax.Array] = None
    bias: Optional[jax.Array] = None
    num_relations: int = eqx.field(static=True, default=1)
    num_bases: Optional[int] = eqx.field(static=True, default=None)
    num_blocks: Optional[int] = eqx.field(static=True, default=None)
    in_channels_l: int = eqx.field(static=True, default=1)
    out_channels: int = eqx.field(static=True, default=1)
    aggr: Optional[str] = eqx.field(static=True, default="mean")
    aggr_module: Any = None

    _op = "RGCNConv"

    # -- inputs
    def _nodes(self, x):
        op = self._op
        x_l, x_r = (x[0], x[1]) if isinstance(x, (tuple, list)) else (x, None)
        x_l = jnp.arange(self.in_channels_l) if x_l is None else as_array(x_l, "x", op=op)
        x_r = x_l if not isinstance(x, (tuple, list)) else as_array(x_r, "x[1]", op=op)
        for name, v in (("x", x_l), ("x", x_r)):
            if not (jnp.issubdtype(v.dtype, jnp.floating) or jnp.issubdtype(v.dtype,
                                                                              jnp.integer)):
                raise TypeError(f"{op}: `{name}` must hold floats (features) or integers "
                                f"(node ids), got {v.dtype}")
        return x_l, x_r

    def full_weight(self) -> jax.Array:
        """``[R, F_in, F_out]`` (or the block layout): bases combined by ``comp``."""
        if self.num_bases is not None:
            assert self.comp is not None  # set with num_bases
            return (self.comp @ self.weight.reshape(self.num_bases, -1)).reshape(
                self.num_relations, self.in_channels_l, self.out_channels)
        return self.weight

    def _linear_aggr(self) -> bool:
        return self.aggr_module is None and self.aggr in _LINEAR

    # -- the relational part
    def _relational(self, x_l, src, dst, edge_type, n_dst, fast: bool):
        r, f_out = self.num_relations, self.out_channels
        weight = self.full_weight()
        floating = jnp.issubdtype(x_l.dtype, jnp.floating)
        if self.num_blocks is not None and not floating:
            raise ValueError(f"{self._op}: Block-diagonal decomposition not supported for "
                             f"non-continuous input features (as PyG)")
        ok = valid(src, x_l.shape[0]) & valid(dst, n_dst) & (edge_type >= 0) & \
            (edge_type < r)
        rel = jnp.where(ok, edge_type, 0)
        key = jnp.where(ok, dst * r + rel, n_dst * r)  # one group per (target, relation)
        if not floating:
            # featureless: W_r's row of the source node (FastRGCNConv: of the source *id*)
            rows = src if fast else gather(x_l, src)
            flat = jnp.where(ok, rel * self.in_channels_l + rows, 0)
            msg = jnp.take(weight.reshape(-1, f_out), flat, axis=0)
            return self._reduce(msg, key, dst, ok, n_dst)
        if self._linear_aggr():
            def projected():
                msg = self._transformed(x_l, weight, src, rel)
                return self._reduce(msg, key, dst, ok, n_dst)

            if not kernel_sums(x_l.dtype):
                return projected()

            def kernel_first():
                # the CPU kernel: no [E, F] buffer; PyG's order (aggregate, then matmul)
                h = gather_aggregate(x_l, src, key, n_dst * r, self.aggr, op=self._op)
                return self._per_relation(h, weight, n_dst)

            return jax.lax.platform_dependent(cpu=kernel_first, default=projected)
        # aggregate per (target, relation), then each relation's matmul (PyG's order)
        h = aggregate_messages(self.aggr, self.aggr_module, gather(x_l, src), key, n_dst * r,
                               dim=0)
        return self._per_relation(h, weight, n_dst)

    def _per_relation(self, h, weight, n_dst):
        """``sum_r h[:, r] @ W_r`` for ``h [N_dst * R, F_in]`` grouped per (target,
        relation): one matmul over the ``(relation, feature)`` pairs."""
        r, f_out = self.num_relations, self.out_channels
        h = h.reshape(n_dst, r, -1)
        if self.num_blocks is not None:
            nb = self.num_blocks
            h = h.reshape(n_dst, r, nb, -1)
            return jnp.einsum("nrbi,rbio->nbo", h, weight).reshape(n_dst, f_out)
        return jnp.einsum("nri,rio->no", h, weight)

    def _transformed(self, x_l, weight, src, rel):
        """``x_j @ W_r`` for every edge: gathered from the nodes projected by every
        relation, or with per-edge weights where that takes less memory."""
        n, f_in = x_l.shape
        r, f_out, e = self.num_relations, self.out_channels, src.shape[0]
        if self.num_blocks is not None:
            nb = self.num_blocks
            if n * r * f_out <= e * f_in * f_out // nb:
                proj = jnp.einsum("nbi,rbio->nrbo", x_l.reshape(n, nb, -1), weight)
                return gather(proj.reshape(n * r, f_out), src * r + rel)
            xj = gather(x_l, src).reshape(e, nb, -1)
            return jnp.einsum("ebi,ebio->ebo", xj, weight[rel]).reshape(e, f_out)
        if n * r * f_out <= e * f_in * f_out:
            proj = x_l @ jnp.transpose(weight, (1, 0, 2)).reshape(f_in, r * f_out)
            return gather(proj.reshape(n * r, f_out), src * r + rel)
        return jnp.einsum("ei,eio->eo", gather(x_l, src), weight[rel])

    def _reduce(self, msg, key, dst, ok, n_dst):
        """``aggr`` over each (target, relation) group, summed over relations."""
        r = self.num_relations
        if self._linear_aggr():
            if self.aggr == "mean":  # PyG's mean per relation: 1 / max(count(i, r), 1)
                count = jax.ops.segment_sum(jnp.ones(key.shape, msg.dtype), key, n_dst * r)
                msg = msg * (1.0 / jnp.maximum(gather(count, key), 1))[:, None]
            return aggregate(msg, jnp.where(ok, dst, n_dst), n_dst)
        h = aggregate_messages(self.aggr, self.aggr_module, msg, key, n_dst * r, dim=0)
        return jnp.sum(h.reshape(n_dst, r, -1), axis=1)

    def _edges(self, edge_index, edge_type, n_src, n_dst):
        op = self._op
        edge_index = edge_array(edge_index, max(n_src, n_dst), op=op)
        if edge_type is None:
            raise ValueError(f"{op}: `edge_type` is required ([num_edges] relation ids in "
                             f"[0, {self.num_relations}))")
        edge_type = as_array(edge_type, "edge_type", op=op)
        if edge_type.shape != (edge_index.shape[1],) or \
                not jnp.issubdtype(edge_type.dtype, jnp.integer):
            raise ValueError(f"{op}: `edge_type` must be a 1-D integer array with one entry "
                             f"per edge ({edge_index.shape[1]}), got shape "
                             f"{tuple(edge_type.shape)}, dtype {edge_type.dtype}")
        return edge_index, edge_type

    def _finish(self, out, x_r):
        if self.root is not None:
            if jnp.issubdtype(x_r.dtype, jnp.floating):
                out = out + x_r @ self.root
            else:
                out = out + jnp.take(self.root, x_r, axis=0)
        return out if self.bias is None else out + self.bias

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_type=None, *, out_sharding=None):
        x_l, x_r = self._nodes(x)
        edge_index, edge_type = self._edges(edge_index, edge_type, x_l.shape[0], x_r.shape[0])
        out = self._relational(x_l, edge_index[0], edge_index[1], edge_type, x_r.shape[0],
                               fast=False)
        return self._finish(out, x_r)


class FastRGCNConv(RGCNConv):
    """``torch_geometric.nn.FastRGCNConv``: :class:`RGCNConv`'s result computed per edge
    (``x_j @ W_{r_ji}``, then ``sum``, or ``mean`` per (target, relation) as
    ``1 / max(count, 1)`` weights). ``aggr``: ``add``/``sum``/``mean`` only (PyG
    asserts it). PyG's quirk mirrored: with integer ``x`` the featureless
    messages read the weight row of the source *node id* (``edge_index[0]``),
    not of ``x[edge_index[0]]`` as RGCNConv does.
    """
    _op = "FastRGCNConv"

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_type=None, *, out_sharding=None):
        x_l, x_r = self._nodes(x)
        edge_index, edge_type = self._edges(edge_index, edge_type, x_l.shape[0], x_r.shape[0])
        out = self._relational(x_l, edge_index[0], edge_index[1], edge_type, x_r.shape[0],
                               fast=True)
        return self._finish(out, x_r)


def _convert(cls, m, ctx: Converter, allowed: tuple):
    check_flow(m, ctx)
    if m.node_dim != 0:
        raise ctx.unsupported(m, f"node_dim={m.node_dim}; RGCNConv's is 0")
    from .._common import check_aggr

    aggr = check_aggr(m, ctx, allowed, modules=cls is RGCNConv)
    name, module = (aggr, None) if isinstance(aggr, str) else (None, aggr)
    return cls(ctx.array(m.weight), ctx.array(m.comp), ctx.array(m.root), ctx.array(m.bias),
               num_relations=int(m.num_relations),
               num_bases=None if m.num_bases is None else int(m.num_bases),
               num_blocks=None if m.num_blocks is None else int(m.num_blocks),
               in_channels_l=int(m.in_channels_l), out_channels=int(m.out_channels),
               aggr=name, aggr_module=module)


@register_converter("torch_geometric.nn.conv.rgcn_conv.RGCNConv")
def _rgcn(m, ctx: Converter):
    return _convert(RGCNConv, m, ctx, ("add", "sum", "mean", "min", "max", "mul"))


@register_converter("torch_geometric.nn.conv.rgcn_conv.FastRGCNConv")
def _fast_rgcn(m, ctx: Converter):
    return _convert(FastRGCNConv, m, ctx, _LINEAR)
