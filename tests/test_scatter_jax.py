"""The scatter family without torch: transforms, error paths, checked mode, and
values against an independent NumPy loop."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import torch2jax_ops as t2j
from testkit.devices import assert_bitwise_on_cpu
from torch2jax_ops import dtypes


def numpy_scatter(src, index, size, reduce):
    """Plain loop over a 1-D problem: the independent formula."""
    out = []
    for g in range(size):
        members = src[index == g]
        if reduce == "sum":
            out.append(members.sum())
        elif reduce == "mean":
            out.append(members.mean() if len(members) else 0.0)
        elif reduce == "mul":
            out.append(np.prod(members))
        elif reduce == "max":
            out.append(members.max() if len(members) else 0.0)
        elif reduce == "min":
            out.append(members.min() if len(members) else 0.0)
    return np.array(out)


@pytest.mark.parametrize("reduce", ["sum", "mean", "mul", "min", "max"])
def test_values_match_a_numpy_loop(reduce):
    rng = np.random.default_rng(0)
    src = rng.uniform(0.5, 1.5, 50).astype(np.float32)
    index = rng.integers(0, 9, 50)
    got = t2j.scatter(jnp.asarray(src), jnp.asarray(index), dim_size=11, reduce=reduce)
    np.testing.assert_allclose(np.asarray(got), numpy_scatter(src, index, 11, reduce),
                               rtol=1e-5)


def test_sum_equals_hand_written_segment_sum_under_jit():
    rng = np.random.default_rng(1)
    src, index = jnp.asarray(rng.normal(size=(100, 8))), jnp.asarray(rng.integers(0, 7, 100))
    ours = jax.jit(lambda s, i: t2j.scatter_sum(s, i, 0, dim_size=7))(src, index)
    plain = jax.jit(lambda s, i: jax.ops.segment_sum(s, i, 7))(src, index)
    # XLA:CPU adds in a fixed order: the same bits; a GPU's scatter-add order is not fixed
    # (1 ulp apart): float32's tolerance there, decided by where the sum ran
    assert_bitwise_on_cpu(ours, plain)
    # deterministic=True (the sorted segment path) gives the same bits on every run
    sorted_sum = jax.jit(lambda s, i: t2j.scatter_sum(s, i, 0, dim_size=7, deterministic=True))
    np.testing.assert_array_equal(np.asarray(sorted_sum(src, index)),
                                  np.asarray(sorted_sum(src, index)))
    assert_bitwise_on_cpu(sorted_sum(src, index), plain, cpu_rtol=1e-6)  # another order


def _program(fn, *args) -> list:
    """The optimised HLO's instructions, without names, metadata and source locations."""
    text = jax.jit(fn).lower(*args).compile().as_text()
    lines = []
    for line in text.splitlines():
        line = re.sub(r",? metadata=\{[^}]*\}", "", line.strip())
        if "=" in line and not line.startswith(("HloModule", "FileNames", "FunctionNames")):
            lines.append(re.sub(r"%[\w.\-]+", "%", line))
    return [line for line in lines if not re.match(r"^\d+ ", line)]


def test_sum_is_the_same_program_as_segment_sum():
    """The floor of scatter sum's per-call cost (benchmarks/RESULTS.md, small inputs) is
    jax.ops.segment_sum's: the two compile to the same instructions."""
    src = jax.ShapeDtypeStruct((10_000, 64), jnp.float32)
    index = jax.ShapeDtypeStruct((10_000,), jnp.int32)
    ours = _program(lambda s, i: t2j.scatter_sum(s, i, 0, dim_size=500), src, index)
    plain = _program(lambda s, i: jax.ops.segment_sum(s, i, 500), src, index)
    assert ours == plain
    assert sum("scatter(" in line for line in ours) == 1
    # and the comparison sees a difference where there is one
    assert _program(lambda s, i: t2j.scatter_mean(s, i, 0, dim_size=500), src, index) != plain


def test_jit_grad_vmap_compose():
    src = jnp.arange(12.0).reshape(3, 4)
    index = jnp.array([0, 1, 0, 2])

    def loss(s):
        return t2j.scatter_max(s, index, dim=-1, dim_size=3)[0].sum()

    g = jax.jit(jax.grad(loss))(src)
    np.testing.assert_array_equal(np.asarray(g), [[0, 1, 1, 1]] * 3)
    batched = jax.vmap(lambda s: t2j.scatter_mean(s, index, dim_size=3))(src)
    np.testing.assert_allclose(np.asarray(batched), [[1, 1, 3], [5, 5, 7], [9, 9, 11]])
    # vmap over the index too (a traced index needs dim_size)
    idx = jnp.stack([index, index[::-1]])
    both = jax.vmap(lambda s, i: t2j.scatter_sum(s, i, dim_size=3))(src[:2], idx)
    assert both.shape == (2, 3)


