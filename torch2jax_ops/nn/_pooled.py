"""Row counts of a pool's static outputs in a traced forward: ``out.size(0)`` after
``TopKPooling`` / ``SAGPooling``.

Under ``jax.jit`` a pool keeps the node budget ``N`` (kept nodes first, then padding),
so its outputs have ``N`` rows where PyG's have ``K`` (the kept nodes). A forward that
reads the row count (``ratio = out.size(0) / x.size(0)``, PyG's colors_topk_pool.py and
triangles_sag_pool.py) would silently read ``N``. A pool port lists its row-aligned
outputs (``row_outputs``) and counts its kept rows (``kept_rows(out)``); the traced
forward then answers ``.size(0)`` / ``.shape[0]`` of those outputs with a
:class:`PooledRows`: the int ``N`` where a shape is built from it (``x.new_zeros(n)``,
the static form's rows), and the kept count ``K`` (a traced int) in arithmetic and
comparisons (``n / m``, ``n - 1``, ``n > 0``), which is PyG's number.

Only the pool's own outputs carry it: a tensor computed from them (``relu(out)``,
a conv's output) has the budget's ``N`` rows as a plain int, the static form's shape.
"""
from __future__ import annotations

import operator
from typing import Any, Optional

__all__ = ["PooledRows", "ARITHMETIC", "kept_operands", "row_count"]


class PooledRows(int):
    """``N`` (the node budget) as an int; ``kept`` the number of kept rows (traced)."""
    kept: Any

    def __new__(cls, budget: int, kept: Any) -> PooledRows:
        obj = super().__new__(cls, budget)
        obj.kept = kept
        return obj

    def __repr__(self) -> str:
        return f"PooledRows(budget={int(self)}, kept={self.kept!r})"


#: operators whose PooledRows operands mean the kept count (getitem and friends are not:
#: ``x.shape[0]`` must return the PooledRows itself)
ARITHMETIC = frozenset({
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
    operator.mod, operator.pow, operator.neg, operator.lt, operator.le, operator.gt,
    operator.ge, operator.eq, operator.ne})


def kept_operands(args: tuple) -> Optional[tuple]:
    """``args`` with each :class:`PooledRows` replaced by its kept count, or None if none is."""
    if not any(isinstance(a, PooledRows) for a in args):
        return None
    return tuple(a.kept if isinstance(a, PooledRows) else a for a in args)


def row_count(shape: tuple, kept: Any) -> tuple:
    """``shape`` with its first entry a :class:`PooledRows` counting ``kept``."""
    return (PooledRows(shape[0], kept),) + tuple(shape[1:])
