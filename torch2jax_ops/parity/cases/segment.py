"""Parity cases for segment_csr / segment_coo / gather_csr / gather_coo vs torch_scatter.

op x reduce x dtype x layout, ``out=``, NaN/inf and extreme values. Indices
are sorted and pointers valid: torch_scatter's C++ kernels do not check them
and must never see bad ones in-process (our rejections are tested separately).
"""
from __future__ import annotations

from typing import Iterable, Optional

import numpy as np

from torch2jax_ops import dtypes
from torch2jax_ops.parity.cases.scatter import DTYPES, _rng, op_pair
from torch2jax_ops.parity.fuzz import values
from torch2jax_ops.parity._suite import Case, register

CSR_REDUCES = ("sum", "add", "mean", "min", "max")
NAMED = ("sum", "add", "mean", "min", "max")

#: (label, src shape, indptr) — the reduced axis is indptr.ndim - 1
CSR_LAYOUTS = (
    ("1d-empty-segment", (12,), [0, 3, 3, 7, 12]),
    ("2d-dim0", (10, 3), [0, 4, 4, 10]),
    ("2d-dim1-bcast-indptr", (3, 8), [[0, 3, 3, 8]]),
    ("3d-batched-indptr", (2, 9, 3), [[0, 2, 5, 9], [0, 0, 6, 9]]),
    ("4d-features", (2, 7, 2, 2), [[0, 1, 7]]),
    ("empty-src", (0, 3), [0, 0, 0]),
    # torch_scatter's own test suite: an empty indptr on an empty src returns the src
    ("empty-indptr", (0, 0, 0, 16), []),
    # positions outside [indptr[0], indptr[-1]) take no part in the forward pass;
    # torch_scatter's sum/mean gradient there is garbage (deviation csr-grad-outside-range)
    ("partial-range", (12, 2), [2, 5, 5, 9]),
)

#: (label, src shape, index shape, groups, dim_size) — the reduced axis is index.ndim - 1
COO_LAYOUTS = (
    ("1d", (12,), (12,), 5, None),
    ("1d-dim_size-empty-groups", (12,), (12,), 4, 8),
    ("2d-dim0", (10, 3), (10,), 4, None),
    # torch_scatter's backward raises for a broadcast index (deviation coo-broadcast-backward)
    ("2d-dim1-bcast-index", (3, 8), (1, 8), 4, None),
    ("3d-batched-index", (2, 9, 3), (2, 9), 4, None),
    ("4d-features", (2, 7, 2, 2), (2, 7), 3, None),
    ("empty-src", (0, 3), (0,), 0, None),
    # torch_scatter's backward dies with SIGFPE here (deviation coo-empty-backward-crash)
    ("empty-src-dim_size", (0, 3), (0,), 0, 4),
)


def sorted_index(rng: np.random.Generator, shape: tuple, groups: int):
    """An int64 torch index, sorted along its last axis (segment_coo's contract)."""
    import torch

    data = np.sort(rng.integers(0, max(groups, 1), size=shape), axis=-1)
    return torch.tensor(data, dtype=torch.int64)


def _indptr(data):
    import torch

    return torch.tensor(data, dtype=torch.int64)


def _csr_variants() -> Iterable[tuple[str, Optional[str], str]]:
    """(op, reduce, kind) for segment_csr(reduce=...) and the named CSR ops."""
    yield from (("segment_csr", r, r) for r in CSR_REDUCES)
    yield from ((f"segment_{k}_csr", None, k) for k in NAMED)


def _coo_variants() -> Iterable[tuple[str, Optional[str], str]]:
    yield from (("segment_coo", r, r) for r in CSR_REDUCES)
    yield from ((f"segment_{k}_coo", None, k) for k in NAMED)


def _name(op: str, reduce: Optional[str]) -> str:
    return op if reduce is None else f"{op}-{reduce}"


