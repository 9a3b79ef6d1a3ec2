"""segment/gather and the composites without torch: values against independent NumPy
formulas, jit/grad/vmap, and the error paths."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import torch2jax_ops as t2j

SRC = np.random.default_rng(0).standard_normal((10, 3)).astype(np.float32)
INDEX = np.array([0, 0, 1, 1, 1, 3, 3, 3, 4, 4])
INDPTR = np.array([0, 2, 5, 5, 8, 10])  # the same grouping (segment 2 empty)


def numpy_groups(src, index, size, fn, empty=0.0):
    return np.stack([fn(src[index == g]) if (index == g).any() else np.full(src.shape[1:], empty)
                     for g in range(size)])


@pytest.mark.parametrize("reduce,fn", [("sum", lambda m: m.sum(0)), ("mean", lambda m: m.mean(0)),
                                       ("min", lambda m: m.min(0)), ("max", lambda m: m.max(0))])
def test_csr_and_coo_match_a_numpy_formula(reduce, fn):
    expected = numpy_groups(SRC, INDEX, 5, fn)
    np.testing.assert_allclose(np.asarray(t2j.segment_csr(SRC, INDPTR, reduce=reduce)),
                               expected, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(t2j.segment_coo(SRC, INDEX, reduce=reduce)),
                               expected, rtol=1e-6)


def test_gathers_invert_the_grouping():
    per_group = np.arange(15.0, dtype=np.float32).reshape(5, 3)
    np.testing.assert_array_equal(np.asarray(t2j.gather_csr(per_group, INDPTR)), per_group[INDEX])
    np.testing.assert_array_equal(np.asarray(t2j.gather_coo(per_group, INDEX)), per_group[INDEX])


def test_integer_segment_mean_truncates_toward_zero():
    src = jnp.array([-3, -4, 5, 6, -7])
    np.testing.assert_array_equal(np.asarray(t2j.segment_csr(src, jnp.array([0, 2, 5]),
                                                             reduce="mean")), [-3, 1])
    np.testing.assert_array_equal(np.asarray(t2j.scatter_mean(src, jnp.array([0, 0, 1, 1, 1]))),
                                  [-4, 1])  # the scatter family floors


def test_composites_match_numpy_formulas():
    std = numpy_groups(SRC, INDEX, 5, lambda m: np.sqrt(((m - m.mean(0)) ** 2).sum(0)
                                                          / (max(len(m) - 1, 1) + 1e-6)))
    np.testing.assert_allclose(np.asarray(t2j.scatter_std(SRC, INDEX, 0)), std, rtol=1e-5)
    lse = numpy_groups(SRC, INDEX, 5, lambda m: np.log(np.exp(m).sum(0)))
    np.testing.assert_allclose(np.asarray(t2j.scatter_logsumexp(SRC, INDEX, 0)), lse, rtol=1e-5)
    soft = np.exp(SRC) / np.exp(lse)[INDEX]
    np.testing.assert_allclose(np.asarray(t2j.scatter_softmax(SRC, INDEX, 0)), soft, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(t2j.scatter_log_softmax(SRC, INDEX, 0)), np.log(soft),
                               rtol=1e-5, atol=1e-6)


def test_jit_grad_vmap():
    csr = jax.jit(lambda s, p: t2j.segment_csr(s, p, reduce="mean"))
    np.testing.assert_allclose(np.asarray(csr(SRC, INDPTR)),
                               np.asarray(t2j.segment_csr(SRC, INDPTR, reduce="mean")), rtol=1e-6)
    grad = jax.grad(lambda s: t2j.scatter_softmax(s, INDEX, 0, dim_size=5)[:, 0].sum())(SRC)
    np.testing.assert_allclose(np.asarray(grad), 0.0, atol=1e-6)  # softmax sums to 1 per group
    batched = jax.vmap(lambda s: t2j.segment_coo(s, INDEX, dim_size=5, reduce="max"))(
        jnp.stack([SRC, 2 * SRC]))
    np.testing.assert_allclose(np.asarray(batched[1]), 2 * np.asarray(batched[0]))
    per_graph = jax.vmap(lambda s, i: t2j.scatter_log_softmax(s, i, 0, dim_size=5))(
        jnp.stack([SRC, SRC]), jnp.stack([INDEX, INDEX[::-1]]))
    np.testing.assert_allclose(np.asarray(per_graph[1]),
                               np.asarray(t2j.scatter_log_softmax(SRC, INDEX[::-1], 0)), rtol=1e-6)


def test_errors_name_the_argument_and_the_fix():
    with pytest.raises(ValueError, match="`dim_size` is required when `indptr` is traced"):
        jax.jit(lambda s, p: t2j.gather_csr(s, p))(SRC[:5], INDPTR)
    with pytest.raises(ValueError, match="`dim_size` is required when `index` is traced"):
        jax.jit(lambda s, i: t2j.segment_coo(s, i))(SRC, INDEX)
    with pytest.raises(ValueError, match=r"`reduce` must be one of .*scatter\(\.\.\., reduce='mul'\)"):
        t2j.segment_csr(SRC, INDPTR, reduce="mul")
    with pytest.raises(ValueError, match="`indptr` needs at least one entry"):
        t2j.segment_csr(SRC, jnp.zeros((0,), jnp.int32))
    with pytest.raises(ValueError, match=r"`src` has 3 rows along axis 0 but `indptr` describes 5"):
        t2j.gather_csr(SRC[:3], INDPTR)
    with pytest.raises(ValueError, match="`out` has 4 rows along axis 0, but `indptr` describes 5"):
        t2j.segment_csr(SRC, INDPTR, out=jnp.zeros((4, 3)))
    with pytest.raises(ValueError, match="cannot be broadcast against `src`"):
        t2j.segment_csr(jnp.ones((2, 4)), jnp.array([[0, 2, 4]] * 3))
    with pytest.raises(ValueError, match="floating point data types, got `src` of dtype int32"):
        t2j.scatter_softmax(jnp.array([1, 2]), jnp.array([0, 0]))
    with pytest.raises(TypeError, match="`out` needs a floating `src`"):
        t2j.scatter_std(jnp.array([1, 2]), jnp.array([0, 0]), out=jnp.zeros(1, jnp.int32))
    with pytest.raises(TypeError, match="torch2jax_ops.dlpack.to_jax"):
        import types
        fake = types.new_class("Tensor", (), {})
        fake.__module__ = "torch"
        t2j.segment_coo(fake(), INDEX)


def test_checked_reports_bad_input_under_jit():
    gather = jax.jit(lambda s, i: t2j.gather_coo(s, i))
    np.testing.assert_array_equal(np.asarray(gather(SRC[:2], jnp.array([0, 5]))[1]), 0.0)
    with pytest.raises(Exception, match=r"`index` has values outside \[0, 2\)"):
        t2j.checked(gather)(SRC[:2], jnp.array([0, 5]))


def test_integer_std_is_float32_and_zero_deviation_gradient_is_zero():
    assert t2j.scatter_std(jnp.array([1, 2, 3, 5]), jnp.array([0, 0, 0, 1])).dtype == jnp.float32
    grad = jax.grad(lambda s: t2j.scatter_std(s, jnp.array([0, 1, 1])).sum())(
        jnp.array([1.0, 2.0, 2.0]))
    np.testing.assert_array_equal(np.asarray(grad), [0.0, 0.0, 0.0])
