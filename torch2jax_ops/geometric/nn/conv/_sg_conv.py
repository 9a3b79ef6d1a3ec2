"""PyG's ``SGConv`` (Simplifying GCN, Wu et al.) as an equinox module, with its converter."""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ...._sharding import OutSharding, sharding_aware
from ....nn import Converter, Linear, register_converter
from ._propagation import (
    WeightedPropagation,
    check_common,
    convert_aggr,
    edges_for,
    gcn_normalized,
    node_features,
    spmm_message_and_aggregate,
)

__all__ = ["SGConv", "Cache"]


class Cache:
    """An array a layer keeps as a constant (a torch layer's filled cache): a static field,
    outside the pytree, so it is no parameter, not in ``state_dict`` and never trained."""
    __slots__ = ("value",)

    def __init__(self, value: np.ndarray) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"Cache(shape={self.value.shape}, dtype={self.value.dtype})"


class SGConv(WeightedPropagation):
    """``torch_geometric.nn.SGConv``: ``out = lin((D^-1/2 (A + I) D^-1/2)^K x)``.

    ``__call__(x [N, F_in], edge_index [2, E], edge_weight [E] = None) -> [N, F_out]``.

    The normalisation is PyG's ``gcn_norm`` (``improved=False``; in-degrees at
    the target, ``add_remaining_self_loops`` with weight 1 when
    ``add_self_loops``), in static shape; ``K`` propagations, then ``lin``
    (with its bias).

    PyG's ``cached=True`` keeps the propagated features of the first call and
    from then on returns ``lin(cache)`` whatever ``x`` and ``edge_index`` it is
    given (no gradient to ``x``): a transductive model trained in PyG holds
    its graph's features there. A layer converted with an empty cache
    recomputes every call (the same numbers on the same graph); one converted
    with a filled cache keeps it (``cached_x``, a constant ``[N, F_in]``
    outside the pytree: no parameter, not in ``state_dict``, never trained)
    and returns ``lin(cached_x)``, PyG's numbers. An ``x`` with another
    number of rows than the cache is a ``ValueError`` (PyG would silently
    return the cached graph's rows).
    Arrays: ``lin.weight [F_out, F_in]``, ``lin.bias [F_out]``.
    """
    lin: Linear
    cached_x: Optional[Cache] = eqx.field(static=True, default=None)
    K: int = eqx.field(static=True, default=1)
    add_self_loops: bool = eqx.field(static=True, default=True)
    aggr: str = eqx.field(static=True, default="add")
    aggr_module: Any = None
    # PyG's message_and_aggregate(adj_t, x): its own signature, as message's is the layer's
    message_and_aggregate = spmm_message_and_aggregate  # type: ignore[assignment]

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_weight=None,
                 *, out_sharding: OutSharding = None) -> jax.Array:
        op = "SGConv"
        x = node_features(x, op=op)
        n = x.shape[self.node_dim]
        if self.cached_x is not None:  # PyG: x = cache.detach(), edge_index unused
            cached = jnp.asarray(self.cached_x.value)
            if n != cached.shape[self.node_dim]:
                raise ValueError(
                    f"{op}: the layer's cache (cached=True, filled in torch) holds the "
                    f"features of a graph of {cached.shape[self.node_dim]} nodes, but "
                    f"`x` has {n}: PyG would return the cached graph's rows. Convert the "
                    f"layer with an empty cache (`._cached_x = None` before from_torch) to "
                    f"propagate each graph, or build it with cached=False")
            return self.lin(cached)
        edge_index, edge_weight = edges_for(edge_index, edge_weight, n, op=op, sparse=True)
        edge_index, edge_weight = gcn_normalized(edge_index, edge_weight, n,
                                                 self.add_self_loops, x.dtype)
        for _ in range(self.K):
            x = self.propagate(edge_index, x=x, edge_weight=edge_weight)
        return self.lin(x)


@register_converter("torch_geometric.nn.conv.sg_conv.SGConv")
def _sg(m, ctx: Converter) -> SGConv:
    check_common(m, ctx)
    cache = m._cached_x if getattr(m, "cached", False) else None
    return SGConv(ctx.child(m.lin, "lin"),
                  cached_x=None if cache is None else Cache(cache.detach().cpu().numpy()),
                  K=int(m.K), add_self_loops=bool(m.add_self_loops), **convert_aggr(m, ctx))
