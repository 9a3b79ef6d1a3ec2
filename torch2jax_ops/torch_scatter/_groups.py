"""``Groups``: any scatter as one flat ``jax.ops.segment_*`` call and back.

The planner behind every op of the torch_scatter mirror (and of the graph
layer's aggregations): it validates the torch_scatter arguments once
(:mod:`._validate`), folds the axes where the index varies into the group id,
and lets the axes where it is broadcast ride along as features.
"""
from __future__ import annotations

import math
from functools import partial
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .. import _dtypes
from .._batch_vector import graph_count
from .._checking import as_array, check_index, is_traced, normalize_dim, static_int
from ._deterministic import sorted_sum
from ._gather import take_groups
from ._validate import (
    aligned_index_shape,
    check_bounds,
    check_out,
    check_sorted,
    index_extent,
    output_size,
)

__all__ = ["Groups"]


class Groups:
    """A scatter along ``dim`` seen as one flat segment reduction.

    Let ``src`` have shape S, the aligned index shape I (see
    :func:`aligned_index_shape`). Axes other than ``dim`` where the index
    varies (I[a] == S[a] > 1) are folded into the group id; axes where it is
    broadcast (I[a] == 1) ride along as trailing feature axes. So::

        rows   = src rearranged to (M, *carried)      M = S[dim] * prod(varying)
        ids    = (M,) group ids; any id outside [0, num_segments) is invalid
                 and reaches no group (segment ops drop it, take_groups fills)
        result = segment_op(rows, ids, num_segments)  (num_segments, *carried)
        out    = from_groups(result)                      src's shape with size at dim

    For the common PyG case (src [E, F], index [E], dim=0) every rearrangement
    is the identity.
    """

    def __init__(self, src: jax.Array, index: jax.Array, dim: int, size: int,
                 aligned: tuple[int, ...], *, op: str, indices_sorted: bool = False):
        shape = src.shape
        self.op, self.dim, self.size, self.src_shape = op, dim, size, shape
        self.length = shape[dim]
        varying = [a for a in range(src.ndim) if a != dim and aligned[a] != 1]
        carried = [a for a in range(src.ndim) if a != dim and aligned[a] == 1]
        self.perm = (dim, *varying, *carried)
        self.inverse_perm = tuple(int(p) for p in np.argsort(self.perm))
        self.varying_shape = tuple(shape[a] for a in varying)
        self.carried_shape = tuple(shape[a] for a in carried)
        self.fold = math.prod(self.varying_shape)
        self.num_segments = size * self.fold
        self.num_rows = self.length * self.fold
        id_dtype = jnp.int32
        if max(self.num_segments, self.num_rows) >= 2**31 - 1:
            if not _dtypes.x64_enabled():
                raise ValueError(f"{op}: {self.num_segments} groups x {self.num_rows} rows need "
                                 f"64-bit ids; enable jax_enable_x64")
            id_dtype = jnp.int64
        # index -> (length, fold) in perm order, without materialising carried axes.
        full = tuple(shape[a] if (a == dim or a in varying) else 1 for a in range(src.ndim))
        idx = jnp.broadcast_to(index.reshape(aligned), full)
        idx = jnp.transpose(idx, self.perm).reshape(self.length, self.fold)
        if self.fold == 1 and idx.dtype == id_dtype:
            # The common case costs nothing: segment_* ops drop ids outside
            # [0, num_segments) themselves, and take_groups guards gathers.
            self.ids = idx.reshape(self.num_rows)
        else:  # range-check before any cast or folding could alias a bad id into range
            valid = (idx >= 0) & (idx < size)
            idx = jnp.where(valid, idx, size).astype(id_dtype)
            linear = idx * self.fold + jnp.arange(self.fold, dtype=id_dtype)[None, :]
            self.ids = jnp.where(valid, linear, self.num_segments).reshape(self.num_rows)
        #: ids never decrease, so XLA may use a sorted segment reduction. Only a verified
        #: order may be promised (a false promise gives undefined results), and folding
        #: varying axes into the ids breaks the order.
        self.indices_sorted = bool(indices_sorted) and self.fold == 1

    @classmethod
    def build(cls, src: Any, index: Any, dim: Any, out: Any, dim_size: Any, *, op: str,
              sorted_index: bool = False) -> tuple[Groups, jax.Array, Optional[jax.Array]]:
        """Validate the torch_scatter arguments and plan the reduction.

        ``sorted_index=True`` is segment_coo's contract: the index must be
        non-decreasing along its last axis (checked), and the output size
        counts the index itself, not its expansion to src's shape.
        Returns ``(groups, src, out)`` with ``src``/``out`` as JAX arrays.
        """
        src = as_array(src, "src", op=op)
        if out is None:  # a BatchVector index knows its group count
            dim_size = graph_count(index, dim_size)
        index = as_array(index, "index", op=op)
        check_index(index, op=op)
        if src.ndim == 0:
            raise ValueError(f"{op}: `src` must have at least one dimension, got a 0-d array")
        if src.dtype == jnp.bool_:
            raise TypeError(f"{op}: `src` of dtype bool is not supported; cast it to an "
                            f"integer or floating dtype")
        dim = normalize_dim(dim, src.ndim, op=op)
        dim_size = static_int(dim_size, "dim_size", op=op)
        out = check_out(out, src, dim, op=op)
        aligned = aligned_index_shape(index.shape, src.shape, dim, op=op)
        # scatter expands the index to src's shape; segment_coo only over its own axes
        numel = math.prod(src.shape[:index.ndim]) if sorted_index else src.size
        if not numel:
            extent = None
        elif sorted_index:
            extent = check_sorted(index, op=op)  # one host read: order and extent
        else:
            extent = index_extent(index)
        size = output_size(index, numel, dim_size, out, dim, extent, op=op)
        if numel:
            check_bounds(index, size, op=op, extent=extent)
        # a traced index's order is merely checked (checkify), not verified
        groups = cls(src, index, dim, size, aligned, op=op,
                     indices_sorted=sorted_index and not is_traced(index))
        return groups, src, out

    # -- moving data between the user's layout and the flat group layout --
    def to_rows(self, x: jax.Array) -> jax.Array:
        """A src-shaped array as (M, *carried)."""
        return jnp.transpose(x, self.perm).reshape((self.num_rows,) + self.carried_shape)

    def to_groups(self, x: jax.Array) -> jax.Array:
        """An out-shaped array as (num_segments, *carried)."""
        return jnp.transpose(x, self.perm).reshape((self.num_segments,) + self.carried_shape)

    def from_rows(self, rows: jax.Array) -> jax.Array:
        """(M, *carried) back to src's shape (the inverse of :meth:`to_rows`)."""
        rows = rows.reshape((self.length,) + self.varying_shape + self.carried_shape)
        return jnp.transpose(rows, self.inverse_perm)

    def from_groups(self, y: jax.Array) -> jax.Array:
        """(num_segments, *carried) back to src's shape with ``size`` along dim."""
        y = y.reshape((self.size,) + self.varying_shape + self.carried_shape)
        return jnp.transpose(y, self.inverse_perm)

    def positions(self) -> jax.Array:
        """(M,) position of each row along ``dim`` (what arg outputs report)."""
        # an iota, not jnp.repeat: XLA's GPU compiler constant-folds repeat's E-sized
        # scan into a literal (minutes of compile time at E = 10M)
        return jax.lax.broadcasted_iota(_dtypes.index_dtype(), (self.length, self.fold),
                                        0).reshape(self.num_rows)

    def sum(self, x: jax.Array, out: Optional[jax.Array] = None,
            deterministic: bool = False) -> jax.Array:
        """Per-group sum of src-shaped ``x`` (plus out-shaped ``out``), as (num_segments, *carried).

        Accumulated as torch does (half types in float32) and rounded once to x's dtype.
        ``deterministic``: see :meth:`sum_rows`.
        """
        return self.sum_rows(self.to_rows(x), None if out is None else self.to_groups(out),
                             deterministic=deterministic)

    def sum_rows(self, rows: jax.Array, out_groups: Optional[jax.Array] = None,
                 keep_accumulator: bool = False, deterministic: bool = False) -> jax.Array:
        """:meth:`sum` of rows already in the flat layout; ``keep_accumulator``
        skips the final rounding (the caller divides first, as segment mean does).

        ``deterministic=True``: the rows are first put in group order (a stable sort
        of the ids, so rows of one group keep their order) and summed in an order
        fixed by the data, not by how a scatter is scheduled
        (:func:`._deterministic.sorted_sum`: the sorted segment sum on the CPU, a
        segmented scan elsewhere). A no-op when the ids are already known sorted.
        """
        acc = _dtypes.accumulation_dtype(rows.dtype)
        if (deterministic and not self.indices_sorted and rows.shape[0] > 1
                and jnp.issubdtype(rows.dtype, jnp.inexact)):  # integer sums are exact anyway
            order = jnp.argsort(self.ids, stable=True)
            ids = self.ids.at[order].get(unique_indices=True)
            # a permutation: its transpose (the gradient) writes every row once
            rows = rows.at[order].get(unique_indices=True)
            total = sorted_sum(rows.astype(acc), ids, self.num_segments)
        else:
            total = jax.ops.segment_sum(rows.astype(acc), self.ids, self.num_segments,
                                        indices_are_sorted=self.indices_sorted)
        if out_groups is not None:
            total = out_groups.astype(acc) + total
        return total if keep_accumulator else total.astype(rows.dtype)

    def mean(self, x: jax.Array, out: Optional[jax.Array] = None,
             rounding: str = "floor", deterministic: bool = False) -> jax.Array:
        """Per-group ``(out + sum) / max(count, 1)`` as (num_segments, *carried).

        ``rounding`` is torch_scatter's per op: "floor" (scatter_mean: integers
        floor, the float sum is rounded to x's dtype before dividing) or
        "trunc" (segment_csr/coo: integers truncate toward zero, half sums are
        divided in float32 and rounded once). ``deterministic``: see :meth:`sum_rows`
        (the count is an integer sum, exact in any order).
        """
        count = jnp.maximum(self.counts(), 1)
        integer = jnp.issubdtype(x.dtype, jnp.integer)
        total = self.sum_rows(self.to_rows(x), None if out is None else self.to_groups(out),
                              keep_accumulator=not integer and rounding == "trunc",
                              deterministic=deterministic)
        if integer:
            divide = jnp.floor_divide if rounding == "floor" else jax.lax.div
            return divide(total, count.astype(x.dtype))
        acc = _dtypes.accumulation_dtype(x.dtype)
        return (total.astype(acc) / count.astype(acc)).astype(x.dtype)

    def prod(self, x: jax.Array, out: Optional[jax.Array] = None) -> jax.Array:
        """Per-group product of src-shaped ``x`` (times out-shaped ``out``), as (num_segments, *carried).

        Empty groups give 1 (or ``out``). The gradient is the product of the
        other elements of the group, also where an element is 0 (no division).
        """
        rows = self.to_rows(x)
        out_groups = None if out is None else self.to_groups(out)
        if jnp.issubdtype(x.dtype, jnp.inexact):
            return _product(rows, out_groups, self.ids, self.num_segments)
        return _product_impl(rows, out_groups, self.ids, self.num_segments)

    def extremum(self, x: jax.Array, kind: str, empty: Any = 0) -> jax.Array:
        """Per-group max (``kind="max"``) or min of src-shaped ``x``, as (num_segments, *carried).

        torch's native ``scatter_reduce(amax/amin, include_self=False)`` rule:
        NaN propagates, a tie splits the gradient evenly among the tied
        elements, and empty groups take ``empty``. (torch_scatter's rules --
        NaN skipped, the gradient to the first winner -- are :func:`extreme`'s.)
        """
        segment = jax.ops.segment_max if kind == "max" else jax.ops.segment_min
        value = segment(self.to_rows(x), self.ids, self.num_segments,
                        indices_are_sorted=self.indices_sorted)
        return jnp.where(self.counts() == 0, jnp.asarray(empty, x.dtype), value)

    def counts(self) -> jax.Array:
        """(num_segments, 1, ...) int32 number of rows per group, broadcastable to a result."""
        ones = jnp.ones((self.num_rows,), jnp.int32)
        count = jax.ops.segment_sum(ones, self.ids, self.num_segments,
                                    indices_are_sorted=self.indices_sorted)
        return count.reshape((self.num_segments,) + (1,) * len(self.carried_shape))