@register("segment")
def csr_cases() -> Iterable[Case]:
    for op, reduce, kind in _csr_variants():
        for dtype in DTYPES:
            for label, src_shape, indptr in CSR_LAYOUTS:
                def build(op=op, reduce=reduce, kind=kind, dtype=dtype, label=label,
                          src_shape=src_shape, indptr=indptr):
                    rng = _rng(op, reduce, dtype, label)
                    torch_fn, jax_fn = op_pair(op, reduce)
                    src = values(rng, src_shape, dtype, kind)
                    grad = not (label == "partial-range" and kind in ("sum", "add", "mean"))
                    return torch_fn, jax_fn, (src, _indptr(indptr)), {}, {"grad": grad}
                yield Case("segment", _name(op, reduce), dtype, label, build)
            def build_out(op=op, reduce=reduce, kind=kind, dtype=dtype):
                # out= is only a destination for CSR: overwritten, so it gets no gradient
                rng = _rng(op, reduce, dtype, "out")
                torch_fn, jax_fn = op_pair(op, reduce)
                src = values(rng, (10, 3), dtype, kind)
                out = values(rng, (3, 3), dtype, kind)
                return torch_fn, jax_fn, (src, _indptr([0, 4, 4, 10]), out), {}, {}
            yield Case("segment", _name(op, reduce), dtype, "out-given", build_out)


@register("segment")
def coo_cases() -> Iterable[Case]:
    for op, reduce, kind in _coo_variants():
        for dtype in DTYPES:
            for label, src_shape, index_shape, groups, dim_size in COO_LAYOUTS:
                def build(op=op, reduce=reduce, kind=kind, dtype=dtype, label=label,
                          src_shape=src_shape, index_shape=index_shape, groups=groups,
                          dim_size=dim_size):
                    rng = _rng(op, reduce, dtype, label)
                    torch_fn, jax_fn = op_pair(op, reduce)
                    src = values(rng, src_shape, dtype, kind)
                    index = sorted_index(rng, index_shape, groups)
                    grad = "bcast" not in label and label != "empty-src-dim_size"
                    return torch_fn, jax_fn, (src, index), {"dim_size": dim_size}, {"grad": grad}
                yield Case("segment", _name(op, reduce), dtype, label, build)
            def build_out(op=op, reduce=reduce, kind=kind, dtype=dtype):
                # out= accumulates for COO. torch_scatter gets it right only when each row's
                # first group is 0 and, for min/max, when src beats out in every non-empty
                # group (deviations coo-out-first-group, segment-stale-arg); it gives out no
                # gradient (deviation out-grad-segment).
                rng = _rng(op, reduce, dtype, "out")
                torch_fn, jax_fn = op_pair(op, reduce)
                src = values(rng, (9, 3), dtype, kind)
                if kind in ("min", "max"):
                    out = values(rng, (6, 3), dtype, kind) * 0 + (10 if kind == "min" else -10)
                else:
                    out = values(rng, (6, 3), dtype, kind)
                index = sorted_index(rng, (9,), 5)
                index[0] = 0
                return torch_fn, jax_fn, (src, index, out), {}, {"grad_wrt": [0]}
            yield Case("segment", _name(op, reduce), dtype, "out-given", build_out)


