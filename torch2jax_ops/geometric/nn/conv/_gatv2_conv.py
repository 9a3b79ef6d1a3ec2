"""PyG's ``GATv2Conv`` (Brody et al., "How attentive are graph attention networks?")."""
from __future__ import annotations

from typing import Any, Optional, Union, cast

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.experimental import sparse as jsparse

from ...._sharding import sharding_aware
from ....nn import Converter, Linear, register_converter
from ..._core._edges import gather_rows
from ...utils._loops import loop_attributes
from .._common import edge_values, graph_input, pair
from ._attention import (
    GatedPropagation,
    attend,
    dropout_weights,
    edge_attention,
    edges_with_loops,
    head_dot,
    heads_view,
    loop_plan,
    merge_heads,
)
from ._propagation import check_common, convert_aggr

__all__ = ["GATv2Conv"]


class GATv2Conv(GatedPropagation):
    """``torch_geometric.nn.GATv2Conv``; attention dropout in training mode (with a key).

    ``__call__(x [N, F_in] or (x_src [N_src, F_src], x_dst [N_dst, F_dst]),
    edge_index [2, E], edge_attr [E, D] or [E] = None, return_attention_weights=None,
    *, key=None)`` -> ``[N_dst, heads * C]`` (``concat``) or ``[N_dst, C]``
    (mean over heads); with ``return_attention_weights`` (any value but
    ``None``/``False``, PyG's truthiness test) also ``(edge_index, alpha)``.

    Per head: ``x_l = lin_l(x_src)``, ``x_r = lin_r(x_dst)`` viewed ``[N, H, C]``;
    ``alpha_ji = softmax_i(att . leaky_relu(x_l[j] + x_r[i] (+ lin_edge(e_ji))))``
    over each target's incoming edges; ``out_i = sum_j alpha_ji x_l[j]``
    (+ ``res(x_dst)``) + ``bias``. The attention of GATv2 applies the
    nonlinearity before ``att`` (GATConv after), so the edge features cannot be
    folded into a per-edge score: they are projected per edge, as in PyG.

    PyG's behaviour mirrored:

    * ``add_self_loops``: every existing loop is removed and one loop per node
      ``i < min(N_src, N_dst)`` added; their edge features by ``fill_value``
      (``"mean"``: the mean of the node's incoming edge features, loops
      excluded), computed in static shapes, the loops node-wise;
    * ``share_weights``: ``lin_r`` is ``lin_l`` (one projection; both names are
      in the state dict, as in PyG's);
    * a bipartite pair needs ``x_dst`` (PyG asserts it); ``edge_attr`` without
      ``edge_dim`` is an error, ``edge_dim`` without ``edge_attr`` skips the
      edge term;
    * the returned attention is taken after dropout (PyG's ``edge_updater``
      returns the dropped weights). Its edge list has a static shape: the
      input edges in their slots (removed loops as the dropped pair ``(M, M)``,
      ``M = max(N_src, N_dst)``, attention 0), then the loops (PyG: compacted).

    Arrays: ``lin_l.weight [H*C, F_src]``, ``lin_l.bias``, ``lin_r.weight [H*C,
    F_dst]``, ``lin_r.bias``, ``att [1, H, C]``, ``lin_edge.weight [H*C, D]``,
    ``res.weight``, ``bias [H*C]`` (``[C]`` without ``concat``).

    ``edge_index`` may be an :class:`~torch2jax_ops.geometric.EdgeIndex` or a
    sparse ``adj_t [N_dst, N_src]`` (``BCOO`` / ``BCSR``). On ``adj_t``, as in
    PyG: the values are ignored, the diagonal entries are replaced by one loop
    per node, repeated entries count once when loops are added (PyG rebuilds a
    coalesced matrix), ``edge_attr`` cannot be combined with ``add_self_loops``,
    and the returned attention comes as ``(adj, alpha)``: a ``BCOO``
    ``[N_dst, N_src, H]`` holding ``alpha`` at the entries and the loops
    (removed diagonal entries as padding), PyG's ``set_sparse_value(adj_t, alpha)``.
    """
    lin_l: Optional[Linear] = None
    lin_r: Optional[Linear] = None
    att: Optional[jax.Array] = None
    lin_edge: Optional[Linear] = None
    res: Optional[Linear] = None
    bias: Optional[jax.Array] = None
    aggr_module: Any = None
    heads: int = eqx.field(static=True, default=1)
    out_channels: int = eqx.field(static=True, default=1)
    concat: bool = eqx.field(static=True, default=True)
    negative_slope: float = eqx.field(static=True, default=0.2)
    dropout: float = eqx.field(static=True, default=0.0)
    add_self_loops: bool = eqx.field(static=True, default=True)
    fill_value: Union[str, float] = eqx.field(static=True, default="mean")
    share_weights: bool = eqx.field(static=True, default=False)
    training: bool = eqx.field(static=True, default=False)
    aggr: str = eqx.field(static=True, default="add")
    node_dim = 0

    def _project(self, x_src: jax.Array, x_dst: jax.Array, tuple_input: bool):
        assert self.lin_l is not None  # always set by the converter
        if self.share_weights:
            x_l = self.lin_l(x_src)
            return x_l, x_l if not tuple_input else self.lin_l(x_dst)
        assert self.lin_r is not None  # None only with share_weights
        if tuple_input:
            return self.lin_l(x_src), self.lin_r(x_dst)
        # one matmul for both projections of the same x
        weight = jnp.concatenate([self.lin_l.weight, self.lin_r.weight], axis=0)
        both = x_src @ weight.T
        if self.lin_l.bias is not None:
            # PyG's one `bias` flag: both projections have a bias, or neither does
            both = both + jnp.concatenate([self.lin_l.bias, cast(jax.Array, self.lin_r.bias)])
        width = self.lin_l.weight.shape[0]
        return both[:, :width], both[:, width:]

    def _scores(self, s: jax.Array) -> jax.Array:
        """``(leaky_relu(s) * att).sum(-1)``: ``[*, H, C]`` -> ``[*, H]`` (one head ``[*]``)."""
        assert self.att is not None  # always set by the converter
        att = self.att.reshape(-1) if self.heads == 1 else self.att[0]
        return head_dot(jax.nn.leaky_relu(s, self.negative_slope), att)

    def _edge_term(self, edge_attr: jax.Array) -> jax.Array:
        if edge_attr.ndim == 1:
            edge_attr = edge_attr[:, None]
        assert self.lin_edge is not None  # edge features are only passed with an edge_dim
        return heads_view(self.lin_edge(edge_attr), self.heads, self.out_channels)

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_attr=None, return_attention_weights=None, *,
                 key=None, out_sharding=None):
        op = "GATv2Conv"
        tuple_input = isinstance(x, (tuple, list))
        x_src, x_dst = pair(x, op=op)
        if x_dst is None:
            raise ValueError(f"{op}: `x` = (x_src, None): GATv2Conv needs the target features "
                             f"too (PyG asserts x_r is not None); pass (x_src, x_dst)")
        graph = graph_input(edge_index, x_src, x_dst, op=op, coalesce=self.add_self_loops)
        edge_index = graph.edge_index
        edge_attr = edge_values(edge_attr, edge_index, "edge_attr", op=op)
        if graph.adj is not None and edge_attr is not None and self.add_self_loops:
            raise ValueError(f"{op}: `edge_attr` with a sparse adj_t and add_self_loops=True is "
                             f"not supported (PyG's add_self_loops asserts edge_attr is None "
                             f"for a sparse matrix); pass the edge list instead")
        if edge_attr is not None and self.lin_edge is None:
            raise ValueError(f"{op}: `edge_attr` was given but the layer has no edge_dim (PyG "
                             f"asserts lin_edge is not None); build it with edge_dim=D or "
                             f"drop edge_attr")
        heads, channels = self.heads, self.out_channels
        res = None if self.res is None else self.res(x_dst)
        x_l, x_r = self._project(x_src, x_dst, tuple_input)
        x_l, x_r = heads_view(x_l, heads, channels), heads_view(x_r, heads, channels)
        n_src, n_dst = x_src.shape[0], x_dst.shape[0]
        src, dst, n_loops = loop_plan(edge_index, n_src, n_dst, self.add_self_loops)
        x_j = gather_rows(x_l, src)
        s = x_j + gather_rows(x_r, dst)
        s_loop = x_l[:n_loops] + x_r[:n_loops]
        if edge_attr is not None:
            s = s + self._edge_term(edge_attr)
            if n_loops:  # the new loops' features by fill_value, from the kept edges
                loop_attr = loop_attributes(edge_attr, self.fill_value, dst, n_loops, op=op)
                s_loop = s_loop + self._edge_term(loop_attr)
        scores, loop_scores = self._scores(s), self._scores(s_loop)
        weights, loop_weights = dropout_weights(self.training, self.dropout, key, scores.shape,
                                                loop_scores.shape, op=op)
        # the weighted sum reads x_l's rows itself (the kernel on the CPU: no [E, H, C]
        # product, and its gradient w.r.t. x_l is no scatter of one)
        out = attend(self, scores, x_l, dst, n_dst, loop_scores, x_l[:n_loops], weights,
                     loop_weights, src=src)
        out = merge_heads(out, heads, self.concat)
        if res is not None:
            out = out + res
        if self.bias is not None:
            out = out + self.bias
        if not return_attention_weights:
            return out
        alpha = edge_attention(scores, dst, n_dst, loop_scores, weights, loop_weights)
        alpha = alpha.reshape(alpha.shape[0], heads)
        edges = edges_with_loops(edge_index, n_src, n_dst, self.add_self_loops)
        if graph.adj is None:
            return out, (edges, alpha)
        # PyG: set_sparse_value(adj_t with its loops, alpha), a [N_dst, N_src, H] matrix
        adj = jsparse.BCOO((alpha, jnp.stack([edges[1], edges[0]], axis=1)),
                           shape=(n_dst, n_src, heads))
        return out, (adj, alpha)


@register_converter("torch_geometric.nn.conv.gatv2_conv.GATv2Conv")
def _gatv2(m, ctx: Converter) -> GATv2Conv:
    check_common(m, ctx)
    fill = m.fill_value
    if hasattr(fill, "numel"):
        if fill.numel() != 1:
            raise ctx.unsupported(m, "fill_value is a tensor with several entries; pass a "
                                     "number or a reduction name")
        fill = float(fill)
    lin_l = ctx.child(m.lin_l, "lin_l")
    return GATv2Conv(
        lin_l=lin_l, lin_r=lin_l if m.share_weights else ctx.child(m.lin_r, "lin_r"),
        att=ctx.array(m.att),
        lin_edge=None if m.lin_edge is None else ctx.child(m.lin_edge, "lin_edge"),
        res=None if m.res is None else ctx.child(m.res, "res"), bias=ctx.array(m.bias),
        heads=m.heads, out_channels=m.out_channels, concat=m.concat,
        negative_slope=float(m.negative_slope), dropout=float(m.dropout),
        add_self_loops=m.add_self_loops, fill_value=fill, share_weights=m.share_weights,
        training=m.training, **convert_aggr(m, ctx))
