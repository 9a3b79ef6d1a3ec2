"""PyG's message-passing convolutions as equinox modules: GCN, GraphConv, SAGE, GIN, GINE.

Each mirrors the PyG layer of the same name in eval mode, with PyG's call
signature and parameter names (``lin.weight``, ``lin_rel.bias`` ...), so
``torch2jax_ops.nn.state_dict(port)`` has the PyG ``state_dict`` keys. Build
one from a PyG layer with :func:`torch2jax_ops.nn.from_torch`.

Shapes: ``x [N, F_in]`` (or a ``(x_src [N_src, F], x_dst [N_dst, F])`` pair
for bipartite graphs where PyG allows it), ``edge_index [2, E]`` (ids may use
the dropped slot ``N``, see :mod:`torch2jax_ops.geometric.message_passing`),
output ``[N_dst, F_out]``. All of them work under ``jax.jit`` with the node
count read off ``x``'s static shape.
"""
from __future__ import annotations

from typing import Any, Optional, Union

import equinox as eqx
import jax
import jax.numpy as jnp

from ...nn.layers import Linear
from ...torch_scatter.core import as_array
from ..message_passing import aggregate, edge_array, gather
from ..norm import gcn_norm_static

__all__ = ["GCNConv", "GraphConv", "SAGEConv", "GINConv", "GINEConv", "pair", "edge_values"]

NodeFeatures = Union[jax.Array, tuple]


def pair(x: NodeFeatures, fn: str) -> tuple[jax.Array, Optional[jax.Array]]:
    """``x`` or ``(x_src, x_dst)`` as the pair PyG's layers work on."""
    if isinstance(x, (tuple, list)):
        if len(x) != 2:
            raise ValueError(f"{fn}: a tuple `x` must be (x_src, x_dst), got {len(x)} entries")
        src = as_array(x[0], "x[0]", fn)
        return src, None if x[1] is None else as_array(x[1], "x[1]", fn)
    x = as_array(x, "x", fn)
    return x, x


def _edges(edge_index: Any, fn: str, x_src: jax.Array, x_dst: Optional[jax.Array]) -> jax.Array:
    n = max(x_src.shape[0], x_src.shape[0] if x_dst is None else x_dst.shape[0])
    return edge_array(edge_index, fn, n)


def edge_values(values: Any, edge_index: jax.Array, fn: str, name: str) -> Optional[jax.Array]:
    """Per-edge weights or features: one row per edge, or None."""
    if values is None:
        return None
    values = as_array(values, name, fn)
    if values.ndim == 0 or values.shape[0] != edge_index.shape[1]:
        raise ValueError(f"{fn}: `{name}` must have one row per edge ({edge_index.shape[1]}), "
                         f"got shape {tuple(values.shape)}")
    return values


def _weighted(messages: jax.Array, weight: Optional[jax.Array]) -> jax.Array:
    return messages if weight is None else weight.reshape((-1,) + (1,) * (messages.ndim - 1)) \
        * messages


class GCNConv(eqx.Module):
    """``torch_geometric.nn.GCNConv``: ``out = D^-1/2 (A + I) D^-1/2 (x W^T) + bias``.

    ``__call__(x [N, F_in], edge_index [2, E], edge_weight [E] = None) -> [N, F_out]``.
    Normalisation as :func:`torch2jax_ops.geometric.gcn_norm` (its static form),
    recomputed every call (PyG's ``cached=False``). Arrays: ``lin.weight
    [F_out, F_in]``, ``bias [F_out]``.
    """
    lin: Linear
    bias: Optional[jax.Array]
    improved: bool = eqx.field(static=True, default=False)
    add_self_loops: bool = eqx.field(static=True, default=True)
    normalize: bool = eqx.field(static=True, default=True)

    def __call__(self, x, edge_index, edge_weight=None):
        fn = "GCNConv"
        x = as_array(x, "x", fn)
        edge_index = _edges(edge_index, fn, x, x)
        edge_weight = edge_values(edge_weight, edge_index, fn, "edge_weight")
        n = x.shape[0]
        h = self.lin(x)
        if self.normalize:
            edge_index, edge_weight = gcn_norm_static(
                edge_index, edge_weight, num_nodes=n, improved=self.improved,
                add_self_loops=self.add_self_loops, dtype=h.dtype)
        out = aggregate(_weighted(gather(h, edge_index[0]), edge_weight), edge_index[1], n)
        return out if self.bias is None else out + self.bias


