"""What the edge, relational and point convs share: dropped sources, keys, aggregations."""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

import jax
import jax.numpy as jnp

from ....nn import Converter
from ....nn._state import key_scope
from ..._core._edges import valid
from .._common import check_aggr

__all__ = ["drop_from_source", "keyed", "converted_aggr", "softplus", "route_loops", "with_loops"]


def drop_from_source(edge_index: jax.Array, n_src: int, n_dst: int) -> jax.Array:
    """An edge whose source is the dropped slot is dropped at its target too: it sends no
    message and counts in no mean or degree (the dropped-slot convention)."""
    src, dst = edge_index[0], edge_index[1]
    return jnp.stack([src, jnp.where(valid(src, n_src), dst, n_dst)])


@contextlib.contextmanager
def keyed(key: Any) -> Iterator[None]:
    """Random ops inside (dropout of a training-mode ``nn``) draw from ``key`` if given."""
    with key_scope(key) if key is not None else contextlib.nullcontext():
        yield


def converted_aggr(m: Any, ctx: Converter, allowed: tuple = ("add", "sum", "mean", "min",
                                                              "max", "mul")) -> dict:
    """``{"aggr": name, "aggr_module": None}`` or ``{"aggr": None, "aggr_module": port}``."""
    aggr = check_aggr(m, ctx, allowed, modules=True)
    if isinstance(aggr, str):
        return {"aggr": aggr, "aggr_module": None}
    return {"aggr": None, "aggr_module": aggr}


def softplus(x: jax.Array) -> jax.Array:
    """``F.softplus(x)`` (beta 1, threshold 20: ``x`` itself above 20, as torch)."""
    return jnp.where(x > 20, x, jax.nn.softplus(jnp.minimum(x, 20)))


def route_loops(edge_index: jax.Array, n_src: int, n_dst: int) -> jax.Array:
    """Every loop ``(i, i)`` becomes ``(n_src, n_dst)``: dropped on both sides (PyG's
    ``remove_self_loops`` with a static shape, bipartite sizes included)."""
    loop = edge_index[0] == edge_index[1]
    slots = jnp.asarray([[n_src], [n_dst]], edge_index.dtype)
    return jnp.where(loop[None, :], slots, edge_index)


def with_loops(edge_index: jax.Array, count: int) -> jax.Array:
    """``edge_index`` followed by the loops ``(i, i)`` of the first ``count`` nodes."""
    loop = jnp.arange(count, dtype=edge_index.dtype)
    return jnp.concatenate([edge_index, jnp.stack([loop, loop])], axis=1)
