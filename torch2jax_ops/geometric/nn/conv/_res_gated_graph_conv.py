"""PyG's ``ResGatedGraphConv`` (residual gated graph convnets, Bresson & Laurent)."""
from __future__ import annotations

from typing import Any, Callable, Optional

import equinox as eqx
import jax

from ...._sharding import sharding_aware
from ....nn import Converter, Linear, register_converter
from .._common import edge_values, graph_input, pair
from ._attention import GatedPropagation, activate, convert_act, drop_dangling
from ._propagation import check_common, convert_aggr

__all__ = ["ResGatedGraphConv"]


class ResGatedGraphConv(GatedPropagation):
    """``torch_geometric.nn.ResGatedGraphConv``: ``out_i = lin_skip(x_i) + sum_j
    act(k_i + q_j) * v_j + bias``.

    ``__call__(x [N, F_in] or (x_src [N_src, F_src], x_dst [N_dst, F_dst]),
    edge_index [2, E], edge_attr [E, D] = None) -> [N_dst, C]``.

    ``k = lin_key(x_dst)``, ``q = lin_query(x_src)``, ``v = lin_value(x_src)``;
    ``act`` defaults to ``Sigmoid()`` (any torch activation module, or a torch
    function with a JAX port). With ``edge_dim`` the three linears read
    ``[x, e_ji]`` per edge (``lin_key(cat([x_i, e_ji]))`` ...); the port splits
    each weight into its node part, applied to the nodes before the gather,
    and its edge part: the same sum, without the ``[E, F + D]`` concatenation.
    ``edge_attr`` is required exactly when ``edge_dim`` is set (PyG asserts it).
    ``aggr`` as PyG's (``"add"`` by default). Arrays: ``lin_key``,
    ``lin_query``, ``lin_value`` (``weight [C, F (+ D)]``, ``bias``),
    ``lin_skip.weight [C, F_dst]`` (with ``root_weight``), ``bias [C]``.
    """
    lin_key: Optional[Linear] = None
    lin_query: Optional[Linear] = None
    lin_value: Optional[Linear] = None
    lin_skip: Optional[Linear] = None
    bias: Optional[jax.Array] = None
    act: Any = None
    aggr_module: Any = None
    act_fn: Optional[Callable] = eqx.field(static=True, default=None)
    edge_dim: Optional[int] = eqx.field(static=True, default=None)
    aggr: str = eqx.field(static=True, default="add")

    @staticmethod
    def _split(lin: Linear, x: jax.Array, edge_attr: Optional[jax.Array], width: int):
        """``lin(cat([x_end, e]))`` as the node part ``x @ W_x.T`` and the edge part
        ``e @ W_e.T + b``."""
        if edge_attr is None:
            return lin(x), None
        node = x @ lin.weight[:, :width].T
        edge = edge_attr @ lin.weight[:, width:].T
        return node, edge if lin.bias is None else edge + lin.bias

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_attr=None, *, out_sharding=None):
        op = "ResGatedGraphConv"
        x_src, x_dst = pair(x, op=op)
        if x_dst is None:
            raise ValueError(f"{op}: `x` = (x_src, None): the keys and the root term need the "
                             f"target features; pass (x_src, x_dst)")
        edge_index = graph_input(edge_index, x_src, x_dst, op=op).edge_index  # values unused
        edge_attr = edge_values(edge_attr, edge_index, "edge_attr", op=op)
        if (edge_attr is None) != (self.edge_dim is None):
            raise ValueError(f"{op}: `edge_attr` must be given exactly when the layer has "
                             f"edge_dim (edge_dim={self.edge_dim}, edge_attr "
                             f"{'missing' if edge_attr is None else 'given'}; PyG asserts it)")
        edge_index = drop_dangling(edge_index, x_src.shape[0], x_dst.shape[0])
        k, ek = self._split(self.lin_key, x_dst, edge_attr, x_dst.shape[-1])
        q, eq = self._split(self.lin_query, x_src, edge_attr, x_src.shape[-1])
        v, ev = self._split(self.lin_value, x_src, edge_attr, x_src.shape[-1])
        out = self.propagate(edge_index, k=(None, k), q=(q, None), v=(v, None), ek=ek, eq=eq,
                             ev=ev)
        if self.lin_skip is not None:
            out = out + self.lin_skip(x_dst)
        return out if self.bias is None else out + self.bias

    # PyG's protocol: propagate passes message's arguments by name, so its signature is
    # the layer's own (not the base's)
    def message(self, k_i: jax.Array, q_j: jax.Array, v_j: jax.Array,  # type: ignore[override]
                ek: Optional[jax.Array] = None, eq: Optional[jax.Array] = None,
                ev: Optional[jax.Array] = None) -> jax.Array:
        if ek is not None:  # the edge parts of lin_key / lin_query / lin_value
            assert eq is not None and ev is not None  # passed together
            k_i, q_j, v_j = k_i + ek, q_j + eq, v_j + ev
        return activate(self, k_i + q_j) * v_j


@register_converter("torch_geometric.nn.conv.res_gated_graph_conv.ResGatedGraphConv")
def _res_gated(m, ctx: Converter) -> ResGatedGraphConv:
    check_common(m, ctx)
    if m.act is None:
        raise ctx.unsupported(m, "act=None: PyG calls self.act(...) in every message, so the "
                                 "layer fails there; pass an activation (default Sigmoid())")
    return ResGatedGraphConv(
        lin_key=ctx.child(m.lin_key, "lin_key"), lin_query=ctx.child(m.lin_query, "lin_query"),
        lin_value=ctx.child(m.lin_value, "lin_value"),
        lin_skip=None if m.lin_skip is None else ctx.child(m.lin_skip, "lin_skip"),
        bias=ctx.array(m.bias), edge_dim=m.edge_dim, **convert_act(m, ctx),
        **convert_aggr(m, ctx))
