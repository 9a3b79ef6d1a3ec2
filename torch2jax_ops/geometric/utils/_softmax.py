"""PyG's ``utils.softmax``: a softmax over the entries that share an index (or a CSR segment)."""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ... import _dtypes
from ..._batch_vector import graph_count
from ..._checking import as_array, is_traced, normalize_dim
from ..._sharding import OutSharding, sharding_aware
from ...torch_scatter._gather import csr_ids
from .._core._edges import (
    check_ids,
    gather,
    gather_rows,
    gather_weighted_sum,
    node_count,
    slot_sum,
    valid,
)

__all__ = ["softmax", "segment_softmax", "softmax_aggregate"]


@sharding_aware
def softmax(src: ArrayLike, index: Optional[ArrayLike] = None, ptr: Optional[ArrayLike] = None,
            num_nodes: Optional[int] = None, dim: int = 0,
            *, out_sharding: OutSharding = None) -> jax.Array:
    """``softmax(src, index, ptr=None, num_nodes=None, dim=0)`` as in PyG.

    Groups ``src`` along ``dim`` by ``index`` (``[src.shape[dim]]``, ids in
    ``[0, num_nodes)``) or by a CSR pointer ``ptr`` (``[G + 1]``, from 0 to
    ``src.shape[dim]``); each group is normalised to sum to 1:
    ``exp(src - max) / (sum exp(src - max) + 1e-16)``, with the group maximum
    taken without gradient, as PyG does. Entries routed to the dropped id
    ``num_nodes`` get 0. Under jit ``num_nodes`` must be given with ``index``.
    """
    op = "softmax"
    src = as_array(src, "src", op=op)
    if not jnp.issubdtype(src.dtype, jnp.floating):
        raise TypeError(f"{op}: `src` must be floating point, got {src.dtype}")
    dim = normalize_dim(dim, src.ndim, op=op)
    length = src.shape[dim]
    if ptr is not None:
        ptr = as_array(ptr, "ptr", op=op)
        if ptr.ndim != 1 or ptr.shape[0] < 1:
            raise ValueError(f"{op}: `ptr` must be 1-D with G + 1 entries, got {tuple(ptr.shape)}")
        if not is_traced(ptr):
            p = np.asarray(ptr)
            if p[0] != 0 or p[-1] != length or (np.diff(p) < 0).any():
                raise ValueError(f"{op}: `ptr` must rise from 0 to src.shape[{dim}]={length}, "
                                 f"got {p.tolist() if p.size <= 12 else p}")
        n = ptr.shape[0] - 1
        index = csr_ids(ptr, length)
    elif index is not None:
        num_nodes = graph_count(index, num_nodes)
        index = as_array(index, "index", op=op)
        if index.shape != (length,) or not jnp.issubdtype(index.dtype, jnp.integer):
            raise ValueError(f"{op}: `index` must be a 1-D integer array of length "
                             f"src.shape[{dim}]={length}, got shape {tuple(index.shape)}, "
                             f"dtype {index.dtype}")
        n = node_count(num_nodes, index, index_name="index", op=op)
        check_ids(index, n, "index", op=op)
    else:
        raise ValueError(f"{op}: pass `index` (the group of each entry) or `ptr` (CSR offsets)")
    return jnp.moveaxis(segment_softmax(jnp.moveaxis(src, dim, 0), index, n), 0, dim)


def segment_softmax(rows: jax.Array, index: jax.Array, n: int) -> jax.Array:
    """:func:`softmax` along axis 0 on checked arguments; ids outside ``[0, n)`` give 0."""
    keep = valid(index, n).reshape((-1,) + (1,) * (rows.ndim - 1))
    rows = jnp.where(keep, rows, 0)  # dropped entries: no inf/NaN, no gradient
    top = jax.ops.segment_max(jax.lax.stop_gradient(rows), index, n)
    e = jnp.exp(rows - gather(top, index))
    total = jax.ops.segment_sum(e, index, n) + 1e-16
    return jnp.where(keep, e / gather(total, index), 0).astype(rows.dtype)


