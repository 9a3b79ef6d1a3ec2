"""Hypothesis-generated random cases: the scatter family vs torch_scatter, drawn by the same
public strategy users fuzz their own ports with (torch2jax_ops.parity.fuzz)."""
import jax
import numpy as np
import torch_scatter
from hypothesis import given
from hypothesis import strategies as st

import torch2jax_ops as t2j
from torch2jax_ops import dtypes
from torch2jax_ops.parity import assert_parity, compare_arrays, fuzz
from torch2jax_ops.parity.cases.scatter import op_pair

REDUCE_OPS = ["scatter_sum", "scatter_mean", "scatter_mul", "scatter_min", "scatter_max"]


def _torch_scatter_cannot(problem, op):
    """Documented deviations "mul-empty-src" and "mean-empty-src-crash"."""
    return problem.src.numel() == 0 and (
        op == "scatter_mul" or (op == "scatter_mean" and problem.index.numel()))


# products near 1, as the case matrix draws them: no zeros (deviation mul-grad-at-zero), no overflow
OP_AND_PROBLEM = st.sampled_from(REDUCE_OPS).flatmap(lambda op: st.tuples(
    st.just(op), fuzz.scatter_inputs(("float32", "float64", "int64", "float16"),
                                     near_one=op == "scatter_mul")))


@given(op_and_problem=OP_AND_PROBLEM)
def test_random_scatter_matches_torch_scatter(op_and_problem):
    op, problem = op_and_problem
    if _torch_scatter_cannot(problem, op):
        return
    torch_fn, jax_fn = op_pair(op)
    with dtypes.x64(dtypes.needs_x64(problem.dtype)):
        assert_parity(torch_fn, jax_fn, problem.src, problem.index, dim=problem.dim,
                      dim_size=problem.dim_size)


@given(problem=fuzz.scatter_inputs(("float32",), dim_size=False),
       reduce=st.sampled_from(["sum", "mean", "min", "max"]))
def test_random_scatter_under_jit_matches_torch_scatter(problem, reduce):
    size = int(problem.index.max()) + 3 if problem.index.numel() else 2  # static under jit
    expected = torch_scatter.scatter(problem.src, problem.index, problem.dim, dim_size=size,
                                     reduce=reduce)
    jitted = jax.jit(lambda s, i: t2j.scatter(s, i, problem.dim, dim_size=size, reduce=reduce))
    got = jitted(problem.src.numpy(), problem.index.numpy().astype(np.int32))
    leaf = compare_arrays(expected, got)
    assert leaf.passed, leaf


def test_fuzz_scatter_runs_the_ported_family():
    """The one-line user API, on our own ops (products near 1, so no overflow)."""
    for op in ("scatter_sum", "scatter_max"):
        fuzz.fuzz_scatter(*op_pair(op), dtypes=("float32", "int32"), max_examples=15,
                          skip=lambda p: False)
    fuzz.fuzz_scatter(*op_pair("scatter_mul"), max_examples=10,
                      strategy=fuzz.scatter_inputs(("float64",), near_one=True),
                      skip=lambda p: p.src.numel() == 0)
