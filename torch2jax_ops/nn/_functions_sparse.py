"""torch's sparse COO / CSR tensors in a traced forward: construction, products, accessors.

A torch sparse tensor is a ``jax.experimental.sparse`` ``BCOO`` (COO) or
``BCSR`` (CSR) here, as :func:`torch2jax_ops.to_jax` makes them. The entries of
the mapping table:

* ``torch._convert_indices_from_coo_to_csr(index, size, out_int32=False)``
  (PyG's ``index2ptr``): ``ptr [size + 1]``, static shape, fine under jit;
* ``torch.sparse_csr_tensor`` / ``torch.sparse_coo_tensor``: the BCSR / BCOO;
* ``sparse @ sparse`` (``operator.matmul``, ``torch.mm``, ``torch.sparse.mm``)
  with torch's exact sparsity pattern and storage order; ``sparse @ dense``;
* the methods ``to_sparse_coo``, ``to_dense``, ``indices``, ``values``,
  ``crow_indices``, ``col_indices``, ``coalesce`` (``t._nnz()`` is not reachable: fx
  refuses private attributes on its proxies; ``t.values().size(0)`` is the same number).

Data-dependent sizes. The number of stored entries of ``A @ B`` and of
``coalesce()`` depends on the index *values*. With concrete indices (eager
calls, or indices held fixed under ``jax.jit``: a closed-over ``edge_index``,
``compare_modules``' integer inputs) the index work runs on the spot and the
result is PyG's exact one, values traced and differentiable; with traced
indices they raise a ``TypeError`` saying so. Index outputs of concrete
indices stay concrete (they are computed under
``jax.ensure_compile_time_eval``), so a chain such as PyG's ``augment_adj``
(loops removed and added, CSR built, squared, read back) keeps its indices
known from one op to the next.

Storage order of a product, as torch's CPU kernel: row by row, and inside a
row the columns in the order the row-by-row walk first reaches them (for each
stored ``A[i, k]`` in storage order, each stored ``B[k, j]`` in storage order),
not sorted; a structural entry whose value sums to zero is kept. COO @ COO
gives a coalesced (row-major sorted) COO, as torch's.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse as jsparse

from .._checking import is_traced
from ._functions_base import dtype_arg, long_dtype
from ._registry import register_function, register_method

__all__ = ["is_sparse", "indices_traced", "eager_indices", "convert_indices_from_coo_to_csr",
           "sparse_csr_tensor", "sparse_coo_tensor", "sparse_matmul"]

_SPARSE = (jsparse.BCOO, jsparse.BCSR)


def is_sparse(x: Any) -> bool:
    """A ``BCOO`` / ``BCSR`` (a torch sparse COO / CSR tensor here)."""
    return isinstance(x, _SPARSE)


def _index_arrays(x: Any) -> tuple:
    if isinstance(x, jsparse.BCSR):
        return (x.indices, x.indptr)
    if isinstance(x, jsparse.BCOO):
        return (x.indices,)
    return (x,)


def indices_traced(*xs: Any) -> bool:
    """True when an index array among ``xs`` (a sparse matrix's indices) is traced."""
    return any(is_traced(a) for x in xs for a in _index_arrays(x))


@contextlib.contextmanager
def eager_indices(*xs: Any) -> Iterator[None]:
    """Evaluate on the spot what depends on concrete indices only (values stay traced).

    Under ``jax.jit`` an op on a concrete array is staged out like any other; inside this
    context it is computed right away, so index outputs stay concrete and the next
    data-dependent op (a product's pattern, ``remove_self_loops``) can read them.
    """
    if indices_traced(*xs):
        yield
    else:
        with jax.ensure_compile_time_eval():
            yield


def _host(x: jax.Array) -> np.ndarray:
    return np.asarray(x).astype(np.int64)


def _check_2d(x: Any, name: str, *, op: str) -> None:
    if x.n_batch or x.n_dense or len(x.shape) != 2:
        raise ValueError(f"{op}: `{name}` must be a 2-D sparse matrix with scalar entries, got "
                         f"shape {tuple(x.shape)} ({x.n_batch} batch, {x.n_dense} dense "
                         f"dimension(s))")


# ------------------------------------------------------------------ construction

@register_function("torch._convert_indices_from_coo_to_csr")
def convert_indices_from_coo_to_csr(input: jax.Array, size: int, *, out_int32: bool = False,
                                    out: Any = None) -> jax.Array:
    """``torch._convert_indices_from_coo_to_csr``: sorted row ids ``[nnz]`` -> ``ptr [size + 1]``.

    ``ptr[i]`` is the number of ids below ``i``. As torch's kernel, ``input`` must be
    sorted with ids in ``[0, size)``: concrete ids are checked (``ValueError``); traced
    ones cannot be. ``out_int32`` picks int32, else int64 (int32 without 64-bit mode).
    """
    op = "_convert_indices_from_coo_to_csr"
    size = int(size)
    if size < 0:
        raise ValueError(f"{op}: `size` must be >= 0, got {size}")
    index = jnp.asarray(input)
    if index.ndim != 1 or not jnp.issubdtype(index.dtype, jnp.integer):
        raise ValueError(f"{op}: `input` must be a 1-D integer tensor, got {index.dtype} of "
                         f"shape {tuple(index.shape)}")
    dtype = jnp.int32 if out_int32 else long_dtype()
    if not is_traced(index) and index.size:
        ids = _host(index)
        if ids.min() < 0 or ids.max() >= size:
            raise ValueError(f"{op}: `input` ids must lie in [0, size={size}), got "
                             f"[{ids.min()}, {ids.max()}]")
        if np.any(np.diff(ids) < 0):
            raise ValueError(f"{op}: `input` must be sorted (torch's kernel assumes it; "
                             f"coalesce the indices first)")
    with eager_indices(index):
        counts = jnp.zeros((size + 1,), dtype).at[index.astype(jnp.int32) + 1].add(
            jnp.ones((), dtype), mode="drop")
        return jnp.cumsum(counts, dtype=dtype)


def _values_arg(values: Any, dtype: Any, *, op: str) -> jax.Array:
    values = jnp.asarray(values)
    dt = dtype_arg(dtype, op=op)
    return values if dt is None else values.astype(dt)


def _size_arg(size: Any, default: tuple, values: jax.Array, *, op: str) -> tuple:
    if size is None:
        return default + tuple(values.shape[1:])
    size = tuple(int(s) for s in size)
    if len(size) != 2 + values.ndim - 1:
        raise ValueError(f"{op}: `size` {size} must have 2 sparse dimensions plus the "
                         f"values' dense ones {tuple(values.shape[1:])}")
    return size


@register_function("torch.sparse_csr_tensor")
def sparse_csr_tensor(crow_indices: Any, col_indices: Any, values: Any, size: Any = None, *,
                      dtype: Any = None, device: Any = None, pin_memory: bool = False,
                      requires_grad: bool = False,
                      check_invariants: Optional[bool] = None) -> jsparse.BCSR:
    """``torch.sparse_csr_tensor(crow [N + 1], col [nnz], values [nnz, *F], size)`` -> ``BCSR``.

    ``size=None`` infers ``(N, col.max() + 1)`` (concrete ``col`` only).
    """
    op = "sparse_csr_tensor"
    crow, col = jnp.asarray(crow_indices), jnp.asarray(col_indices)
    values = _values_arg(values, dtype, op=op)
    if crow.ndim != 1 or col.ndim != 1 or values.ndim < 1 or col.shape[0] != values.shape[0]:
        raise ValueError(f"{op}: expected crow_indices [N + 1], col_indices [nnz] and values "
                         f"[nnz, ...], got shapes {tuple(crow.shape)}, {tuple(col.shape)}, "
                         f"{tuple(values.shape)}")
    if size is None:
        if is_traced(col):
            raise TypeError(f"{op}: `size` is needed when col_indices are traced (the column "
                            f"count is read off their values)")
        cols = int(_host(col).max()) + 1 if col.shape[0] else 0
        default: tuple = (crow.shape[0] - 1, cols)
    else:
        default = ()
    size = _size_arg(size, default, values, op=op)
    if crow.shape[0] != size[0] + 1:
        raise ValueError(f"{op}: crow_indices must have size[0] + 1 = {size[0] + 1} entries, got "
                         f"{crow.shape[0]}")
    return jsparse.BCSR((values, col, crow), shape=size)


@register_function("torch.sparse_coo_tensor")
def sparse_coo_tensor(indices: Any, values: Any, size: Any = None, *, dtype: Any = None,
                      device: Any = None, pin_memory: bool = False, requires_grad: bool = False,
                      check_invariants: Optional[bool] = None,
                      is_coalesced: Optional[bool] = None) -> jsparse.BCOO:
    """``torch.sparse_coo_tensor(indices [2, nnz], values [nnz, *F], size)`` -> ``BCOO``.

    ``is_coalesced=True`` is taken on trust, as torch does (sorted, no repeats);
    ``size=None`` infers ``indices.max(1) + 1`` (concrete indices only).
    """
    op = "sparse_coo_tensor"
    index = jnp.asarray(indices)
    values = _values_arg(values, dtype, op=op)
    if index.ndim != 2 or index.shape[0] != 2 or values.ndim < 1 or \
            values.shape[0] != index.shape[1]:
        raise ValueError(f"{op}: expected indices [2, nnz] and values [nnz, ...], got shapes "
                         f"{tuple(index.shape)} and {tuple(values.shape)}")
    if size is None:
        if is_traced(index):
            raise TypeError(f"{op}: `size` is needed when the indices are traced (the size is "
                            f"read off their values)")
        ids = _host(index)
        default = tuple(int(d) for d in (ids.max(1) + 1 if ids.shape[1] else (0, 0)))
    else:
        default = ()
    size = _size_arg(size, default, values, op=op)
    flag = bool(is_coalesced)
    with eager_indices(index):
        return jsparse.BCOO((values, index.T), shape=size, indices_sorted=flag,
                            unique_indices=flag)


# ------------------------------------------------------------------ storage

def _rows_of(x: Any) -> jax.Array:
    """Row id of every stored entry, storage order (a BCSR's rows from its ``indptr``)."""
    if isinstance(x, jsparse.BCOO):
        return x.indices[:, 0]
    n, nnz = x.shape[0], x.indices.shape[0]
    return jnp.repeat(jnp.arange(n, dtype=x.indices.dtype), jnp.diff(x.indptr),
                      total_repeat_length=nnz)


def _cols_of(x: Any) -> jax.Array:
    return x.indices[:, 1] if isinstance(x, jsparse.BCOO) else x.indices


def _traced_error(op: str, what: str) -> TypeError:
    return TypeError(
        f"{op}: {what} depends on the index values, and here they are traced (under jax.jit), "
        f"so the result's size is not known while the program is built. Give it concrete "
        f"indices: call the model eagerly, or keep the edge_index a compile-time constant "
        f"under jit (close over it; torch2jax_ops.parity.compare_modules holds integer inputs "
        f"fixed); or compute it densely (adj.to_dense() @ adj.to_dense())")


def _coalesce_pattern(rows: np.ndarray, cols: np.ndarray, ncols: int
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row-major sorted distinct ``(row, col)`` and each entry's slot among them."""
    key = rows * max(ncols, 1) + cols
    uniq, slot = np.unique(key, return_inverse=True)
    return uniq // max(ncols, 1), uniq % max(ncols, 1), slot.reshape(-1)


def _product_pattern(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                               np.ndarray]:
    """``(rows, cols, pa, pb, slot)``: the product's entries in torch's CSR order, and every
    contributing pair (``a``'s entry ``pa``, ``b``'s entry ``pb``) with its entry ``slot``."""
    ar, ac = _host(_rows_of(a)), _host(_cols_of(a))
    br, bc = _host(_rows_of(b)), _host(_cols_of(b))
    m, p = b.shape
    # b's entries grouped by row, storage order inside a row
    order_b = np.argsort(br, kind="stable")
    start = np.concatenate([[0], np.cumsum(np.bincount(br, minlength=m))])
    count = start[ac + 1] - start[ac]
    pa = np.repeat(np.arange(ac.shape[0]), count)
    offset = np.arange(pa.shape[0]) - np.repeat(np.cumsum(count) - count, count)
    pb = order_b[start[ac[pa]] + offset] if pa.shape[0] else np.zeros(0, np.int64)
    # a's entries row by row (stable: storage order inside a row), then the walk order
    walk = np.argsort(ar[pa], kind="stable")
    pa, pb = pa[walk], pb[walk]
    key = ar[pa] * max(p, 1) + bc[pb]
    uniq, first, slot = np.unique(key, return_index=True, return_inverse=True)
    rank = np.lexsort((first, uniq // max(p, 1)))  # by row, then first reached
    where = np.empty_like(rank)
    where[rank] = np.arange(rank.shape[0])
    ordered = uniq[rank]
    return ordered // max(p, 1), ordered % max(p, 1), pa, pb, where[slot.reshape(-1)]


def _csr(rows: np.ndarray, cols: np.ndarray, values: jax.Array, shape: tuple,
         dtype: Any) -> jsparse.BCSR:
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=shape[0]))])
    return jsparse.BCSR((values, jnp.asarray(cols, dtype), jnp.asarray(indptr, dtype)),
                        shape=shape)