def softmax_aggregate(scores: jax.Array, messages: jax.Array, index: jax.Array, n: int,
                      loop_scores: Optional[jax.Array] = None,
                      loop_messages: Optional[jax.Array] = None,
                      weights: Optional[jax.Array] = None,
                      loop_weights: Optional[jax.Array] = None,
                      src: Optional[jax.Array] = None) -> jax.Array:
    """``aggregate(segment_softmax(scores, index, n)[..., None] * messages, index, n)``, fused.

    ``scores`` ``[E, *H]``, ``messages`` ``[E, *H, C]`` -> ``[n, *H, C]``: the
    attention-weighted sum of GATConv. The softmax is normalised after the
    sum, ``sum(e * m) / (sum(e) + 1e-16)`` with ``e = exp(score - max)``, which
    is PyG's ``sum((e / (sum(e) + 1e-16)) * m)`` up to rounding: per edge one
    gather and one divide fewer (forward and backward). Numerator and
    denominator are two sums into a slot for dropped ids (``slot_sum``: their
    gradients gather unmasked). Ids outside ``[0, n)`` reach no node; empty
    nodes get 0.

    ``loop_scores`` ``[L, *H]`` and ``loop_messages`` ``[L, *H, C]`` (``L <= n``)
    add one entry to each node ``i < L``, exactly as a self-loop edge ``(i, i)``
    at the end of the edge list would, but node-wise: no gather, no scatter.

    ``weights`` ``[E, *H]`` (and ``loop_weights`` ``[L, *H]``) multiply the
    normalised attention of each entry: attention dropout is
    ``keep / (1 - p)`` here (the numerator only; the softmax itself is PyG's).

    ``src`` ``[E]``: each entry's message is a row of ``messages`` (then ``[N_src,
    *H, C]``): ``messages[src]``, PyG's ``x_j``. On the CPU, where the kernel is
    built, the numerator is then one pass of
    :func:`~torch2jax_ops.geometric._core._cpu_kernel.weighted_gather_scatter_add`
    and its gradient the kernel and
    :func:`~torch2jax_ops.geometric._core._cpu_kernel.edge_dot`: no ``[E, *H, C]``
    buffer in the forward or the backward pass. Elsewhere the rows are gathered.
    An entry whose ``src`` is out of range sends nothing.
    """
    if scores.ndim > 1 and all(h == 1 for h in scores.shape[1:]):
        # one head: drop the unit axes (XLA:CPU reduces [E, 1, C] over C, in the
        # backward pass, about 5x slower than [E, C])
        def flat(a, k):
            return None if a is None else a.reshape(a.shape[:1] + a.shape[scores.ndim:][:k])
        out = softmax_aggregate(flat(scores, 0), flat(messages, 1), index, n,
                                flat(loop_scores, 0), flat(loop_messages, 1),
                                flat(weights, 0), flat(loop_weights, 0), src)
        return out.reshape((n,) + messages.shape[1:])
    keep = valid(index, n).reshape((-1,) + (1,) * (scores.ndim - 1))
    scores = jnp.where(keep, scores, 0)  # dropped entries: no inf/NaN, no gradient
    top = jax.ops.segment_max(jax.lax.stop_gradient(scores), index, n)
    loops = 0 if loop_scores is None else loop_scores.shape[0]
    if loops:
        top = top.at[:loops].max(jax.lax.stop_gradient(loop_scores))
    e = jnp.exp(scores - gather_rows(top, index))
    acc = _dtypes.accumulation_dtype(messages.dtype)
    weighted = e if weights is None else e * weights.astype(e.dtype)
    # numerator and denominator as two sums (not one of [e * m, e]): the gradient
    # then gathers each back without slicing a [n, *H, C + 1] cotangent
    if src is None:
        num = slot_sum((weighted[..., None] * messages).astype(acc), index, n)
    else:
        num = gather_weighted_sum(messages.astype(acc), weighted.astype(acc), src, index, n)
    den = slot_sum(e.astype(acc), index, n)
    if loops:
        assert loop_scores is not None and loop_messages is not None  # loops > 0 needs both
        e_loop = jnp.exp(loop_scores - top[:loops])
        w_loop = e_loop if loop_weights is None else e_loop * loop_weights.astype(e_loop.dtype)
        num = num.at[:loops].add((w_loop[..., None] * loop_messages).astype(acc))
        den = den.at[:loops].add(e_loop.astype(acc))
    return (num / (den[..., None] + 1e-16)).astype(messages.dtype)

