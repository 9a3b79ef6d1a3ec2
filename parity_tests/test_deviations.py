"""Proofs for every entry of torch2jax_ops.parity.deviations.DEVIATIONS.

Each test shows what torch_scatter does, and proves our answer right with an
independent computation (finite differences in float64, or a direct formula).
Bad indices are never fed to torch_scatter's C++ kernels: they corrupt memory.
"""
import subprocess
import sys
import textwrap

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


def assert_out_gradient_is_exact_and_torch_gives_none(op, src, link, out, *between):
    """Our d result / d out against finite differences; torch_scatter's is None or 0."""
    fn = getattr(t2j, op)

    def f(o):
        result = fn(jnp.asarray(src), jnp.asarray(link), *between, o)
        return result[0] if isinstance(result, tuple) else result

    with dtypes.x64():
        fd, w = central_difference(f, out)
        ours = np.asarray(jax.grad(lambda o: jnp.sum(f(o) * jnp.asarray(w)))(jnp.asarray(out)))
    np.testing.assert_allclose(ours, fd, rtol=1e-6, atol=1e-8)
    assert np.any(ours != 0)
    o = torch.tensor(out, requires_grad=True)
    res = getattr(torch_scatter, op)(torch.tensor(src), torch.tensor(link), *between, o.clone())
    (res[0] if isinstance(res, tuple) else res).sum().backward()
    assert o.grad is None or torch.all(o.grad == 0)


@pytest.mark.parametrize("op", ["scatter_min", "scatter_max", "scatter_mul"])
def test_out_gradient_matches_finite_differences(op):
    # group 3 is empty: out alone decides it
    assert_out_gradient_is_exact_and_torch_gives_none(
        op, np.array([1.0, 5.0, 2.0, -3.0, 0.5]), np.array([0, 0, 1, 2, 2]),
        np.array([3.0, 0.25, -1.0, 4.0]), 0)


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
    # segment_coo / gather: torch_scatter ignores dim_size beside out, and gather_coo into a
    # wrongly sized out returns zeros; we name the conflict
    with pytest.raises(ValueError, match=r"`dim_size`=5 disagrees with `out`"):
        t2j.segment_coo(src, index, out=jnp.zeros((2, 3)), dim_size=5)
    ignored = torch_scatter.segment_coo(torch.ones(2, 3), torch.tensor([0, 1]),
                                        out=torch.zeros(2, 3), dim_size=5)
    assert ignored.shape == (2, 3)
    with pytest.raises(ValueError, match=r"`out` has 5 rows along axis 0, but `index` has 3"):
        t2j.gather_coo(src, jnp.array([0, 1, 1]), out=jnp.zeros((5, 3)))
    garbage = torch_scatter.gather_coo(torch.ones(2, 3), torch.tensor([0, 1, 1]),
                                       out=torch.zeros(5, 3))
    assert garbage.eq(0).all()  # nothing of src was gathered
    with pytest.raises(ValueError, match=r"`dim_size`=4 disagrees with `out`"):
        t2j.gather_csr(src, jnp.array([0, 1, 2]), out=jnp.zeros((3, 3)), dim_size=4)


# ------------------------------------------------------------------ segment / gather

def dies_in_torch(code: str) -> int:
    """Run torch_scatter code in a child process; returns its exit status (<0: a signal)."""
    script = "import torch, torch_scatter\n" + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", script], capture_output=True).returncode