def test_max_gradient_goes_to_first_tied_element_only():
    g = jax.grad(lambda s: t2j.scatter_max(s, jnp.array([0, 0, 0]))[0].sum())(
        jnp.array([2.0, 2.0, 1.0]))
    np.testing.assert_array_equal(np.asarray(g), [1.0, 0.0, 0.0])
    # jax.ops.segment_max would split it:
    split = jax.grad(lambda s: jax.ops.segment_max(s, jnp.array([0, 0, 0]), 1).sum())(
        jnp.array([2.0, 2.0, 1.0]))
    np.testing.assert_array_equal(np.asarray(split), [0.5, 0.5, 0.0])


def test_missing_dim_size_under_jit_names_the_argument():
    with pytest.raises(ValueError, match=r"`dim_size` is required when `index` is traced"):
        jax.jit(lambda s, i: t2j.scatter_sum(s, i))(jnp.ones(3), jnp.array([0, 1, 2]))


def test_traced_dim_size_names_the_fix():
    with pytest.raises(TypeError, match=r"static_argnames='dim_size'"):
        jax.jit(lambda s, i, n: t2j.scatter_sum(s, i, dim_size=n))(
            jnp.ones(3), jnp.array([0, 1, 2]), 3)


@pytest.mark.parametrize("call, error, pattern", [
    (lambda: t2j.scatter_sum(jnp.ones(3), jnp.array([0.0, 1.0, 2.0])), TypeError,
     r"`index` must have an integer dtype"),
    (lambda: t2j.scatter_sum(jnp.ones((2, 3)), jnp.array([0, 1]), dim=1), ValueError,
     r"`index` of shape \(2,\) cannot be broadcast to `src` of shape \(2, 3\)"),
    (lambda: t2j.scatter_sum(jnp.ones((2, 3)), jnp.array([0, 1]), dim=2), IndexError,
     r"`dim`=2 is out of range.*\[-2, 1\]"),
    (lambda: t2j.scatter(jnp.ones(2), jnp.array([0, 1]), reduce="avg"), ValueError,
     r"`reduce` must be one of 'sum', 'add', 'mul', 'mean', 'min', 'max', got 'avg'"),
    (lambda: t2j.scatter_sum(jnp.ones(2), jnp.array([0, 1]), out=jnp.zeros(2, jnp.int32)),
     TypeError, r"`out` has dtype int32 but `src` has float32"),
    (lambda: t2j.scatter_sum(jnp.ones(2), jnp.array([0, 1]), dim_size=-1), ValueError,
     r"`dim_size` must be >= 0"),
    (lambda: t2j.scatter_sum(jnp.ones((2, 2)), jnp.zeros((2, 2, 2), jnp.int32)), ValueError,
     r"`index` has 3 dims but `src` only 2"),
    (lambda: t2j.scatter_max(jnp.ones(2, jnp.complex64), jnp.array([0, 1])), TypeError,
     r"complex"),
    (lambda: t2j.scatter_sum(jnp.ones(2, bool), jnp.array([0, 1])), TypeError, r"bool"),
    (lambda: t2j.scatter_sum(np.float32(1.0), jnp.array([0])), ValueError,
     r"at least one dimension"),
])
def test_bad_input_gets_a_clear_error(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


def test_torch_tensor_input_says_how_to_convert():
    class FakeTensor:  # stands in for torch.Tensor without importing torch
        __module__ = "torch"
    with pytest.raises(TypeError, match=r"torch2jax_ops.dlpack.to_jax"):
        t2j.scatter_sum(FakeTensor(), jnp.array([0]))


def test_checked_mode_passes_good_input_through():
    f = t2j.checked(jax.jit(lambda s, i: t2j.scatter_sum(s, i, dim_size=3)))
    np.testing.assert_array_equal(np.asarray(f(jnp.ones(3), jnp.array([0, 0, 2]))), [2, 0, 1])


def test_arg_dtype_follows_jax_integer_width():
    _, arg = t2j.scatter_max(jnp.ones(3), jnp.array([0, 0, 1]))
    assert arg.dtype == jnp.int32
    with dtypes.x64():
        _, arg = t2j.scatter_max(jnp.ones(3), jnp.array([0, 0, 1]))
        assert arg.dtype == jnp.int64


def test_half_precision_sums_accumulate_in_float32():
    ones = jnp.ones(3000, jnp.float16)
    assert float(t2j.scatter_sum(ones, jnp.zeros(3000, jnp.int32))[0]) == 3000.0
    assert float(t2j.scatter_mean(ones, jnp.zeros(3000, jnp.int32))[0]) == 1.0


@pytest.mark.parametrize("op", ["scatter_sum", "scatter_max", "scatter_mul"])
def test_huge_int64_ids_under_jit_are_dropped_not_aliased(op):
    with dtypes.x64():
        index = jnp.array([0, 2**32, 1, -(2**32) + 1], jnp.int64)  # int32 casts: 0 and 1
        src = jnp.array([1.0, 5.0, 2.0, 7.0])
        f = jax.jit(lambda s, i: getattr(t2j, op)(s, i, dim_size=2))
        got = f(src, index)
        got = got[0] if isinstance(got, tuple) else got
        np.testing.assert_array_equal(np.asarray(got), [1.0, 2.0])
