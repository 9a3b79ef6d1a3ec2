"""PyG's sparse-adjacency utilities on ``jax.experimental.sparse`` matrices.

``to_edge_index(adj)`` and ``spmm(adj, x, reduce)`` take the ``BCOO`` / ``BCSR``
that :func:`torch2jax_ops.to_jax` makes of a torch sparse COO / CSR / CSC
tensor (or any 2-D one built in JAX). Stored slots past the matrix's entries
(JAX's padding: ``fromdense(..., nse=k)``, ``bcoo_sum_duplicates``) have ids
out of range and reach no row.

``spmm`` follows ``torch_geometric.utils.spmm`` on torch sparse tensors, which
on the CPU is ``torch.sparse.mm(adj.to_sparse_csr(), x, reduce)``: every
reduction reads ``value * x[col]`` over a row's entries; a repeated COO entry is
summed into one first (torch coalesces on the way to CSR), so ``mean`` divides
by the number of distinct entries; empty rows give 0; ``max`` / ``min``
propagate NaN and send the whole gradient to the first winning entry of a row
in CSR order (torch's rule for ``sparse.mm``'s reductions, unlike
``scatter_reduce``'s even split between ties).
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental import sparse as jsparse

from ... import _dtypes
from ..._checking import as_array
from ..._sharding import OutSharding, sharding_aware
from ...torch_scatter._gather import csr_ids
from .._core._edges import aggregate, gather, valid

__all__ = ["to_edge_index", "spmm"]

_REDUCES = ("sum", "mean", "min", "max")


def _entries(adj: Any, *, op: str) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(rows [S], cols [S], values [S])`` of a 2-D BCOO / BCSR in storage order."""
    if not isinstance(adj, (jsparse.BCOO, jsparse.BCSR)):
        raise TypeError(f"{op}: expected a jax.experimental.sparse BCOO or BCSR matrix "
                        f"(torch2jax_ops.to_jax of a torch sparse tensor), got "
                        f"{type(adj).__name__}; a dense adjacency is an edge_index away: "
                        f"jnp.stack(jnp.nonzero(a))")
    if adj.n_batch or adj.n_dense or len(adj.shape) != 2:
        raise ValueError(f"{op}: takes a 2-D sparse matrix with scalar entries, got shape "
                         f"{tuple(adj.shape)} with {adj.n_batch} batch and {adj.n_dense} dense "
                         f"dimension(s)")
    if isinstance(adj, jsparse.BCSR):
        rows = csr_ids(adj.indptr, adj.indices.shape[0])  # padding slots get row n (dropped)
        return rows.astype(adj.indices.dtype), adj.indices, adj.data
    return adj.indices[:, 0], adj.indices[:, 1], adj.data


@sharding_aware
def to_edge_index(adj: Any, *, out_sharding: OutSharding = None) -> tuple[jax.Array, jax.Array]:
    """``torch_geometric.utils.to_edge_index``: a sparse matrix as ``(edge_index, values)``.

    Args:
      adj: a 2-D ``BCOO`` / ``BCSR`` ``[N, M]`` with ``S`` stored entries.

    Returns:
      ``edge_index [2, S]`` (rows, columns; JAX's index dtype: int32 unless
      64-bit mode, where PyG gives int64) and ``values [S]``, in storage order:
      row-major for CSR and coalesced COO, column-major for a CSC tensor's
      ``BCOO``, as PyG's. Padding slots come out with ids out of range (row ``N``).
    """
    rows, cols, values = _entries(adj, op="to_edge_index")
    index = _dtypes.index_dtype()
    return jnp.stack([rows.astype(index), cols.astype(index)]), values


@sharding_aware
def spmm(src: Any, other: Any, reduce: str = "sum",
         *, out_sharding: OutSharding = None) -> jax.Array:
    """``torch_geometric.utils.spmm(src, other, reduce)``: ``src @ other`` with a reduction.

    Args:
      src: a 2-D ``BCOO`` / ``BCSR`` ``[N, M]`` (PyG's ``adj_t``: row ``i`` gathers
        from the columns it stores).
      other: ``[M, F]``.
      reduce: ``"sum"`` (or ``"add"``), ``"mean"``, ``"min"`` or ``"max"``.

    Returns:
      ``[N, F]``: row ``i`` reduces ``value_ij * other[j]`` over its entries
      (module docstring for repeats, empty rows, NaN and ties). Gradients flow
      to ``other`` and to ``src``'s values.
    """
    op = "spmm"
    reduce = "sum" if reduce == "add" else reduce
    if reduce not in _REDUCES:
        raise ValueError(f"{op}: `reduce` argument '{reduce}' not supported; choose one of "
                         f"{list(_REDUCES)} (or 'add')")
    other = as_array(other, "other", op=op)
    if other.ndim != 2 or other.shape[0] != src.shape[1]:
        raise ValueError(f"{op}: `other` must be [M, F] with M = src.shape[1] = {src.shape[1]}, "
                         f"got shape {tuple(other.shape)}")
    if reduce != "sum" and isinstance(src, jsparse.BCOO) and not src.unique_indices:
        # torch coalesces on the way to CSR: repeats are summed before mean/min/max
        src = jsparse.bcoo_sum_duplicates(src, nse=src.nse)
    rows, cols, values = _entries(src, op=op)
    n, m = src.shape
    rows = jnp.where(valid(rows, n) & valid(cols, m), rows, n)  # padding reaches no row
    messages = values[:, None].astype(other.dtype) * gather(other, cols)
    if reduce in ("sum", "mean"):
        return aggregate(messages, rows, n, reduce, op=op)
    return _first_winner(messages, rows, n, reduce)


def _first_winner(messages: jax.Array, rows: jax.Array, n: int, kind: str) -> jax.Array:
    """Per row and feature, the entry that wins ``kind`` first in storage order (NaN wins
    over numbers); empty rows 0. The result *is* that entry, so its gradient goes there
    alone."""
    count = messages.shape[0]
    best = jax.lax.stop_gradient(aggregate(messages, rows, n, kind, op="spmm"))
    frozen = jax.lax.stop_gradient(messages)
    at_row = gather(best, rows)
    wins = (frozen == at_row) | (jnp.isnan(frozen) & jnp.isnan(at_row))
    position = jnp.arange(count, dtype=rows.dtype)[:, None]
    first = jax.ops.segment_min(jnp.where(wins, position, count), rows, n)
    first = jnp.minimum(first, count)  # empty rows: the zero row appended below
    padded = jnp.concatenate([messages, jnp.zeros((1,) + messages.shape[1:], messages.dtype)])
    return jnp.take_along_axis(padded, first, axis=0, mode="promise_in_bounds")
