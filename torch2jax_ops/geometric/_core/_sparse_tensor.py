"""``torch_sparse.SparseTensor`` in JAX: what ``to_jax(adj_t)`` gives for one.

A :class:`SparseTensor` holds torch_sparse's storage as it is: ``row [S]``,
``col [S]`` (sorted by row, then column; repeated entries kept, as torch_sparse
keeps them), ``value [S]`` or None, and ``sparse_sizes`` (Python ints, static
under ``jax.jit``). It is a pytree (row, col and value are its leaves), so it
passes through ``jax.jit`` / ``jax.grad`` as an argument.

PyG's layers read a SparseTensor by rules of their own, which differ from a
torch sparse tensor's (:func:`layer_matrix` applies them):

* no values means all ones (``torch_sparse.matmul`` / ``to_torch_sparse_csr_tensor``);
* GINConv and SAGEConv drop the values (``adj_t.set_value(None)``): ones;
* GCNConv's ``gcn_norm`` with self-loops *replaces* the diagonal
  (``torch_sparse.fill_diag``: every stored diagonal entry is dropped, one loop
  of ``2`` if ``improved`` else ``1`` per node is added), where the torch
  sparse branch adds the loop to the stored entry;
* GraphConv and GCNConv without ``normalize`` use the values as weights.

The layers take a SparseTensor as the BCSR :func:`layer_matrix` builds:
dropped entries stay in it as padding (column ``N_src``, out of range), so
shapes stay static under jit.
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
from jax.experimental import sparse as jsparse

from ...dlpack import register_tensor_type

__all__ = ["SparseTensor", "from_torch_sparse", "layer_matrix", "LAYER_RULES"]

#: how a layer reads a SparseTensor's values (see :func:`layer_matrix`)
LAYER_RULES = ("values", "ones", "gcn_loops")


@jax.tree_util.register_pytree_node_class
class SparseTensor:
    """``torch_sparse.SparseTensor`` (a sparse ``[N_rows, N_cols]`` matrix) as JAX arrays.

    Args:
      row, col: ``[S]`` integer ids, sorted by ``(row, col)`` (torch_sparse's
        storage order; repeated entries allowed).
      value: ``[S]`` (or ``[S, ...]``) values, or None (all ones where a layer
        multiplies by them).
      sparse_sizes: ``(N_rows, N_cols)``, Python ints.
    """

    #: the methods a converted forward (``from_torch``'s fx trace) calls on it as torch_sparse's
    _TORCH_METHODS = frozenset({"nnz", "sizes", "size", "has_value", "set_value", "fill_value",
                                "t"})

    def __init__(self, row: Any, col: Any, value: Optional[Any], sparse_sizes: tuple):
        self.row, self.col, self.value = row, col, value
        self.sparse_sizes = tuple(int(s) for s in sparse_sizes)
        if len(self.sparse_sizes) != 2:
            raise ValueError(f"SparseTensor: `sparse_sizes` must be (N_rows, N_cols), got "
                             f"{sparse_sizes}")

    def tree_flatten(self) -> tuple:
        return (self.row, self.col, self.value), self.sparse_sizes

    @classmethod
    def tree_unflatten(cls, sizes: tuple, leaves: Any) -> SparseTensor:
        row, col, value = leaves
        return cls(row, col, value, sizes)

    def __repr__(self) -> str:
        return (f"SparseTensor(sparse_sizes={self.sparse_sizes}, nnz={self.nnz()}, "
                f"has_value={self.has_value()})")

    # ------------------------------------------------------------- torch_sparse's API
    def nnz(self) -> int:
        """The number of stored entries ``S`` (repeats counted)."""
        return int(self.row.shape[0])

    def sizes(self) -> list:
        return list(self.sparse_sizes)

    def size(self, dim: int) -> int:
        return self.sparse_sizes[dim]

    def has_value(self) -> bool:
        return self.value is not None

    def storage_value(self) -> Optional[Any]:
        return self.value

    def set_value(self, value: Optional[Any], layout: Optional[str] = None) -> SparseTensor:
        """``adj.set_value(value, layout)``: new values (None: none, all ones).

        ``layout`` ``None`` / ``"coo"`` / ``"csr"``: ``value [S]`` in storage
        order; ``"csc"``: in column-major order (torch_sparse permutes it)."""
        if value is None:
            return SparseTensor(self.row, self.col, None, self.sparse_sizes)
        value = jnp.asarray(value)
        if value.shape[:1] != (self.nnz(),):
            raise ValueError(f"SparseTensor.set_value: `value` must have {self.nnz()} rows "
                             f"(one per stored entry), got shape {tuple(value.shape)}")
        if layout not in (None, "coo", "csr", "csc"):
            raise ValueError(f"SparseTensor.set_value: `layout` must be None, 'coo', 'csr' or "
                             f"'csc', got {layout!r}")
        if layout == "csc":
            value = value[jnp.argsort(self._csr2csc())]
        return SparseTensor(self.row, self.col, value, self.sparse_sizes)

    def fill_value(self, fill_value: float, dtype: Any = None) -> SparseTensor:
        """``adj.fill_value(v)``: every stored entry's value ``v`` (float32 unless ``dtype``)."""
        value = jnp.full((self.nnz(),), fill_value, dtype=dtype or jnp.float32)
        return SparseTensor(self.row, self.col, value, self.sparse_sizes)

    def _csr2csc(self) -> jax.Array:
        """The permutation to column-major order (stable: ties keep storage order)."""
        key = self.col.astype(jnp.int64 if jax.config.read("jax_enable_x64") else jnp.int32)
        return jnp.lexsort((self.row, key))

    def t(self) -> SparseTensor:
        """``adj.t()``: the transpose, stored sorted by its rows (the old columns)."""
        perm = self._csr2csc()
        value = None if self.value is None else self.value[perm]
        return SparseTensor(self.col[perm], self.row[perm], value, self.sparse_sizes[::-1])

    def to_bcsr(self) -> jsparse.BCSR:
        """The matrix as a ``BCSR`` (no values: ones), repeated entries kept."""
        value = jnp.ones(self.row.shape, jnp.float32) if self.value is None else self.value
        return _bcsr(self.row, self.col, value, self.sparse_sizes)

    def to_dense(self) -> jax.Array:
        """``[N_rows, N_cols]``, repeated entries summed (a torch COO tensor's ``to_dense``;
        torch_sparse's own ``to_dense`` keeps one of them, so a converted forward that
        calls ``adj.to_dense()`` gets an error, not this)."""
        value = jnp.ones(self.row.shape, jnp.float32) if self.value is None else self.value
        out = jnp.zeros(self.sparse_sizes + value.shape[1:], value.dtype)
        return out.at[self.row, self.col].add(value)


