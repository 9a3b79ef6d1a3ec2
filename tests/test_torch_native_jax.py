"""torch2jax_ops.torch without torch: shapes, errors, jit, vmap, checked mode, pinned rules.

The numbers are compared with real torch in parity_tests/test_torch_native.py;
here the rules are pinned on hand-computed examples (torch's results, recorded).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from testkit.devices import assert_bitwise_on_cpu
from torch2jax_ops import checked, dtypes
from torch2jax_ops import torch as T

F32 = jnp.float32


def test_public_face():
    assert T.__all__ == ["scatter_reduce", "scatter_add", "scatter", "gather",
                         "index_add", "index_reduce", "index_select"]
    for name in T.__all__:
        fn = getattr(T, name)
        assert fn.__doc__ and "out_sharding" in str(__import__("inspect").signature(fn))


# ----------------------------------------------------------------------------- values

def test_scatter_reduce_include_self_rules():
    x = jnp.array([1.0, 2.0, 5.0])
    i = jnp.array([0, 0, 1])
    s = jnp.array([2.0, 3.0, 4.0])
    # mean counts input's element with include_self; untouched positions keep input
    assert T.scatter_reduce(x, 0, i, s, "mean").tolist() == [2.0, 3.0, 5.0]
    assert T.scatter_reduce(x, 0, i, s, "mean", include_self=False).tolist() == [2.5, 4.0, 5.0]
    assert T.scatter_reduce(x, 0, i, s, "sum", include_self=False).tolist() == [5.0, 4.0, 5.0]
    assert T.scatter_reduce(x, 0, i, s, "prod").tolist() == [6.0, 8.0, 5.0]
    assert T.scatter_reduce(x, 0, i, s, "amin").tolist() == [1.0, 2.0, 5.0]
    assert T.scatter_reduce(x, 0, i, s, "amin", include_self=False).tolist() == [2.0, 4.0, 5.0]
    # torch's undocumented aliases
    assert T.scatter_reduce(x, 0, i, s, "max").tolist() == [3.0, 4.0, 5.0]


def test_integer_mean_floors_and_bool_reductions():
    x = jnp.array([0, 0, 0])
    i = jnp.array([0, 0, 1])
    s = jnp.array([-3, -2, 5])
    assert T.scatter_reduce(x, 0, i, s, "mean").tolist() == [-2, 2, 0]
    assert T.scatter_reduce(x, 0, i, s, "mean", include_self=False).tolist() == [-3, 5, 0]
    b = jnp.array([False, True, False])
    src = jnp.array([True, False, False, False])
    assert T.scatter_reduce(b, 0, jnp.array([0, 0, 1, 2]), src, "sum").tolist() == \
        [True, True, False]
    assert T.index_add(b, 0, jnp.array([0, 2]), jnp.array([True, True])).tolist() == \
        [True, True, True]
    with pytest.raises(TypeError, match="bool"):
        T.scatter_reduce(b, 0, jnp.array([0]), jnp.array([True]), "mean")


def test_index_smaller_than_src_reads_the_leading_block():
    x = jnp.zeros((3, 4))
    src = jnp.arange(20.0).reshape(5, 4)
    out = T.scatter_add(x, 0, jnp.zeros((2, 3), jnp.int32), src)
    assert out.tolist() == [[4.0, 6.0, 8.0, 0.0], [0.0] * 4, [0.0] * 4]
    # the index may be longer than input along dim (not than src)
    out = T.scatter_add(x, 0, jnp.zeros((5, 1), jnp.int32), src)
    assert out[:, 0].tolist() == [40.0, 0.0, 0.0]
    g = jax.grad(lambda s: T.scatter_add(x, 0, jnp.zeros((2, 3), jnp.int32), s).sum())(src)
    assert g.tolist() == [[1, 1, 1, 0]] * 2 + [[0] * 4] * 3


def test_scatter_duplicates_last_write_wins_and_torch_gradient():
    x = jnp.zeros(3)
    i = jnp.array([0, 0, 2])
    s = jnp.array([1.0, 2.0, 3.0])
    assert T.scatter(x, 0, i, s).tolist() == [2.0, 0.0, 3.0]
    gx, gs = jax.grad(lambda x, s: (T.scatter(x, 0, i, s) * jnp.array([1.0, 2.0, 3.0])).sum(),
                      argnums=(0, 1))(x, s)
    assert gx.tolist() == [0.0, 2.0, 0.0]
    assert gs.tolist() == [1.0, 1.0, 3.0]  # every writer gets its target's gradient (torch)
    two = jnp.array([[0, 1], [0, 1]])
    assert T.scatter(jnp.zeros((2, 2)), 0, two, jnp.array([[1.0, 2.0], [3.0, 4.0]])).tolist() \
        == [[3.0, 0.0], [0.0, 4.0]]


def test_scatter_value_and_reduce_forms():
    x = jnp.full((3, 4), 2.0)
    i = jnp.zeros((2, 3), jnp.int32)
    assert T.scatter(x, 0, i, 5.5)[0].tolist() == [5.5, 5.5, 5.5, 2.0]
    assert T.scatter(x, 0, i, value=5.5, reduce="add")[0].tolist() == [13.0, 13.0, 13.0, 2.0]
    assert T.scatter(x, 0, i, value=5.5, reduce="multiply")[0, 0] == 60.5
    assert T.scatter(jnp.zeros(3, jnp.int32), 0, jnp.array([1]), 5.9).tolist() == [0, 5, 0]


def test_index_ops_values():
    x = jnp.zeros((3, 2))
    out = T.index_add(x, 0, jnp.array([0, 0, 2]), jnp.ones((3, 2)), alpha=2)
    assert out.tolist() == [[4.0, 4.0], [0.0, 0.0], [2.0, 2.0]]
    assert T.index_add(jnp.array([1, 2, 3]), 0, jnp.array([0, 0, 2]), jnp.array([3, 4, 5]),
                       alpha=-1.5).tolist() == [-6, 2, -2]          # alpha truncates to -1
    assert T.index_reduce(jnp.array([2, 3, 4]), 0, jnp.array([1, 1, 0]), jnp.array([5, -2, 7]),
                          "prod").tolist() == [14, -30, 4]
    m = jnp.arange(6.0).reshape(2, 3)
    assert T.index_select(m, 1, jnp.array([2, 0])).tolist() == [[2.0, 0.0], [5.0, 3.0]]
    assert T.index_select(m, 1, jnp.array(2)).shape == (2, 1)
    assert T.index_select(jnp.array(5.0), 0, jnp.array([0])).shape == ()
    assert T.gather(m, 1, jnp.array([[2, 0], [1, 1]])).tolist() == [[2.0, 0.0], [4.0, 4.0]]


def test_zero_dim_and_empty_index():
    s0 = jnp.array(1.0)
    assert T.scatter_add(s0, 0, jnp.array(0), jnp.array(2.0)) == 3.0
    assert T.scatter_add(s0, -1, jnp.array([0, 0]), jnp.array([2.0, 3.0])) == 6.0
    x = jnp.array([1.0, 2.0])
    empty = jnp.zeros((0,), jnp.int32)
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        assert T.scatter_reduce(x, 0, empty, jnp.ones(5), reduce).tolist() == [1.0, 2.0]
        # torch skips every shape rule for an empty index
        assert T.scatter_reduce(jnp.ones((2, 3)), 0, empty, jnp.ones(5), reduce).shape == (2, 3)
    assert T.gather(jnp.ones((2, 3)), 1, empty).shape == (0,)
    assert T.index_reduce(x, 0, empty, jnp.zeros(0), "prod", include_self=False).tolist() == \
        [1.0, 2.0]


def test_half_types_accumulate_as_torch():
    ones = jnp.ones(3000, jnp.float16)
    ids = jnp.zeros(3000, jnp.int32)
    # scatter_add / scatter_reduce: float32 accumulation, one rounding
    assert float(T.scatter_add(jnp.zeros(1, jnp.float16), 0, ids, ones)[0]) == 3000.0
    # index_add into a 1-d tensor: step by step in float16 (2048 + 1 rounds back to 2048)
    assert float(T.index_add(jnp.zeros(1, jnp.float16), 0, ids, ones)[0]) == 2048.0
    # ... into a 2-d tensor with alpha=1: float32 accumulation; alpha != 1: step by step
    two = jnp.ones((3000, 2), jnp.float16)
    assert float(T.index_add(jnp.zeros((1, 2), jnp.float16), 0, ids, two)[0, 0]) == 3000.0
    assert float(T.index_add(jnp.zeros((1, 2), jnp.float16), 0, ids, two, alpha=2)[0, 0]) == 4096
    # ... and along a middle dim of a 3-d tensor: step by step again (torch's kernels)
    three = jnp.ones((1, 3000, 1), jnp.float16)
    assert float(T.index_add(jnp.zeros((1, 1, 1), jnp.float16), 1, ids, three)[0, 0, 0]) == 2048
    assert float(T.index_add(jnp.zeros((1, 1, 1), jnp.float16), 2, ids,
                             three.reshape(1, 1, 3000))[0, 0, 0]) == 3000
    # index_reduce mean: step-by-step sum 2048; the count is 3001 -> 3000 in float16 (2-d)
    # and stops at 2048 when counted step by step (1-d)
    m2 = T.index_reduce(jnp.zeros((1, 2), jnp.float16), 0, ids, two, "mean")
    assert float(m2[0, 0]) == float(jnp.float16(2048 / 3000))
    assert float(T.index_reduce(jnp.zeros(1, jnp.float16), 0, ids, ones, "mean")[0]) == 1.0
    bf = T.index_add(jnp.zeros(1, jnp.bfloat16), 0, ids, ones.astype(jnp.bfloat16))
    assert float(bf[0]) == 256.0


def test_float64_and_int64_in_x64_mode():
    with dtypes.x64(True):
        x = jnp.zeros(3, jnp.float64)
        out = T.scatter_reduce(x, 0, jnp.array([0, 0, 2], jnp.int64),
                               jnp.array([0.1, 0.2, 0.3], jnp.float64), "sum")
        assert out.dtype == jnp.float64 and out[0] == 0.1 + 0.2
        big = jnp.array([2**40, 3], jnp.int64)
        assert T.scatter_reduce(jnp.zeros(1, jnp.int64), 0, jnp.array([0, 0]), big,
                                "amax")[0] == 2**40


# ----------------------------------------------------------------------------- gradients

def test_amax_gradient_splits_ties_with_input_even_without_include_self():
    x = jnp.array([3.0, 1.0, 5.0])
    i = jnp.array([0, 0, 0, 1, 2])
    s = jnp.array([3.0, 3.0, 1.0, 1.0, 2.0])
    grads = jax.grad(lambda x, s: T.scatter_reduce(x, 0, i, s, "amax").sum(),
                     argnums=(0, 1))(x, s)
    np.testing.assert_allclose(grads[0], [1 / 3, 0.5, 1.0], rtol=1e-6)
    np.testing.assert_allclose(grads[1], [1 / 3, 1 / 3, 0.0, 0.5, 0.0], rtol=1e-6)
    grads = jax.grad(lambda x, s: T.scatter_reduce(x, 0, i, s, "amax",
                                                   include_self=False).sum(),
                     argnums=(0, 1))(x, s)
    np.testing.assert_allclose(grads[0], [0.0, 0.0, 0.0])
    # torch's rule: input's 3.0 (and 1.0) still count in the split: 1/3 each, 1/2
    np.testing.assert_allclose(grads[1], [1 / 3, 1 / 3, 0.0, 0.5, 1.0], rtol=1e-6)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float16])
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_amax_nan_group_gives_nan_gradients(dtype, jit):
    # torch: grad = (src == result) * g / N, and 0 * inf is NaN where N is 0 (a NaN group).
    # Under jit XLA turns convert(mask) * x into select(mask, x, 0), which gave 0 there.
    x = jnp.array([3.0, 1.0], dtype)
    i = jnp.array([0, 0, 1])
    s = jnp.array([jnp.nan, 3.0, 1.0], dtype)
    out = T.scatter_reduce(x, 0, i, s, "amax")
    assert np.isnan(out[0]) and out[1] == 1.0
    grad = jax.grad(lambda x, s: T.scatter_reduce(x, 0, i, s, "amax").astype(F32).sum(),
                    argnums=(0, 1))
    gx, gs = (jax.jit(grad) if jit else grad)(x, s)
    assert np.isnan(gx[0]) and gx[1] == 0.5
    assert np.isnan(gs[0]) and np.isnan(gs[1]) and gs[2] == 0.5
    gi = jax.grad(lambda s: T.index_reduce(x, 0, i, s, "amin").astype(F32).sum())
    gi = (jax.jit(gi) if jit else gi)(s)
    assert np.isnan(gi[0]) and np.isnan(gi[1]) and gi[2] == 0.5


def test_prod_gradient_with_zeros():
    x = jnp.array([0.0, 2.0, 5.0, 3.0])
    i = jnp.array([0, 0, 1, 1, 2, 2, 3])
    s = jnp.array([2.0, 3.0, 0.0, 4.0, 0.0, 0.0, 7.0])
    gx, gs = jax.grad(lambda x, s: T.scatter_reduce(x, 0, i, s, "prod").sum(),
                      argnums=(0, 1))(x, s)
    # exact on the CPU; a GPU gave 3.0000002 for 21 / 7 (1 ulp): float32's tolerance there
    assert_bitwise_on_cpu(gx, [6.0, 0.0, 0.0, 7.0])
    assert_bitwise_on_cpu(gs, [0.0, 0.0, 8.0, 0.0, 0.0, 0.0, 3.0])


def test_prod_gradient_divides_as_torch_at_infinities():
    # torch: grad_self = g * prod(self, src) / self, so an infinite self gives NaN
    gx = jax.grad(lambda x: T.scatter_reduce(x, 0, jnp.array([0, 0]), jnp.array([-1.0, -1.0]),
                                             "prod").sum())(jnp.array([-jnp.inf]))
    assert np.isnan(gx[0])


def test_mean_gradient_and_index_add_alpha_gradient():
    x = jnp.array([1.0, 2.0, 5.0])
    i = jnp.array([0, 0, 1])
    s = jnp.array([2.0, 3.0, 4.0])
    gx, gs = jax.grad(lambda x, s: T.index_reduce(x, 0, i, s, "mean").sum(),
                      argnums=(0, 1))(x, s)
    np.testing.assert_allclose(gx, [1 / 3, 0.5, 1.0], rtol=1e-6)
    np.testing.assert_allclose(gs, [1 / 3, 1 / 3, 0.5], rtol=1e-6)
    gs = jax.grad(lambda s: (T.index_add(x, 0, i, s, alpha=2.5) * jnp.arange(3.0)).sum())(s)
    assert gs.tolist() == [0.0, 0.0, 2.5]


def test_gather_and_index_select_gradients_scatter_add():
    m = jnp.arange(4.0)
    g = jax.grad(lambda m: T.gather(m, 0, jnp.array([0, 0, 3])).sum())(m)
    assert g.tolist() == [2.0, 0.0, 0.0, 1.0]
    g = jax.grad(lambda m: T.index_select(m, 0, jnp.array([1, 1, 1])).sum())(m)
    assert g.tolist() == [0.0, 3.0, 0.0, 0.0]
    h = jax.grad(lambda m: jax.grad(lambda m: (T.gather(m, 0, jnp.array([1, 2])) ** 3).sum())(
        m).sum())(m)
    assert h.tolist() == [0.0, 6.0, 12.0, 0.0]  # second order through the custom rule


# ----------------------------------------------------------------------------- errors

@pytest.mark.parametrize("call, error, match", [
    (lambda: T.scatter_add(jnp.zeros((3, 4)), 0, jnp.zeros((5,), jnp.int32), jnp.ones((5, 6))),
     ValueError, "same number of dims"),
    (lambda: T.scatter_add(jnp.zeros((3, 4)), 0, jnp.zeros((2, 5), jnp.int32), jnp.ones((5, 6))),
     ValueError, r"larger than `input`.*dim 1"),
    (lambda: T.scatter_add(jnp.zeros((3, 4)), 0, jnp.zeros((6, 4), jnp.int32), jnp.ones((5, 6))),
     ValueError, r"larger than `src`.*dim 0"),
    (lambda: T.scatter_add(jnp.zeros(3), 0, jnp.array([0]), jnp.ones(1, jnp.int32)),
     TypeError, "`src` has dtype int32 but `input` has float32"),
    (lambda: T.scatter_add(jnp.zeros(3), 0, jnp.array([0.0]), jnp.ones(1)),
     TypeError, "`index` must have an integer dtype"),
    (lambda: T.scatter_add(jnp.zeros(3), 1, jnp.array([0]), jnp.ones(1)),
     IndexError, r"`dim`=1 is out of range"),
    (lambda: T.scatter_add(jnp.zeros(3), 0, jnp.array([3]), jnp.ones(1)),
     IndexError, r"contains 3, out of range for `input` along dim=0 of size 3 \(valid range "
                 r"\[0, 3\)\)"),
    (lambda: T.scatter_reduce(jnp.zeros(3), 0, jnp.array([-1]), jnp.ones(1), "sum"),
     IndexError, "negative values .* never wrap"),
    (lambda: T.scatter_reduce(jnp.zeros(3), 0, jnp.array([0]), jnp.ones(1), "add"),
     ValueError, "'sum' and 'prod'"),
    (lambda: T.scatter_reduce(jnp.zeros(3, jnp.complex64), 0, jnp.array([0]),
                              jnp.ones(1, jnp.complex64), "amax"), TypeError, "complex"),
    (lambda: T.scatter(jnp.zeros(3), 0, jnp.array([0]), jnp.ones(1), value=2.0),
     TypeError, "exactly one"),
    (lambda: T.scatter(jnp.zeros(3), 0, jnp.array([0])), TypeError, "exactly one"),
    (lambda: T.scatter(jnp.zeros(3), 0, jnp.array([0]), jnp.ones(1), reduce="mean"),
     ValueError, "'add' or 'multiply'"),
    (lambda: T.scatter(jnp.zeros((3, 2)), 0, jnp.zeros((5, 3), jnp.int32), 1.0),
     ValueError, "larger than `input`"),
    (lambda: T.index_add(jnp.zeros((3, 4)), 0, jnp.array([0, 1]), jnp.ones((3, 4))),
     ValueError, "`index` has 2 entries but `source` has 3"),
    (lambda: T.index_add(jnp.zeros((3, 4)), 0, jnp.array([[0]]), jnp.ones((1, 4))),
     ValueError, "must be a vector"),
    (lambda: T.index_add(jnp.zeros((3, 4)), 0, jnp.array([0]), jnp.ones((1, 5))),
     ValueError, "must match `input`"),
    (lambda: T.index_add(jnp.zeros(3), 0, jnp.array([0]), jnp.ones(())),
     ValueError, "must match `input`"),
    (lambda: T.index_add(jnp.zeros(3), 0, jnp.array([0]), jnp.ones(1), alpha=jnp.ones(2)),
     TypeError, "`alpha` must be a number"),
    (lambda: T.index_reduce(jnp.zeros(3), 0, jnp.array([0]), jnp.ones(1), "sum"),
     ValueError, "use index_add"),
    (lambda: T.index_reduce(jnp.zeros(3), 0, jnp.array([3]), jnp.ones(1), "amax"),
     IndexError, r"valid range \[0, 3\)"),
    (lambda: T.index_select(jnp.array(5.0), 0, jnp.array([0, 0])), ValueError, "exactly one"),
    (lambda: T.index_select(jnp.zeros(4), 0, jnp.array([-1])), IndexError, "negative"),
    (lambda: T.gather(jnp.zeros((3, 4)), 1, jnp.zeros((4, 2), jnp.int32)), ValueError,
     "larger than `input` .* at dim 0"),
    (lambda: T.gather(jnp.zeros((3, 4)), 1, jnp.array([[4]])), IndexError, "contains 4"),
    (lambda: T.scatter_reduce(np.zeros(3), 0, [0], np.ones(1), "sum",
                              include_self=jnp.array(True)), TypeError, "include_self"),
])
def test_errors_name_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_torch_tensor_gets_the_conversion_hint():
    class FakeTensor:
        __module__ = "torch"
    with pytest.raises(TypeError, match="dlpack.to_jax"):
        T.gather(FakeTensor(), 0, jnp.array([0]))


# ----------------------------------------------------------------------------- jit / vmap

def _all_ops(x, i, s, xi, si):
    return [
        T.scatter_reduce(x, 0, i, s, "amax", include_self=False),
        T.scatter_reduce(x, 0, i, s, "mean"),
        T.scatter_reduce(x, 0, i, s, "prod", include_self=False),
        T.scatter_add(x, 0, i, s),
        T.scatter(x, 0, i[:2], s),
        T.gather(x, 0, i),
        T.index_add(xi, 0, i[:, 0], si, alpha=0.5),
        T.index_reduce(xi, 0, i[:, 0], si, "amin"),
        T.index_select(xi, 0, i[:, 0]),
    ]


def _inputs(dtype=jnp.float32):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.integers(-2, 3, size=(4, 3)) / 2, dtype)
    i = jnp.asarray(np.stack([rng.permutation(4)[:3] for _ in range(3)], 1).repeat(2, 0)[:5])
    s = jnp.asarray(rng.integers(-2, 3, size=(6, 3)) / 2, dtype)
    return x, i, s, x, s[:5]


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float16])
def test_jit_equals_eager(dtype):
    args = _inputs(dtype)
    eager = _all_ops(*args)
    jitted = jax.jit(_all_ops)(*args)
    for e, j in zip(eager, jitted):
        np.testing.assert_array_equal(np.asarray(e, np.float32), np.asarray(j, np.float32))
    loss = lambda x, s: sum(jnp.sum(o.astype(F32)) for o in _all_ops(x, args[1], s, x, s[:5]))
    ge = jax.grad(loss, argnums=(0, 1))(args[0], args[2])
    gj = jax.jit(jax.grad(loss, argnums=(0, 1)))(args[0], args[2])
    for e, j in zip(ge, gj):
        np.testing.assert_allclose(np.asarray(e, np.float32), np.asarray(j, np.float32),
                                   rtol=2e-3)


def test_vmap_over_a_batch_of_indices_and_values():
    x, i, s, xi, si = _inputs()
    batch_i = jnp.stack([i, i[::-1]])
    batch_s = jnp.stack([s, -s])
    out = jax.vmap(lambda i, s: T.scatter_reduce(x, 0, i, s, "amax"))(batch_i, batch_s)
    for b in range(2):
        np.testing.assert_array_equal(out[b], T.scatter_reduce(x, 0, batch_i[b], batch_s[b],
                                                               "amax"))
    sel = jax.vmap(lambda i: T.index_select(xi, 0, i))(batch_i[:, :, 0])
    assert sel.shape == (2, 5, 3)
    half = jax.vmap(lambda s: T.index_add(jnp.zeros(2, jnp.float16), 0, jnp.array([0, 0, 1]),
                                          s))(jnp.ones((3, 3), jnp.float16))
    assert half.tolist() == [[2.0, 1.0]] * 3


def test_traced_bad_ids_are_dropped_and_checked_raises():
    x = jnp.zeros(3)
    f = jax.jit(lambda i: T.scatter_add(x, 0, i, jnp.ones(3)))
    assert f(jnp.array([0, -1, 5])).tolist() == [1.0, 0.0, 0.0]   # never wrapped
    with pytest.raises(Exception, match=r"values outside \[0, 3\)"):
        checked(f)(jnp.array([0, -1, 5]))
    g = jax.jit(lambda i: T.gather(jnp.arange(1.0, 4.0), 0, i))
    assert g(jnp.array([-1, 1, 7])).tolist() == [0.0, 2.0, 0.0]   # bad ids read 0
    with pytest.raises(Exception, match="index"):
        checked(g)(jnp.array([-1, 1, 7]))
    h = jax.jit(lambda i: T.index_add(jnp.zeros(2, jnp.float16), 0, i,
                                      jnp.ones(3, jnp.float16)))
    assert h(jnp.array([0, 9, 1])).tolist() == [1.0, 1.0]


def test_static_arguments_under_jit():
    x = jnp.zeros(3)
    with pytest.raises(TypeError, match="`alpha` must be a Python number"):
        jax.jit(lambda a: T.index_add(x, 0, jnp.array([0]), jnp.ones(1), alpha=a))(2.0)
    with pytest.raises(TypeError, match="`include_self` must be a Python bool"):
        jax.jit(lambda b: T.scatter_reduce(x, 0, jnp.array([0]), jnp.ones(1), "sum",
                                           include_self=b))(True)
