"""The shared core of the torch_scatter mirror.

Everything the scatter, segment and composite ops have in common lives here
and nowhere else: argument validation (with errors that name the argument and
the valid range), torch_scatter's index broadcasting rule, the output size
along the reduced axis, index bounds (never a silent wrap-around), and
:class:`Groups`, which turns any scatter into one flat ``jax.ops.segment_*``
call and back.

Bounds policy
-------------
* concrete index (eager code, or an index closed over by ``jax.grad``):
  an index outside ``[0, size)`` raises :class:`IndexError`, as torch does;
* traced index (under ``jax.jit`` / ``jax.vmap``): elements with an index
  outside ``[0, size)`` are dropped (they reach no group, get zero gradient);
  run the function through :func:`torch2jax_ops.checked` to raise instead.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from .. import dtypes

__all__ = [
    "as_array", "is_traced", "normalize_dim", "check_index", "static_int",
    "aligned_index_shape", "index_extent", "output_size", "check_bounds", "check_out",
    "check_sorted", "check_indptr", "check_leading_axes", "csr_ids", "gather_along", "take_groups", "Groups",
]


def is_traced(x: Any) -> bool:
    """True when ``x`` is a tracer (inside jit, vmap, grad w.r.t. it ...)."""
    return isinstance(x, jax.core.Tracer)


def as_array(x: Any, name: str, fn: str) -> jax.Array:
    """``x`` as a JAX array; a torch tensor gets an error that says how to convert."""
    if type(x).__module__.startswith("torch"):
        raise TypeError(
            f"{fn}: `{name}` is a torch tensor; pass a JAX array instead "
            f"(torch2jax_ops.dlpack.to_jax(tensor) converts without a copy)")
    if isinstance(x, (jax.Array, np.ndarray, np.generic)) or is_traced(x):
        return jnp.asarray(x)
    if isinstance(x, (list, tuple, int, float, bool)):
        return jnp.asarray(x)
    raise TypeError(f"{fn}: `{name}` must be an array, got {type(x).__name__}")


def normalize_dim(dim: Any, ndim: int, fn: str, name: str = "dim") -> int:
    """torch's dim normalisation: ``dim`` in ``[-ndim, ndim - 1]``."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{fn}: `{name}` must be a Python int, got {type(dim).__name__}")
    lo, hi = -max(ndim, 1), max(ndim, 1) - 1
    if not lo <= dim <= hi:
        raise IndexError(
            f"{fn}: `{name}`={dim} is out of range for a {ndim}-D `src` "
            f"(expected to be in range of [{lo}, {hi}])")
    return int(dim) % max(ndim, 1)


def check_index(index: jax.Array, fn: str, name: str = "index") -> None:
    """The index must hold integers (torch needs int64; int32 etc. are accepted here)."""
    if not jnp.issubdtype(index.dtype, jnp.integer):
        raise TypeError(
            f"{fn}: `{name}` must have an integer dtype, got {index.dtype} "
            f"(use index.astype(jnp.int32), or int64 with jax_enable_x64)")


def static_int(value: Any, name: str, fn: str, minimum: int = 0) -> Optional[int]:
    """A size argument as a Python int (``None`` stays ``None``).

    Sizes decide output shapes, and shapes are static in JAX: a traced value
    cannot be used, and the error says how to make it static.
    """
    if value is None:
        return None
    if is_traced(value):
        raise TypeError(
            f"{fn}: `{name}` must be a concrete Python int, but it is traced: output "
            f"shapes are static under jax.jit. Pass it as a Python int, or mark it "
            f"static: jax.jit(f, static_argnames='{name}')")
    try:
        number = operator.index(value if not hasattr(value, "item") else value.item())
    except TypeError:
        raise TypeError(f"{fn}: `{name}` must be an int, got {value!r}") from None
    if number < minimum:
        raise ValueError(f"{fn}: `{name}` must be >= {minimum}, got {number}")
    return number