@register("segment")
def special_value_cases() -> Iterable[Case]:
    """NaN and +-inf (every group keeps a finite member), all-inf groups and extreme
    finite values (COO only: torch_scatter's CSR kernel gets those wrong, a deviation)."""
    import torch

    inf, nan = float("inf"), float("nan")
    data = [nan, 1.0, -inf, 2.0, inf, 3.0, 2.0, nan, -1.0, inf, 0.5, -inf]
    pairs = [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    for fmt, variants in (("csr", _csr_variants()), ("coo", _coo_variants())):
        for op, reduce, _kind in variants:
            for dtype in dtypes.FLOAT_NAMES:
                def build(op=op, reduce=reduce, dtype=dtype, fmt=fmt):
                    torch_fn, jax_fn = op_pair(op, reduce)
                    src = torch.tensor(data, dtype=torch.float64).to(dtypes.torch_dtype(dtype))
                    link = _indptr(list(range(0, 13, 2))) if fmt == "csr" else _indptr(pairs)
                    return torch_fn, jax_fn, (src, link), {}, {}
                yield Case("segment", _name(op, reduce), dtype, "nan-inf", build)
            if fmt == "coo" and reduce in ("min", "max"):
                # values only: torch_scatter's arg (and so its gradient) is stale in groups
                # that are all -inf / all lowest finite (deviation segment-stale-arg)
                for dtype in DTYPES:
                    def build_extreme(op=op, reduce=reduce, dtype=dtype):
                        torch_fn, jax_fn = op_pair(op, reduce)
                        tdtype = dtypes.torch_dtype(dtype)
                        is_float = dtype in dtypes.FLOAT_NAMES
                        info = torch.finfo(tdtype) if is_float else torch.iinfo(tdtype)
                        big = inf if is_float else info.max
                        src = torch.tensor([info.min, info.min, -big, -big, 3, info.max,
                                            info.max, big, big, -2], dtype=tdtype)
                        index = _indptr([0, 0, 1, 1, 2, 3, 3, 4, 4, 5])
                        return torch_fn, jax_fn, (src, index), {}, {"grad": False}
                    yield Case("segment", _name(op, reduce), dtype, "extreme-and-all-inf",
                               build_extreme)


@register("segment")
def gather_cases() -> Iterable[Case]:
    """gather_csr / gather_coo: plain, batched, broadcast, empty, out= (overwritten)."""
    csr = (
        ("1d", (4,), [0, 3, 3, 7, 12], False),
        ("2d-dim0", (3, 2), [0, 4, 4, 10], False),
        ("3d-batched-indptr", (2, 3, 2), [[0, 2, 5, 9], [0, 0, 6, 9]], False),
        ("2d-dim1-bcast-indptr", (3, 3), [[0, 3, 3, 8]], False),
        ("empty-src", (0, 2), [0, 0, 0], False),
        ("empty-indptr", (0, 0, 0, 16), [], False),
        # before indptr[0] and from indptr[-1] on, out is kept (torch: garbage without out)
        ("partial-range-out", (3, 2), [2, 5, 5, 9], True),
    )
    coo = (
        ("1d", (5,), (9,), False),
        ("2d-dim0", (5, 3), (9,), False),
        ("3d-batched-index", (2, 5, 3), (2, 7), False),
        # an empty index on a non-empty src kills torch_scatter (SIGFPE), and so does the
        # backward of an empty src (SIGSEGV): deviation gather-coo-empty-crash; forward only
        ("empty-src", (0, 3), (4,), False),
        ("out-given", (5, 3), (9,), True),
    )
    for dtype in DTYPES:
        for label, src_shape, indptr, with_out in csr:
            def build(dtype=dtype, label=label, src_shape=src_shape, indptr=indptr,
                      with_out=with_out):
                rng = _rng("gather_csr", dtype, label)
                torch_fn, jax_fn = op_pair("gather_csr")
                src = values(rng, src_shape, dtype, "sum")
                args = (src, _indptr(indptr))
                if with_out:
                    length = int(np.max(indptr)) + 2
                    args += (values(rng, src_shape[:-2] + (length,) + src_shape[-1:], dtype,
                                    "sum"),)
                # out is kept outside the range: torch gives it no gradient (a deviation)
                return torch_fn, jax_fn, args, {}, {"grad_wrt": [0]}
            yield Case("segment", "gather_csr", dtype, label, build)
        for label, src_shape, index_shape, with_out in coo:
            def build_coo(dtype=dtype, label=label, src_shape=src_shape,
                          index_shape=index_shape, with_out=with_out):
                rng = _rng("gather_coo", dtype, label)
                torch_fn, jax_fn = op_pair("gather_coo")
                src = values(rng, src_shape, dtype, "sum")
                index = sorted_index(rng, index_shape, src_shape[len(index_shape) - 1])
                args = (src, index)
                if with_out:
                    dim = len(index_shape) - 1
                    shape = src_shape[:dim] + index_shape[-1:] + src_shape[dim + 1:]
                    args += (values(rng, shape, dtype, "sum"),)
                return torch_fn, jax_fn, args, {}, {"grad": label != "empty-src"}
            yield Case("segment", "gather_coo", dtype, label, build_coo)