def test_csr_gradient_outside_the_pointer_range_is_zero():
    src = np.arange(1.0, 7.0)
    indptr = np.array([1, 3, 4])  # positions 0, 4, 5 belong to no segment
    for reduce in ("sum", "mean"):
        with dtypes.x64():
            f = lambda x: t2j.segment_csr(x, jnp.asarray(indptr), reduce=reduce)
            fd, w = central_difference(f, src)
            ours = np.asarray(jax.grad(lambda x: jnp.sum(f(x) * jnp.asarray(w)))(
                jnp.asarray(src)))
        np.testing.assert_allclose(ours, fd, rtol=1e-6, atol=1e-9)
        assert ours[0] == ours[4] == ours[5] == 0
    # torch_scatter: sum leaves uninitialised memory there, mean cannot backpropagate
    s = torch.tensor(src, requires_grad=True)
    with pytest.raises(RuntimeError, match="must match the size"):
        torch_scatter.segment_csr(s, torch.tensor(indptr), reduce="mean").sum().backward()
    # sum: inside the range torch_scatter agrees; outside it returns torch.empty's
    # contents, whatever the allocator had (so nothing to assert about their values)
    s = torch.tensor(src, requires_grad=True)
    torch_scatter.segment_csr(s, torch.tensor(indptr)).sum().backward()
    np.testing.assert_array_equal(s.grad[1:4].numpy(), [1.0, 1.0, 1.0])


@pytest.mark.parametrize("fmt", ["csr", "coo"])
def test_segment_min_max_report_no_stale_arg(fmt):
    inf = float("inf")
    src = np.array([3.0, -inf, -inf, 2.0, 5.0])
    link = np.array([0, 1, 3, 5]) if fmt == "csr" else np.array([0, 1, 1, 2, 2])
    fn = getattr(t2j, f"segment_max_{fmt}")
    value, arg = fn(jnp.asarray(src), jnp.asarray(link))
    # the rules of scatter_max, computed independently here
    ref_value, ref_arg = t2j.scatter_max(jnp.asarray(src), jnp.array([0, 1, 1, 2, 2]))
    np.testing.assert_array_equal(np.asarray(value), [3.0, 0.0, 5.0])
    np.testing.assert_array_equal(np.asarray(arg), [0, 5, 4])
    np.testing.assert_array_equal(np.asarray(value), np.asarray(ref_value))
    np.testing.assert_array_equal(np.asarray(arg), np.asarray(ref_arg))
    w = np.array([1.0, 10.0, 100.0])
    grad = jax.grad(lambda x: jnp.sum(fn(x, jnp.asarray(link))[0] * w))(jnp.asarray(src))
    np.testing.assert_array_equal(np.asarray(grad), [1.0, 0.0, 0.0, 0.0, 100.0])
    # torch_scatter: the all -inf segment reports the previous segment's arg (0) ...
    s = torch.tensor(src, requires_grad=True)
    t_value, t_arg = getattr(torch_scatter, f"segment_max_{fmt}")(s, torch.tensor(link))
    assert t_arg[1] == 0
    assert t_value[1] == (torch.finfo(torch.float64).min if fmt == "csr" else 0)
    t_value.backward(torch.tensor(w))
    assert s.grad[0] == 10.0  # ... so element 0 gets segment 1's cotangent, not its own


def test_csr_with_zero_segments_is_empty():
    ours = t2j.segment_csr(jnp.ones((3, 2)), jnp.array([0]))
    assert ours.shape == (0, 2)
    assert dies_in_torch("torch_scatter.segment_csr(torch.ones(3, 2), torch.tensor([0]))") < 0


def test_gather_csr_before_the_first_pointer_is_zero():
    src, indptr = np.array([1.0, 2.0]), np.array([2, 3, 5])
    ours = np.asarray(t2j.gather_csr(jnp.asarray(src), jnp.asarray(indptr)))
    np.testing.assert_array_equal(ours, [0.0, 0.0, 1.0, 2.0, 2.0])  # by the definition
    out = np.full(6, 9.0)
    with_out = t2j.gather_csr(jnp.asarray(src), jnp.asarray(indptr), jnp.asarray(out))
    theirs = torch_scatter.gather_csr(torch.tensor(src), torch.tensor(indptr),
                                      torch.tensor(out))
    np.testing.assert_array_equal(np.asarray(with_out), theirs.numpy())
    # torch_scatter without out: positions 0 and 1 come from torch.empty (never written)
    np.testing.assert_array_equal(
        torch_scatter.gather_csr(torch.tensor(src), torch.tensor(indptr))[2:].numpy(), ours[2:])