def _sparse_sparse(a: Any, b: Any, *, op: str) -> Any:
    _check_2d(a, "input", op=op)
    _check_2d(b, "other", op=op)
    if type(a) is not type(b):
        raise TypeError(f"{op}: both sparse operands must have the same layout (CSR @ CSR or "
                        f"COO @ COO), got {type(a).__name__} @ {type(b).__name__}; convert one "
                        f"with .to_sparse_coo()")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"{op}: shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be "
                         f"multiplied")
    if jnp.dtype(a.dtype) != jnp.dtype(b.dtype):
        raise TypeError(f"{op}: expected both operands to have the same dtype, got {a.dtype} "
                        f"and {b.dtype}")
    if indices_traced(a, b):
        raise _traced_error(op, "the number of stored entries of a sparse @ sparse product")
    with jax.ensure_compile_time_eval():
        rows, cols, pa, pb, slot = _product_pattern(a, b)
    shape = (a.shape[0], b.shape[1])
    index_dtype = a.indices.dtype
    values = jax.ops.segment_sum(a.data[pa] * b.data[pb], jnp.asarray(slot, jnp.int32),
                                 rows.shape[0]) if pa.shape[0] else jnp.zeros((0,), a.dtype)
    values = values.astype(a.dtype)
    with jax.ensure_compile_time_eval():
        if isinstance(a, jsparse.BCSR):
            return _csr(rows, cols, values, shape, index_dtype)
        # COO: torch coalesces the product (row-major sorted)
        order = np.lexsort((cols, rows))
        perm = np.empty_like(order)
        perm[order] = np.arange(order.shape[0])
        index = jnp.asarray(np.stack([rows[order], cols[order]], axis=1), index_dtype)
    return jsparse.BCOO((values[jnp.asarray(order)] if order.shape[0] else values, index),
                        shape=shape, indices_sorted=True, unique_indices=True)


