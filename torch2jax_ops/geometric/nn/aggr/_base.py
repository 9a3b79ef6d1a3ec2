"""What every aggregation shares: PyG's argument rules, reductions along ``dim``, torch's clamp.

An aggregation is called as PyG's ``Aggregation.__call__``:
``aggr(x, index=None, ptr=None, dim_size=None, dim=-2)``. ``x`` ``[..., E, ...]``
holds one entry per element along ``dim``; ``index`` ``[E]`` names each
element's group (``dim_size`` groups; the id ``dim_size`` is the dropped slot
of :mod:`torch2jax_ops.geometric`: the element reaches no group), or ``ptr``
``[G + 1]`` gives CSR boundaries (elements sorted by group). Neither: one
group. The output has ``dim_size`` rows along ``dim``.

Under ``jax.jit`` ``dim_size`` must be given with ``index`` (PyG reads
``index.max() + 1`` from the data); with ``ptr`` it is ``ptr.shape[0] - 1``.
"""
from __future__ import annotations

import contextlib
from typing import Any, ClassVar, NamedTuple, Optional, cast

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._batch_vector import BatchVector, graph_count
from ...._checking import Reduction, as_array
from ...._sharding import OutSharding, sharding_aware
from ....nn._state import key_scope
from ....torch_scatter._gather import csr_ids
from ....torch_scatter._segment_csr import segment_csr
from ..._core._edges import aggregate, check_ids, node_count
from .._message_passing import aggregate_along

__all__ = ["Aggregation", "Grouping", "prepare", "reduce_along", "clamp", "aggregate_messages",
           "counts_along"]


class Grouping(NamedTuple):
    """Where each element of ``x`` goes: ``ids [E]`` along ``axis`` into ``n`` groups.

    ``indexed``: ``index`` was given (or made: no ``index`` and no ``ptr`` is one
    group); ``ptr``: the CSR offsets when only ``ptr`` was given (PyG then
    reduces with ``segment``: torch_scatter's ``segment_csr``, whose min/max
    send the gradient to the first extremum); ``padded``: ``index`` is a padded
    batch's :class:`~torch2jax_ops.BatchVector`, whose highest group with elements is
    the padding graph.
    """
    ids: jax.Array
    n: int
    axis: int
    indexed: bool
    ptr: Optional[jax.Array] = None
    padded: bool = False


def prepare(x: Any, index: Any, ptr: Any, dim_size: Any, dim: Any, *, op: str,
            needs_index: bool = False) -> tuple:
    """PyG's ``Aggregation.__call__`` rules: ``(x, Grouping)``."""
    x = as_array(x, "x", op=op)
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{op}: `dim` must be a Python int, got {type(dim).__name__}")
    if dim >= x.ndim or dim < -x.ndim:
        raise ValueError(f"{op}: Encountered invalid dimension '{dim}' of source tensor with "
                         f"{x.ndim} dimensions (as PyG)")
    axis = dim % x.ndim
    length = x.shape[axis]
    if index is None and ptr is None:  # PyG: one group, index = zeros
        index = jnp.zeros((length,), jnp.int32)
        if dim_size is None:
            dim_size = 1 if length else 0
    if ptr is not None:
        ptr = as_array(ptr, "ptr", op=op)
        if ptr.ndim != 1 or ptr.shape[0] < 1 or not jnp.issubdtype(ptr.dtype, jnp.integer):
            raise ValueError(f"{op}: `ptr` must be a 1-D integer array of G + 1 offsets, got "
                             f"shape {tuple(ptr.shape)}, dtype {ptr.dtype}")
        if dim_size is None:
            dim_size = ptr.shape[0] - 1
        elif dim_size != ptr.shape[0] - 1:
            raise ValueError(f"{op}: Encountered invalid 'dim_size' (got '{dim_size}' but "
                             f"expected '{ptr.shape[0] - 1}' from `ptr`)")
    if needs_index and index is None:
        raise NotImplementedError(f"{op}: this aggregation requires 'index' to be specified "
                                  f"(as in PyG); pass index=... (the group of each element)")
    if index is not None:
        padded = isinstance(index, BatchVector) and index.padded
        dim_size = graph_count(index, dim_size)
        index = as_array(index, "index", op=op)
        if index.ndim != 1 or index.shape[0] != length or \
                not jnp.issubdtype(index.dtype, jnp.integer):
            raise ValueError(f"{op}: `index` must be a 1-D integer array with one entry per "
                             f"element along dim={dim} ({length}), got shape "
                             f"{tuple(index.shape)}, dtype {index.dtype}")
        n = node_count(dim_size, index, "dim_size", index_name="index",
                       hint="the number of groups (num_nodes)", op=op)
        check_ids(index, n, "index", op=op)
        return x, Grouping(index, n, axis, True, padded=padded)
    n = int(dim_size)
    return x, Grouping(csr_ids(ptr, length), n, axis, False, ptr)