def aligned_index_shape(index_shape: Sequence[int], src_shape: Sequence[int],
                        dim: int, fn: str, name: str = "index") -> tuple[int, ...]:
    """torch_scatter's ``broadcast(index, src, dim)``, as a shape.

    A 1-D index is first given ``dim`` leading unit axes (so it lines up with
    axis ``dim``); then unit axes are appended until it has ``src.ndim`` axes.
    The result must expand to ``src``'s shape: every axis equal or 1.
    """
    shape = tuple(index_shape)
    if len(shape) == 1:
        shape = (1,) * dim + shape
    if len(shape) > len(src_shape):
        raise ValueError(
            f"{fn}: `{name}` has {len(index_shape)} dims but `src` only {len(src_shape)}; "
            f"an index may have at most as many dims as src")
    shape = shape + (1,) * (len(src_shape) - len(shape))
    for axis, (i, s) in enumerate(zip(shape, src_shape)):
        if i != s and i != 1:
            rule = ("a 1-D index lines up with axis `dim`" if len(index_shape) == 1 else
                    "a k-D index lines up with the LEADING k axes of src")
            raise ValueError(
                f"{fn}: `{name}` of shape {tuple(index_shape)} cannot be broadcast to `src` of "
                f"shape {tuple(src_shape)} with dim={dim} ({rule}; aligned shape {shape} "
                f"differs at axis {axis}: {i} vs {s})")
    return shape


def index_extent(index: jax.Array) -> Optional[tuple[int, int]]:
    """(min, max) of a concrete, non-empty index (one host read); None when traced or empty."""
    if is_traced(index) or index.size == 0:
        return None
    values = np.asarray(index)
    return int(values.min()), int(values.max())


def output_size(fn: str, index: jax.Array, index_numel: int, dim_size: Optional[int],
                out: Optional[jax.Array], dim: int,
                extent: Optional[tuple[int, int]] = None) -> int:
    """Size of the output along the reduced axis, by torch_scatter's rule.

    ``out``'s size if given, else ``dim_size``, else 0 for an empty index, else
    ``index.max() + 1`` — which needs a concrete index.
    """
    if out is not None:
        size = out.shape[dim]
        if dim_size is not None and dim_size != size:
            raise ValueError(
                f"{fn}: `dim_size`={dim_size} disagrees with `out`.shape[{dim}]={size}; "
                f"pass one of them (torch_scatter silently ignores dim_size here)")
        return size
    if dim_size is not None:
        return dim_size
    if index_numel == 0:
        return 0
    if is_traced(index):
        raise ValueError(
            f"{fn}: `dim_size` is required when `index` is traced (under jax.jit or "
            f"jax.vmap): the number of groups would be index.max() + 1, a value JAX cannot "
            f"turn into a static shape. Pass dim_size=<number of groups> as a Python int "
            f"(e.g. num_nodes), or compute it outside jit")
    return (extent or index_extent(index))[1] + 1


def check_bounds(index: jax.Array, size: int, fn: str, name: str = "index",
                 extent: Optional[tuple[int, int]] = None,
                 target: str = "the output along dim",
                 fix: str = "raise dim_size or fix the index") -> None:
    """Reject indices outside ``[0, size)``: eagerly when concrete, via checkify when traced."""
    if index.size == 0:
        return
    if is_traced(index):
        checkify.debug_check(
            jnp.all((index >= 0) & (index < size)),
            f"{fn}: `{name}` has values outside [0, {size}) (min {{lo}}, max {{hi}})",
            lo=jnp.min(index), hi=jnp.max(index))
        return
    lo, hi = extent or index_extent(index)
    if lo < 0:
        raise IndexError(
            f"{fn}: `{name}` contains negative values (min {lo}); valid range is "
            f"[0, {size}). Negative indices never wrap around in torch2jax_ops")
    if hi >= size:
        raise IndexError(
            f"{fn}: `{name}` contains {hi}, out of range for {target} of size {size} "
            f"(valid range [0, {size})); {fix}")


def check_out(out: Any, src: jax.Array, dim: int, fn: str) -> Optional[jax.Array]:
    """``out`` must match ``src`` in dtype and in every axis but ``dim``."""
    if out is None:
        return None
    out = as_array(out, "out", fn)
    expected = "(" + ", ".join(str(n) if a != dim else "*" for a, n in enumerate(src.shape)) + ")"
    if out.ndim != src.ndim or any(o != s for a, (o, s) in
                                   enumerate(zip(out.shape, src.shape)) if a != dim):
        raise ValueError(
            f"{fn}: `out` has shape {tuple(out.shape)}, expected {expected} "
            f"(src's shape with any size along dim={dim})")
    if out.dtype != src.dtype:
        raise TypeError(f"{fn}: `out` has dtype {out.dtype} but `src` has {src.dtype}; "
                        f"they must match (torch_scatter does not promote)")
    return out


