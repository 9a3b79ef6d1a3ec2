"""torch's CPU ``sort`` order, ties included, for the ops whose PyG result depends on it.

``torch.sort(stable=False)`` on the CPU (what ``TopKPooling``, ``SortAggregation``
and ``sort_edge_index`` / ``coalesce`` call without pyg-lib) is **not** stable:
measured on torch 2.x, it runs libstdc++'s ``std::sort`` (introsort: median-of-3
quicksort, heapsort past depth ``2 * floor(log2 n)``, a final insertion sort,
which alone makes rows of at most 16 entries stable) over (value, index) pairs
compared by value only (NaN largest); a 1-D integer tensor of at least 32768
entries sorted ascending goes to a radix sort instead, which is stable.
Equal keys therefore come out in an order that only that algorithm gives.

:func:`torch_cpu_argsort` replays it on the host (NumPy + Python, exactly, in
O(n log n) comparisons; keys without ties take NumPy's sort at C speed).
:func:`stable_argsort` is the pure-JAX order (ties by position) used under
``jax.jit``; both agree whenever there are no ties, or at most 16 entries.
:func:`host_argsort` runs the exact order under ``jax.jit`` through
``jax.pure_callback`` (a device-to-host round trip).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ... import _dtypes

__all__ = ["torch_cpu_argsort", "stable_argsort", "host_argsort", "RADIX_MIN"]

#: the size from which torch sorts a 1-D integer tensor (ascending) with a stable radix sort
RADIX_MIN = 32768
_THRESHOLD = 16  # libstdc++'s _S_threshold


def _introsort(keys: list, descending: bool) -> list:
    """libstdc++ ``std::sort`` on the positions ``0..n-1`` compared by ``keys``."""
    k = keys
    n = len(k)
    a = list(range(n))
    if descending:
        def comp(i, j):
            x, y = k[i], k[j]
            return (x != x and y == y) or x > y
    else:
        def comp(i, j):
            x, y = k[i], k[j]
            return (x == x and y != y) or x < y

    def adjust_heap(first, hole, length, value):
        top = second = hole
        while second < (length - 1) // 2:
            second = 2 * (second + 1)
            if comp(a[first + second], a[first + second - 1]):
                second -= 1
            a[first + hole] = a[first + second]
            hole = second
        if (length & 1) == 0 and second == (length - 2) // 2:
            second = 2 * (second + 1)
            a[first + hole] = a[first + second - 1]
            hole = second - 1
        parent = (hole - 1) // 2
        while hole > top and comp(a[first + parent], value):
            a[first + hole] = a[first + parent]
            hole = parent
            parent = (hole - 1) // 2
        a[first + hole] = value

    def heap_sort(first, last):
        length = last - first
        if length >= 2:
            parent = (length - 2) // 2
            while True:
                adjust_heap(first, parent, length, a[first + parent])
                if parent == 0:
                    break
                parent -= 1
        while last - first > 1:
            last -= 1
            value = a[last]
            a[last] = a[first]
            adjust_heap(first, 0, last - first, value)

    def median_to_first(result, x, y, z):
        if comp(a[x], a[y]):
            if comp(a[y], a[z]):
                pick = y
            elif comp(a[x], a[z]):
                pick = z
            else:
                pick = x
        elif comp(a[x], a[z]):
            pick = x
        elif comp(a[y], a[z]):
            pick = z
        else:
            pick = y
        a[result], a[pick] = a[pick], a[result]

    def partition(first, last):
        median_to_first(first, first + 1, first + (last - first) // 2, last - 1)
        lo, hi, pivot = first + 1, last, a[first]
        while True:
            while comp(a[lo], pivot):
                lo += 1
            hi -= 1
            while comp(pivot, a[hi]):
                hi -= 1
            if not lo < hi:
                return lo
            a[lo], a[hi] = a[hi], a[lo]
            lo += 1

    def loop(first, last, depth):
        while last - first > _THRESHOLD:
            if depth == 0:
                heap_sort(first, last)
                return
            depth -= 1
            cut = partition(first, last)
            loop(cut, last, depth)
            last = cut

    def linear_insert(last):
        val = a[last]
        nxt = last - 1
        while comp(val, a[nxt]):
            a[last] = a[nxt]
            last = nxt
            nxt -= 1
        a[last] = val

    def insertion_sort(first, last):
        for i in range(first + 1, last):
            if comp(a[i], a[first]):
                val = a[i]
                a[first + 1:i + 1] = a[first:i]
                a[first] = val
            else:
                linear_insert(i)

    if n:
        loop(0, n, 2 * (n.bit_length() - 1))
        if n > _THRESHOLD:
            insertion_sort(0, _THRESHOLD)
            for i in range(_THRESHOLD, n):
                linear_insert(i)
        else:
            insertion_sort(0, n)
    return a


def _one_row(keys: np.ndarray, descending: bool, radix: bool) -> np.ndarray:
    n = keys.shape[0]
    if n <= 1:
        return np.arange(n, dtype=np.int64)
    if radix:  # torch's radix path: stable
        return np.argsort(keys, kind="stable").astype(np.int64)
    if np.unique(keys).shape[0] == n:  # no ties: every correct sort agrees
        order = np.argsort(keys, kind="stable")  # NaN last
        return (order[::-1] if descending else order).astype(np.int64)
    return np.asarray(_introsort(keys.tolist(), descending), dtype=np.int64)


def torch_cpu_argsort(keys, descending: bool = False, axis: int = -1) -> np.ndarray:
    """The permutation ``torch.sort(keys, dim=axis, descending=descending)[1]`` gives on the CPU.

    ``keys`` is a concrete array (NumPy or JAX); the result is a NumPy int64
    array of ``keys``' shape. Ties come out in torch's order (see the module
    docstring), NaN sorts as the largest value.
    """
    keys = np.asarray(keys)
    if keys.ndim == 0:
        return np.zeros((), np.int64)
    moved = np.moveaxis(keys, axis, -1)
    radix = (keys.ndim == 1 and not descending and np.issubdtype(keys.dtype, np.integer)
             and keys.shape[0] >= RADIX_MIN)
    rows = moved.reshape(-1, moved.shape[-1])
    out = np.stack([_one_row(r, descending, radix) for r in rows]) if rows.shape[0] else \
        np.zeros(rows.shape, np.int64)
    return np.moveaxis(out.reshape(moved.shape), -1, axis)


def stable_argsort(keys: jax.Array, descending: bool = False, axis: int = -1) -> jax.Array:
    """A stable argsort in JAX: ties by position; NaN sorts as the largest value, as in torch."""
    keys = jnp.asarray(keys)
    axis = axis % max(keys.ndim, 1)
    iota = jax.lax.broadcasted_iota(jnp.int32, keys.shape, axis)
    operands: tuple[jax.Array, ...]
    if jnp.issubdtype(keys.dtype, jnp.floating):
        nan = jnp.isnan(keys)
        value = jnp.where(nan, jnp.zeros((), keys.dtype), keys) + jnp.zeros((), keys.dtype)
        first = (~nan if descending else nan).astype(jnp.int8)  # NaN first when descending
        operands = (first, -value if descending else value, iota)
    elif descending:
        if jnp.issubdtype(keys.dtype, jnp.unsignedinteger) or keys.dtype == jnp.bool_:
            keys = keys.astype(jnp.int64 if _dtypes.x64_enabled() else jnp.int32)
        operands = (-keys.astype(jnp.int64 if keys.dtype.itemsize >= 8 else jnp.int32), iota)
    else:
        operands = (keys, iota)
    return jax.lax.sort(operands, dimension=axis, num_keys=len(operands))[-1]


def host_argsort(keys: jax.Array, descending: bool = False, axis: int = -1) -> jax.Array:
    """:func:`torch_cpu_argsort` as a JAX op: exact on concrete arrays, a host callback under jit.

    Returns int32 positions of ``keys``' shape.
    """
    keys = jnp.asarray(keys)
    if not isinstance(keys, jax.core.Tracer):
        return jnp.asarray(torch_cpu_argsort(np.asarray(keys), descending, axis), jnp.int32)

    def run(k):
        return torch_cpu_argsort(np.asarray(k), descending, axis).astype(np.int32)

    return jax.pure_callback(run, jax.ShapeDtypeStruct(keys.shape, jnp.int32), keys,
                             vmap_method="sequential")
