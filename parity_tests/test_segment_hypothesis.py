"""Hypothesis-generated random cases: segment/gather and the composites vs torch_scatter,
eager and under jax.jit."""
import hypothesis.extra.numpy as hnp
import jax
import numpy as np
import torch
import torch_scatter
from hypothesis import given
from hypothesis import strategies as st

import torch2jax_ops as t2j
from torch2jax_ops import dtypes
from torch2jax_ops.parity import assert_parity
from torch2jax_ops.parity.cases.composite import distinct_values, group_sizes
from torch2jax_ops.parity.cases.scatter import index_for, op_pair
from torch2jax_ops.parity.fuzz import values


@st.composite
def segment_problem(draw):
    """src [*B, E, *F] (B, F of 0-2 axes, sizes 1-4; E 1-8) and a sorted index [*B', E]
    (B' each 1 or B), plus the CSR pointer of the same grouping per row."""
    lead = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3))
    trail = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3))
    length = draw(st.integers(1, 8))
    index_lead = tuple(draw(st.sampled_from([1, n])) for n in lead)
    groups = draw(st.integers(1, 5))
    seed = draw(st.integers(0, 2**31 - 1))
    return lead, trail, length, index_lead, groups, seed


def _segment_data(problem, dtype, kind):
    lead, trail, length, index_lead, groups, seed = problem
    rng = np.random.default_rng(seed)
    src = values(rng, lead + (length,) + trail, dtype, kind)
    index = np.sort(rng.integers(0, groups, index_lead + (length,)), axis=-1)
    counts = np.apply_along_axis(lambda r: np.bincount(r, minlength=groups), -1, index)
    indptr = np.concatenate([np.zeros(index_lead + (1,), np.int64),
                             np.cumsum(counts, axis=-1)], axis=-1)
    return src, torch.tensor(index), torch.tensor(indptr)


@given(problem=segment_problem(), reduce=st.sampled_from(["sum", "mean", "min", "max"]),
       dtype=st.sampled_from(["float32", "float64", "int64", "float16"]))
def test_random_segment_csr_and_coo_match_torch_scatter(problem, reduce, dtype):
    src, index, indptr = _segment_data(problem, dtype, reduce)
    with dtypes.x64(dtypes.needs_x64(dtype)):
        torch_fn, jax_fn = op_pair("segment_csr", reduce)
        assert_parity(torch_fn, jax_fn, src, indptr)
        torch_fn, jax_fn = op_pair(f"segment_{reduce}_coo")
        # the broadcast-index backward raises in torch_scatter (deviation coo-broadcast-backward)
        broadcast = index.shape[:-1] != src.shape[:index.dim() - 1]
        assert_parity(torch_fn, jax_fn, src, index, grad=not broadcast)


@given(problem=segment_problem(), dtype=st.sampled_from(["float32", "float64", "int32"]))
def test_random_gathers_match_torch_scatter(problem, dtype):
    src, index, indptr = _segment_data(problem, dtype, "sum")
    lead, trail, length, index_lead, groups, seed = problem
    segments = values(np.random.default_rng(seed + 1), lead + (groups,) + trail, dtype, "sum")
    with dtypes.x64(dtypes.needs_x64(dtype)):
        # torch_scatter's gather_csr needs a full-size indptr (it asserts src.size == len - 1)
        full = indptr.expand(lead + indptr.shape[-1:]).contiguous()
        assert_parity(*op_pair("gather_csr"), segments, full)
        if index.shape[:-1] == segments.shape[:index.dim() - 1]:  # torch_scatter: no broadcast
            assert_parity(*op_pair("gather_coo"), segments, index)


@st.composite
def composite_problem(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    full = draw(st.booleans())
    index_shape = shape if full else (shape[dim],)
    return shape, dim, index_shape, draw(st.integers(1, 4)), draw(st.integers(0, 2**31 - 1))


@given(problem=composite_problem(),
       op=st.sampled_from(["scatter_std", "scatter_logsumexp", "scatter_softmax",
                           "scatter_log_softmax"]),
       dtype=st.sampled_from(["float32", "float64"]))
def test_random_composites_match_torch_scatter(problem, op, dtype):
    shape, dim, index_shape, groups, seed = problem
    rng = np.random.default_rng(seed)
    src = distinct_values(rng, shape, dtype)
    index = index_for(rng, index_shape, groups)
    # std's gradient is NaN in torch_scatter for one-element groups (deviation std-grad-at-zero)
    grad = op != "scatter_std" or (group_sizes(index.numpy(), shape, dim) > 1).all()
    with dtypes.x64(dtypes.needs_x64(dtype)):
        assert_parity(*op_pair(op), src, index, dim=dim, grad=bool(grad))


@given(problem=composite_problem(),
       op=st.sampled_from(["scatter_logsumexp", "scatter_softmax", "scatter_log_softmax",
                           "scatter_std"]))
def test_random_composites_under_jit_match_torch_scatter(problem, op):
    shape, dim, index_shape, groups, seed = problem
    rng = np.random.default_rng(seed)
    src, index = distinct_values(rng, shape, "float32"), index_for(rng, index_shape, groups)
    grad = op != "scatter_std" or (group_sizes(index.numpy(), shape, dim) > 1).all()
    assert_parity(lambda s, i: getattr(torch_scatter, op)(s, i, dim, dim_size=groups),
                  jax.jit(lambda s, i: getattr(t2j, op)(s, i, dim, dim_size=groups)),
                  src, index, rtol=1e-5, atol=1e-5, grad=bool(grad))  # as above


@given(problem=segment_problem(), reduce=st.sampled_from(["sum", "mean", "min", "max"]))
def test_random_segments_under_jit_match_torch_scatter(problem, reduce):
    src, index, indptr = _segment_data(problem, "float32", reduce)
    groups = problem[4]
    csr = jax.jit(lambda s, p: t2j.segment_csr(s, p, reduce=reduce))
    coo = jax.jit(lambda s, i: t2j.segment_coo(s, i, dim_size=groups, reduce=reduce))
    expected = lambda s, p: torch_scatter.segment_csr(s, p, reduce=reduce)  # noqa: E731
    # the same torch result twice: coo with a static dim_size must equal csr's groups
    assert_parity(expected, csr, src, indptr, rtol=1e-6, atol=1e-6)
    assert_parity(lambda s, i: expected(s, indptr), coo, src, index, rtol=1e-6, atol=1e-6)