def test_segment_coo_accumulates_into_its_own_row_of_out():
    src, index = np.array([1.0, 2.0, 3.0, 4.0, 5.0]), np.array([1, 1, 2, 4, 4])
    out = np.array([10.0, 20.0, 30.0, 40.0, 50.0])
    ours = t2j.segment_coo(jnp.asarray(src), jnp.asarray(index), jnp.asarray(out))
    expected = out.copy()
    np.add.at(expected, index, src)  # the independent formula
    np.testing.assert_array_equal(np.asarray(ours), expected)  # [10, 23, 33, 40, 59]
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(
        t2j.scatter_sum(jnp.asarray(src), jnp.asarray(index), 0, jnp.asarray(out))))
    theirs = torch_scatter.segment_coo(torch.tensor(src), torch.tensor(index),
                                       torch.tensor(out))
    assert theirs[1] == 13.0  # out[0] + 1 + 2: started from the wrong row of out


@pytest.mark.parametrize("op", ["segment_sum_coo", "segment_mean_coo", "segment_max_coo",
                                "gather_csr"])
def test_segment_out_gradient_matches_finite_differences(op):
    src = np.array([1.0, 5.0, 2.0, -3.0, 0.5])
    if op == "gather_csr":  # out is kept before indptr[0] and from indptr[-1] on
        assert_out_gradient_is_exact_and_torch_gives_none(
            op, src[:3], np.array([1, 3, 5, 6]), np.array([0.5, 1.5, -2.0, 3.0, 4.0, 1.0, 2.0]))
    else:
        assert_out_gradient_is_exact_and_torch_gives_none(
            op, src, np.array([0, 0, 1, 3, 3]), np.array([3.0, 0.25, -1.0, 4.0]))


def test_segment_coo_broadcast_index_has_a_gradient():
    rng = np.random.default_rng(0)
    src, index = rng.standard_normal((3, 8)), np.array([[0, 0, 1, 1, 1, 2, 3, 3]])
    with dtypes.x64():
        f = lambda x: t2j.segment_coo(x, jnp.asarray(index), reduce="mean")
        fd, w = central_difference(f, src)
        ours = np.asarray(jax.grad(lambda x: jnp.sum(f(x) * jnp.asarray(w)))(jnp.asarray(src)))
    np.testing.assert_allclose(ours, fd, rtol=1e-6, atol=1e-9)
    s = torch.tensor(src, requires_grad=True)
    forward = torch_scatter.segment_coo(s, torch.tensor(index), reduce="mean")
    np.testing.assert_allclose(forward.detach().numpy(), np.asarray(f(jnp.asarray(src))))
    with pytest.raises(RuntimeError, match="INTERNAL ASSERT FAILED"):
        forward.sum().backward()


def test_empty_segment_inputs_are_well_defined():
    empty, no_index = jnp.zeros((0, 3)), jnp.zeros((0,), jnp.int32)
    grad = jax.grad(lambda s: jnp.sum(t2j.segment_coo(s, no_index, dim_size=4)))(empty)
    assert grad.shape == (0, 3)
    assert t2j.gather_coo(jnp.ones((5, 3)), no_index).shape == (0, 3)
    grad = jax.grad(lambda s: jnp.sum(t2j.gather_coo(s, jnp.zeros(4, jnp.int32))))(empty)
    assert grad.shape == (0, 3)
    assert dies_in_torch("""
        s = torch.zeros(0, 3, requires_grad=True)
        idx = torch.zeros(0, dtype=torch.long)
        torch_scatter.segment_coo(s, idx, dim_size=4).sum().backward()""") < 0
    assert dies_in_torch("torch_scatter.gather_coo(torch.ones(5, 3), "
                         "torch.zeros(0, dtype=torch.long))") < 0
    assert dies_in_torch("""
        s = torch.zeros(0, 3, requires_grad=True)
        torch_scatter.gather_coo(s, torch.zeros(4, dtype=torch.long)).sum().backward()""") < 0