def _sparse_dense(a: Any, other: jax.Array, *, op: str) -> jax.Array:
    _check_2d(a, "input", op=op)
    other = jnp.asarray(other)
    if other.ndim not in (1, 2) or other.shape[0] != a.shape[1]:
        raise ValueError(f"{op}: sparse {tuple(a.shape)} @ dense needs a dense [{a.shape[1]}] "
                         f"or [{a.shape[1]}, F] operand, got shape {tuple(other.shape)}")
    if jnp.dtype(a.dtype) != jnp.dtype(other.dtype):
        raise TypeError(f"{op}: expected both operands to have the same dtype, got {a.dtype} "
                        f"and {other.dtype}")
    with eager_indices(a):
        rows, cols = _rows_of(a).astype(jnp.int32), _cols_of(a).astype(jnp.int32)
    vals = a.data if other.ndim == 1 else a.data[:, None]
    return jax.ops.segment_sum(vals * other[cols], rows, a.shape[0])


def sparse_matmul(input: Any, other: Any, *, op: str = "matmul") -> Any:
    """``input @ other`` with a sparse operand: sparse @ sparse (same layout) or sparse @ dense.

    Sparse @ sparse gives torch's pattern and storage order (module docstring) and needs
    concrete indices; a dense operand on the left is refused, as a batched or >2-D operand.
    """
    if is_sparse(input) and is_sparse(other):
        return _sparse_sparse(input, other, op=op)
    if is_sparse(input):
        return _sparse_dense(input, other, op=op)
    raise TypeError(f"{op}: dense @ sparse is not mapped; write it as (sparse.t() @ dense.t())"
                    f".t() or densify the sparse operand with .to_dense()")


