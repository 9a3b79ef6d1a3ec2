"""What every graph op shares: edge-index checks, the dropped node slot, gather and aggregate.

PyG's ``MessagePassing`` with ``flow="source_to_target"``: a message travels
``edge_index[0] -> edge_index[1]``; ``x_j = x[edge_index[0]]`` and messages are
reduced at the target ``edge_index[1]`` into ``num_nodes`` rows.

The dropped slot
----------------
Shapes are static under ``jax.jit``, so where PyG deletes edges (removing
self-loops, masking padding) we keep them and route them to the node id
``num_nodes``: one past the last node. Every op here drops such an edge: its
message reaches no node, its gathered features are zeros, it has no weight in
a degree, a softmax or a mean. Any other id outside ``[0, num_nodes]`` is an
error (``IndexError`` when the index is concrete; dropped and reported by
:func:`torch2jax_ops.checked` when traced): negative ids never wrap around.

Graph inputs
------------
``edge_index`` is a ``[2, E]`` integer array or an
:class:`~torch2jax_ops.geometric.EdgeIndex` (the same array with PyG's sort
order; :func:`edge_array` unwraps it, :func:`targets_sorted` reads the order).
The layers also take a sparse ``adj_t`` (``BCOO`` / ``BCSR``, see
:mod:`torch2jax_ops.geometric._core._adjacency`); the utilities here take edge lists only.

Sorted targets
--------------
:func:`aggregate` with ``indices_sorted=True`` reduces with XLA's sorted segment
ops (``indices_are_sorted=True``): the caller promises that ``index`` never
decreases (an ``EdgeIndex`` sorted by ``"col"``, a CSR adjacency's rows).
Only a target row used as it is may be promised: routing an edge to the
dropped slot in the middle of the list breaks the order.
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse as jsparse

from ... import _dtypes
from ..._checking import REDUCTIONS, as_array, check_reduce, debug_check, is_traced, static_int
from ...torch_scatter._gather import slot_sum, stream_block, streamed_sum, take_groups, take_rows
from ...torch_scatter._groups import Groups
from . import _cpu_kernel
from ._edge_index import EdgeIndex

__all__ = ["edge_array", "is_sparse_matrix", "targets_sorted", "node_count", "check_ids", "valid",
           "gather", "gather_rows", "slot_sum", "aggregate", "gather_aggregate",
           "gather_weighted_sum", "gather_dot", "kernel_sums"]


def is_sparse_matrix(x: Any) -> bool:
    """True for a ``jax.experimental.sparse`` ``BCOO`` / ``BCSR`` (a sparse ``adj_t``)."""
    return isinstance(x, (jsparse.BCOO, jsparse.BCSR))


def edge_array(edge_index: Any, num_nodes: Optional[int] = None,
               name: str = "edge_index", *, op: str) -> jax.Array:
    """``edge_index`` (``[2, E]`` array or :class:`EdgeIndex`) as a ``[2, E]`` integer array
    whose ids lie in ``[0, num_nodes]``."""
    if isinstance(edge_index, EdgeIndex):
        edge_index = edge_index.index
    elif type(edge_index).__name__ == "SparseTensor" and hasattr(edge_index, "sparse_sizes"):
        raise TypeError(
            f"{op}: `{name}` is a SparseTensor; this op takes an edge list [2, num_edges] "
            f"(for PyG's adj_t: jnp.stack([adj_t.col, adj_t.row])) or, in the layers that "
            f"take one, a sparse adj_t")
    elif is_sparse_matrix(edge_index):
        raise TypeError(
            f"{op}: `{name}` is a sparse matrix ({type(edge_index).__name__}); this op takes an "
            f"edge list [2, num_edges]. torch2jax_ops.geometric.utils.to_edge_index(adj) gives "
            f"one: its rows are adj's (row, col) pairs, so for PyG's transposed adj_t "
            f"(adj_t[i, j] != 0: an edge j -> i) flip them: edge_index[::-1]")
    edge_index = as_array(edge_index, name, op=op)
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"{op}: `{name}` must have shape [2, num_edges] (row 0: sources, row 1: "
                         f"targets), got {tuple(edge_index.shape)}")
    if not jnp.issubdtype(edge_index.dtype, jnp.integer):
        raise TypeError(f"{op}: `{name}` must hold integers, got {edge_index.dtype}")
    if num_nodes is not None:
        check_ids(edge_index, num_nodes, name, op=op)
    return edge_index


def targets_sorted(edge_index: Any) -> bool:
    """True when ``edge_index`` promises sorted targets: an :class:`EdgeIndex` with
    ``sort_order="col"`` (what :func:`aggregate`'s ``indices_sorted`` may then take)."""
    return isinstance(edge_index, EdgeIndex) and edge_index.sort_order == "col"


def node_count(num_nodes: Any, index: jax.Array, name: str = "num_nodes",
               index_name: str = "edge_index",
               hint: str = "x.shape[0], or the padded size for padded graphs", *, op: str) -> int:
    """PyG's ``maybe_num_nodes``: ``num_nodes`` if given, else ``index.max() + 1``.

    The fallback reads the data, so it needs a concrete index; under jit the
    error names the argument to pass.
    """
    size = static_int(num_nodes, name, op=op)
    if size is not None:
        return size
    if is_traced(index):
        raise ValueError(
            f"{op}: `{name}` is required under jax.jit / jax.vmap: PyG infers it as "
            f"{index_name}.max() + 1, a value that cannot become a static shape. Pass "
            f"{name}=<int> ({hint}), or pass the {index_name} as a BatchVector, which "
            f"carries the count (PaddedGraph.batch from JaxLoader, pad_graph or from_pyg is "
            f"one)")
    return int(np.asarray(index).max()) + 1 if index.size else 0


def check_ids(ids: jax.Array, num_nodes: int, name: str, *, op: str) -> None:
    """Ids must lie in ``[0, num_nodes]`` (``num_nodes`` is the dropped slot)."""
    if ids.size == 0:
        return
    if is_traced(ids):
        debug_check(jnp.all((ids >= 0) & (ids <= num_nodes)),
                    f"{op}: `{name}` has ids outside [0, {num_nodes}]")
        return
    values = np.asarray(ids)
    lo, hi = int(values.min()), int(values.max())
    if lo < 0:
        raise IndexError(f"{op}: `{name}` contains the negative id {lo}; node ids lie in "
                         f"[0, {num_nodes}) (negative ids never wrap around here)")
    if hi > num_nodes:
        raise IndexError(f"{op}: `{name}` contains the node id {hi}, but there are only "
                         f"{num_nodes} nodes (valid ids [0, {num_nodes}); {num_nodes} itself "
                         f"marks a dropped edge). Pass the right num_nodes / x")


def valid(ids: jax.Array, num_nodes: int) -> jax.Array:
    """True where an id names a real node (not the dropped slot)."""
    return (ids >= 0) & (ids < num_nodes)


def gather(x: jax.Array, ids: jax.Array) -> jax.Array:
    """``x[ids]`` along axis 0, zeros for dropped ids (the gradient accumulates as torch's)."""
    return take_groups(x, ids, 0)


def gather_rows(x: jax.Array, ids: jax.Array) -> jax.Array:
    """:func:`gather` as a plain gather from ``x`` with a zero row appended: for rows a
    reduction reads (attention queries, keys, values); see
    :func:`~torch2jax_ops.torch_scatter._gather.take_rows` for when each form is faster."""
    return take_rows(x, ids, 0)


def aggregate(messages: jax.Array, index: jax.Array, num_nodes: int, reduce: str = "sum", *,
              op: str = "aggregate", indices_sorted: bool = False) -> jax.Array:
    """PyG's ``utils.scatter(messages, index, dim=0, dim_size=num_nodes, reduce=reduce)``.

    ``messages`` ``[E, *F]``, ``index`` ``[E]`` -> ``[num_nodes, *F]``, on the
    torch_scatter mirror's ``Groups`` planner. Dropped ids reach no node.
    Empty nodes get 0 for every reduction (PyG's
    ``scatter_reduce_(include_self=False)`` into zeros), 1 for ``mul``;
    ``mean`` divides by ``max(count, 1)``; float16/bfloat16 accumulate in
    float32 and round once. min/max follow torch's native rule (PyG 2.x on
    CPU): NaN propagates and tied maxima share the gradient evenly.
    ``indices_sorted=True`` promises a non-decreasing ``index`` (module
    docstring): XLA's sorted segment reductions, the same result.
    """
    kind = check_reduce(reduce, REDUCTIONS, "aggr", op=op)
    aligned = (index.shape[0],) + (1,) * (messages.ndim - 1)
    groups = Groups(messages, index, 0, num_nodes, aligned, op=op,
                    indices_sorted=indices_sorted)
    if kind == "sum":
        result = groups.sum(messages)
    elif kind == "mean":
        result = groups.mean(messages, rounding="trunc")
    elif kind == "mul":
        result = groups.prod(messages)
    else:
        result = groups.extremum(messages, kind)
    return groups.from_groups(result)


def kernel_sums(dtype: Any) -> bool:
    """Whether :func:`gather_aggregate` (``sum``/``mean``) and :func:`gather_weighted_sum`
    run the CPU kernel for rows of ``dtype`` in a function traced now, on the CPU: the
    kernel is built and loads, it is not switched off, and the process has one device
    (:func:`~torch2jax_ops.geometric._core._cpu_kernel.usable`, for the accumulation dtype).
    A layer that orders its work around the kernel asks this."""
    return _cpu_kernel.usable(_dtypes.accumulation_dtype(dtype))


def gather_aggregate(x: jax.Array, src: jax.Array, dst: jax.Array, num_nodes: int,
                     reduce: str = "sum", *, op: str = "aggregate",
                     indices_sorted: bool = False, masked: bool = False) -> jax.Array:
    """``aggregate(gather_rows(x, src), dst, num_nodes, reduce)``: each edge's message
    is its source row ``x_j``, reduced at its target (PyG's default ``message``).

    ``x [N_src, *F]``, ``src [E]``, ``dst [E]`` -> ``[num_nodes, *F]``, the value of
    the two steps. On the CPU, a sum or mean of floating rows runs as
    :func:`~torch2jax_ops.geometric._core._cpu_kernel.gather_scatter_add`, a C++ kernel
    that adds each source row into its target row with no ``[E, *F]`` buffer (300k
    edges x 64 features: 5 ms against 18 ms streamed and 40 ms in two steps): the same
    sums in the same order, so the value and the gradient are the two steps' to the
    bit. Where the kernel is not built or switched off (``TORCH2JAX_OPS_NATIVE=0``), a
    large edge list
    (:func:`~torch2jax_ops.torch_scatter._gather.stream_block`) runs as
    :func:`~torch2jax_ops.torch_scatter._gather.streamed_sum`, through cache-sized
    blocks of edges (the gradient up to the order of its sums). The mean divides the
    sum by ``max(count, 1)`` in the accumulation dtype and rounds once, as
    :func:`aggregate`. Elsewhere (other platforms, several devices, other reductions),
    and for small edge lists without the kernel, the two steps themselves (``masked``:
    :func:`gather` instead of :func:`gather_rows`, the form a layer used before).
    """
    def two_steps() -> jax.Array:
        rows = gather(x, src) if masked else gather_rows(x, src)
        return aggregate(rows, dst, num_nodes, reduce, op=op,
                         indices_sorted=indices_sorted)

    kind = check_reduce(reduce, REDUCTIONS, "aggr", op=op)
    if kind not in ("sum", "mean") or not jnp.issubdtype(x.dtype, jnp.inexact):
        return two_steps()
    acc = _dtypes.accumulation_dtype(x.dtype)
    native = _cpu_kernel.usable(acc)
    block = None if native else stream_block(x.shape, src.shape[0])
    if not native and block is None:
        return two_steps()

    def streamed() -> jax.Array:
        if native:
            total = _cpu_kernel.gather_scatter_add(x.astype(acc), src, dst, num_nodes)
        else:
            assert block is not None
            total = streamed_sum(x.astype(acc), src, dst, num_nodes, indices_sorted, block)
        if kind == "mean":
            count = aggregate(jnp.ones(dst.shape, jnp.int32), dst, num_nodes, "sum", op=op,
                              indices_sorted=indices_sorted)
            total = total / jnp.maximum(count, 1).astype(acc).reshape(
                (num_nodes,) + (1,) * (x.ndim - 1))
        return total.astype(x.dtype)

    return jax.lax.platform_dependent(cpu=streamed, default=two_steps)


def gather_weighted_sum(x: jax.Array, weight: jax.Array, src: jax.Array, dst: jax.Array,
                        num_nodes: int) -> jax.Array:
    """``sum_e weight[e, h] * x[src[e], h, :]`` at each target ``dst[e]``: attention's
    weighted sum of source rows.

    ``x [N_src, *H, C]``, ``weight [E, *H]`` (one float dtype, the accumulation dtype of
    the caller), ``src [E]``, ``dst [E]`` -> ``[num_nodes, *H, C]``; an edge with an id
    out of range adds nothing. On the CPU, where the kernel is built, one pass of
    :func:`~torch2jax_ops.geometric._core._cpu_kernel.weighted_gather_scatter_add`: no
    ``[E, *H, C]`` buffer, and the gradient is the kernel again (w.r.t. ``x``) and
    :func:`~torch2jax_ops.geometric._core._cpu_kernel.edge_dot` (w.r.t. ``weight``).
    At 1M edges into 100k nodes x 4 heads x 64 (2-core CPU, 2026-11-27): forward 328 ms
    against 462 ms for the XLA steps, forward + gradient 608 against 1330 ms. Elsewhere
    (other platforms, several devices, the kernel switched off or not built) the XLA
    steps: gather, multiply, scatter-add, with the same values on the CPU to the bit.
    """
    def steps() -> jax.Array:
        return slot_sum(weight[..., None] * gather_rows(x, src), dst, num_nodes)

    if not _cpu_kernel.usable(x.dtype):
        return steps()
    return jax.lax.platform_dependent(
        cpu=lambda: _cpu_kernel.weighted_gather_scatter_add(x, weight, src, dst, num_nodes),
        default=steps)


def gather_dot(a: jax.Array, b: jax.Array, ia: jax.Array, ib: jax.Array) -> jax.Array:
    """``sum(a[ia] * b[ib], axis=-1)``: one dot per edge and head (attention's
    query-key score ``q_i . k_j``).

    ``a [Na, *H, C]``, ``b [Nb, *H, C]`` (one float dtype), ``ia [E]``, ``ib [E]`` ->
    ``[E, *H]`` in that dtype; 0 for an id out of range. On the CPU, where the kernel
    is built, :func:`~torch2jax_ops.geometric._core._cpu_kernel.edge_dot` in the
    accumulation dtype (no ``[E, *H, C]`` buffer; its gradient is
    :func:`gather_weighted_sum`'s kernel). Elsewhere two gathers, a product and a sum.
    """
    def steps() -> jax.Array:
        return jnp.sum(gather_rows(a, ia) * gather_rows(b, ib), axis=-1)

    acc = _dtypes.accumulation_dtype(a.dtype)
    if not _cpu_kernel.usable(acc):
        return steps()
    return jax.lax.platform_dependent(
        cpu=lambda: _cpu_kernel.edge_dot(a.astype(acc), b.astype(acc), ia, ib).astype(a.dtype),
        default=steps)
