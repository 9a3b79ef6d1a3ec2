"""References for the sum of gathered rows (tests/test_gather_forms.py, tests/test_cpu_kernel.py):
edge ids with invalid entries, the two XLA steps, and a plain numpy loop."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from torch2jax_ops.torch_scatter._gather import slot_sum, take_rows


def edges(rng: np.random.Generator, count: int, rows: int, segments: int, *,
          invalid: bool = True) -> tuple[jax.Array, jax.Array]:
    """``src [count]`` in ``[0, rows)``, ``dst [count]`` in ``[0, segments)`` (int32); with
    ``invalid``, negative ids (must not wrap) and ids past the end, on both ends."""
    src = rng.integers(0, rows, count).astype(np.int32)
    dst = rng.integers(0, segments, count).astype(np.int32)
    if invalid:
        src[::7], dst[3::11] = -1, segments
        src[5::13], dst[2::17] = rows + 2, -3
    return jnp.asarray(src), jnp.asarray(dst)


def reference_sum(table, src, dst, segments: int) -> np.ndarray:
    """``table [M, *F]`` -> ``[segments, *F]`` float64: a loop over the edges, invalid ids
    adding nothing."""
    table, src, dst = np.asarray(table, np.float64), np.asarray(src), np.asarray(dst)
    out = np.zeros((segments,) + table.shape[1:])
    for s, d in zip(src, dst):
        if 0 <= s < table.shape[0] and 0 <= d < segments:
            out[d] += table[s]
    return out


def one_pass(table: jax.Array, src: jax.Array, dst: jax.Array, segments: int) -> jax.Array:
    """The two XLA steps: gather the rows, scatter-add them (``[segments, *F]``)."""
    return slot_sum(take_rows(table, src), dst, segments)
