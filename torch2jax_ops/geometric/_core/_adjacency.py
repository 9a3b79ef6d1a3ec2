"""PyG's sparse ``adj_t`` as the layers' edge list: the one conversion every layer calls.

PyG's layers take their graph as ``edge_index [2, E]`` or as a sparse
adjacency ``adj_t``: the *transposed* adjacency, ``adj_t[i, j] != 0`` for an
edge ``j -> i``, of shape ``[N_dst, N_src]``. Here ``adj_t`` is the ``BCOO`` /
``BCSR`` that :func:`torch2jax_ops.to_jax` makes of a torch sparse COO / CSR /
CSC tensor (or one built in JAX). :func:`adjacency` turns it into

* ``edge_index [2, S]``: row 0 the sources (``adj_t``'s columns), row 1 the
  targets (its rows), one slot per stored entry in storage order (PyG's
  ``to_edge_index`` order: row-major for CSR, storage order for COO). ``S`` is
  the matrix's ``nse``, static under ``jax.jit``. JAX's padding slots (ids past
  the matrix: ``fromdense(..., nse=k)``, ``bcoo_sum_duplicates``) become the
  dropped pair ``(N_src, N_dst)`` (each side's dropped slot): no message, no weight;
* ``values [S]``: the entries (what gradients w.r.t. the matrix flow to);
* the node counts from the matrix's shape, and whether the targets are sorted
  (a ``BCSR``'s rows always are; a ``BCOO`` when its ``indices_sorted`` says so).

The rules of PyG's sparse branches, which each layer picks from:

* **values**: used where PyG calls ``spmm(adj_t, x, reduce)`` (its fused
  ``message_and_aggregate``) or reads them as ``edge_weight`` (``gcn_norm``);
  ignored by the layers that only look at the entries' positions (attention);
* **coalescing**: torch sums repeated entries when it converts to CSR (``spmm``
  with a mean / min / max) or rebuilds the matrix (``add_self_loops``).
  ``coalesce=True`` does the same to a ``BCOO`` not known unique
  (``bcoo_sum_duplicates``, same ``nse``); a ``BCSR`` is taken as coalesced,
  as torch's CSR tensors are;
* **self-loops** (``gcn_norm`` on a sparse ``adj_t``, :func:`gcn_norm_sparse`):
  ``add_self_loops`` appends a loop ``(i, i)`` of weight ``fill`` for every node
  and coalescing *adds* it to an explicit diagonal entry: ``A + fill * I``. The
  ``edge_index`` branch (``add_remaining_self_loops``) keeps an existing loop's
  weight instead, so a graph with diagonal entries normalises differently in
  the two forms, as in PyG.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax.experimental import sparse as jsparse

from ...torch_scatter._gather import csr_ids
from ..utils._norm import _inverse_sqrt
from ._edges import aggregate, gather, is_sparse_matrix

__all__ = ["Adjacency", "adjacency", "is_sparse_matrix", "gcn_norm_sparse", "normalized_matrix",
           "with_values"]


class Adjacency(NamedTuple):
    """A sparse ``adj_t [N_dst, N_src]`` as an edge list (module docstring)."""
    #: ``[2, S]``: row 0 sources (adj_t's columns), row 1 targets (its rows); padding
    #: ``(N_src, N_dst)``
    edge_index: jax.Array
    #: ``[S]``: the stored values (padding slots hold whatever JAX stored there, usually 0)
    values: jax.Array
    #: ``adj_t.shape[1]``
    num_src: int
    #: ``adj_t.shape[0]``
    num_dst: int
    #: ``edge_index[1]`` never decreases (a promise for sorted segment reductions)
    targets_sorted: bool
    #: the matrix itself (coalesced when asked): what ``spmm`` takes
    matrix: Any


def adjacency(adj: Any, *, name: str = "edge_index", op: str,
              coalesce: bool = False) -> Adjacency:
    """``adj_t`` (a 2-D ``BCOO`` / ``BCSR`` ``[N_dst, N_src]``) as an :class:`Adjacency`.

    Args:
      adj: the sparse transposed adjacency, scalar entries, no batch dimensions.
      name: the argument's name, for errors.
      op: the caller, for errors.
      coalesce: sum repeated entries first (a ``BCOO`` not known unique), as
        torch does where PyG converts to CSR or rebuilds the matrix.

    Returns:
      The edge list ``[2, S]`` (``S = adj.nse``), values ``[S]``, node counts,
      the targets' order and the (coalesced) matrix.
    """
    if not is_sparse_matrix(adj):
        raise TypeError(f"{op}: `{name}` must be a jax.experimental.sparse BCOO or BCSR "
                        f"adj_t, got {type(adj).__name__}")
    if len(adj.shape) != 2 or adj.n_batch or adj.n_dense:
        raise ValueError(
            f"{op}: `{name}` must be a 2-D sparse adj_t [N_dst, N_src] with scalar entries, got "
            f"shape {tuple(adj.shape)} with {adj.n_batch} batch and {adj.n_dense} dense "
            f"dimension(s); pass one graph's matrix (a batch of graphs is one block-diagonal "
            f"matrix in PyG), or its edge list")
    if coalesce and isinstance(adj, jsparse.BCOO) and not adj.unique_indices:
        adj = jsparse.bcoo_sum_duplicates(adj, nse=adj.nse)
    n_dst, n_src = (int(d) for d in adj.shape)
    if isinstance(adj, jsparse.BCSR):
        rows = csr_ids(adj.indptr, adj.indices.shape[0]).astype(adj.indices.dtype)
        cols, is_sorted = adj.indices, True
    else:
        rows, cols, is_sorted = adj.indices[:, 0], adj.indices[:, 1], bool(adj.indices_sorted)
    inside = (rows >= 0) & (rows < n_dst) & (cols >= 0) & (cols < n_src)
    edge_index = jnp.stack([jnp.where(inside, cols, jnp.asarray(n_src, cols.dtype)),
                            jnp.where(inside, rows, jnp.asarray(n_dst, rows.dtype))])
    return Adjacency(edge_index, adj.data, n_src, n_dst, is_sorted, adj)


def gcn_norm_sparse(adj: Adjacency, *, improved: bool = False, add_self_loops: bool = True,
                    dtype: Any = None, merge: bool = True) -> tuple[jax.Array, Optional[jax.Array],
                                                                    Optional[jax.Array]]:
    """PyG's ``gcn_norm`` on a sparse ``adj_t`` (its torch-sparse branch), in static shapes.

    ``A' = A + fill * I`` (``fill`` 2 with ``improved``, else 1) when
    ``add_self_loops``: the loop is *added* to an explicit diagonal entry (PyG
    appends it and coalesces). ``deg_i = sum_j A'_ij`` (row sums of ``adj_t``:
    in-degrees), ``w_ij = deg_i^-1/2 A'_ij deg_j^-1/2``; ``deg 0`` gives 0. The
    matrix must be square.

    ``merge=True`` folds each loop into its node's diagonal entry, as PyG's
    coalescing does: what a mean or a max over the entries sees. It needs a
    coalesced matrix (``adjacency(coalesce=True)``). ``merge=False`` keeps
    every loop apart: the same weighted *sums* (the loop's share of ``A'_ii``
    sits in the loop), without coalescing.

    Returns:
      ``(weights [S], loop_weights [N], loop_kept [N])``: the normalised value of
      every stored entry, then the new loops' weights (0 where the node had a
      diagonal entry, which took the loop) and which new loops exist (False:
      merged into the diagonal entry; a mean or max must skip them). Without
      self-loops the last two are None.
    """
    src, dst = adj.edge_index[0], adj.edge_index[1]
    n = adj.num_dst
    weights = adj.values.astype(dtype or adj.values.dtype)
    loops = kept = None
    if add_self_loops and not merge:
        loops = jnp.full((n,), 2.0 if improved else 1.0, weights.dtype)
        kept = jnp.ones((n,), bool)
    elif add_self_loops:
        fill = jnp.asarray(2.0 if improved else 1.0, weights.dtype)
        diagonal = (src == dst) & (dst < n)
        has_diagonal = jax.ops.segment_max(diagonal.astype(jnp.int32), dst, n,
                                           indices_are_sorted=adj.targets_sorted) > 0
        weights = weights + jnp.where(diagonal, fill, jnp.zeros((), weights.dtype))
        kept = ~has_diagonal
        loops = jnp.where(kept, fill, jnp.zeros((), weights.dtype))
    deg = aggregate(weights, dst, n, "sum", op="gcn_norm", indices_sorted=adj.targets_sorted)
    if loops is not None:
        deg = deg + loops
    dinv = _inverse_sqrt(deg)
    weights = gather(dinv, src) * weights * gather(dinv, dst)
    if loops is not None:
        loops = dinv * loops * dinv
    return weights, loops, kept


def normalized_matrix(adj: Adjacency, *, improved: bool = False, add_self_loops: bool = True,
                      dtype: Any = None) -> jsparse.BCOO:
    """PyG's ``gcn_norm`` of a sparse ``adj_t`` as the matrix it returns: a square ``BCOO``.

    ``adj`` must be coalesced when ``add_self_loops`` (``adjacency(coalesce=True)``):
    the loops are folded into the diagonal entries (:func:`gcn_norm_sparse` with
    ``merge=True``), so the matrix holds one entry per ``(row, col)``, as PyG's
    coalesced result. Its ``nse`` is static: the ``S`` stored slots, then ``N``
    loop slots (a node whose diagonal entry took its loop leaves the slot as
    padding, ids out of range).
    """
    weights, loops, kept = gcn_norm_sparse(adj, improved=improved,
                                           add_self_loops=add_self_loops, dtype=dtype,
                                           merge=True)
    n = adj.num_dst
    src, dst = adj.edge_index[0], adj.edge_index[1]
    indices = jnp.stack([dst, src], axis=1)  # padding (N, N): out of range, as JAX's
    if loops is None:
        return jsparse.BCOO((weights, indices), shape=(n, n), unique_indices=True)
    assert kept is not None  # set with the loops
    ids = jnp.where(kept, jnp.arange(n, dtype=indices.dtype), jnp.asarray(n, indices.dtype))
    indices = jnp.concatenate([indices, jnp.stack([ids, ids], axis=1)])
    return jsparse.BCOO((jnp.concatenate([weights, loops]), indices), shape=(n, n),
                        unique_indices=True)


def with_values(adj_t: Any, data: jax.Array) -> Any:
    """The same sparse matrix (``BCOO`` / ``BCSR``) with other stored values ``[S]``."""
    if isinstance(adj_t, jsparse.BCSR):
        return jsparse.BCSR((data, adj_t.indices, adj_t.indptr), shape=adj_t.shape)
    return jsparse.BCOO((data, adj_t.indices), shape=adj_t.shape,
                        indices_sorted=adj_t.indices_sorted, unique_indices=adj_t.unique_indices)