def test_bad_segment_input_raises():
    src = jnp.arange(5.0)
    with pytest.raises(ValueError, match=r"`index` must be sorted.*index\[3\]=0 follows 2"):
        t2j.segment_coo(src, jnp.array([0, 1, 2, 0, 2]))
    with pytest.raises(ValueError, match=r"`indptr` must be non-decreasing"):
        t2j.segment_csr(src, jnp.array([0, 3, 2, 5]))
    with pytest.raises(ValueError, match=r"`indptr` has the entry 6, beyond src's size 5"):
        t2j.segment_csr(src, jnp.array([0, 3, 6]))
    with pytest.raises(ValueError, match=r"`indptr` has a negative entry"):
        t2j.segment_csr(src, jnp.array([-1, 3, 5]))
    with pytest.raises(IndexError, match=r"`index` contains 5.*\[0, 5\)"):
        t2j.gather_coo(src, jnp.array([0, 5]))
    # under jit: an unsorted index still groups correctly; checked() reports it
    unsorted = jnp.array([0, 1, 2, 0, 2])
    jitted = jax.jit(lambda s, i: t2j.segment_coo(s, i, dim_size=3))
    np.testing.assert_array_equal(np.asarray(jitted(src, unsorted)),
                                  np.asarray(t2j.scatter_sum(src, unsorted, dim_size=3)))
    with pytest.raises(Exception, match="must be sorted"):
        t2j.checked(jitted)(src, unsorted)
    bad_ptr = jax.jit(lambda s, p: t2j.segment_csr(s, p))
    with pytest.raises(Exception, match=r"`indptr` must be non-decreasing with values in"):
        t2j.checked(bad_ptr)(src, jnp.array([0, 3, 9]))
    # torch_scatter: an unsorted index silently gives a wrong sum (no bad memory access here)
    theirs = torch_scatter.segment_coo(torch.arange(5.0), torch.tensor([0, 1, 2, 0, 2]),
                                       reduce="mean")
    assert theirs[0] != 1.5


def test_gather_coo_takes_any_order():
    src, index = np.array([1.0, 2.0, 3.0]), np.array([2, 0, 1, 0])
    np.testing.assert_array_equal(np.asarray(t2j.gather_coo(jnp.asarray(src), jnp.asarray(index))),
                                  src[index])
    with pytest.raises(RuntimeError, match="idx <= next_idx"):
        torch_scatter.gather_coo(torch.tensor(src), torch.tensor(index))


# ------------------------------------------------------------------------- composites

def test_std_gradient_where_the_deviation_is_zero():
    src = np.array([1.0, 2.0, 4.0, 3.0, 3.0])
    index = np.array([0, 0, 1, 2, 2])  # group 1 has one element, group 2 two equal ones
    with dtypes.x64():
        f = lambda x: t2j.scatter_std(x, jnp.asarray(index))
        grad = np.asarray(jax.grad(lambda x: jnp.sum(f(x)))(jnp.asarray(src)))
        fd, w = central_difference(lambda x: f(x)[:2], src)
        smooth = np.asarray(jax.grad(lambda x: jnp.sum(f(x)[:2] * jnp.asarray(w)))(
            jnp.asarray(src)))
    assert np.isfinite(grad).all()
    # groups 0 and 1 (one element: std is constantly 0) agree with finite differences
    np.testing.assert_allclose(smooth[:3], fd[:3], rtol=1e-6, atol=1e-9)
    assert grad[2] == 0 and fd[2] == 0
    assert grad[3] == grad[4] == 0  # the smallest subgradient of |t| * std(v) at t = 0
    s = torch.tensor(src, requires_grad=True)
    torch_scatter.scatter_std(s, torch.tensor(index)).sum().backward()
    assert torch.isnan(s.grad[2:]).all() and torch.isfinite(s.grad[:2]).all()