def check_leading_axes(src: jax.Array, link: jax.Array, fn: str, name: str) -> int:
    """segment/gather's layout rule; returns the reduced axis ``link.ndim - 1``.

    ``link`` (an index or a CSR pointer) works along its last axis; its
    leading axes line up with src's and must be 1 (broadcast) or equal.
    """
    if link.ndim == 0:
        raise ValueError(f"{fn}: `{name}` must have at least one dimension, got a 0-d array")
    if src.ndim < link.ndim:
        raise ValueError(f"{fn}: `{name}` has {link.ndim} dims but `src` only {src.ndim}; "
                         f"it works along axis {name}.ndim - 1 of src")
    for axis in range(link.ndim - 1):
        if link.shape[axis] not in (1, src.shape[axis]):
            raise ValueError(
                f"{fn}: `{name}` of shape {tuple(link.shape)} cannot be broadcast against "
                f"`src` of shape {tuple(src.shape)}: leading axis {axis} is "
                f"{link.shape[axis]}, expected 1 or {src.shape[axis]}")
    return link.ndim - 1


def check_sorted(index: jax.Array, fn: str, name: str = "index") -> Optional[tuple[int, int]]:
    """``index`` must be non-decreasing along its last axis (segment_coo's contract).

    torch_scatter trusts it and returns wrong values (or corrupts memory) when
    it is not; here a concrete index raises, a traced one is checked through
    :func:`torch2jax_ops.checked`. Returns the (min, max) of a concrete,
    non-empty index, read off its first and last columns (the same host read).
    """
    if is_traced(index):
        if index.shape[-1] > 1:
            checkify.debug_check(jnp.all(index[..., 1:] >= index[..., :-1]),
                                 f"{fn}: `{name}` must be sorted (non-decreasing) along its "
                                 f"last axis")
        return None
    if index.size == 0:
        return None
    values = np.asarray(index)
    steps = np.diff(values, axis=-1)
    if (steps < 0).any():
        where = np.unravel_index(int(np.argmax(steps < 0)), steps.shape)
        at = where[:-1] + (where[-1] + 1,)
        raise ValueError(
            f"{fn}: `{name}` must be sorted (non-decreasing) along its last axis, but "
            f"{name}[{', '.join(map(str, at))}]={values[at]} follows {values[where]}. Sort "
            f"src and index together (jnp.argsort(index, stable=True)), or use scatter(), "
            f"which takes any order")
    return int(values[..., 0].min()), int(values[..., -1].max())


def check_indptr(indptr: jax.Array, length: int, fn: str, name: str = "indptr") -> None:
    """A CSR pointer: starts >= 0, never decreases, ends <= ``length`` (src's size along dim).

    torch_scatter reads out of bounds for anything else; here a concrete
    ``indptr`` raises, a traced one is checked through :func:`torch2jax_ops.checked`.
    """
    if indptr.size == 0:
        return
    first, last = indptr[..., 0], indptr[..., -1]
    if is_traced(indptr):
        checkify.debug_check(
            jnp.all(first >= 0) & jnp.all(last <= length)
            & jnp.all(indptr[..., 1:] >= indptr[..., :-1]),
            f"{fn}: `{name}` must be non-decreasing with values in [0, {length}]")
        return
    values = np.asarray(indptr)
    if values.min() < 0:
        raise ValueError(f"{fn}: `{name}` has a negative entry ({values.min()}); offsets must "
                         f"lie in [0, {length}] (src's size along the reduced axis)")
    if values.max() > length:
        raise ValueError(f"{fn}: `{name}` has the entry {values.max()}, beyond src's size "
                         f"{length} along the reduced axis; offsets must lie in [0, {length}]")
    if (np.diff(values, axis=-1) < 0).any():
        raise ValueError(f"{fn}: `{name}` must be non-decreasing along its last axis "
                         f"(a CSR pointer: segment i spans indptr[i]:indptr[i + 1])")


def csr_ids(indptr: jax.Array, length: int) -> jax.Array:
    """Segment id of each of ``length`` positions: shape ``indptr.shape[:-1] + (length,)``.

    Position e belongs to segment i when ``indptr[i] <= e < indptr[i + 1]``
    (the last such i for empty segments in between); positions before
    ``indptr[0]`` get -1 and positions from ``indptr[-1]`` on get the number of
    segments: both are invalid ids that reach no group. O(length + segments).
    """
    lead, points = indptr.shape[:-1], indptr.shape[-1]
    flat = indptr.reshape(-1, points).astype(jnp.int32)
    marks = jnp.zeros((flat.shape[0], length + 1), jnp.int32)
    marks = marks.at[jnp.arange(flat.shape[0])[:, None], flat].add(1, mode="drop")
    ids = jnp.cumsum(marks[:, :length], axis=-1, dtype=jnp.int32) - 1
    return ids.reshape(lead + (length,))


