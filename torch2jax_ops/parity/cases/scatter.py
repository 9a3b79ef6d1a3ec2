"""Parity cases for the scatter family: op x reduce x dtype x layout, vs torch_scatter.

Every case builds fresh torch tensors from a fixed seed; the JAX side gets the
same values. Float cases also compare gradients (torch autograd vs jax.vjp).
"""
from __future__ import annotations

import zlib
from typing import Callable, Iterable, Optional

import numpy as np

from torch2jax_ops import dtypes
from torch2jax_ops.parity._suite import Case, register
from torch2jax_ops.parity.fuzz import values

OPS = ("scatter_sum", "scatter_add", "scatter_mean", "scatter_mul", "scatter_min",
       "scatter_max")
REDUCES = ("sum", "add", "mean", "mul", "min", "max")
DTYPES = ("float16", "bfloat16", "float32", "float64", "int32", "int64")

#: (label, src shape, index shape, dim, number of groups used, dim_size)
LAYOUTS = (
    ("1d", (12,), (12,), 0, 4, None),
    ("1d-dim_size-empty-groups", (12,), (12,), -1, 4, 7),
    ("2d-dim0", (10, 3), (10,), 0, 4, None),
    ("2d-dim-1", (3, 10), (10,), -1, 4, None),
    ("2d-full-index-dim-2", (8, 3), (8, 3), -2, 3, None),
    ("3d-leading-2d-index", (2, 9, 3), (2, 9), 1, 4, None),
    ("4d-full-index", (2, 3, 6, 2), (2, 3, 6, 2), 2, 3, None),
    ("bcast-index-Nx1", (7, 4), (7, 1), 0, 3, None),
    ("empty-src", (0, 3), (0,), 0, 0, None),
    ("empty-src-dim_size", (0, 3), (0,), 0, 0, 4),
)


def _rng(*key) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def index_for(rng: np.random.Generator, shape: tuple, groups: int):
    import torch

    return torch.tensor(rng.integers(0, max(groups, 1), size=shape), dtype=torch.int64)


def op_pair(op: str, reduce: Optional[str] = None) -> tuple[Callable, Callable]:
    """torch_scatter's op and ours, with ``out`` cloned on the torch side (it mutates it)."""
    import torch_scatter

    import torch2jax_ops

    theirs, ours = getattr(torch_scatter, op), getattr(torch2jax_ops, op)
    extra = {} if reduce is None else {"reduce": reduce}

    def torch_fn(src, index, out=None, **kw):
        if out is not None:  # only ops that have `out` get it (softmax has none)
            kw["out"] = out.clone()
        return theirs(src, index, **kw, **extra)

    def jax_fn(src, index, out=None, **kw):
        if out is not None:
            kw["out"] = out
        return ours(src, index, **kw, **extra)

    torch_fn.__name__ = f"torch_scatter.{op}"
    jax_fn.__name__ = f"torch2jax_ops.{op}"
    return torch_fn, jax_fn


def _variants() -> Iterable[tuple[str, Optional[str]]]:
    yield from ((op, None) for op in OPS)
    yield from (("scatter", r) for r in REDUCES)


def _name(op: str, reduce: Optional[str]) -> str:
    return op if reduce is None else f"scatter-{reduce}"


def kind_of(op: str, reduce: Optional[str]) -> str:
    return reduce or op.replace("scatter_", "")


@register("scatter")
def layout_cases() -> Iterable[Case]:
    for op, reduce in _variants():
        for dtype in DTYPES:
            for label, src_shape, index_shape, dim, groups, dim_size in LAYOUTS:
                if kind_of(op, reduce) == "mul" and label == "empty-src-dim_size":
                    continue  # deviation "mul-empty-src": torch_scatter gives 0, we give 1
                def build(op=op, reduce=reduce, dtype=dtype, src_shape=src_shape,
                          index_shape=index_shape, dim=dim, groups=groups, dim_size=dim_size,
                          label=label):
                    rng = _rng(op, reduce, dtype, label)
                    torch_fn, jax_fn = op_pair(op, reduce)
                    src = values(rng, src_shape, dtype, kind_of(op, reduce))
                    index = index_for(rng, index_shape, groups)
                    kwargs = {"dim": dim, "dim_size": dim_size}
                    return torch_fn, jax_fn, (src, index), kwargs, {}
                yield Case("scatter", _name(op, reduce), dtype, label, build)


@register("scatter")
def out_cases() -> Iterable[Case]:
    """``out=`` given: accumulate into it (sum/mean/mul) or reduce with it (min/max)."""
    for op, reduce in _variants():
        kind = kind_of(op, reduce)
        for dtype in DTYPES:
            def build(op=op, reduce=reduce, dtype=dtype, kind=kind):
                rng = _rng(op, reduce, dtype, "out")
                torch_fn, jax_fn = op_pair(op, reduce)
                src = values(rng, (9, 3), dtype, kind)
                index = index_for(rng, (9,), 5)  # group 4 may be empty; out has 6 rows
                out = values(rng, (6, 3), dtype, kind)
                # torch_scatter gives `out` no gradient for min/max/mul (a deviation).
                wrt = [0, 2] if kind in ("sum", "add", "mean") else [0]
                return torch_fn, jax_fn, (src, index, out), {"dim": 0}, {"grad_wrt": wrt}
            yield Case("scatter", _name(op, reduce), dtype, "out-given", build)


@register("scatter")
def special_value_cases() -> Iterable[Case]:
    """NaN, +-inf, all -inf / +inf groups and the dtype's extreme finite values."""
    import torch

    for op, reduce in _variants():
        kind = kind_of(op, reduce)
        for dtype in DTYPES:
            is_float = dtype in dtypes.FLOAT_NAMES
            if is_float:
                def build(op=op, reduce=reduce, dtype=dtype, kind=kind):
                    torch_fn, jax_fn = op_pair(op, reduce)
                    inf, nan = float("inf"), float("nan")
                    data = [nan, 1.0, -inf, -inf, inf, inf, 2.0, nan, -1.0, inf, 0.5, -inf]
                    src = torch.tensor(data, dtype=torch.float64).to(dtypes.torch_dtype(dtype))
                    index = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5])
                    # NaN gradients of mul differ by design (torch_scatter zeroes NaN).
                    return torch_fn, jax_fn, (src, index), {"dim": 0}, {"grad": kind != "mul"}
                yield Case("scatter", _name(op, reduce), dtype, "nan-inf", build)
            if kind in ("min", "max"):
                def build_extreme(op=op, reduce=reduce, dtype=dtype, is_float=is_float):
                    torch_fn, jax_fn = op_pair(op, reduce)
                    tdtype = dtypes.torch_dtype(dtype)
                    info = torch.finfo(tdtype) if is_float else torch.iinfo(tdtype)
                    src = torch.tensor([info.min, info.min, 3, info.max, info.max, -2],
                                       dtype=tdtype)
                    index = torch.tensor([0, 0, 1, 2, 2, 1])
                    return torch_fn, jax_fn, (src, index), {"dim": 0}, {}
                yield Case("scatter", _name(op, reduce), dtype, "extreme-finite", build_extreme)
