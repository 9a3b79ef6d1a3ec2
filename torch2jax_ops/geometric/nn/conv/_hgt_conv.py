"""PyG's ``HGTConv`` (Heterogeneous Graph Transformer, Hu et al. 2020) as an equinox module.

``__call__(x_dict, edge_index_dict) -> out_dict``. ``x_dict``: node type ->
``[N_t, F_t]``; ``edge_index_dict``: ``(src, rel, dst)`` -> ``[2, E_r]``
(row 0 ids of ``src`` nodes, row 1 of ``dst`` nodes; the dropped slot
``N_src`` / ``N_dst`` marks a padding edge that reaches no node). With
``F = out_channels``, ``H = heads``, ``D = F / H``:

* ``k_t, q_t, v_t = split(kqv_lin[t](x_t), 3)``, each viewed ``[N_t, H, D]``;
* per edge type ``r = (s, ., d)`` and head ``h``:
  ``k_r = k_s[:, h] @ k_rel.weight[h * R + r]`` (``[D, D]``, ``R`` edge
  types of the metadata), ``v_r`` likewise with ``v_rel``;
* per edge ``j -> i`` of type ``r``: ``a_ji = (q_i . k_r,j) * p_rel[r] / sqrt(D)``
  (``[H]``), normalised by **one** softmax over all incoming edges of ``i``,
  of every edge type together (PyG concatenates the edge types into one
  bipartite graph); ``o_i = sum_j a_ji v_r,j`` -> ``[N_d, F]``;
* ``out_t = out_lin[t](gelu(o_t))``, and where ``F == F_t`` the gated skip
  ``sigmoid(skip[t]) * out_t + (1 - sigmoid(skip[t])) * x_t``.

``out_dict`` holds, as PyG's, exactly the node types of ``x_dict`` that are
the destination of some edge type of the *metadata* (``dst_node_types``):
a node type that only sends is absent (PyG leaves it out, it is not
``None``); a destination type whose edge types are all missing from
``edge_index_dict`` (or have no edges) gets ``out_lin[t](0)``, skip-mixed.

PyG's behaviour mirrored: edge types missing from ``edge_index_dict`` are
skipped; an edge type the layer does not know is a ``KeyError`` (PyG's
``edge_types_map[edge_type]``); node types of ``x_dict`` the layer does not
know are ignored.

One deviation: PyG's relation matrices depend on the *order* of
``edge_index_dict``. Its ``HeteroLinear(..., is_sorted=True)`` gets a type
vector laid out in the dict's order; in the metadata's order (or a
subsequence of it: ``data.edge_index_dict`` is) that vector is sorted and
edge type ``r``, head ``h`` uses ``k_rel.weight[h * R + r]``; in another
order it is not sorted and PyG's segment pointers hand some edge types
another relation's matrices. JAX sorts dict keys whenever a dict crosses
``jax.jit`` or a tree map, so the caller's order cannot be seen reliably:
the port always pairs as for the metadata's order (PyG's result for
``data.edge_index_dict``, whatever order the dict comes in).

Arrays (PyG's ``state_dict`` names): ``kqv_lin.lins.<t>.weight [3F, F_t]`` /
``.bias``, ``out_lin.lins.<t>.weight [F, F]`` / ``.bias``,
``k_rel.weight`` / ``v_rel.weight [H * R, D, D]``, ``skip.<t> [1]``,
``p_rel.<s>__<rel>__<d> [1, H]``.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ...._checking import as_array
from ....nn import Converter, register_converter
from ..._core._edges import check_ids, edge_array, gather_rows, valid
from ...utils._softmax import softmax_aggregate
from .._common import check_flow
from .._hetero_linear import HeteroDictLinear

__all__ = ["HGTConv"]

EdgeType = tuple[str, str, str]


class _RelationWeight(eqx.Module):
    """PyG's ``HeteroLinear(D, D, H * R, bias=False)``: ``weight [H * R, D, D]``, ``x @ W``."""
    weight: jax.Array


def _edge_key(edge_type: Any) -> str:
    return "__".join(edge_type)