def test_logsumexp_with_out_keeps_out_and_has_a_gradient():
    src, index = np.array([1.0, 2.0, -1.0]), np.array([0, 0, 2])
    out = np.array([0.5, 3.0, 0.25])  # group 1 has no src
    expected = np.log(np.exp(out) + np.array([np.exp(1) + np.exp(2), 0.0, np.exp(-1.0)]))
    with dtypes.x64():
        f = lambda o: t2j.scatter_logsumexp(jnp.asarray(src), jnp.asarray(index), out=o)
        np.testing.assert_allclose(np.asarray(f(jnp.asarray(out))), expected, rtol=1e-10)
        fd, w = central_difference(f, out)
        ours = np.asarray(jax.grad(lambda o: jnp.sum(f(o) * jnp.asarray(w)))(jnp.asarray(out)))
    np.testing.assert_allclose(ours, fd, rtol=1e-6)
    theirs = torch_scatter.scatter_logsumexp(torch.tensor(src), torch.tensor(index),
                                             out=torch.tensor(out))
    assert theirs[1] == 0.0  # 2.1.2 zeroes the group without src
    np.testing.assert_allclose(theirs[[0, 2]].numpy(), expected[[0, 2]], rtol=1e-10)
    s = torch.tensor(src, requires_grad=True)
    result = torch_scatter.scatter_logsumexp(s, torch.tensor(index), out=torch.tensor(out))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        result.sum().backward()


def test_logsumexp_of_empty_index_is_empty():
    assert t2j.scatter_logsumexp(jnp.zeros((0,)), jnp.zeros((0,), jnp.int32)).shape == (0,)
    with pytest.raises(RuntimeError, match=r"numel\(\) == 0"):
        torch_scatter.scatter_logsumexp(torch.zeros(0), torch.zeros(0, dtype=torch.long))


def test_softmax_of_lowest_finite_group():
    low = float(np.finfo(np.float32).min)
    src, index = np.array([low, low, 1.0], np.float32), np.array([0, 0, 1])
    soft = np.asarray(t2j.scatter_softmax(jnp.asarray(src), jnp.asarray(index)))
    log_soft = np.asarray(t2j.scatter_log_softmax(jnp.asarray(src), jnp.asarray(index)))
    np.testing.assert_allclose(soft, [0.5, 0.5, 1.0])  # two equal scores share evenly
    np.testing.assert_allclose(log_soft, [np.log(0.5), np.log(0.5), 0.0], rtol=1e-6)
    theirs = torch_scatter.scatter_softmax(torch.tensor(src), torch.tensor(index))
    assert torch.isnan(theirs[:2]).all()
    theirs = torch_scatter.scatter_log_softmax(torch.tensor(src), torch.tensor(index))
    assert (theirs[:2] < -1e30).all()


