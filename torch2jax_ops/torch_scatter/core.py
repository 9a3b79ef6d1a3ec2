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
    "take_groups", "Groups",
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
                 extent: Optional[tuple[int, int]] = None) -> None:
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
            f"{fn}: `{name}` contains {hi}, out of range for an output of size {size} "
            f"along dim (valid range [0, {size})); raise dim_size or fix the index")


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


def take_groups(per_group: jax.Array, ids: jax.Array, fill: Any = 0) -> jax.Array:
    """Each row's group value: (num_segments, ...) -> (len(ids), ...).

    Ids outside ``[0, num_segments)`` (invalid rows) get ``fill``; works with
    zero groups too.
    """
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
    def build(cls, fn: str, src: Any, index: Any, dim: Any, out: Any, dim_size: Any
              ) -> tuple["Groups", jax.Array, Optional[jax.Array]]:
        """Validate the torch_scatter arguments and plan the reduction.

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
        numel = src.size  # the index is expanded to src's shape
        extent = index_extent(index) if numel else None
        size = output_size(fn, index, numel, dim_size, out, dim, extent)
        if numel:
            check_bounds(index, size, fn, extent=extent)
        return cls(fn, src, index, dim, size, aligned), src, out

    # -- moving data between the user's layout and the flat group layout --
    def rows(self, x: jax.Array) -> jax.Array:
        """A src-shaped array as (M, *carried)."""
        return jnp.transpose(x, self.perm).reshape((self.num_rows,) + self.carried_shape)

    def groups(self, x: jax.Array) -> jax.Array:
        """An out-shaped array as (num_segments, *carried)."""
        return jnp.transpose(x, self.perm).reshape((self.num_segments,) + self.carried_shape)

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
        rows = self.rows(x)
        acc = dtypes.accumulation_dtype(rows.dtype)
        total = jax.ops.segment_sum(rows.astype(acc), self.ids, self.num_segments)
        if out is not None:
            total = self.groups(out).astype(acc) + total
        return total.astype(rows.dtype)

    def counts(self) -> jax.Array:
        """(num_segments, 1, ...) int32 number of rows per group, broadcastable to a result."""
        ones = jnp.ones((self.num_rows,), jnp.int32)
        count = jax.ops.segment_sum(ones, self.ids, self.num_segments)
        return count.reshape((self.num_segments,) + (1,) * len(self.carried_shape))