# ------------------------------------------------------------------ product with exact gradient

def _product_impl(rows, out_groups, ids, num_segments):
    product = jax.ops.segment_prod(rows, ids, num_segments)
    return product if out_groups is None else out_groups * product


@partial(jax.custom_vjp, nondiff_argnums=(3,))
def _product(rows, out_groups, ids, num_segments):
    return _product_impl(rows, out_groups, ids, num_segments)


def _product_fwd(rows, out_groups, ids, num_segments):
    return _product_impl(rows, out_groups, ids, num_segments), (rows, out_groups, ids)


def _product_bwd(num_segments, residuals, g):
    rows, out_groups, ids = residuals
    is_zero = rows == 0
    zeros = jax.ops.segment_sum(is_zero.astype(jnp.int32), ids, num_segments)
    nonzero_product = jax.ops.segment_prod(jnp.where(is_zero, 1, rows), ids, num_segments)
    z = take_groups(zeros, ids, 2)
    p = take_groups(nonzero_product, ids, 0)
    # d(prod)/d(x_e) = product of the other elements of the group, computed
    # without dividing by a zero: a zero element gets the product of the
    # non-zeros when it is the only zero, every element gets 0 with >= 2 zeros.
    others = jnp.where(is_zero, jnp.where(z == 1, p, 0),
                       jnp.where(z == 0, p / jnp.where(is_zero, 1, rows), 0))
    scale = g if out_groups is None else g * out_groups
    grad_rows = take_groups(scale, ids, 0) * others
    grad_out = None
    if out_groups is not None:
        grad_out = g * jnp.where(zeros > 0, 0, nonzero_product)
    return grad_rows, grad_out, None


_product.defvjp(_product_fwd, _product_bwd)
