"""Hypothesis-generated random cases: the scatter family vs torch_scatter."""
import hypothesis.extra.numpy as hnp
import numpy as np
import torch_scatter
from hypothesis import given
from hypothesis import strategies as st

import torch2jax_ops as t2j
from torch2jax_ops import dtypes
from torch2jax_ops.parity import assert_parity
from torch2jax_ops.parity.cases_scatter import index_for, op_pair, values

REDUCE_OPS = ["scatter_sum", "scatter_mean", "scatter_mul", "scatter_min", "scatter_max"]


@st.composite
def scatter_problem(draw):
    """src of 1-4 dims (sizes 0-5), a dim, an index that is 1-D or full, maybe dim_size."""
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=5))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    groups = draw(st.integers(1, 6))
    if draw(st.booleans()):
        index_shape = (shape[dim],)
    else:  # a k-D index aligned with the leading axes, possibly with unit axes
        k = draw(st.integers((dim % len(shape)) + 1, len(shape)))
        index_shape = tuple(1 if (a != dim % len(shape) and draw(st.booleans())) else shape[a]
                            for a in range(k))
    seed = draw(st.integers(0, 2**31 - 1))
    extra = draw(st.sampled_from([None, 0, 3]))
    return shape, dim, index_shape, groups, seed, extra


def _tensors(shape, dim, index_shape, groups, seed, dtype, op):
    """The case matrix's own data generators (ties on a 0.5 grid, mul near 1)."""
    rng = np.random.default_rng(seed)
    return values(rng, shape, dtype, op), index_for(rng, index_shape, groups)


@given(problem=scatter_problem(), op=st.sampled_from(REDUCE_OPS),
       dtype=st.sampled_from(["float32", "float64", "int64", "float16"]))
def test_random_scatter_matches_torch_scatter(problem, op, dtype):
    shape, dim, index_shape, groups, seed, extra = problem
    src, index = _tensors(shape, dim, index_shape, groups, seed, dtype, op)
    dim_size = None if extra is None else (int(index.max()) + 1 if index.numel() else 0) + extra
    if src.numel() == 0 and (op == "scatter_mul" or (op == "scatter_mean" and index.numel())):
        return  # documented deviations "mul-empty-src" and "mean-empty-src-crash"
    torch_fn, jax_fn = op_pair(op)
    with dtypes.x64(dtypes.needs_x64(dtype)):
        assert_parity(torch_fn, jax_fn, src, index, dim=dim, dim_size=dim_size)


@given(problem=scatter_problem(), reduce=st.sampled_from(["sum", "mean", "min", "max"]))
def test_random_scatter_under_jit_matches_torch_scatter(problem, reduce):
    import jax

    shape, dim, index_shape, groups, seed, _ = problem
    src, index = _tensors(shape, dim, index_shape, groups, seed, "float32", reduce)
    size = groups  # static, as under jit it must be
    expected = torch_scatter.scatter(src, index, dim, dim_size=size, reduce=reduce)
    jitted = jax.jit(lambda s, i: t2j.scatter(s, i, dim, dim_size=size, reduce=reduce))
    got = jitted(src.numpy(), index.numpy().astype(np.int32))
    np.testing.assert_allclose(np.asarray(got), expected.numpy(), rtol=1.3e-6, atol=1e-5)
