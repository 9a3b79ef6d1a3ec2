"""Proofs for every entry of torch2jax_ops.parity.deviations.DEVIATIONS.

Each test shows what torch_scatter does, and proves our answer right with an
independent computation (finite differences in float64, or a direct formula).
Bad indices are never fed to torch_scatter's C++ kernels: they corrupt memory.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch_scatter

import torch2jax_ops as t2j
from torch2jax_ops import dtypes
from torch2jax_ops.parity import DEVIATIONS


def central_difference(f, x, eps=1e-6):
    """d sum(f(x) * w) / dx with a fixed random w, by central differences (float64)."""
    x = np.asarray(x, np.float64)
    w = np.random.default_rng(1).standard_normal(np.shape(f(jnp.asarray(x))))
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = eps
        grad[i] = (np.sum(np.asarray(f(jnp.asarray(x + step))) * w)
                   - np.sum(np.asarray(f(jnp.asarray(x - step))) * w)) / (2 * eps)
    return grad, w


def test_every_deviation_has_its_proof_here():
    names = {name for name in globals() if name.startswith("test_")}
    for deviation in DEVIATIONS:
        path, test = deviation.proof.split("::")
        assert path == "parity_tests/test_deviations.py" and test in names, deviation.id


def test_scatter_mul_gradient_at_zero_is_product_of_others():
    src = np.array([0.0, 2.0, 3.0, 0.0, 5.0, 0.0, 0.0, 7.0])
    index = np.array([0, 0, 0, 1, 1, 2, 2, 3])
    with dtypes.x64():
        f = lambda x: t2j.scatter_mul(x, jnp.asarray(index))
        fd, w = central_difference(f, src)
        ours = np.asarray(jax.grad(lambda x: jnp.sum(f(x) * jnp.asarray(w)))(jnp.asarray(src)))
    # independent formula: product of the other members of the group, times w[group]
    expected = np.array([np.prod(np.delete(src[index == index[i]],
                                           np.flatnonzero(np.flatnonzero(index == index[i]) == i)))
                         * w[index[i]] for i in range(len(src))])
    np.testing.assert_allclose(ours, expected, rtol=1e-12)
    np.testing.assert_allclose(ours, fd, rtol=1e-6, atol=1e-8)
    # torch_scatter: 0 for the zero element of group 0 (true value 6 * w[0])
    s = torch.tensor(src, requires_grad=True)
    torch_scatter.scatter_mul(s, torch.tensor(index)).mul(torch.tensor(w)).sum().backward()
    assert s.grad[0] == 0 and ours[0] == pytest.approx(6 * w[0])


def test_scatter_mul_of_empty_src_is_the_empty_product():
    empty, index = np.zeros((0, 3)), np.zeros((0,), np.int64)
    ours = t2j.scatter_mul(jnp.asarray(empty, jnp.float32), jnp.asarray(index), 0, dim_size=2)
    np.testing.assert_array_equal(np.asarray(ours), np.ones((2, 3)))
    # the same rule torch_scatter itself applies to empty groups of a non-empty src
    groups = torch_scatter.scatter_mul(torch.ones(1, 3), torch.tensor([0]), 0, dim_size=2)
    np.testing.assert_array_equal(groups.numpy(), np.ones((2, 3)))
    theirs = torch_scatter.scatter_mul(torch.zeros(0, 3), torch.tensor(index), 0, dim_size=2)
    np.testing.assert_array_equal(theirs.numpy(), np.zeros((2, 3)))


@pytest.mark.parametrize("op", ["scatter_min", "scatter_max", "scatter_mul"])
def test_out_gradient_matches_finite_differences(op):
    src = np.array([1.0, 5.0, 2.0, -3.0, 0.5])
    index = np.array([0, 0, 1, 2, 2])
    out = np.array([3.0, 0.25, -1.0, 4.0])  # group 3 is empty: out alone decides it
    fn = getattr(t2j, op)

    def f(o):
        result = fn(jnp.asarray(src), jnp.asarray(index), 0, o)
        return result[0] if isinstance(result, tuple) else result

    with dtypes.x64():
        fd, w = central_difference(f, out)
        ours = np.asarray(jax.grad(lambda o: jnp.sum(f(o) * jnp.asarray(w)))(jnp.asarray(out)))
    np.testing.assert_allclose(ours, fd, rtol=1e-6, atol=1e-8)
    assert np.any(ours != 0)
    # torch_scatter: `out` receives no gradient at all
    o = torch.tensor(out, requires_grad=True)
    res = getattr(torch_scatter, op)(torch.tensor(src), torch.tensor(index), 0, o.clone())
    (res[0] if isinstance(res, tuple) else res).sum().backward()
    assert o.grad is None or torch.all(o.grad == 0)


@pytest.mark.parametrize("op", ["scatter_sum", "scatter_mean", "scatter_mul", "scatter_min",
                                "scatter_max"])
def test_bad_indices_raise_instead_of_corrupting_memory(op):
    fn = getattr(t2j, op)
    src = jnp.arange(4.0)
    with pytest.raises(IndexError, match=r"`index`.*negative.*\[0, 3\)"):
        fn(src, jnp.array([0, 1, -1, 2]), dim_size=3)
    with pytest.raises(IndexError, match=r"`index` contains 7.*\[0, 3\)"):
        fn(src, jnp.array([0, 1, 7, 2]), dim_size=3)
    # under jit the bad elements are dropped, never wrapped around ...
    jitted = jax.jit(lambda s, i: fn(s, i, dim_size=3))
    bad = jnp.array([0, 1, -1, 2])
    got = jitted(src, bad)
    got = got[0] if isinstance(got, tuple) else got
    expected = fn(src[jnp.array([0, 1, 3])], jnp.array([0, 1, 2]), dim_size=3)
    expected = expected[0] if isinstance(expected, tuple) else expected
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))
    # ... and the checked mode raises
    with pytest.raises(Exception, match=r"`index` has values outside \[0, 3\)"):
        t2j.checked(jitted)(src, bad)


def test_mean_with_index_broadcast_along_dim_is_the_mean():
    src = np.arange(5.0)
    ours = t2j.scatter_mean(jnp.asarray(src), jnp.array([0]))
    np.testing.assert_allclose(np.asarray(ours), [src.mean()])
    # torch_scatter broadcasts the index for the sum but counts the unexpanded index
    theirs = torch_scatter.scatter_mean(torch.tensor(src), torch.tensor([0]))
    np.testing.assert_allclose(theirs.numpy(), [src.sum()])


def test_mean_of_empty_src_with_nonempty_index_is_empty():
    src, index = np.zeros((1, 0), np.float32), np.array([0])
    assert t2j.scatter_mean(jnp.asarray(src), jnp.asarray(index), 0).shape == (0, 0)
    np.testing.assert_array_equal(
        np.asarray(t2j.scatter_mean(jnp.asarray(src), jnp.asarray(index), 0, dim_size=2)),
        np.zeros((2, 0)))
    # scatter_sum (same size rule) agrees with us; torch_scatter's mean raises
    assert torch_scatter.scatter_sum(torch.tensor(src), torch.tensor(index), 0).shape == (0, 0)
    with pytest.raises(RuntimeError, match="out of bounds"):
        torch_scatter.scatter_mean(torch.tensor(src), torch.tensor(index), 0)


def test_out_shape_and_dim_size_conflicts_raise():
    src, index = jnp.ones((2, 3)), jnp.array([0, 1])
    with pytest.raises(ValueError, match=r"`out` has shape \(2, 4\), expected \(\*, 3\)"):
        t2j.scatter_sum(src, index, 0, out=jnp.zeros((2, 4)))
    with pytest.raises(ValueError, match=r"`dim_size`=5 disagrees with `out`"):
        t2j.scatter_sum(src, index, 0, out=jnp.zeros((2, 3)), dim_size=5)
    # torch_scatter writes a sub-block of a larger out
    partial = torch_scatter.scatter_sum(torch.ones(2, 3), torch.tensor([0, 1]), 0,
                                        out=torch.zeros(2, 4))
    assert partial[:, 3].eq(0).all() and partial[:, :3].eq(1).all()
