"""nn._state.random_draw / replay_scope: the port's random ops draw from their key, or
inside a replay take recorded draws in order (what compare_modules feeds them)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from torch2jax_ops.nn import key_scope
from torch2jax_ops.nn import _functions_nn as fn
from torch2jax_ops.nn._state import Draw, replay_scope


def test_outside_a_replay_the_ops_draw_from_the_key():
    with key_scope(jax.random.key(0)):
        a = fn.randperm(5)
    with key_scope(jax.random.key(0)):
        b = fn.randperm(5)
    np.testing.assert_array_equal(a, b)
    assert sorted(np.asarray(a).tolist()) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match=r"randperm: the port draws random numbers here, so "
                                         r"it needs a PRNG key"):
        fn.randperm(5)


def test_a_replay_returns_the_recorded_draws_in_order_and_applies_each_formula():
    draws = [Draw("randperm", "randperm", np.array([2, 0, 1])),
             Draw("uniform", "uniform_", np.array([0.0, 0.5, 0.25], np.float32)),
             Draw("keep", "dropout", np.array([True, False, True]))]
    with replay_scope(draws) as taken:
        perm = fn.randperm(3)
        u = fn.uniform_(jnp.zeros(3), -2.0, 2.0)
        dropped = fn.dropout(jnp.array([1.0, 2.0, 3.0]), p=0.5)
    assert len(taken) == 3
    np.testing.assert_array_equal(perm, [2, 0, 1])
    np.testing.assert_allclose(u, [-2.0, 0.0, -1.0])          # from + (to - from) * u
    np.testing.assert_allclose(dropped, [2.0, 0.0, 6.0])       # kept ones scaled by 1/(1-p)


def test_a_replay_refuses_a_draw_of_another_kind_or_shape_or_past_the_last():
    with replay_scope([Draw("normal", "randn", np.zeros(3, np.float32))]):
        with pytest.raises(ValueError, match=r"draw #1 is uniform of shape \(3,\), but "
                                             r"torch's was normal of shape \(3,\)"):
            fn.rand(3)
        with pytest.raises(ValueError, match=r"normal of shape \(4,\), but torch's was "
                                             r"normal of shape \(3,\)"):
            fn.randn(4)
    with replay_scope([]):
        with pytest.raises(ValueError, match=r"after the 0 draw\(s\)"):
            fn.randn(3)


def test_a_replay_under_jit_bakes_the_draws_in():
    draws = [Draw("keep", "dropout", np.array([False, True]))]

    @jax.jit
    def f(x):
        with replay_scope(draws):
            return fn.dropout(x, p=0.75)

    np.testing.assert_allclose(f(jnp.array([1.0, 1.0])), [0.0, 4.0])


def test_eval_mode_and_p_zero_draw_nothing():
    with replay_scope([]) as taken:
        x = jnp.arange(3.0)
        np.testing.assert_array_equal(fn.dropout(x, 0.5, training=False), x)
        np.testing.assert_array_equal(fn.dropout(x, 0.0), x)
        np.testing.assert_array_equal(fn.dropout(x, 1.0), jnp.zeros(3))
    assert taken == []
    with pytest.raises(ValueError, match="between 0 and 1"):
        fn.dropout(x, 1.5, training=False)