@pytest.mark.parametrize("op", ["scatter_std", "scatter_logsumexp", "scatter_softmax",
                                "scatter_log_softmax"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_composites_are_correctly_rounded(op, dtype):
    rng = np.random.default_rng(3)
    eps = float(jnp.finfo(dtype).eps)
    worst_ours, worst_torch = 0.0, 0.0
    for _ in range(20):
        x = rng.permutation(np.linspace(-3, 3, 40))
        index = torch.tensor(rng.permutation(np.repeat(np.arange(10), 4)))
        xt = torch.tensor(x).to(dtypes.torch_dtype(dtype))
        truth = getattr(torch_scatter, op)(xt.double(), index, 0).numpy()  # exact inputs
        theirs = getattr(torch_scatter, op)(xt, index, 0).double().numpy()
        ours = np.asarray(getattr(t2j, op)(jnp.asarray(xt.float().numpy()).astype(dtype),
                                           jnp.asarray(index.numpy()), 0)).astype(np.float64)
        scale = np.abs(truth) * eps + 1e-30
        worst_ours = max(worst_ours, float(np.max(np.abs(ours - truth) / scale)))
        worst_torch = max(worst_torch, float(np.max(np.abs(theirs - truth) / scale)))
    assert worst_ours <= 0.5 + 1e-3  # correctly rounded
    assert worst_torch > worst_ours
    if dtype != "float16":
        return  # bfloat16 has float32's range: eps=1e-12 does not underflow
    # eps underflows in torch's float16, not in ours
    inf = float("inf")
    src = torch.tensor([inf, 3.0, -inf, -inf]).to(dtypes.torch_dtype(dtype))
    idx = torch.tensor([0, 0, 1, 1])
    ours_src = jnp.asarray(src.float().numpy()).astype(dtype)
    if op == "scatter_logsumexp":
        assert torch_scatter.scatter_logsumexp(src, idx)[0] == 0
        assert float(t2j.scatter_logsumexp(ours_src, jnp.asarray(idx.numpy()))[0]) == float(
            jnp.finfo(dtype).max)
    if op == "scatter_log_softmax":
        assert torch.isnan(torch_scatter.scatter_log_softmax(src, idx)[2:]).all()
        assert (np.asarray(t2j.scatter_log_softmax(ours_src, jnp.asarray(idx.numpy())))[2:]
                == -np.inf).all()


def test_functional_call_unknown_key_raises():
    from torch2jax_ops import func
    from torch2jax_ops.parity.cases.autograd import Linear, TwoLayer, torch_two_layer

    torch.manual_seed(0)
    module = torch_two_layer()
    x = torch.randn(2, 4)
    typo = {"lin1.weigth": torch.zeros(6, 4)}
    # torch: the typo is ignored, the output is the module's own (silently)
    torch.testing.assert_close(torch.func.functional_call(module, typo, (x,)), module(x))
    # ours: an error naming the key and the real names
    params = {k: jnp.asarray(v.detach().numpy()) for k, v in module.state_dict().items()}
    ours = TwoLayer(Linear(params["lin1.weight"], params["lin1.bias"]),
                    Linear(params["lin2.weight"], params["lin2.bias"]))
    with pytest.raises(KeyError, match=r"lin1\.weigth.*lin1\.weight"):
        func.functional_call(ours, {"lin1.weigth": jnp.zeros((6, 4))}, (jnp.asarray(x.numpy()),))
    # the correct key replaces the weight, as in torch (independent check: a zero layer)
    zero = {"lin1.weight": jnp.zeros((6, 4)), "lin1.bias": jnp.zeros(6)}
    out = func.functional_call(ours, zero, (jnp.asarray(x.numpy()),))
    expected = np.broadcast_to(params["lin2.bias"], (2, 3))  # tanh(0) = 0
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-6)


def test_forward_mode_jacobian_structure_is_tuples():
    from torch2jax_ops.autograd import functional

    x = torch.tensor([0.1, 0.2, 0.3])
    f = lambda a, b: (a * b.sum(), a.exp())  # noqa: E731
    reverse = torch.autograd.functional.jacobian(f, (x, x))
    forward = torch.autograd.functional.jacobian(f, (x, x), strategy="forward-mode",
                                                 vectorize=True)
    assert type(reverse) is tuple and type(reverse[0]) is tuple
    assert type(forward) is list and type(forward[0]) is list  # torch's inconsistency
    ours = functional.jacobian(lambda a, b: (a * b.sum(), jnp.exp(a)),
                               (to_j(x), to_j(x)), strategy="forward-mode")
    assert type(ours) is tuple and all(type(row) is tuple for row in ours)
    for r_row, o_row in zip(reverse, ours):  # same values as torch's reverse mode
        for r, o in zip(r_row, o_row):
            np.testing.assert_allclose(np.asarray(o), r.numpy(), rtol=1e-6)
    hess = torch.autograd.functional.hessian(lambda a, b: (a * b).sum(), (x, x),
                                             outer_jacobian_strategy="forward-mode",
                                             vectorize=True)
    assert type(hess) is list
    ours = functional.hessian(lambda a, b: (a * b).sum(), (to_j(x), to_j(x)),
                              outer_jacobian_strategy="forward-mode")
    assert type(ours) is tuple and all(type(row) is tuple for row in ours)
    np.testing.assert_allclose(np.asarray(ours[0][1]), np.eye(3))  # d2/da db of sum(a*b)


def to_j(t):
    return t2j.to_jax(t)


def test_chunked_vmap_with_an_unbatched_output():
    from torch2jax_ops import func

    x, y = torch.randn(6, 3), torch.randn(3)
    f = lambda a, b: (a * b, b * 2)  # noqa: E731
    with pytest.raises(TypeError, match="dim"):
        torch.func.vmap(f, (0, None), (0, None), chunk_size=4)(x, y)
    whole = torch.func.vmap(f, (0, None), (0, None))(x, y)
    ours = func.vmap(f, (0, None), (0, None), chunk_size=4)(to_j(x), to_j(y))
    for w, o in zip(whole, ours):  # independent check: the unchunked torch result
        np.testing.assert_allclose(np.asarray(o), w.numpy(), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ours[0]), (x * y).numpy(), rtol=1e-6)


