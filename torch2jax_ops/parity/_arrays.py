"""Whether one torch value and one JAX value agree, within the dtype's tolerances.

:func:`compare_arrays` compares one output (or gradient, or weight) leaf; a
:class:`LeafResult` records how it compares, a :class:`ParityResult` gathers
the leaves of one comparison (:func:`torch2jax_ops.parity.compare`), and a
:class:`ParityError` says the comparison itself could not be made.

Rules: shapes must match; dtypes must be of the same kind (floating dtypes by
name; integer widths may differ, since JAX's width follows its 64-bit mode);
integers and bools compare exactly; floats within (rtol, atol) from
:data:`torch2jax_ops.dtypes.TOLERANCES` (``GRAD_TOLERANCES`` for gradients), NaN where NaN and +-inf where +-inf.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional

import numpy as np

from .. import _dtypes

__all__ = ["LeafResult", "ParityResult", "ParityError", "compare_arrays"]


class ParityError(ValueError):
    """The comparison itself could not be made (mismatched structures, non-tensors...)."""


@dataclasses.dataclass
class LeafResult:
    """How one output (or one gradient) compares."""
    path: str
    kind: str  # "output" | "grad"
    shape: tuple
    dtype: str
    max_abs: float
    max_rel: float
    #: worst |a - e| / (atol + rtol |e|): <= 1 passes (inf for NaN/inf/shape mismatches)
    tol_ratio: float
    worst_index: Optional[tuple]
    rtol: float
    atol: float
    passed: bool
    message: str = ""

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["shape"] = list(self.shape)
        d["worst_index"] = None if self.worst_index is None else list(self.worst_index)
        for key in ("max_abs", "max_rel", "tol_ratio"):
            if not math.isfinite(d[key]):
                d[key] = str(d[key])
        return d


@dataclasses.dataclass
class ParityResult:
    """The outcome of :func:`compare`: one :class:`LeafResult` per output and gradient."""
    name: str
    leaves: list
    #: the matmul precision both sides ran at (:data:`PRECISIONS`)
    precision: str = "highest"

    @property
    def passed(self) -> bool:
        return all(leaf.passed for leaf in self.leaves)

    @property
    def max_abs(self) -> float:
        return max((leaf.max_abs for leaf in self.leaves), default=0.0)

    @property
    def tol_ratio(self) -> float:
        return max((leaf.tol_ratio for leaf in self.leaves), default=0.0)

    def failures(self) -> list:
        return [leaf for leaf in self.leaves if not leaf.passed]

    def __getitem__(self, path: str) -> LeafResult:
        """The leaf of that path: ``result["output"]``, ``result["grad conv1.lin.weight"]``."""
        for leaf in self.leaves:
            if leaf.path == path:
                return leaf
        raise KeyError(f"no leaf {path!r}; the leaves are {[leaf.path for leaf in self.leaves]}")

    def to_dict(self) -> dict:
        return {"name": self.name, "passed": self.passed, "precision": self.precision,
                "leaves": [leaf.to_dict() for leaf in self.leaves]}

    def __str__(self) -> str:
        head = (f"parity {'PASSED' if self.passed else 'FAILED'}: {self.name} "
                f"(matmul precision: {self.precision})")
        cols = ("leaf", "shape", "dtype", "max abs err", "max rel err", "err/tol", "worst at", "ok")
        rows = [cols]
        for leaf in sorted(self.leaves, key=lambda leaf_: (leaf_.passed, -_finite(leaf_.tol_ratio))):
            rows.append((leaf.path, str(tuple(leaf.shape)), leaf.dtype, f"{leaf.max_abs:.3g}",
                         f"{leaf.max_rel:.3g}", f"{leaf.tol_ratio:.3g}",
                         "-" if leaf.worst_index is None else str(tuple(leaf.worst_index)),
                         "yes" if leaf.passed else "NO"))
        widths = [max(len(r[i]) for r in rows) for i in range(len(cols))]
        lines = [head] + ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
        lines += [f"  {leaf.path}: {leaf.message}" for leaf in self.leaves if leaf.message]
        return "\n".join(lines)


def _finite(x: float) -> float:
    return x if math.isfinite(x) else 1e300


# ----------------------------------------------------------------------------- arrays

def _is_tensor(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "dtype") and hasattr(x, "shape")\
        and not _is_sparse_tensor(x)


def _is_sparse_tensor(x: Any) -> bool:
    """A ``torch_sparse.SparseTensor`` (converted by ``to_jax``, never differentiated)."""
    return type(x).__name__ == "SparseTensor" and type(x).__module__.startswith("torch_sparse")


def _to_numpy(x: Any) -> np.ndarray:
    """torch tensor / JAX array / scalar -> NumPy (bfloat16 widened to float32, exactly)."""
    if _is_tensor(x):
        import torch

        x = x.detach().cpu()
        if x.dtype == torch.bfloat16:
            x = x.float()
        return x.resolve_conj().numpy()
    arr = np.asarray(x)
    return arr.astype(np.float32) if arr.dtype.name == "bfloat16" else arr


def compare_arrays(expected: Any, actual: Any, path: str = "output", kind: str = "output",
                   rtol: Optional[float] = None, atol: Optional[float] = None,
                   normwise: bool = False) -> LeafResult:
    """Compare one torch value (expected) with one JAX value (actual).

    ``normwise=True`` raises atol to ``rtol * max|expected|`` (finite entries):
    the error is measured against the size of the whole array, not of each
    entry, for results that are differences of O(1) terms.
    """
    e_name, a_name = _dtypes.name_of(expected), _dtypes.name_of(actual)
    e, a = _to_numpy(expected), _to_numpy(actual)
    default_rtol, default_atol = _dtypes.tolerance(e_name, kind)
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    if normwise and e.size and _dtypes.kind_of(e_name) == "float":
        finite = np.abs(e[np.isfinite(e)].astype(np.float64))
        atol = max(atol, rtol * float(finite.max(initial=0.0)))

    def fail(message: str) -> LeafResult:
        return LeafResult(path, kind, tuple(e.shape), e_name, math.inf, math.inf, math.inf,
                          None, rtol, atol, False, message)

    if e.shape != a.shape:
        return fail(f"shape differs: torch {tuple(e.shape)}, jax {tuple(a.shape)}")
    if _dtypes.kind_of(e_name) != _dtypes.kind_of(a_name) or (_dtypes.kind_of(e_name) == "float" and e_name != a_name):
        return fail(f"dtype differs: torch {e_name}, jax {a_name}")
    if e.size == 0:
        return LeafResult(path, kind, tuple(e.shape), e_name, 0.0, 0.0, 0.0, None, rtol, atol, True)
    if _dtypes.kind_of(e_name) in ("int", "bool"):
        diff = np.abs(e.astype(np.float64) - a.astype(np.float64))
        worst = np.unravel_index(int(np.argmax(diff)), diff.shape)
        bad = int(np.count_nonzero(diff))
        return LeafResult(path, kind, tuple(e.shape), e_name, float(diff.max()), float(diff.max()),
                          math.inf if bad else 0.0, tuple(int(i) for i in worst), 0.0, 0.0,
                          bad == 0, f"{bad} of {e.size} values differ" if bad else "")
    e = e.astype(np.complex128 if _dtypes.kind_of(e_name) == "complex" else np.float64)
    a = a.astype(e.dtype)
    e_nan, a_nan = np.isnan(e), np.isnan(a)
    e_inf, a_inf = np.isinf(e), np.isinf(a)
    special = e_nan | a_nan | e_inf | a_inf
    special_ok = (e_nan == a_nan) & (np.where(e_inf | a_inf, e == a, True) | e_nan | a_nan)
    finite = ~special
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(finite, np.abs(a - e), 0.0)
    allowed = atol + rtol * np.abs(np.where(finite, e, 0.0))
    ratio = np.where(finite, diff / np.maximum(allowed, np.finfo(np.float64).tiny), 0.0)
    ratio = np.where(special & ~special_ok, np.inf, ratio)
    worst = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    rel = np.where(finite & (e != 0), diff / np.where(e != 0, np.abs(e), 1.0), 0.0)
    n_special = int(np.count_nonzero(~special_ok))
    n_far = int(np.count_nonzero(ratio[finite] > 1.0))
    message = []
    if n_special:
        message.append(f"{n_special} NaN/inf positions differ")
    if n_far:
        message.append(f"{n_far} of {e.size} values outside rtol={rtol:g}, atol={atol:g}")
    return LeafResult(path, kind, tuple(e.shape), e_name, float(diff.max()), float(rel.max()),
                      float(ratio.max()), tuple(int(i) for i in worst), rtol, atol,
                      not message, "; ".join(message))