@register_function("torch.sparse.mm")
def sparse_mm(mat1: Any, mat2: Any, reduce: str = "sum") -> Any:
    """``torch.sparse.mm(mat1, mat2)`` (``reduce="sum"`` only)."""
    if reduce not in ("sum", "add"):
        raise ValueError(f"sparse.mm: only reduce='sum' is mapped here, got {reduce!r}; use "
                         f"torch_geometric.utils.spmm for the other reductions")
    return sparse_matmul(mat1, mat2, op="sparse.mm")


# ------------------------------------------------------------------ methods

def _need_sparse(x: Any, name: str) -> None:
    if not is_sparse(x):
        raise TypeError(f".{name}(): expected a sparse tensor (BCOO / BCSR), got "
                        f"{type(x).__name__}")


@register_method("to_sparse_coo")
def to_sparse_coo(self: Any) -> jsparse.BCOO:
    """``t.to_sparse_coo()``: a CSR's entries in its storage order (marked coalesced, as
    torch marks them); a COO as it is."""
    _need_sparse(self, "to_sparse_coo")
    if isinstance(self, jsparse.BCOO):
        return self
    _check_2d(self, "self", op="to_sparse_coo")
    with eager_indices(self):
        index = jnp.stack([_rows_of(self), self.indices], axis=1)
    return jsparse.BCOO((self.data, index), shape=self.shape, indices_sorted=True,
                        unique_indices=True)


