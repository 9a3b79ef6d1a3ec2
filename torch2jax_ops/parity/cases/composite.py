"""Parity cases for scatter_std / scatter_logsumexp / scatter_softmax / scatter_log_softmax.

Layouts are the scatter family's; values are distinct (no ties), and std's
index gives every group at least two members, because torch_scatter's std
gradient is NaN for one-element and constant groups (deviation
std-grad-at-zero, proved separately).
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from torch2jax_ops import dtypes
from torch2jax_ops.parity.cases.scatter import LAYOUTS, _rng, index_for, op_pair
from torch2jax_ops.parity._suite import Case, register

#: (case op name, torch_scatter function, extra keyword arguments)
VARIANTS = (
    ("scatter_std", "scatter_std", {}),
    ("scatter_std-biased", "scatter_std", {"unbiased": False}),
    ("scatter_logsumexp", "scatter_logsumexp", {}),
    ("scatter_softmax", "scatter_softmax", {}),
    ("scatter_log_softmax", "scatter_log_softmax", {}),
)
FLOATS = ("float16", "bfloat16", "float32", "float64")
#: float16/bfloat16 are computed in float32 and rounded once (deviation
#: half-precision-composites): torch rounds every step and drifts up to ~30 eps,
#: so these dtypes are compared norm-wise
NORMWISE = {"float16": True, "bfloat16": True}
#: torch_scatter's std takes integers (and returns float32); the others raise ValueError
STD_DTYPES = FLOATS + ("int32", "int64")


def distinct_values(rng: np.random.Generator, shape: tuple, dtype: str):
    """Evenly spaced values in [-3, 3] in random order: no two equal, even in bfloat16
    (up to ~100 elements)."""
    import torch

    n = int(np.prod(shape))
    if dtype in dtypes.INT_NAMES:
        data = rng.permutation(np.arange(n) - n // 2)
    else:
        data = rng.permutation(np.linspace(-3, 3, n)) if n > 1 else np.full(n, 0.5)
    return torch.tensor(np.reshape(data, shape), dtype=torch.float64).to(
        dtypes.torch_dtype(dtype))


def group_sizes(index: np.ndarray, src_shape: tuple, dim: int) -> np.ndarray:
    """Members per non-empty group after torch_scatter's index broadcasting."""
    from torch2jax_ops.torch_scatter._validate import aligned_index_shape

    dim = dim % len(src_shape)
    if not int(np.prod(src_shape)):
        return np.zeros(0, int)
    full = np.broadcast_to(np.reshape(index, aligned_index_shape(index.shape, src_shape, dim,
                                                                 op="group_sizes")), src_shape)
    keys = np.moveaxis(full, dim, -1).reshape(-1, src_shape[dim])  # one row per fiber
    sizes = [np.unique(row, return_counts=True)[1] for row in keys if row.size]
    return np.concatenate(sizes) if sizes else np.zeros(0, int)