def test_jacobian_of_an_empty_output_is_empty():
    from torch2jax_ops.autograd import functional

    with pytest.raises(RuntimeError, match="non-empty TensorList"):
        torch.autograd.functional.jacobian(lambda t: t * 2, torch.zeros(0))
    reference = torch.func.jacrev(lambda t: t * 2)(torch.zeros(0))   # torch's other API
    for strategy in ("reverse-mode", "forward-mode"):
        ours = functional.jacobian(lambda t: t * 2, jnp.zeros(0), strategy=strategy)
        assert ours.shape == tuple(reference.shape) == (0, 0)
    ours = functional.jacobian(lambda t: (t[:0], t.sum()), jnp.ones(3))
    assert ours[0].shape == (0, 3)
    np.testing.assert_array_equal(np.asarray(ours[1]), np.ones(3))


def test_to_dense_batch_rejects_an_unsorted_batch():
    import torch_geometric.utils as U

    from torch2jax_ops import geometric

    x, batch = torch.arange(1.0, 7.0).view(6, 1), torch.tensor([1, 0, 0, 1, 1, 1])
    theirs, mask = U.to_dense_batch(x, batch)
    assert 1.0 not in theirs.flatten().tolist()      # node 0 (value 1, graph 1) is gone
    assert int(mask.sum()) == 5                      # 6 nodes in, 5 out, no error
    with pytest.raises(ValueError, match="sorted"):
        geometric.to_dense_batch(jnp.arange(6.0).reshape(6, 1), jnp.array([1, 0, 0, 1, 1, 1]))
    checked = t2j.checked(jax.jit(lambda x, b: geometric.to_dense_batch(
        x, b, max_num_nodes=4, batch_size=2)))
    with pytest.raises(Exception, match="sorted"):
        checked(jnp.arange(6.0).reshape(6, 1), jnp.array([1, 0, 0, 1, 1, 1]))


# ------------------------------------------------------------------ heterogeneous layers

def test_hetero_linear_is_sorted_with_unsorted_types_gives_each_row_its_weight():
    """PyG's HeteroLinear(is_sorted=True) builds its segment pointer as if type_vec were
    sorted: an unsorted one hands rows other types' weights. The port's answer is the
    per-row formula x_i @ W[t_i] + b[t_i] (PyG's is_sorted=False result)."""
    import torch
    import torch_geometric.nn as tnn

    from torch2jax_ops.nn import from_torch

    torch.manual_seed(0)
    layer = tnn.HeteroLinear(6, 5, num_types=4, is_sorted=True).eval()
    x = torch.randn(9, 6)
    type_vec = torch.tensor([3, 0, 2, 0, 1, 3, 1, 2, 0])
    w, b = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    truth = np.einsum("ni,nio->no", x.numpy(), w[type_vec.numpy()]) + b[type_vec.numpy()]
    ours = np.asarray(from_torch(layer)(jnp.asarray(x.numpy()), jnp.asarray(type_vec.numpy())))
    np.testing.assert_allclose(ours, truth, rtol=1e-5, atol=1e-5)
    assert np.abs(layer(x, type_vec).detach().numpy() - truth).max() > 0.1  # PyG's answer
    layer.is_sorted = False
    np.testing.assert_allclose(layer(x, type_vec).detach().numpy(), truth, rtol=1e-5,
                               atol=1e-5)


