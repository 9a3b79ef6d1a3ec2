"""torch's native scatter API (torch2jax_ops.torch) vs real torch.

The hand-picked matrix (function x reduce x include_self x dtype x layout, and
the edge cases) is section "torch" of the parity suite
(torch2jax_ops/parity/cases/torch_native.py), also run by the parity report; below it,
hypothesis draws random problems, and the fx mapping table is checked.
"""
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import torch2jax_ops  # noqa: F401  (loads the fx table)
from torch2jax_ops import dtypes
from torch2jax_ops import torch as ours
from torch2jax_ops.parity import assert_parity
from torch2jax_ops.parity import _suite as suite

from torch2jax_ops.parity.cases.torch_native import torch_index_select

CASES = suite.cases("torch")


def test_matrix_covers_every_function_reduce_and_dtype():
    ops = {c.op for c in CASES}
    assert {f"scatter_reduce-{r}" for r in ("sum", "prod", "mean", "amax", "amin")} <= ops
    assert {f"index_reduce-{r}" for r in ("prod", "mean", "amax", "amin")} <= ops
    assert {"scatter_add", "scatter-src", "scatter-value", "scatter-src-add",
            "scatter-value-multiply", "index_add", "index_select", "gather"} <= ops
    for op in ops:
        seen = {c.dtype for c in CASES if c.op == op}
        assert {"float32", "float64"} <= seen, op
    labels = {c.label for c in CASES}
    assert {"empty-index-self", "nan-inf-noself", "ties-with-input-noself",
            "index-smaller-self", "pyg-relu-ties-with-zeros", "0d-self"} <= labels


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_matches_torch(case):
    result = case.run()
    assert result.passed, str(result)
    assert result.leaves, "nothing was compared"


# ----------------------------------------------------------------------------- hypothesis

FLOATS = ("float32", "float64")
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def scatter_problems(draw, index_op=False):
    """input / index / src (torch) for torch's scatter rule, or the index ops' rule."""
    ndim = draw(st.integers(1, 3))
    x_shape = tuple(draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim)))
    dim = draw(st.integers(-ndim, ndim - 1))
    axis = dim % ndim
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    dtype = draw(st.sampled_from(FLOATS))
    grid = draw(st.booleans())  # a coarse grid makes ties (and self ties) likely

    def data(shape):
        raw = rng.integers(-2, 3, size=shape) / 2 if grid else rng.uniform(-2, 2, size=shape)
        return torch.tensor(np.asarray(raw), dtype=torch.float64).to(dtypes.torch_dtype(dtype))

    length = draw(st.integers(0, 7))
    if index_op:
        s_shape = x_shape[:axis] + (length,) + x_shape[axis + 1:]
        index = torch.tensor(rng.integers(0, x_shape[axis], size=length), dtype=torch.int64)
    else:
        i_shape = tuple(length if d == axis else draw(st.integers(1, n))
                        for d, n in enumerate(x_shape))
        s_shape = tuple(n + draw(st.integers(0, 1)) for n in i_shape)
        index = torch.tensor(rng.integers(0, x_shape[axis], size=i_shape), dtype=torch.int64)
    return data(x_shape), dim, index, data(s_shape), dtype


def _run(dtype, fn, *args, **options):
    with dtypes.x64(dtype == "float64"):
        assert_parity(*fn, *args, **options)


@SETTINGS
@given(problem=scatter_problems(),
       reduce=st.sampled_from(("sum", "prod", "mean", "amax", "amin")),
       include_self=st.booleans())
