"""PyG's ``PNAConv`` (principal neighbourhood aggregation, Corso et al.)."""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._checking import as_array
from ...._sharding import sharding_aware
from ....nn import Converter, Linear, ModuleList, register_converter
from ..._core._edges import gather
from .._common import check_flow, edge_values, graph_input
from ..aggr._basic import (
    MaxAggregation,
    MeanAggregation,
    MinAggregation,
    StdAggregation,
    SumAggregation,
    VarAggregation,
    _std_from_var,
)
from ..aggr._multi import MultiAggregation
from ..aggr._scaler import DegreeScalerAggregation, scale
from ._edge_family import drop_from_source

__all__ = ["PNAConv"]

_FAST = (SumAggregation, MeanAggregation, MinAggregation, MaxAggregation, VarAggregation,
         StdAggregation)


def _towers_linear(layers: list, h: jax.Array) -> jax.Array:
    """Tower ``t``'s Linear on ``h[..., t, :]``, all towers at once: ``[M, T, I] -> [M, T, O]``."""
    w = jnp.stack([lin.weight for lin in layers])  # [T, O, I]
    out = jnp.einsum("mti,toi->mto", h, w)
    if layers[0].bias is not None:
        out = out + jnp.stack([lin.bias for lin in layers])
    return out


def _towers(nets: ModuleList, h: jax.Array, start: int = 0) -> jax.Array:
    """Each tower's Sequential (from layer ``start`` on) on its slice ``h[:, t]``."""
    for k in range(start, len(nets[0])):
        layers = [net[k] for net in nets]
        if isinstance(layers[0], Linear):
            h = _towers_linear(layers, h)
        else:  # an activation (the same in every tower: PyG builds them alike)
            h = layers[0](h)
    return h


def _semi(aggr: Any) -> bool:
    return (aggr if isinstance(aggr, VarAggregation) else aggr.var_aggr).semi_grad


def _fast_aggregate(aggrs: tuple, m: jax.Array, dst: jax.Array, n: int) -> list:
    """The basic aggregations of ``m [E, T, F]`` at ``dst``, sharing their scatters: one
    segment sum of ``[m, m * m]`` (sum, mean, var, std), one segment max of ``[m, -m]``
    (max, min), one count. PyG's formulas (its unfused path, as for 3-D messages):
    ``mean = sum / max(count, 1)``, ``var = mean(m * m) - mean ** 2`` (``m * m`` without
    gradient for a ``semi_grad`` member), empty nodes 0."""
    f = m.shape[-1]
    count = jax.ops.segment_sum(jnp.ones(dst.shape, m.dtype), dst, n)
    count = count.reshape((n,) + (1,) * (m.ndim - 1))
    denom = jnp.maximum(count, 1)
    semis = sorted({_semi(a) for a in aggrs if isinstance(a, (VarAggregation, StdAggregation))})
    sums, squares, top, bottom = None, {}, None, None
    if semis or any(isinstance(a, (SumAggregation, MeanAggregation)) for a in aggrs):
        parts = [m]
        for semi in semis:
            sq = jax.lax.stop_gradient(m) if semi else m
            parts.append(sq * sq)
        total = jax.ops.segment_sum(jnp.concatenate(parts, axis=-1), dst, n)
        sums = total[..., :f]
        squares = {semi: total[..., (i + 1) * f:(i + 2) * f] for i, semi in enumerate(semis)}
    if any(isinstance(a, (MaxAggregation, MinAggregation)) for a in aggrs):
        both = jax.ops.segment_max(jnp.concatenate([m, -m], axis=-1), dst, n)
        both = jnp.where(count > 0, both, jnp.zeros((), m.dtype))
        top, bottom = both[..., :f], -both[..., f:]
    outs = []
    for a in aggrs:
        if isinstance(a, SumAggregation):
            outs.append(sums)
        elif isinstance(a, MeanAggregation):
            assert sums is not None  # computed above for every sum / mean / var / std member
            outs.append(sums / denom)
        elif isinstance(a, MaxAggregation):
            outs.append(top)
        elif isinstance(a, MinAggregation):
            outs.append(bottom)
        else:
            assert sums is not None
            mean = sums / denom
            var = squares[_semi(a)] / denom - mean * mean
            outs.append(var if isinstance(a, VarAggregation) else _std_from_var(var))
    return outs