def test_hgt_pairs_relation_matrices_by_edge_type_whatever_the_dict_order():
    """PyG's HGTConv stacks the edge types in edge_index_dict's order and reads them with
    HeteroLinear(is_sorted=True): any order but the metadata's gives some edge types another
    relation's matrices. JAX sorts dict keys under jit, so the port pairs by edge type:
    PyG's answer for data.edge_index_dict, in any order."""
    import torch
    import torch_geometric.nn as tnn

    from torch2jax_ops.parity.cases.hetero import built, hetero_graph
    from torch2jax_ops.nn import from_torch

    module, (x, e) = built(lambda data: tnn.HGTConv(-1, 8, data.metadata(), heads=2),
                           "float32", "dblp-like")
    assert list(e) == hetero_graph().metadata()[1]
    reordered = dict(reversed(list(e.items())))
    in_order, pyg_reordered = module(x, e), module(x, reordered)
    assert not torch.allclose(in_order["paper"], pyg_reordered["paper"], atol=1e-3)
    port = from_torch(module)
    xj = {k: jnp.asarray(v.numpy()) for k, v in x.items()}
    ej = {k: jnp.asarray(v.numpy(), jnp.int32) for k, v in reordered.items()}
    out = jax.jit(lambda a, b: port(a, b))(xj, ej)
    for t, value in in_order.items():
        np.testing.assert_allclose(np.asarray(out[t]), value.detach().numpy(), rtol=1e-4,
                                   atol=1e-5)



def test_a_sparse_layer_fuses_whatever_its_class_built_first():
    """PyG bakes the first instance's ``fuse`` flag into the class's generated propagate: a
    SAGEConv(aggr='max') built after a SAGEConv(aggr=[...]) raises on a SparseTensor. A
    fresh subclass shows it without touching the process's SAGEConv; the port of the same
    layer gives W_l (max over neighbours of x_j) + b + W_r x_i, by hand."""
    import torch_geometric.nn as tnn
    from torch_sparse import SparseTensor

    from torch2jax_ops.nn import from_torch
    from torch2jax_ops.parity.cases.sparse import fused_propagate_safe

    class FreshSAGE(tnn.SAGEConv):
        pass

    FreshSAGE(4, 3, aggr=["mean", "max"])  # the first instance: it cannot fuse
    torch.manual_seed(0)
    layer = FreshSAGE(4, 3, aggr="max").eval()
    plain = tnn.SAGEConv(4, 3, aggr="max").eval()
    plain.load_state_dict(layer.state_dict())
    x = torch.randn(5, 4)
    src, dst = torch.tensor([0, 1, 2, 3, 0]), torch.tensor([1, 2, 3, 1, 4])
    adj_t = SparseTensor(row=dst, col=src, sparse_sizes=(5, 5))
    with pytest.raises(NotImplementedError, match="message_and_aggregate"):
        layer(x, adj_t)

    with torch.no_grad():
        neigh = np.zeros((5, 4), np.float32)
        for i in range(5):
            rows = [x[j].numpy() for j, d in zip(src.tolist(), dst.tolist()) if d == i]
            neigh[i] = np.max(rows, axis=0) if rows else 0.0
        expected = (neigh @ plain.lin_l.weight.numpy().T + plain.lin_l.bias.numpy()
                    + x.numpy() @ plain.lin_r.weight.numpy().T)
        np.testing.assert_allclose(fused_propagate_safe(layer)(x, adj_t).numpy(), expected,
                                   rtol=1e-5, atol=1e-6)

        # a subclass of a built class: PyG's _orig_propagate is the parent's generated code
        class FreshChild(FreshSAGE):
            pass

        child = FreshChild(4, 3, aggr="max").eval()
        child.load_state_dict(plain.state_dict())
        assert "FreshSAGE_propagate" in FreshChild._orig_propagate.__module__
        with pytest.raises(NotImplementedError, match="message_and_aggregate"):
            FreshChild._orig_propagate.__get__(child, FreshChild)(adj_t, x=(x, x))
        np.testing.assert_allclose(fused_propagate_safe(child)(x, adj_t).numpy(), expected,
                                   rtol=1e-5, atol=1e-6)
    port = from_torch(plain)
    from torch2jax_ops.dlpack import to_jax

    out = jax.jit(lambda a, b: port(a, b))(jnp.asarray(x.numpy()), to_jax(adj_t))
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=1e-6)