class GraphConv(eqx.Module):
    """``torch_geometric.nn.GraphConv``: ``lin_rel(aggr_j w_ji x_j) + lin_root(x_i)``.

    Aggregation (``add``/``mean``/``max``) on the raw features, then ``lin_rel``.
    ``__call__(x, edge_index, edge_weight=None) -> [N_dst, F_out]``.
    """
    lin_rel: Linear
    lin_root: Linear
    aggr: str = eqx.field(static=True, default="add")

    def __call__(self, x, edge_index, edge_weight=None):
        fn = "GraphConv"
        x_src, x_dst = pair(x, fn)
        edge_index = _edges(edge_index, fn, x_src, x_dst)
        edge_weight = edge_values(edge_weight, edge_index, fn, "edge_weight")
        n = x_src.shape[0] if x_dst is None else x_dst.shape[0]
        out = aggregate(_weighted(gather(x_src, edge_index[0]), edge_weight), edge_index[1], n,
                        self.aggr, fn)
        out = self.lin_rel(out)
        return out if x_dst is None else out + self.lin_root(x_dst)


class SAGEConv(eqx.Module):
    """``torch_geometric.nn.SAGEConv``: ``lin_l(mean_j x_j) + lin_r(x_i)``, optionally L2-normalised.

    With ``project``, neighbours are first mapped by ``relu(lin(x_j))`` (the root
    term keeps the raw ``x``). ``__call__(x, edge_index) -> [N_dst, F_out]``.
    """
    lin_l: Linear
    lin_r: Optional[Linear]
    lin: Optional[Linear] = None
    aggr: str = eqx.field(static=True, default="mean")
    normalize: bool = eqx.field(static=True, default=False)

    def __call__(self, x, edge_index):
        fn = "SAGEConv"
        x_src, x_dst = pair(x, fn)
        edge_index = _edges(edge_index, fn, x_src, x_dst)
        if self.lin is not None:
            x_src = jax.nn.relu(self.lin(x_src))
        n = x_src.shape[0] if x_dst is None else x_dst.shape[0]
        out = self.lin_l(aggregate(gather(x_src, edge_index[0]), edge_index[1], n, self.aggr, fn))
        if self.lin_r is not None and x_dst is not None:
            out = out + self.lin_r(x_dst)
        if self.normalize:  # F.normalize(p=2, dim=-1, eps=1e-12)
            norm = jnp.linalg.norm(out, axis=-1, keepdims=True)
            out = out / jnp.maximum(norm, 1e-12)
        return out


class GINConv(eqx.Module):
    """``torch_geometric.nn.GINConv``: ``nn((1 + eps) x_i + sum_j x_j)``.

    ``eps [1]`` is trained only with ``train_eps`` (else no gradient reaches it,
    as for PyG's buffer). ``__call__(x, edge_index) -> nn's output``.
    """
    nn: Any
    eps: jax.Array
    train_eps: bool = eqx.field(static=True, default=False)

    def _combine(self, out, x_dst):
        eps = self.eps if self.train_eps else jax.lax.stop_gradient(self.eps)
        if x_dst is not None:
            out = out + (1 + eps) * x_dst
        return self.nn(out)

    def __call__(self, x, edge_index):
        fn = "GINConv"
        x_src, x_dst = pair(x, fn)
        edge_index = _edges(edge_index, fn, x_src, x_dst)
        n = x_src.shape[0] if x_dst is None else x_dst.shape[0]
        return self._combine(aggregate(gather(x_src, edge_index[0]), edge_index[1], n), x_dst)


class GINEConv(GINConv):
    """``torch_geometric.nn.GINEConv``: ``nn((1 + eps) x_i + sum_j relu(x_j + lin(e_ji)))``.

    ``lin`` (``[F_in, edge_dim]`` with bias) exists when PyG's ``edge_dim`` was
    given; without it ``edge_attr`` must already have ``F_in`` columns.
    ``__call__(x, edge_index, edge_attr) -> nn's output``.
    """
    lin: Optional[Linear] = None

    def __call__(self, x, edge_index, edge_attr=None):
        fn = "GINEConv"
        x_src, x_dst = pair(x, fn)
        edge_index = _edges(edge_index, fn, x_src, x_dst)
        edge_attr = edge_values(edge_attr, edge_index, fn, "edge_attr")
        if edge_attr is None:
            raise ValueError(f"{fn}: `edge_attr` is required ([num_edges, edge_dim])")
        if self.lin is None and x_src.shape[-1] != edge_attr.shape[-1]:
            raise ValueError(f"{fn}: node and edge feature sizes do not match ({x_src.shape[-1]} "
                             f"vs {edge_attr.shape[-1]}); PyG needs edge_dim=... for that")
        if self.lin is not None:
            edge_attr = self.lin(edge_attr)
        n = x_src.shape[0] if x_dst is None else x_dst.shape[0]
        messages = jax.nn.relu(gather(x_src, edge_index[0]) + edge_attr)
        return self._combine(aggregate(messages, edge_index[1], n), x_dst)
