"""PyG's ``ARMAConv`` (ARMA graph filters, Bianchi et al.) as an equinox module."""
from __future__ import annotations

from typing import Any, Callable, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._sharding import OutSharding, sharding_aware
from ....nn import Converter, register_converter
from ....nn._layers import dropout
from ....nn._state import next_key
from ._propagation import (
    WeightedPropagation,
    check_common,
    convert_aggr,
    edges_for,
    gcn_normalized,
    node_features,
    torch_function,
)

__all__ = ["ARMAConv"]


class ARMAConv(WeightedPropagation):
    """``torch_geometric.nn.ARMAConv``: ``K`` parallel stacks of ``T`` layers, averaged.

    ``__call__(x [N, F_in], edge_index [2, E], edge_weight [E] = None, *, key=None)
    -> [N, F_out]``.

    Stack ``k``: ``X^(0) = x``; ``X^(t+1) = act(A_hat (X^(t) W_t^k) + dropout(x) V_t^k
    + b_t^k)`` with ``W_0 = init_weight[k]``, ``W_t = weight[t - 1, k]`` (``t >= 1``),
    ``V_t = root_weight[t, k]``, ``b_t = bias[t, k]`` (index 0 for every ``t``
    with ``shared_weights``); the output is the mean over the stacks. ``A_hat``
    is PyG's ``gcn_norm`` **without** self-loops. Features are ``[K, N, F]``
    (``node_dim=-2``) inside. ``weight`` always has ``max(1, T - 1)`` layers,
    unused when ``T == 1`` (zero gradient).

    Training mode with ``dropout > 0``: the root input ``x`` goes through
    ``F.dropout`` in every layer (a fresh ``[1, N, F_in]`` mask, shared by the
    stacks), drawn from ``key`` (or the enclosing key scope).
    Arrays: ``init_weight [K, F_in, F_out]``, ``weight [max(1, T-1), K, F_out, F_out]``,
    ``root_weight [T, K, F_in, F_out]``, ``bias [T, K, 1, F_out]`` (``T = 1`` when
    shared), plus ``act``'s if the activation module has any.
    """
    init_weight: jax.Array
    weight: jax.Array
    root_weight: jax.Array
    bias: Optional[jax.Array]
    act: Any = None
    act_fn: Optional[Callable] = eqx.field(static=True, default=None)
    num_stacks: int = eqx.field(static=True, default=1)
    num_layers: int = eqx.field(static=True, default=1)
    shared_weights: bool = eqx.field(static=True, default=False)
    dropout: float = eqx.field(static=True, default=0.0)
    training: bool = eqx.field(static=True, default=False)
    aggr: str = eqx.field(static=True, default="add")
    aggr_module: Any = None

    def _activation(self, x: jax.Array) -> jax.Array:
        if self.act is not None:
            return self.act(x)
        return x if self.act_fn is None else self.act_fn(x)

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x, edge_index, edge_weight=None, *, key=None,
                 out_sharding: OutSharding = None) -> jax.Array:
        op = "ARMAConv"
        x = node_features(x, op=op)
        n = x.shape[self.node_dim]
        edge_index, edge_weight = edges_for(edge_index, edge_weight, n, op=op)
        edge_index, edge_weight = gcn_normalized(edge_index, edge_weight, n, False, x.dtype)
        drop = self.training and self.dropout > 0
        if drop:
            key = next_key(op) if key is None else key
        x = jnp.expand_dims(x, -3)
        out = x
        for t in range(self.num_layers):
            if t == 0:
                out = out @ self.init_weight
            else:
                out = out @ self.weight[0 if self.shared_weights else t - 1]
            out = self.propagate(edge_index, x=out, edge_weight=edge_weight)
            root = dropout(x, self.dropout, drop, jax.random.fold_in(key, t) if drop else None,
                           op=op)
            out = out + root @ self.root_weight[0 if self.shared_weights else t]
            if self.bias is not None:
                out = out + self.bias[0 if self.shared_weights else t]
            out = self._activation(out)
        return jnp.mean(out, axis=-3)


@register_converter("torch_geometric.nn.conv.arma_conv.ARMAConv")
def _arma(m, ctx: Converter) -> ARMAConv:
    import torch

    check_common(m, ctx)
    act = act_fn = None
    if isinstance(m.act, torch.nn.Module):
        act = ctx.child(m.act, "act")
    elif m.act is not None:
        act_fn = torch_function(m.act, ctx, m, "act")
    return ARMAConv(ctx.array(m.init_weight), ctx.array(m.weight), ctx.array(m.root_weight),
                    ctx.array(m.bias), act=act, act_fn=act_fn, num_stacks=int(m.num_stacks),
                    num_layers=int(m.num_layers), shared_weights=bool(m.shared_weights),
                    dropout=float(m.dropout), training=bool(m.training),
                    **convert_aggr(m, ctx))