def test_scatter_reduce_random(problem, reduce, include_self):
    x, dim, index, src, dtype = problem
    fns = (lambda x, i, s: torch.scatter_reduce(x, dim, i, s, reduce, include_self=include_self),
           lambda x, i, s: ours.scatter_reduce(x, dim, i, s, reduce, include_self=include_self))
    smaller = tuple(index.shape) != tuple(src.shape)
    if not smaller:
        _run(dtype, fns, x, index, src)
        return
    # An index smaller than src reads only src[:index.shape]. torch's backward raises there
    # (amax/amin/prod even for input's gradient: "The size of tensor a (3) must match the
    # size of tensor b (2)", torch 2.13, found by this test): values on the full src, and
    # values and every gradient on the part of src that is read.
    _run(dtype, fns, x, index, src, grad=False)
    _run(dtype, fns, x, index, src[tuple(slice(0, n) for n in index.shape)].clone())


@SETTINGS
@given(problem=scatter_problems(index_op=True),
       reduce=st.sampled_from(("prod", "mean", "amax", "amin", "add")),
       include_self=st.booleans())
def test_index_ops_random(problem, reduce, include_self):
    x, dim, index, source, dtype = problem
    if reduce == "add":
        fns = (lambda x, i, s: torch.index_add(x, dim, i, s, alpha=0.5),
               lambda x, i, s: ours.index_add(x, dim, i, s, alpha=0.5))
    else:
        fns = (lambda x, i, s: torch.index_reduce(x, dim, i, s, reduce,
                                                  include_self=include_self),
               lambda x, i, s: ours.index_reduce(x, dim, i, s, reduce,
                                                 include_self=include_self))
    _run(dtype, fns, x, index, source)


@SETTINGS
@given(problem=scatter_problems())
def test_gather_and_index_select_random(problem):
    x, dim, index, _, dtype = problem
    _run(dtype, (lambda x, i: torch.gather(x, dim, i), lambda x, i: ours.gather(x, dim, i)),
         x, index)
    flat = index.reshape(-1)
    _run(dtype, (lambda x, i: torch_index_select(x, dim, i),
                 lambda x, i: ours.index_select(x, dim, i)), x, flat)


# ----------------------------------------------------------------------------- fx table

FUNCTIONS = ("scatter_reduce", "scatter_add", "scatter", "index_add", "index_reduce",
             "index_select", "gather")
METHODS = ("scatter_reduce", "scatter_reduce_", "scatter_add", "scatter_add_", "scatter",
           "scatter_", "index_add", "index_add_", "index_reduce", "index_reduce_",
           "index_select", "gather")


def test_fx_table_maps_functions_and_methods_to_this_package():
    from torch2jax_ops.geometric import _table_torch
    from torch2jax_ops.nn import _registry

    functions, methods = _registry.functions(), _registry.methods()
    for name in FUNCTIONS:
        assert functions[f"torch.{name}"] is getattr(_table_torch, f"_fx_{name}"), name
    for name in METHODS:
        assert methods[name] is getattr(_table_torch, f"_fx_{name.rstrip('_')}"), name


class _Net(torch.nn.Module):
    """PyG 2.x's CPU aggregation calls, written out in a user's forward."""

    def forward(self, x, index):
        src = torch.relu(x)
        full = index.view(-1, 1).expand_as(src)
        mx = src.new_zeros((4, src.size(1))).scatter_reduce_(0, full, src, "amax",
                                                             include_self=False)
        sm = torch.zeros(4, src.size(1)).scatter_add_(0, full, src)
        mean = torch.index_reduce(torch.ones(4, src.size(1)), 0, index, src, "mean")
        added = mx.index_add(0, index[:3], src[:3], alpha=2.0)
        picked = torch.gather(sm, 0, full[:5]) + added.index_select(0, index[:5])
        out = torch.zeros(4, 1).scatter_(0, torch.tensor([[3], [0]]), 1.5)
        return mx + sm + mean + added + out, picked


def test_user_model_with_native_scatter_calls_converts():
    from torch2jax_ops.nn import from_torch

    net = _Net()
    port = from_torch(net)
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.integers(-2, 3, size=(10, 3)) / 2.0, dtype=torch.float32)
    index = torch.tensor(rng.integers(0, 4, size=10))
    assert_parity(net, port, x, index, grad_wrt=[0])
