"""Bounded memory for a long pytest worker (both conftests call :func:`release`).

Every jitted function keeps its compiled executables in JAX's caches for as long as the
process lives. The suite compiles thousands of small programs, so an xdist worker grew by
about 3 MB a test (2.9 GB after 400 parity cases, measured 2026-11-26) until the two
workers of the 2-core CI machine ran out of memory near the end of ``make test`` and one
died ("worker 'gw1' crashed"). Clearing JAX's caches every :data:`EVERY` tests keeps a
worker near 1.2 GB at the same point and costs only recompiling what the next tests share.
"""
from __future__ import annotations

import gc

#: tests between two cache clears
EVERY = 50
_count = [0]


def release() -> None:
    """Count one finished test; every :data:`EVERY`-th, drop JAX's compiled programs."""
    _count[0] += 1
    if _count[0] % EVERY == 0:
        import jax

        jax.clear_caches()
        gc.collect()
