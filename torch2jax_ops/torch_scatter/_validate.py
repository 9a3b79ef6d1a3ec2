"""Validation of torch_scatter's arguments: index broadcasting, output size, bounds, ``out``.

The rules are torch_scatter 2.1's (see ``shared/reference/torch_scatter.md``),
with one difference everywhere: bad input raises a Python exception that names
the argument and the valid range, never a crash or a silent wrap-around.

Bounds policy
-------------
* concrete index (eager code, or an index closed over by ``jax.grad``):
  an index outside ``[0, size)`` raises :class:`IndexError`, as torch does;
* traced index (under ``jax.jit`` / ``jax.vmap``): elements with an index
  outside ``[0, size)`` are dropped (they reach no group, get zero gradient);
  run the function through :func:`torch2jax_ops.checked` to raise instead.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._checking import as_array, check_bounds, debug_check, index_extent, is_traced  # noqa: F401  (re-exported)

__all__ = ["aligned_index_shape", "index_extent", "output_size", "check_bounds", "check_out",
           "check_leading_axes", "check_sorted", "check_indptr"]


def aligned_index_shape(index_shape: Sequence[int], src_shape: Sequence[int],
                        dim: int, name: str = "index", *, op: str) -> tuple[int, ...]:
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
            f"{op}: `{name}` has {len(index_shape)} dims but `src` only {len(src_shape)}; "
            f"an index may have at most as many dims as src")
    shape = shape + (1,) * (len(src_shape) - len(shape))
    for axis, (i, s) in enumerate(zip(shape, src_shape)):
        if i != s and i != 1:
            rule = ("a 1-D index lines up with axis `dim`" if len(index_shape) == 1 else
                    "a k-D index lines up with the LEADING k axes of src")
            raise ValueError(
                f"{op}: `{name}` of shape {tuple(index_shape)} cannot be broadcast to `src` of "
                f"shape {tuple(src_shape)} with dim={dim} ({rule}; aligned shape {shape} "
                f"differs at axis {axis}: {i} vs {s})")
    return shape


def output_size(index: jax.Array, index_numel: int, dim_size: Optional[int],
                out: Optional[jax.Array], dim: int,
                extent: Optional[tuple[int, int]] = None, *, op: str) -> int:
    """Size of the output along the reduced axis, by torch_scatter's rule.

    ``out``'s size if given, else ``dim_size``, else 0 for an empty index, else
    ``index.max() + 1`` — which needs a concrete index.
    """
    if out is not None:
        size = out.shape[dim]
        if dim_size is not None and dim_size != size:
            raise ValueError(
                f"{op}: `dim_size`={dim_size} disagrees with `out`.shape[{dim}]={size}; "
                f"pass one of them (torch_scatter silently ignores dim_size here)")
        return size
    if dim_size is not None:
        return dim_size
    if index_numel == 0:
        return 0
    if is_traced(index):
        raise ValueError(
            f"{op}: `dim_size` is required when `index` is traced (under jax.jit or "
            f"jax.vmap): the number of groups would be index.max() + 1, a value JAX cannot "
            f"turn into a static shape. Pass dim_size=<number of groups> as a Python int "
            f"(e.g. num_nodes), or compute it outside jit")
    found = extent or index_extent(index)
    assert found is not None  # concrete and non-empty here
    return found[1] + 1


def check_out(out: Any, src: jax.Array, dim: int, *, op: str) -> Optional[jax.Array]:
    """``out`` must match ``src`` in dtype and in every axis but ``dim``."""
    if out is None:
        return None
    out = as_array(out, "out", op=op)
    expected = "(" + ", ".join(str(n) if a != dim else "*" for a, n in enumerate(src.shape)) + ")"
    if out.ndim != src.ndim or any(o != s for a, (o, s) in
                                   enumerate(zip(out.shape, src.shape)) if a != dim):
        raise ValueError(
            f"{op}: `out` has shape {tuple(out.shape)}, expected {expected} "
            f"(src's shape with any size along dim={dim})")
    if out.dtype != src.dtype:
        raise TypeError(f"{op}: `out` has dtype {out.dtype} but `src` has {src.dtype}; "
                        f"they must match (torch_scatter does not promote)")
    return out


def check_leading_axes(src: jax.Array, link: jax.Array, name: str, *, op: str) -> int:
    """segment/gather's layout rule; returns the reduced axis ``link.ndim - 1``.

    ``link`` (an index or a CSR pointer) works along its last axis; its
    leading axes line up with src's and must be 1 (broadcast) or equal.
    """
    if link.ndim == 0:
        raise ValueError(f"{op}: `{name}` must have at least one dimension, got a 0-d array")
    if src.ndim < link.ndim:
        raise ValueError(f"{op}: `{name}` has {link.ndim} dims but `src` only {src.ndim}; "
                         f"it works along axis {name}.ndim - 1 of src")
    for axis in range(link.ndim - 1):
        if link.shape[axis] not in (1, src.shape[axis]):
            raise ValueError(
                f"{op}: `{name}` of shape {tuple(link.shape)} cannot be broadcast against "
                f"`src` of shape {tuple(src.shape)}: leading axis {axis} is "
                f"{link.shape[axis]}, expected 1 or {src.shape[axis]}")
    return link.ndim - 1


def check_sorted(index: jax.Array, name: str = "index", *, op: str) -> Optional[tuple[int, int]]:
    """``index`` must be non-decreasing along its last axis (segment_coo's contract).

    torch_scatter trusts it and returns wrong values (or corrupts memory) when
    it is not; here a concrete index raises, a traced one is checked through
    :func:`torch2jax_ops.checked`. Returns the (min, max) of a concrete,
    non-empty index, read off its first and last columns (the same host read).
    """
    if is_traced(index):
        if index.shape[-1] > 1:
            debug_check(jnp.all(index[..., 1:] >= index[..., :-1]),
                        f"{op}: `{name}` must be sorted (non-decreasing) along its "
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
            f"{op}: `{name}` must be sorted (non-decreasing) along its last axis, but "
            f"{name}[{', '.join(map(str, at))}]={values[at]} follows {values[where]}. Sort "
            f"src and index together (jnp.argsort(index, stable=True)), or use scatter(), "
            f"which takes any order")
    return int(values[..., 0].min()), int(values[..., -1].max())


def check_indptr(indptr: jax.Array, length: int, name: str = "indptr", *, op: str) -> None:
    """A CSR pointer: starts >= 0, never decreases, ends <= ``length`` (src's size along dim).

    torch_scatter reads out of bounds for anything else; here a concrete
    ``indptr`` raises, a traced one is checked through :func:`torch2jax_ops.checked`.
    """
    if indptr.size == 0:
        return
    first, last = indptr[..., 0], indptr[..., -1]
    if is_traced(indptr):
        debug_check(
            jnp.all(first >= 0) & jnp.all(last <= length)
            & jnp.all(indptr[..., 1:] >= indptr[..., :-1]),
            f"{op}: `{name}` must be non-decreasing with values in [0, {length}]")
        return
    values = np.asarray(indptr)
    if values.min() < 0:
        raise ValueError(f"{op}: `{name}` has a negative entry ({values.min()}); offsets must "
                         f"lie in [0, {length}] (src's size along the reduced axis)")
    if values.max() > length:
        raise ValueError(f"{op}: `{name}` has the entry {values.max()}, beyond src's size "
                         f"{length} along the reduced axis; offsets must lie in [0, {length}]")
    if (np.diff(values, axis=-1) < 0).any():
        raise ValueError(f"{op}: `{name}` must be non-decreasing along its last axis "
                         f"(a CSR pointer: segment i spans indptr[i]:indptr[i + 1])")
