"""torch-free tests of the derivative APIs: randomness under vmap, nth_grad's range rules,
Hutchinson's estimator, dependence analysis, module names."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import torch2jax_ops as t2j
from torch2jax_ops import func, nn
from torch2jax_ops.autograd import dependencies


def test_vmap_randomness_with_typed_keys():
    key = jax.random.key(0)
    draw = lambda x, k: x + jax.random.normal(k)   # noqa: E731
    xs = jnp.zeros(4)
    with pytest.raises(ValueError, match="randomness='different'"):
        func.vmap(draw, in_dims=(0, None))(xs, key)
    different = func.vmap(draw, in_dims=(0, None), randomness="different")(xs, key)
    same = func.vmap(draw, in_dims=(0, None), randomness="same")(xs, key)
    assert len(set(np.asarray(different).tolist())) == 4
    assert len(set(np.asarray(same).tolist())) == 1
    # "different" = one key per element, split from the given one
    np.testing.assert_array_equal(
        different, jax.vmap(draw)(xs, jax.random.split(key, 4)))
    # a batch of keys is explicit: fine in every mode
    mapped = func.vmap(draw)(xs, jax.random.split(key, 4))
    np.testing.assert_array_equal(mapped, different)


@pytest.mark.parametrize("chunk", [1, 3, 7, 8, 100])
def test_vmap_chunks_give_the_unchunked_result(chunk):
    x = jnp.arange(7 * 3.0).reshape(3, 7)
    f = lambda a, b: (jnp.sin(a) * b, a.sum())   # noqa: E731
    whole = func.vmap(f, in_dims=(1, None), out_dims=(1, 0))(x, 2.0)
    chunked = func.vmap(f, in_dims=(1, None), out_dims=(1, 0), chunk_size=chunk)(x, 2.0)
    for w, c in zip(whole, chunked):
        np.testing.assert_allclose(c, w, rtol=1e-6)
    assert chunked[0].shape == (3, 7)


def test_jacrev_chunks_and_jacfwd_agree():
    f = lambda x: jnp.tanh(jnp.outer(x, x)).ravel()   # noqa: E731
    x = jnp.linspace(-1, 1, 5)
    base = jax.jacrev(f)(x)
    for chunk in (None, 1, 4, 50):
        np.testing.assert_allclose(func.jacrev(f, chunk_size=chunk)(x), base, rtol=1e-6)
    np.testing.assert_allclose(func.jacfwd(f)(x), base, rtol=1e-6)


def test_nth_grad_orders_concrete_traced_and_out_of_range():
    x = 0.7
    expected = [np.sin(x), np.cos(x), -np.sin(x), -np.cos(x), np.sin(x)]
    for k, e in enumerate(expected):
        np.testing.assert_allclose(func.nth_grad(jnp.sin, k, x, max_order=4), e, rtol=1e-6)
    orders = jnp.array([0, 1, 2, 3, 4, 5, -1])
    got = jax.jit(jax.vmap(lambda k: func.nth_grad(jnp.sin, k, x, max_order=4)))(orders)
    np.testing.assert_allclose(got[:5], expected, rtol=1e-6)
    assert np.isnan(got[5]) and np.isnan(got[6])   # traced and outside: NaN, never clamped
    with pytest.raises(ValueError, match=r"order=5 is outside \[0, max_order=4\]"):
        func.nth_grad(jnp.sin, 5, x, max_order=4)
    with pytest.raises(ValueError, match="max_order"):
        func.nth_grad(jnp.sin, 1, x, max_order=-1)
    with pytest.raises(TypeError, match="scalar"):
        func.nth_grad(jnp.sin, 1, jnp.ones(3))
    checked = t2j.checked(jax.jit(lambda k: func.nth_grad(jnp.sin, k, x, max_order=4)))
    np.testing.assert_allclose(checked(2), -np.sin(x), rtol=1e-6)
    with pytest.raises(Exception, match="order is outside"):
        checked(9)


def test_nth_grad_other_arguments_are_held_fixed():
    f = lambda a, x: a * x ** 3   # noqa: E731
    np.testing.assert_allclose(func.nth_grad(f, 2, 2.0, 0.5, argnum=1), 2.0 * 6 * 0.5)


def test_jacobian_trace_is_unbiased_and_reproducible():
    w = jax.random.normal(jax.random.key(1), (6, 6))
    f = lambda z: jnp.tanh(w @ z)   # noqa: E731
    x = jnp.linspace(-0.5, 0.5, 6)
    exact = float(jnp.trace(jax.jacfwd(f)(x)))
    estimates = jnp.array([func.jacobian_trace(f, x, key=jax.random.key(s), num_samples=64)
                           for s in range(40)])
    # the mean of 40 independent estimates is within 4 standard errors of the trace
    se = float(jnp.std(estimates)) / np.sqrt(40)
    assert abs(float(jnp.mean(estimates)) - exact) < 4 * se + 1e-6
    again = func.jacobian_trace(f, x, key=jax.random.key(0), num_samples=64)
    assert float(again) == float(estimates[0])
    # diagonal Jacobian: Rademacher probes are exact
    np.testing.assert_allclose(
        func.jacobian_trace(jnp.sin, x, key=jax.random.key(0), num_samples=1),
        jnp.cos(x).sum(), rtol=1e-6)
    with pytest.raises(ValueError, match="num_samples"):
        func.jacobian_trace(f, x, key=jax.random.key(0), num_samples=0)
    with pytest.raises(ValueError, match="square"):
        func.jacobian_trace(lambda z: z.sum(), x, key=jax.random.key(0), num_samples=2)
    # differentiable w.r.t. what func closes over (e.g. CNF training)
    g = jax.grad(lambda s: func.jacobian_trace(lambda z: s * jnp.sin(z), x,
                                               key=jax.random.key(0), num_samples=2))(1.0)
    np.testing.assert_allclose(g, jnp.cos(x).sum(), rtol=1e-6)


def test_dependencies_follow_torch_graph_rules():
    @jax.jit
    def helper(a, b):
        return a * 2, b

    def f(x, y, z):
        first, _ = helper(x, y)
        return (first, (x > 0).astype(x.dtype) * 3, jax.lax.stop_gradient(y) + z,
                jax.lax.cond(True, lambda: x, lambda: y), x * 0, jnp.zeros_like(x))

    deps = dependencies(f, jnp.ones(2), jnp.ones(2), jnp.ones(2))
    assert deps == [{0}, set(), {2}, {0, 1}, {0}, set()]


def test_module_names_are_torch_state_dict_keys():
    import equinox as eqx

    class TwoLayer(eqx.Module):
        lin1: nn.Linear
        lin2: nn.Linear

    model = TwoLayer(nn.Linear(jnp.ones((6, 4)), jnp.zeros(6)),
                     nn.Linear(jnp.ones((3, 6)), jnp.zeros(3)))
    assert list(nn.state_dict(model)) == ["lin1.weight", "lin1.bias", "lin2.weight", "lin2.bias"]
    layers = [{"w": jnp.ones(2)}, (jnp.ones(1), jnp.arange(3))]
    assert list(nn.state_dict(layers)) == ["0.w", "1.0", "1.1"]
    assert [n for n, _ in nn.named_parameters(layers)] == ["0.w", "1.0"]