class PNAConv(eqx.Module):
    """``torch_geometric.nn.PNAConv``: towers of pre-networks on ``[x_i, x_j, enc(e_ji)]``,
    degree-scaled multi-aggregation, towers of post-networks on ``[x_i, aggregated]``,
    then ``lin``.

    ``__call__(x [N, F_in], edge_index [2, E], edge_attr [E, edge_dim] = None) -> [N, F_out]``.
    ``x`` is viewed ``[N, towers, F_in / towers]`` (``divide_input``) or repeated
    per tower. The arrays are PyG's: ``aggr_module.avg_deg_lin`` /
    ``avg_deg_log`` (buffers, or parameters with ``train_norm``),
    ``edge_encoder``, ``pre_nns.{t}.{k}``, ``post_nns.{t}.{k}``, ``lin``.

    Computed as PyG does, in fewer steps: the first pre-layer is linear in
    ``[x_i, x_j, e]``, so it is applied to the nodes (and edges) once and the
    per-edge sums are gathered; every tower runs in one batched matmul; the
    basic aggregations (sum, mean, min, max, var, std) share their scatters.
    Other aggregations go through the ``aggr_module`` port unchanged.
    """
    aggr_module: DegreeScalerAggregation
    pre_nns: ModuleList
    post_nns: ModuleList
    lin: Linear
    edge_encoder: Optional[Linear] = None
    towers: int = eqx.field(static=True, default=1)
    divide_input: bool = eqx.field(static=True, default=False)
    F_in: int = eqx.field(static=True, default=1)
    F_out: int = eqx.field(static=True, default=1)

    def _inputs(self, x):
        n = x.shape[0]
        if self.divide_input:
            return x.reshape(n, self.towers, self.F_in)
        return jnp.broadcast_to(x.reshape(n, 1, self.F_in), (n, self.towers, self.F_in))

    def _first_layer(self, x, x3, edge_attr, src, dst):
        """The first pre-layer of every tower on each edge, ``[E, T, F_in]``."""
        f, towers = self.F_in, self.towers
        w = jnp.stack([net[0].weight for net in self.pre_nns])  # [T, F_in, k * F_in]
        bias = None if self.pre_nns[0][0].bias is None else \
            jnp.stack([net[0].bias for net in self.pre_nns])  # [T, F_in]

        def node_part(wk):  # [T, F_in(out), F_in(in)] applied to every node
            if self.divide_input:
                return jnp.einsum("nti,toi->nto", x3, wk)
            return (x @ jnp.transpose(wk, (2, 0, 1)).reshape(f, towers * f)).reshape(
                -1, towers, f)

        a = node_part(w[:, :, :f])      # the x_i part, at the target
        c = node_part(w[:, :, f:2 * f])  # the x_j part, at the source
        if bias is not None:
            a = a + bias
        h = gather(a, dst) + gather(c, src)
        if edge_attr is not None:
            enc = self.edge_encoder
            we = jnp.transpose(w[:, :, 2 * f:], (2, 0, 1)).reshape(f, towers * f)
            folded = enc.weight.T @ we  # [edge_dim, T * F_in]: encoder and pre-layer in one
            e = edge_attr.astype(folded.dtype) @ folded
            if enc.bias is not None:
                e = e + enc.bias @ we
            h = h + e.reshape(-1, towers, f)
        return h

    def _aggregate(self, m, dst, n):
        scaler = self.aggr_module
        inner = scaler.aggr
        fast = isinstance(inner, MultiAggregation) and inner.mode == "cat" and all(
            type(a) in _FAST for a in inner.aggrs)
        if not fast:
            return scaler(m, dst, dim_size=n, dim=0)
        outs = _fast_aggregate(tuple(inner.aggrs), m, dst, n)
        out = jnp.concatenate(outs, axis=-1) if len(outs) > 1 else outs[0]
        deg = jax.ops.segment_sum(jnp.ones(dst.shape, out.dtype), dst, n).reshape(n, 1, 1)
        lin, log = scaler.norms()
        return scale(out, deg, scaler.scaler, lin, log)

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_attr=None, *, out_sharding=None):
        op = "PNAConv"
        x = as_array(x, "x", op=op)
        n = x.shape[0]
        edge_index = graph_input(edge_index, x, x, op=op).edge_index  # values unused
        edge_attr = edge_values(edge_attr, edge_index, "edge_attr", op=op)
        if edge_attr is not None and self.edge_encoder is None:
            raise ValueError(f"{op}: `edge_attr` was given but the layer has no edge_dim "
                             f"(PyG's pre-networks take [x_i, x_j] only)")
        if edge_attr is None and self.edge_encoder is not None:
            raise ValueError(f"{op}: the layer has edge_dim set: pass `edge_attr` (PyG's "
                             f"pre-networks take [x_i, x_j, edge_encoder(edge_attr)])")
        if edge_attr is not None and edge_attr.ndim == 1:
            edge_attr = edge_attr[:, None]
        edge_index = drop_from_source(edge_index, n, n)
        src, dst = edge_index[0], edge_index[1]
        x3 = self._inputs(x)
        m = self._first_layer(x, x3, edge_attr, src, dst)
        m = _towers(self.pre_nns, m, start=1)
        out = self._aggregate(m, dst, n)
        out = jnp.concatenate([x3, out], axis=-1)
        out = _towers(self.post_nns, out)
        return self.lin(out.reshape(n, self.towers * self.F_out))


@register_converter("torch_geometric.nn.conv.pna_conv.PNAConv")
def _pna_conv(m, ctx: Converter):
    check_flow(m, ctx)
    if m.node_dim != 0:
        raise ctx.unsupported(m, f"node_dim={m.node_dim}; PNAConv's is 0")
    return PNAConv(ctx.child(m.aggr_module, "aggr_module"), ctx.child(m.pre_nns, "pre_nns"),
                   ctx.child(m.post_nns, "post_nns"), ctx.child(m.lin, "lin"),
                   ctx.child(m.edge_encoder, "edge_encoder") if m.edge_dim is not None
                   else None,
                   towers=int(m.towers), divide_input=bool(m.divide_input), F_in=int(m.F_in),
                   F_out=int(m.F_out))