def _bcsr(row: Any, col: Any, value: Any, sizes: tuple) -> jsparse.BCSR:
    """A row-sorted entry list as a BCSR (row pointers from the sorted rows)."""
    indptr = jnp.searchsorted(row, jnp.arange(sizes[0] + 1, dtype=row.dtype), side="left")
    return jsparse.BCSR((value, col, indptr.astype(col.dtype)), shape=sizes)


def layer_matrix(adj: SparseTensor, rule: str, *, dtype: Any, op: str) -> jsparse.BCSR:
    """The BCSR a PyG layer's SparseTensor branch works on.

    Args:
      adj: the ``adj_t [N_dst, N_src]``.
      rule: ``"values"`` (the values, ones without: GraphConv, GCNConv without
        self-loops), ``"ones"`` (values dropped: GINConv, SAGEConv), or
        ``"gcn_loops"`` (the values; every stored diagonal entry dropped, as
        padding, for ``fill_diag``'s loops the layer adds).
      dtype: the values' dtype where there are none (ones).
      op: the caller, for errors.
    """
    if not isinstance(adj, SparseTensor):
        raise TypeError(f"{op}: expected a SparseTensor, got {type(adj).__name__}")
    if rule not in LAYER_RULES:
        raise ValueError(f"{op}: rule must be one of {LAYER_RULES}, got {rule!r}")
    if adj.value is not None and adj.value.ndim != 1:
        raise ValueError(f"{op}: a SparseTensor adj_t with values of shape "
                         f"{tuple(adj.value.shape)}; PyG's layers take scalar values [S]")
    ones = adj.value is None or rule == "ones"
    value = jnp.ones(adj.row.shape, dtype) if ones else adj.value
    col = adj.col
    if rule == "gcn_loops":
        col = jnp.where(adj.row == adj.col, jnp.asarray(adj.sparse_sizes[1], col.dtype), col)
    return _bcsr(adj.row, col, value, adj.sparse_sizes)


def from_torch_sparse(adj: Any, convert: Any) -> SparseTensor:
    """A ``torch_sparse.SparseTensor`` as a :class:`SparseTensor`; ``convert(tensor)`` moves
    each of its tensors (ids, values) to JAX."""
    storage = adj.storage
    value = storage.value()
    return SparseTensor(convert(storage.row()), convert(storage.col()),
                        None if value is None else convert(value), tuple(adj.sparse_sizes()))


# to_jax(torch_sparse.SparseTensor): PyG's layers read it by rules of their own (values
# dropped, diagonal replaced), so it gets a type of its own, apart from a BCSR
register_tensor_type("torch_sparse.tensor.SparseTensor", from_torch_sparse)