def reduce_along(x: jax.Array, g: Grouping, reduce: str, *, op: str) -> jax.Array:
    """PyG's ``Aggregation.reduce``: ``scatter(x, index, dim, dim_size, reduce)`` (0 for
    empty groups), or with ``ptr`` alone ``segment(x, ptr, reduce)``."""
    moved = jnp.moveaxis(x, g.axis, 0)
    if not g.indexed and reduce in ("min", "max"):
        assert g.ptr is not None  # a Grouping without an index carries the ptr
        out = segment_csr(moved, g.ptr, reduce=cast(Reduction, reduce))
    else:
        out = aggregate(moved, g.ids, g.n, reduce, op=op)
    return jnp.moveaxis(out, 0, g.axis)


def counts_along(g: Grouping, ndim: int, dtype: Any) -> jax.Array:
    """PyG's ``degree(index, dim_size)`` shaped to broadcast along ``g.axis`` of an
    ``ndim``-D result (dropped ids count for no group)."""
    deg = jax.ops.segment_sum(jnp.ones(g.ids.shape, dtype), g.ids, g.n)
    shape = [1] * ndim
    shape[g.axis] = g.n
    return deg.reshape(shape)


def clamp(x: jax.Array, lo: Optional[float] = None, hi: Optional[float] = None) -> jax.Array:
    """``torch.clamp(x, lo, hi)``: the gradient passes where ``lo <= x <= hi`` (bounds
    included, unlike ``jnp.clip`` which splits it at a bound); NaN stays NaN."""
    out = x
    if lo is not None:
        out = jnp.where(x < lo, jnp.asarray(lo, x.dtype), out)
    if hi is not None:
        out = jnp.where(out > hi, jnp.asarray(hi, x.dtype), out)
    return out


def aggregate_messages(aggr: Optional[str], aggr_module: Any, inputs: jax.Array,
                       index: jax.Array, dim_size: int, dim: int = -2) -> jax.Array:
    """A conv's aggregation: its ``aggr_module`` port if it has one, else the reduction name."""
    if aggr_module is not None:
        return aggr_module(inputs, index, dim_size=dim_size, dim=dim)
    assert aggr is not None  # a conv has its aggr name or an aggr_module
    return aggregate_along(inputs, index, dim_size, aggr, dim)


class Aggregation(eqx.Module):
    """Base class: PyG's ``torch_geometric.nn.aggr.Aggregation`` call protocol.

    ``__call__(x, index=None, ptr=None, dim_size=None, dim=-2) -> [..., dim_size, ...]``;
    subclasses implement ``_aggregate(x, groups)`` (a :class:`Grouping`).
    """
    _needs_index: ClassVar[bool] = False

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x: Any, index: Any = None, ptr: Any = None,
                 dim_size: Optional[int] = None, dim: int = -2, *,
                 key: Any = None, out_sharding: OutSharding = None) -> jax.Array:
        """Aggregate ``x`` along ``dim`` into ``dim_size`` groups (see the module docs);
        ``key``: for dropout inside the networks of a training-mode aggregation."""
        op = type(self).__name__
        x, groups = prepare(x, index, ptr, dim_size, dim, op=op,
                            needs_index=self._needs_index)
        with key_scope(key) if key is not None else contextlib.nullcontext():
            return self._aggregate(x, groups)

    def _aggregate(self, x: jax.Array, g: Grouping) -> jax.Array:
        raise NotImplementedError