def gather_along(src: jax.Array, ids: jax.Array, dim: int, fill: Any = 0) -> jax.Array:
    """``src`` gathered along ``dim`` at ``ids``; invalid ids (<0 or >= size) give ``fill``.

    ``ids`` has shape ``lead + (n,)`` with ``lead`` broadcastable to
    ``src.shape[:dim]``; the result is src's shape with ``n`` at ``dim``.
    float16/bfloat16 gather through float32 (exact), so that the gradient, a
    scatter-add, accumulates in float32 as torch's does.
    """
    acc = dtypes.accumulation_dtype(src.dtype)
    if acc != src.dtype:
        return gather_along(src.astype(acc), ids, dim, fill).astype(src.dtype)
    size = src.shape[dim]
    ids = jnp.where(ids < 0, size, ids)  # jnp.take wraps negative ids even in "fill" mode
    if size == 0:
        return jnp.full(src.shape[:dim] + ids.shape[-1:] + src.shape[dim + 1:], fill, src.dtype)
    lead = ids.shape[:-1]
    if math.prod(lead) == 1:  # one index for all leading axes: a plain row gather
        return jnp.take(src, ids.reshape(-1), axis=dim, mode="fill", fill_value=fill)
    ids = jnp.broadcast_to(ids, src.shape[:dim] + ids.shape[-1:])
    batch = math.prod(src.shape[:dim])
    flat_src = src.reshape((batch,) + src.shape[dim:])
    flat_ids = ids.reshape(batch, -1)
    taken = jax.vmap(lambda s, i: jnp.take(s, i, axis=0, mode="fill", fill_value=fill))(
        flat_src, flat_ids)
    return taken.reshape(src.shape[:dim] + ids.shape[-1:] + src.shape[dim + 1:])