class HGTConv(eqx.Module):
    """``torch_geometric.nn.HGTConv``; see the module docs for what it computes.

    ``__call__(x_dict {t: [N_t, F_t]}, edge_index_dict {(s, rel, d): [2, E]})``
    -> ``{t: [N_t, out_channels]}`` for the node types of ``x_dict`` that some
    edge type of the metadata points to.
    """
    kqv_lin: HeteroDictLinear
    out_lin: HeteroDictLinear
    k_rel: _RelationWeight
    v_rel: _RelationWeight
    skip: dict[str, jax.Array]
    p_rel: dict[str, jax.Array]
    out_channels: int = eqx.field(static=True)
    heads: int = eqx.field(static=True)
    node_types: tuple[str, ...] = eqx.field(static=True)
    edge_types: tuple[EdgeType, ...] = eqx.field(static=True)

    @property
    def dst_node_types(self) -> frozenset:
        """PyG's ``dst_node_types``: every destination of the metadata's edge types."""
        return frozenset(et[-1] for et in self.edge_types)

    def _inputs(self, x_dict: Any, edge_index_dict: Any) -> tuple[dict, dict]:
        op = "HGTConv"
        if not isinstance(x_dict, Mapping):
            raise TypeError(f"{op}: `x_dict` must be a dict node type -> [N, F] features, got "
                            f"{type(x_dict).__name__}")
        if not isinstance(edge_index_dict, Mapping):
            raise TypeError(f"{op}: `edge_index_dict` must be a dict (src, rel, dst) -> [2, E] "
                            f"edge index, got {type(edge_index_dict).__name__}")
        if not edge_index_dict:
            raise ValueError(f"{op}: `edge_index_dict` is empty; PyG's HGTConv needs at least "
                             f"one edge type (it concatenates their source features)")
        xs: dict[str, jax.Array] = {}
        for t, x in x_dict.items():
            if t not in self.kqv_lin.lins:
                continue  # PyG's HeteroDictLinear skips types it has no Linear for
            x = as_array(x, f"x_dict[{t!r}]", op=op)
            width = self.kqv_lin.lins[t].weight.shape[1]
            if x.ndim != 2 or x.shape[1] != width:
                raise ValueError(f"{op}: `x_dict[{t!r}]` must have shape [num_nodes, {width}] "
                                 f"(the layer's in_channels for {t!r}), got {tuple(x.shape)}")
            if not jnp.issubdtype(x.dtype, jnp.floating):
                raise TypeError(f"{op}: `x_dict[{t!r}]` must be floating point, got {x.dtype}")
            xs[t] = x
        edges: dict[EdgeType, jax.Array] = {}
        for et, edge_index in edge_index_dict.items():
            et = tuple(et) if isinstance(et, (tuple, list)) else et
            if et not in self.edge_types:
                raise KeyError(f"{op}: `edge_index_dict` has the edge type {et!r}, which is "
                               f"not in the layer's metadata {list(self.edge_types)} (PyG "
                               f"raises KeyError too); drop it or rebuild the layer")
            for end, t in (("source", et[0]), ("destination", et[-1])):
                if t not in xs:
                    raise KeyError(f"{op}: `x_dict` has no features for the node type {t!r}, "
                                   f"the {end} of the edge type {et!r} in `edge_index_dict`")
            name = f"edge_index_dict[{et!r}]"
            edge_index = edge_array(edge_index, name=name, op=op)
            check_ids(edge_index[0], xs[et[0]].shape[0], f"{name}[0]", op=op)
            check_ids(edge_index[1], xs[et[-1]].shape[0], f"{name}[1]", op=op)
            edges[et] = edge_index
        return xs, edges

    def __call__(self, x_dict: Mapping[str, Any],
                 edge_index_dict: Mapping[Any, Any]) -> dict[str, jax.Array]:
        xs, edges = self._inputs(x_dict, edge_index_dict)
        heads, f = self.heads, self.out_channels
        dim = f // heads
        kqv = self.kqv_lin(xs)
        k, q, v = {}, {}, {}
        for t, h in kqv.items():
            k[t], q[t], v[t] = (a.reshape(a.shape[0], heads, dim) for a in jnp.split(h, 3, axis=1))

        # destinations: the concatenated node range the one softmax runs over
        targets = [t for t in xs if t in self.dst_node_types]
        offsets, total = {}, 0
        for t in targets:
            offsets[t], total = total, total + xs[t].shape[0]

        num_edge_types = len(self.edge_types)
        scores, messages, index = [], [], []
        for et, edge_index in edges.items():
            # head h of edge type r: k_rel.weight[h * R + r] (PyG's sorted type vector)
            rel = np.arange(heads) * num_edge_types + self.edge_types.index(et)
            s, d = et[0], et[-1]
            n_src, n_dst = xs[s].shape[0], xs[d].shape[0]
            k_r = jnp.einsum("nhd,hde->nhe", k[s], self.k_rel.weight[rel])
            v_r = jnp.einsum("nhd,hde->nhe", v[s], self.v_rel.weight[rel])
            src, dst = edge_index[0], edge_index[1]
            keep = valid(src, n_src) & valid(dst, n_dst)
            k_j, v_j = gather_rows(k_r, src), gather_rows(v_r, src)
            q_i = gather_rows(q[d], dst)
            alpha = jnp.sum(q_i * k_j, axis=-1) * self.p_rel[_edge_key(et)]
            scores.append(alpha / math.sqrt(dim))
            messages.append(v_j)
            index.append(jnp.where(keep, dst + offsets[d], total))
        out = softmax_aggregate(jnp.concatenate(scores), jnp.concatenate(messages),
                                jnp.concatenate(index), total)
        out = out.reshape(total, f)

        result = {}
        for t in targets:
            o = self.out_lin.lins[t](jax.nn.gelu(out[offsets[t]:offsets[t] + xs[t].shape[0]],
                                                 approximate=False))
            if o.shape[-1] == xs[t].shape[-1]:  # PyG: the skip only where the widths agree
                gate = jax.nn.sigmoid(self.skip[t])
                o = gate * o + (1 - gate) * xs[t]
            result[t] = o
        return result


@register_converter("torch_geometric.nn.conv.hgt_conv.HGTConv")
def _hgt(m: Any, ctx: Converter) -> HGTConv:
    check_flow(m, ctx)
    if m.aggr != "add":
        raise ctx.unsupported(m, f"aggr={m.aggr!r}; HGTConv sums its attention-weighted "
                                 f"messages (aggr='add')")
    if getattr(m, "decomposed_layers", 1) != 1:
        raise ctx.unsupported(m, f"decomposed_layers={m.decomposed_layers}; only 1 is ported")
    return HGTConv(
        kqv_lin=ctx.child(m.kqv_lin, "kqv_lin"), out_lin=ctx.child(m.out_lin, "out_lin"),
        k_rel=_RelationWeight(ctx.array(m.k_rel.weight)),
        v_rel=_RelationWeight(ctx.array(m.v_rel.weight)),
        skip={t: ctx.array(p) for t, p in m.skip.items()},
        p_rel={key: ctx.array(p) for key, p in m.p_rel.items()},
        out_channels=int(m.out_channels), heads=int(m.heads),
        node_types=tuple(m.node_types), edge_types=tuple(tuple(et) for et in m.edge_types))
