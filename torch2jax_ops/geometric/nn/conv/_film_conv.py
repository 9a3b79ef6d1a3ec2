"""PyG's ``FiLMConv`` (feature-wise linear modulation, Brockschmidt) as an equinox module."""
from __future__ import annotations

from typing import Any, Callable, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._checking import as_array
from ...._sharding import sharding_aware
from ....nn import Converter, Linear, ModuleList, register_converter
from ..._core._edges import valid
from .._common import graph_input, pair
from ._attention import GatedPropagation, activate, convert_act, drop_dangling
from ._propagation import check_common, convert_aggr

__all__ = ["FiLMConv"]


class FiLMConv(GatedPropagation):
    """``torch_geometric.nn.FiLMConv``: messages modulated by their target, per relation.

    ``__call__(x [N, F_in] or (x_src [N_src, F_src], x_dst [N_dst, F_dst]),
    edge_index [2, E], edge_type [E] = None) -> [N_dst, C]``.

    ``beta, gamma = film_skip(x_i).split(C)``, ``out_i = act(gamma * lin_skip(x_i)
    + beta)``; then for each relation ``r``: ``beta_r, gamma_r = films[r](x_i)``,
    ``out_i += aggr_{j -> i of type r} act(gamma_r,i * lins[r](x_j) + beta_r,i)``
    (``aggr`` PyG's ``"mean"`` by default). ``act`` defaults to ``ReLU()``
    (``None``: no activation). ``nn`` (when given to PyG) replaces each FiLM
    linear by a deep copy of that module; it is converted as it is.

    With ``num_relations > 1`` PyG runs one ``propagate`` per relation on
    ``edge_index[:, edge_type == r]`` (a data-dependent shape); the port runs
    one over all edges in static shapes: relation ``r`` of node ``v`` is row
    ``v * R + r``, so each edge gathers its own relation's features and lands
    in its own relation's slot (edge types outside ``[0, R)`` reach nothing,
    as with PyG's masks), and the relations are summed in PyG's order.
    ``edge_type`` is required then (PyG asserts it) and ignored for one
    relation. Arrays: ``lins.{r}.weight [C, F_src]``, ``films.{r}.weight
    [2C, F_dst]``, ``films.{r}.bias``, ``lin_skip.weight [C, F_dst]``,
    ``film_skip.weight [2C, F_dst]`` (no bias), or the arrays of ``nn``.
    """
    lins: Optional[ModuleList] = None
    films: Optional[ModuleList] = None
    lin_skip: Optional[Linear] = None
    film_skip: Any = None
    act: Any = None
    aggr_module: Any = None
    act_fn: Optional[Callable] = eqx.field(static=True, default=None)
    out_channels: int = eqx.field(static=True, default=1)
    num_relations: int = eqx.field(static=True, default=1)
    aggr: str = eqx.field(static=True, default="mean")

    def _film(self, film: Any, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        both = film(x)
        return both[..., :self.out_channels], both[..., self.out_channels:]

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_type=None, *, out_sharding=None):
        op = "FiLMConv"
        x_src, x_dst = pair(x, op=op)
        if x_dst is None:
            raise ValueError(f"{op}: `x` = (x_src, None): the FiLM parameters are computed "
                             f"from the target features; pass (x_src, x_dst)")
        graph = graph_input(edge_index, x_src, x_dst, op=op)  # values unused
        if graph.adj is not None and self.num_relations > 1:
            raise ValueError(f"{op}: a sparse adj_t with num_relations={self.num_relations} "
                             f"is not supported (PyG reads the values as edge_type and fails); "
                             f"pass the edge list and `edge_type`")
        edge_index = graph.edge_index
        n_src, n_dst = x_src.shape[0], x_dst.shape[0]
        edge_index = drop_dangling(edge_index, n_src, n_dst)
        beta, gamma = self._film(self.film_skip, x_dst)
        out = activate(self, gamma * self.lin_skip(x_dst) + beta)
        relations = self.num_relations
        if relations <= 1:
            beta, gamma = self._film(self.films[0], x_dst)
            return out + self.propagate(edge_index, x=self.lins[0](x_src), beta=beta,
                                        gamma=gamma)
        if edge_type is None:
            raise ValueError(f"{op}: the layer has num_relations={relations}, so `edge_type` "
                             f"[E] is required (PyG asserts it)")
        edge_type = as_array(edge_type, "edge_type", op=op)
        if edge_type.shape != (edge_index.shape[1],) or not jnp.issubdtype(edge_type.dtype,
                                                                           jnp.integer):
            raise ValueError(f"{op}: `edge_type` must be one integer per edge "
                             f"[{edge_index.shape[1]}], got shape {tuple(edge_type.shape)}, "
                             f"dtype {edge_type.dtype}")
        # relation r of node v is row v * R + r: one propagate for all relations
        src, dst = edge_index[0], edge_index[1]
        t = edge_type.astype(src.dtype)
        keep = valid(src, n_src) & valid(dst, n_dst) & (t >= 0) & (t < relations)
        flat = jnp.stack([jnp.where(keep, src * relations + t, n_src * relations),
                          jnp.where(keep, dst * relations + t, n_dst * relations)])
        h = jnp.stack([lin(x_src) for lin in self.lins], axis=1)          # [N_src, R, C]
        films = [self._film(film, x_dst) for film in self.films]
        betas = jnp.stack([b for b, _ in films], axis=1)                   # [N_dst, R, C]
        gammas = jnp.stack([g for _, g in films], axis=1)

        def rows(a):
            return a.reshape(-1, a.shape[-1])

        agg = self.propagate(flat, x=rows(h), beta=rows(betas), gamma=rows(gammas))
        agg = agg.reshape(n_dst, relations, -1)
        for r in range(relations):  # PyG adds the relations one by one
            out = out + agg[:, r]
        return out

    # PyG's protocol: propagate passes message's arguments by name, so its signature is
    # the layer's own (not the base's)
    def message(  # type: ignore[override]
            self, x_j: jax.Array, beta_i: jax.Array, gamma_i: jax.Array) -> jax.Array:
        return activate(self, gamma_i * x_j + beta_i)


@register_converter("torch_geometric.nn.conv.film_conv.FiLMConv")
def _film(m, ctx: Converter) -> FiLMConv:
    check_common(m, ctx)
    if len(m.lins) == 0:
        raise ctx.unsupported(m, "num_relations=0: PyG builds no relation layers and fails in "
                                 "forward (films[0]); use num_relations >= 1")
    return FiLMConv(
        lins=ctx.child(m.lins, "lins"), films=ctx.child(m.films, "films"),
        lin_skip=ctx.child(m.lin_skip, "lin_skip"), film_skip=ctx.child(m.film_skip, "film_skip"),
        out_channels=m.out_channels, num_relations=m.num_relations, **convert_act(m, ctx),
        **convert_aggr(m, ctx))