@register_method("to_dense")
def to_dense(self: Any, dtype: Any = None, *, masked_grad: bool = False) -> jax.Array:
    """``t.to_dense()``: repeated entries summed."""
    if not is_sparse(self):
        out = jnp.asarray(self)
    else:
        out = self.todense()
    dt = dtype_arg(dtype, op="to_dense")
    return out if dt is None else out.astype(dt)


@register_method("indices")
def indices(self: Any) -> jax.Array:
    """``t.indices()`` of a coalesced COO: ``[2, nnz]``; torch refuses an uncoalesced one."""
    _need_sparse(self, "indices")
    if not isinstance(self, jsparse.BCOO):
        raise TypeError(".indices(): only a COO tensor has it; a CSR tensor has crow_indices() "
                        "and col_indices()")
    if not (self.indices_sorted and self.unique_indices):
        raise RuntimeError(".indices(): cannot get indices on an uncoalesced tensor, please "
                           "call .coalesce() first (torch's rule)")
    with eager_indices(self):
        return self.indices.T.astype(long_dtype())


@register_method("values")
def values(self: Any) -> Any:
    """``t.values()``: the stored values ``[nnz, *F]`` (a dict's ``.values()`` as Python's)."""
    if isinstance(self, dict):
        return self.values()
    _need_sparse(self, "values")
    if isinstance(self, jsparse.BCOO) and not (self.indices_sorted and self.unique_indices):
        raise RuntimeError(".values(): cannot get values on an uncoalesced tensor, please "
                           "call .coalesce() first (torch's rule)")
    return self.data


@register_method("crow_indices")
def crow_indices(self: Any) -> jax.Array:
    """``t.crow_indices()`` of a CSR: ``[N + 1]``."""
    if not isinstance(self, jsparse.BCSR):
        raise TypeError(f".crow_indices(): expected a CSR tensor (BCSR), got "
                        f"{type(self).__name__}")
    return self.indptr


@register_method("col_indices")
def col_indices(self: Any) -> jax.Array:
    """``t.col_indices()`` of a CSR: ``[nnz]``."""
    if not isinstance(self, jsparse.BCSR):
        raise TypeError(f".col_indices(): expected a CSR tensor (BCSR), got "
                        f"{type(self).__name__}")
    return self.indices


@register_method("coalesce")
def coalesce(self: Any) -> jsparse.BCOO:
    """``t.coalesce()`` of a COO: repeated entries summed, row-major sorted.

    Needs concrete indices unless already coalesced (the entry count depends on them).
    """
    _need_sparse(self, "coalesce")
    if not isinstance(self, jsparse.BCOO):
        raise TypeError(".coalesce(): only a COO tensor has it")
    if self.indices_sorted and self.unique_indices:
        return self
    if self.n_batch or len(self.shape) - self.n_dense != 2:
        raise ValueError(f".coalesce(): takes a COO with 2 sparse dimensions, got shape "
                         f"{tuple(self.shape)}")
    if indices_traced(self):
        raise _traced_error("coalesce", "the number of distinct entries")
    with jax.ensure_compile_time_eval():
        rows, cols, slot = _coalesce_pattern(_host(self.indices[:, 0]),
                                             _host(self.indices[:, 1]), self.shape[1])
        index = jnp.asarray(np.stack([rows, cols], axis=1), self.indices.dtype)
    data = jax.ops.segment_sum(self.data, jnp.asarray(slot, jnp.int32), rows.shape[0])
    return jsparse.BCOO((data, index), shape=self.shape, indices_sorted=True,
                        unique_indices=True)
