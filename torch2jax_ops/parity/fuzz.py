"""Fuzz a scatter-like port against its torch original, on top of hypothesis.

A scatter-like function takes ``src``, an integer ``index`` along ``dim`` and
an optional output size ``dim_size``. :func:`scatter_inputs` draws such
problems (random shapes of 1 to 4 axes including empty ones, 1-D or full or
broadcast indices, sorted or random or single-group index patterns, empty
groups, ties) and :func:`fuzz_scatter` runs :func:`~torch2jax_ops.parity.assert_parity`
on each, shrinking a failure to a small example::

    from torch2jax_ops.parity import fuzz

    def test_my_scatter_port():
        fuzz.fuzz_scatter(my_torch_op, my_jax_port, dtypes=("float32", "float64"))

Needs hypothesis (``pip install 'torch2jax_ops[parity]'``).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional, Sequence

import hypothesis.extra.numpy as hnp
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .. import _dtypes
from ._compare import assert_parity

__all__ = ["ScatterInputs", "scatter_inputs", "fuzz_scatter", "INDEX_PATTERNS"]

#: how the index is filled: uniform ids, sorted ids (segment_coo's layout),
#: every row in group 0, or ids that skip groups (groups with no member).
INDEX_PATTERNS = ("random", "sorted", "one-group", "empty-groups")


@dataclasses.dataclass(frozen=True)
class ScatterInputs:
    """One drawn problem, as torch tensors: ``src`` [*, N, *], ``index`` (int64), ``dim``,
    ``dim_size`` (``None``, or at least every id + 1)."""
    src: Any
    index: Any
    dim: int
    dim_size: Optional[int]
    dtype: str
    pattern: str

    def __repr__(self) -> str:  # what hypothesis prints for a falsifying example
        return (f"ScatterInputs(dtype={self.dtype!r}, src shape={tuple(self.src.shape)}, "
                f"index shape={tuple(self.index.shape)}, dim={self.dim}, "
                f"dim_size={self.dim_size}, pattern={self.pattern!r},\n"
                f"  src={self.src.tolist()},\n  index={self.index.tolist()})")


def _index(rng: np.random.Generator, shape: tuple, groups: int, pattern: str, dim: int):
    if pattern == "one-group" or groups == 0:
        ids = np.zeros(shape, np.int64)
    elif pattern == "empty-groups":  # only even ids: every odd group is empty
        ids = 2 * rng.integers(0, max(1, (groups + 1) // 2), size=shape)
    else:
        ids = rng.integers(0, groups, size=shape)
    if pattern == "sorted" and ids.ndim:
        ids = np.sort(ids, axis=dim)
    return ids


def values(rng: np.random.Generator, shape: tuple, dtype: str, op: str,
           device: Any = None) -> Any:
    """Test data as a torch tensor (on ``device``; None: the CPU); a 0.5 grid in floats makes
    ties for min/max. Drawn and rounded to ``dtype`` on the host, then moved."""
    import torch

    data: np.ndarray
    if dtype in _dtypes.INT_NAMES:
        low, high = (-2, 3) if "mul" in op else (-5, 6)
        data = rng.integers(low, high, size=shape)
    elif "mul" in op:
        data = rng.uniform(0.5, 1.5, size=shape)
    else:
        data = np.round(rng.uniform(-3, 3, size=shape) * 2) / 2 + rng.choice([0, 0.25], size=shape)
    return torch.tensor(data, dtype=torch.float64).to(_dtypes.torch_dtype(dtype)).to(device)


@st.composite
def scatter_inputs(draw: Callable, dtypes: Sequence[str] = ("float32",), *, max_dims: int = 4,
                   max_side: int = 5, max_groups: int = 6,
                   patterns: Sequence[str] = INDEX_PATTERNS, full_index: bool = True,
                   dim_size: bool = True, near_one: bool = False,
                   device: Any = None) -> ScatterInputs:
    """A hypothesis strategy of :class:`ScatterInputs`.

    Args:
      dtypes: ``src`` dtypes to draw from (torch names: ``"float16"``, ``"int64"`` ...).
      max_dims, max_side: ``src`` has 1..max_dims axes of 0..max_side entries.
      max_groups: ids lie in ``[0, max_groups)``.
      patterns: index patterns to draw from (:data:`INDEX_PATTERNS`).
      full_index: also draw k-D indices aligned with ``src``'s leading axes (some
        axes of size 1, broadcast); ``False``: 1-D indices only.
      dim_size: sometimes pass ``dim_size`` (exact or with extra empty groups).
      near_one: floats in [0.5, 1.5] (for products); otherwise a 0.5 grid in
        [-3, 3] plus 0/0.25, so min/max see ties.
      device: the torch device of ``src`` and ``index`` (``"cuda"`` fuzzes a GPU
        kernel); None: the CPU. The same draws give the same values on any device.
    """
    unknown = sorted(set(patterns) - set(INDEX_PATTERNS))
    if unknown:
        raise ValueError(f"scatter_inputs: unknown index pattern(s) {unknown}; "
                         f"choose from {INDEX_PATTERNS}")
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=max_dims, min_side=0, max_side=max_side))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    axis = dim % len(shape)
    index_shape: tuple[int, ...]
    if not full_index or draw(st.booleans()):
        index_shape = (shape[dim],)
        index_dim = 0
    else:  # a k-D index aligned with the leading axes, some unit (broadcast) axes
        k = draw(st.integers(axis + 1, len(shape)))
        index_shape = tuple(1 if (a != axis and draw(st.booleans())) else shape[a]
                            for a in range(k))
        index_dim = axis
    groups = draw(st.integers(1, max_groups))
    pattern = draw(st.sampled_from(list(patterns)))
    dtype = draw(st.sampled_from(list(dtypes)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    import torch

    src = values(rng, shape, dtype, "mul" if near_one else "sum", device)
    ids = _index(rng, index_shape, groups, pattern, index_dim)
    index = torch.tensor(ids, dtype=torch.int64).to(device)
    size = None
    if dim_size:
        extra = draw(st.sampled_from([None, 0, 2]))
        if extra is not None:  # read off the host copy: no device-to-host transfer
            size = (int(ids.max()) + 1 if ids.size else 0) + extra
    return ScatterInputs(src, index, dim, size, dtype, pattern)


def fuzz_scatter(torch_fn: Callable, jax_fn: Callable, *,
                 dtypes: Sequence[str] = ("float32", "float64"), max_examples: int = 50,
                 keywords: Sequence[str] = ("dim", "dim_size"),
                 skip: Optional[Callable[[ScatterInputs], bool]] = None,
                 strategy: Optional[Any] = None, device: Any = None,
                 **compare_options: Any) -> None:
    """Check ``jax_fn`` against ``torch_fn`` on ``max_examples`` random scatter problems.

    Each is called as ``fn(src, index, dim=..., dim_size=...)`` (the keywords
    named in ``keywords``; ``dim_size`` is left out when it is ``None``), float
    problems with gradients; 64-bit dtypes run in JAX's 64-bit mode. A failure
    raises ``AssertionError`` with the parity table of the smallest failing
    problem hypothesis finds (printed as its falsifying example).

    Args:
      dtypes: the dtypes to fuzz (passed to :func:`scatter_inputs`).
      max_examples: how many problems.
      keywords: which of ``"dim"``, ``"dim_size"`` the functions take.
      skip: ``skip(problem) -> True`` leaves out problems the original
        cannot handle (say torch_scatter's crash on an empty ``src``).
      strategy: another strategy of :class:`ScatterInputs` (``scatter_inputs(...)``
        with other options); ``dtypes`` and ``device`` are then ignored.
      device: the torch device the problems are made on (``"cuda"``: the torch
        function runs its GPU kernel; the port gets the same values over DLPack).
      **compare_options: ``grad``, ``rtol``, ``atol``, ``normwise`` for :func:`compare`.
    """
    bad = sorted(set(keywords) - {"dim", "dim_size"})
    if bad:
        raise ValueError(f"fuzz_scatter: keywords may hold 'dim' and 'dim_size', not {bad}")
    problems = strategy if strategy is not None else scatter_inputs(tuple(dtypes),
                                                                    device=device)

    @settings(max_examples=max_examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(problem=problems)
    def run(problem: ScatterInputs) -> None:
        if skip is not None and skip(problem):
            return
        kwargs = {}
        if "dim" in keywords:
            kwargs["dim"] = problem.dim
        if "dim_size" in keywords and problem.dim_size is not None:
            kwargs["dim_size"] = problem.dim_size
        with _dtypes.x64(_dtypes.needs_x64(problem.dtype)):
            assert_parity(torch_fn, jax_fn, problem.src, problem.index, **compare_options,
                          **kwargs)

    run()