def take_groups(per_group: jax.Array, ids: jax.Array, fill: Any = 0) -> jax.Array:
    """Each row's group value: (num_segments, ...) -> (len(ids), ...).

    Ids outside ``[0, num_segments)`` (invalid rows) get ``fill``; works with
    zero groups too. float16/bfloat16 go through float32 (exact), so that the
    gradient, a scatter-add, accumulates in float32 as torch's does.
    """
    acc = dtypes.accumulation_dtype(per_group.dtype)
    if acc != per_group.dtype:
        return take_groups(per_group.astype(acc), ids, fill).astype(per_group.dtype)
    count = per_group.shape[0]
    if count == 0:
        return jnp.full(ids.shape + per_group.shape[1:], fill, per_group.dtype)
    # jnp.take wraps negative ids even in "fill" mode: send them out of range.
    return jnp.take(per_group, jnp.where(ids < 0, count, ids), axis=0, mode="fill",
                    fill_value=fill)


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
        out    = restore(result)                      src's shape with size at dim

    For the common PyG case (src [E, F], index [E], dim=0) every rearrangement
    is the identity.
    """

    def __init__(self, fn: str, src: jax.Array, index: jax.Array, dim: int,
                 size: int, aligned: tuple[int, ...]):
        shape = src.shape
        self.fn, self.dim, self.size, self.src_shape = fn, dim, size, shape
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
        self.sorted = False  # ids non-decreasing: lets XLA use a sorted segment reduction
        id_dtype = jnp.int32
        if max(self.num_segments, self.num_rows) >= 2**31 - 1:
            if not jax.config.jax_enable_x64:
                raise ValueError(f"{fn}: {self.num_segments} groups x {self.num_rows} rows need "
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

    @classmethod
    def build(cls, fn: str, src: Any, index: Any, dim: Any, out: Any, dim_size: Any,
              sorted_index: bool = False) -> tuple["Groups", jax.Array, Optional[jax.Array]]:
        """Validate the torch_scatter arguments and plan the reduction.

        ``sorted_index=True`` is segment_coo's contract: the index must be
        non-decreasing along its last axis (checked), and the output size
        counts the index itself, not its expansion to src's shape.
        Returns ``(groups, src, out)`` with ``src``/``out`` as JAX arrays.
        """
        src = as_array(src, "src", fn)
        index = as_array(index, "index", fn)
        check_index(index, fn)
        if src.ndim == 0:
            raise ValueError(f"{fn}: `src` must have at least one dimension, got a 0-d array")
        if src.dtype == jnp.bool_:
            raise TypeError(f"{fn}: `src` of dtype bool is not supported; cast it to an "
                            f"integer or floating dtype")
        dim = normalize_dim(dim, src.ndim, fn)
        dim_size = static_int(dim_size, "dim_size", fn)
        out = check_out(out, src, dim, fn)
        aligned = aligned_index_shape(index.shape, src.shape, dim, fn)
        # scatter expands the index to src's shape; segment_coo only over its own axes
        numel = math.prod(src.shape[:index.ndim]) if sorted_index else src.size
        if not numel:
            extent = None
        elif sorted_index:
            extent = check_sorted(index, fn)  # one host read: order and extent
        else:
            extent = index_extent(index)
        size = output_size(fn, index, numel, dim_size, out, dim, extent)
        if numel:
            check_bounds(index, size, fn, extent=extent)
        groups = cls(fn, src, index, dim, size, aligned)
        # Only a verified (concrete) order may be promised to XLA: a false promise
        # gives undefined results, and a traced index is merely checked.
        groups.sorted = sorted_index and groups.fold == 1 and not is_traced(index)
        return groups, src, out

    # -- moving data between the user's layout and the flat group layout --
    def rows(self, x: jax.Array) -> jax.Array:
        """A src-shaped array as (M, *carried)."""
        return jnp.transpose(x, self.perm).reshape((self.num_rows,) + self.carried_shape)

    def groups(self, x: jax.Array) -> jax.Array:
        """An out-shaped array as (num_segments, *carried)."""
        return jnp.transpose(x, self.perm).reshape((self.num_segments,) + self.carried_shape)

    def unrows(self, rows: jax.Array) -> jax.Array:
        """(M, *carried) back to src's shape (the inverse of :meth:`rows`)."""
        rows = rows.reshape((self.length,) + self.varying_shape + self.carried_shape)
        return jnp.transpose(rows, self.inverse_perm)

    def restore(self, y: jax.Array) -> jax.Array:
        """(num_segments, *carried) back to src's shape with ``size`` along dim."""
        y = y.reshape((self.size,) + self.varying_shape + self.carried_shape)
        return jnp.transpose(y, self.inverse_perm)

    def positions(self) -> jax.Array:
        """(M,) position of each row along ``dim`` (what arg outputs report)."""
        return jnp.repeat(jnp.arange(self.length, dtype=dtypes.index_dtype()), self.fold,
                          total_repeat_length=self.num_rows)

    def sum(self, x: jax.Array, out: Optional[jax.Array] = None) -> jax.Array:
        """Per-group sum of src-shaped ``x`` (plus out-shaped ``out``), as (num_segments, *carried).

        Accumulated as torch does (half types in float32) and rounded once to x's dtype.
        """
        return self.sum_rows(self.rows(x), None if out is None else self.groups(out))

    def sum_rows(self, rows: jax.Array, out_groups: Optional[jax.Array] = None,
                 keep_accumulator: bool = False) -> jax.Array:
        """:meth:`sum` of rows already in the flat layout; ``keep_accumulator``
        skips the final rounding (the caller divides first, as segment mean does)."""
        acc = dtypes.accumulation_dtype(rows.dtype)
        total = jax.ops.segment_sum(rows.astype(acc), self.ids, self.num_segments,
                                    indices_are_sorted=self.sorted)
        if out_groups is not None:
            total = out_groups.astype(acc) + total
        return total if keep_accumulator else total.astype(rows.dtype)

    def mean(self, x: jax.Array, out: Optional[jax.Array] = None,
             rounding: str = "floor") -> jax.Array:
        """Per-group ``(out + sum) / max(count, 1)`` as (num_segments, *carried).

        ``rounding`` is torch_scatter's per op: "floor" (scatter_mean: integers
        floor, the float sum is rounded to x's dtype before dividing) or
        "trunc" (segment_csr/coo: integers truncate toward zero, half sums are
        divided in float32 and rounded once).
        """
        count = jnp.maximum(self.counts(), 1)
        integer = jnp.issubdtype(x.dtype, jnp.integer)
        total = self.sum_rows(self.rows(x), None if out is None else self.groups(out),
                              keep_accumulator=not integer and rounding == "trunc")
        if integer:
            divide = jnp.floor_divide if rounding == "floor" else jax.lax.div
            return divide(total, count.astype(x.dtype))
        acc = dtypes.accumulation_dtype(x.dtype)
        return (total.astype(acc) / count.astype(acc)).astype(x.dtype)

    def counts(self) -> jax.Array:
        """(num_segments, 1, ...) int32 number of rows per group, broadcastable to a result."""
        ones = jnp.ones((self.num_rows,), jnp.int32)
        count = jax.ops.segment_sum(ones, self.ids, self.num_segments,
                                    indices_are_sorted=self.sorted)
        return count.reshape((self.num_segments,) + (1,) * len(self.carried_shape))