def paired_index(rng: np.random.Generator, index_shape: tuple, src_shape: tuple, dim: int,
                 groups: int):
    """An int64 torch index in which every group has at least two members."""
    import torch

    dim = dim % len(src_shape)
    axis = 0 if len(index_shape) == 1 else dim
    data = rng.integers(0, max(groups, 1), size=index_shape)
    if axis < len(index_shape) and index_shape[axis] > 1:
        fibers = np.ascontiguousarray(np.moveaxis(data, axis, -1))
        length = fibers.shape[-1]
        flat = fibers.reshape(-1, length)  # a view: fibers is contiguous
        for fiber in flat:
            pairs = np.repeat(rng.integers(0, max(groups, 1), size=(length + 1) // 2), 2)
            if length % 2:
                pairs[length - 1] = pairs[0]  # an odd length: the last one joins the first pair
            fiber[:] = rng.permutation(pairs[:length])
        data = np.moveaxis(fibers, -1, axis)
    index = torch.tensor(np.ascontiguousarray(data), dtype=torch.int64)
    assert (group_sizes(index.numpy(), src_shape, dim) != 1).all(), "a one-element group"
    return index


@register("composite")
def layout_cases() -> Iterable[Case]:
    for name, fn, extra in VARIANTS:
        for dtype in STD_DTYPES if fn == "scatter_std" else FLOATS:
            for label, src_shape, index_shape, dim, groups, dim_size in LAYOUTS:
                if fn == "scatter_logsumexp" and label == "empty-src":
                    continue  # torch_scatter raises here (deviation logsumexp-empty-index)
                def build(name=name, fn=fn, extra=extra, dtype=dtype, label=label,
                          src_shape=src_shape, index_shape=index_shape, dim=dim,
                          groups=groups, dim_size=dim_size):
                    rng = _rng(name, dtype, label)
                    torch_fn, jax_fn = op_pair(fn)
                    src = distinct_values(rng, src_shape, dtype)
                    if fn == "scatter_std":
                        index = paired_index(rng, index_shape, src_shape, dim, groups)
                    else:
                        index = index_for(rng, index_shape, groups)
                    kwargs = {"dim": dim, "dim_size": dim_size, **extra}
                    options = {"normwise": NORMWISE.get(dtype, False)}
                    return torch_fn, jax_fn, (src, index), kwargs, options
                yield Case("composite", name, dtype, label, build)


@register("composite")
def out_cases() -> Iterable[Case]:
    """std and logsumexp with ``out=``; every group has src (torch_scatter 2.1.2 zeroes
    logsumexp's groups without src: deviation logsumexp-out-empty-group)."""
    for name, fn, extra in VARIANTS:
        if fn not in ("scatter_std", "scatter_logsumexp"):
            continue
        for dtype in FLOATS:
            def build(name=name, fn=fn, extra=extra, dtype=dtype):
                import torch

                rng = _rng(name, dtype, "out")
                torch_fn, jax_fn = op_pair(fn)
                src = distinct_values(rng, (10, 3), dtype)
                index = torch.tensor(rng.permutation(np.arange(10) % 5), dtype=torch.int64)
                out = torch.tensor(rng.uniform(0.0, 2.0, (5, 3))).to(dtypes.torch_dtype(dtype))
                # torch_scatter's logsumexp backward fails with out= (an in-place exp_
                # on out): deviation logsumexp-out
                options = {"normwise": NORMWISE.get(dtype, False),
                           "grad": fn != "scatter_logsumexp"}
                return torch_fn, jax_fn, (src, index, out), {"dim": 0, **extra}, options
            yield Case("composite", name, dtype, "out-given", build)


@register("composite")
def special_value_cases() -> Iterable[Case]:
    """NaN, +-inf, all -inf groups (softmax: NaN; log_softmax: -inf; logsumexp: 0)."""
    import torch

    inf, nan = float("inf"), float("nan")
    data = [nan, 1.0, -inf, 2.0, inf, 3.0, -inf, -inf, 1.5, -0.5, 0.25, -inf]
    index = [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    # In float16 torch_scatter's eps=1e-12 underflows to 0: its +inf logsumexp
    # group gives 0 and its all -inf log_softmax group NaN (float32/64 give the largest
    # finite value and -inf, as we do in every dtype): deviation half-precision-composites.
    underflow = {"scatter_logsumexp", "scatter_log_softmax"}
    half_data, half_index = data[:4] + data[8:], index[:4] + index[8:]
    for name, fn, extra in VARIANTS:
        for dtype in FLOATS:
            def build(name=name, fn=fn, extra=extra, dtype=dtype):
                torch_fn, jax_fn = op_pair(fn)
                half = fn in underflow and dtype == "float16"
                values_, index_ = (half_data, half_index) if half else (data, index)
                src = torch.tensor(values_, dtype=torch.float64).to(dtypes.torch_dtype(dtype))
                # std's gradient is NaN beside inf/NaN in torch and in ours alike,
                # but the all -inf pair is a zero-deviation group: forward only
                options = {"grad": fn != "scatter_std",
                           "normwise": NORMWISE.get(dtype, False)}
                return (torch_fn, jax_fn, (src, torch.tensor(index_)), {"dim": 0, **extra},
                        options)
            yield Case("composite", name, dtype, "nan-inf", build)
