"""The CPU kernel pair of attention message passing (torch2jax_ops/geometric/_core/_cpu_kernel.py).

``weighted_gather_scatter_add`` (``out[dst[e], h] += w[e, h] * table[src[e], h]``) and
``edge_dot`` (``out[e, h] = a[ia[e], h] . b[ib[e], h]``) are each other's transposes, so
an attention layer's forward and gradient move no ``[E, H, C]`` buffer. Every value is
checked against a numpy loop over the edges (an independent formula) and against the XLA
steps the kernels replace; the weighted sum equals those steps to the bit (each product
rounded, then added in edge order). Ids out of range must add nothing and never wrap.

The kernels are XLA:CPU FFI handlers: every test runs on the CPU device, whatever JAX's
default device is, and the callers pick them in a process with one device (testkit/devices.py).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from testkit.devices import on_cpu, require_one_device
from testkit.scatter_refs import edges as _edges
from torch2jax_ops import dtypes
from torch2jax_ops.geometric._core import _cpu_kernel
from torch2jax_ops.geometric._core._edges import gather_dot, gather_rows, gather_weighted_sum
from torch2jax_ops.geometric.utils._softmax import softmax_aggregate

WEIGHTED = "torch2jax_ops_weighted_gather_scatter_add"
DOT = "torch2jax_ops_edge_dot"


@pytest.fixture(autouse=True)
def _on_the_cpu():
    with on_cpu():
        yield


@pytest.fixture
def one_device():
    require_one_device("the CPU kernel")


def _calls(f, *args, target):
    return f.lower(*args).as_text().count(target)


def _loop_weighted(table, weight, src, dst, segments):
    table, weight = np.asarray(table, np.float64), np.asarray(weight, np.float64)
    out = np.zeros((segments,) + table.shape[1:])
    for e, (s, d) in enumerate(zip(np.asarray(src), np.asarray(dst))):
        if 0 <= s < table.shape[0] and 0 <= d < segments:
            out[d] += weight[e][..., None] * table[s]
    return out


def _loop_dot(a, b, ia, ib):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    out = np.zeros((len(ia),) + a.shape[1:-1])
    for e, (i, j) in enumerate(zip(np.asarray(ia), np.asarray(ib))):
        if 0 <= i < a.shape[0] and 0 <= j < b.shape[0]:
            out[e] = (a[i] * b[j]).sum(-1)
    return out


def _steps(table, weight, src, dst, segments):
    return _cpu_kernel._weighted_reference(table, weight, src, dst, num_segments=segments)


@pytest.mark.parametrize("heads", [(), (3,), (2, 2)])
@pytest.mark.parametrize("edges", [0, 1, 97, 40_000])  # 40k x 4 x 32 runs on two threads
def test_weighted_sum_equals_the_steps_to_the_bit_and_a_loop(heads, edges, one_device):
    rng = np.random.default_rng(edges + len(heads))
    rows, segments, channels = (300, 200, 32) if edges == 40_000 else (9, 6, 5)
    table = jnp.asarray(rng.standard_normal((rows, *heads, channels)), jnp.float32)
    weight = jnp.asarray(rng.standard_normal((edges, *heads)), jnp.float32)
    src, dst = _edges(rng, edges, rows, segments)
    run = jax.jit(lambda t, w, s, d: _cpu_kernel.weighted_gather_scatter_add(t, w, s, d,
                                                                             segments))
    assert _calls(run, table, weight, src, dst, target=WEIGHTED) == 1
    got = np.asarray(run(table, weight, src, dst))
    assert got.shape == (segments, *heads, channels) and got.dtype == np.float32
    np.testing.assert_array_equal(got, np.asarray(jax.jit(_steps, static_argnums=4)(
        table, weight, src, dst, segments)))
    np.testing.assert_allclose(got, _loop_weighted(table, weight, src, dst, segments),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("heads", [(), (3,)])
@pytest.mark.parametrize("edges", [0, 97, 40_000])
def test_edge_dot_equals_a_loop(heads, edges, one_device):
    rng = np.random.default_rng(edges)
    a = jnp.asarray(rng.standard_normal((300, *heads, 32)), jnp.float32)
    b = jnp.asarray(rng.standard_normal((200, *heads, 32)), jnp.float32)
    ia, ib = _edges(rng, edges, 300, 200)
    run = jax.jit(_cpu_kernel.edge_dot)
    assert _calls(run, a, b, ia, ib, target=DOT) == 1
    got = np.asarray(run(a, b, ia, ib))
    assert got.shape == (edges, *heads) and got.dtype == np.float32
    want = _loop_dot(a, b, ia, ib)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    if edges:  # an id out of range: exactly 0, never a wrapped row's dot
        bad = ~((np.asarray(ia) >= 0) & (np.asarray(ia) < 300) & (np.asarray(ib) >= 0)
                & (np.asarray(ib) < 200))
        assert bad.any() and (got[bad] == 0).all()


def test_float64_and_int64_ids_past_int32(one_device):
    with dtypes.x64(True):
        table = jnp.arange(1.0, 13.0, dtype=jnp.float64).reshape(4, 1, 3)
        weight = jnp.asarray([[2.0], [3.0], [5.0], [7.0], [11.0]], jnp.float64)
        # 2**32 + 1 would be 1 after a plain cast to int32; -1 would be row 3 after a wrap
        src = jnp.asarray([0, 2**32 + 1, -1, 3, 1], jnp.int64)
        dst = jnp.asarray([0, 1, 1, 2**32, 1], jnp.int64)
        got = _cpu_kernel.weighted_gather_scatter_add(table, weight, src, dst, 3)
        assert got.dtype == jnp.float64
        np.testing.assert_array_equal(np.asarray(got)[:, 0],
                                      [[2, 4, 6], [44, 55, 66], [0, 0, 0]])
        dots = _cpu_kernel.edge_dot(table, table, src, dst)
        np.testing.assert_array_equal(np.asarray(dots)[:, 0], [14, 0, 0, 0, 77])


def test_empty_sizes_and_bad_arguments(one_device):
    table, ids = jnp.ones((4, 2, 3), jnp.float32), jnp.asarray([0, 1], jnp.int32)
    weight = jnp.ones((2, 2), jnp.float32)
    assert float(_cpu_kernel.weighted_gather_scatter_add(table, weight[:0], ids[:0], ids[:0],
                                                         5).sum()) == 0.0
    assert _cpu_kernel.weighted_gather_scatter_add(table, weight, ids, ids, 0).shape == (0, 2, 3)
    assert _cpu_kernel.edge_dot(table, table, ids[:0], ids[:0]).shape == (0, 2)
    with pytest.raises(TypeError, match="both float32 or both float64"):
        _cpu_kernel.weighted_gather_scatter_add(table, weight.astype(jnp.float16), ids, ids, 2)
    with pytest.raises(ValueError, match=r"expected table \[M, \*H, C\], weight \[E, \*H\]"):
        _cpu_kernel.weighted_gather_scatter_add(table, jnp.ones((2, 3)), ids, ids, 2)
    with pytest.raises(ValueError, match=r"expected a \[Ma, \*H, C\], b \[Mb, \*H, C\]"):
        _cpu_kernel.edge_dot(table, jnp.ones((4, 3, 3)), ids, ids)


def test_gradients_are_the_pair_and_equal_the_steps(one_device):
    """d/d table of the weighted sum is the weighted sum with the ids swapped, d/d weight is
    the edge dot (and the reverse for the edge dot): the gradient calls only the kernels."""
    rng = np.random.default_rng(1)
    table = jnp.asarray(rng.standard_normal((9, 3, 4)), jnp.float32)
    weight = jnp.asarray(rng.standard_normal((61, 3)), jnp.float32)
    src, dst = _edges(rng, 61, 9, 5)
    probe = jnp.asarray(rng.standard_normal((5, 3, 4)), jnp.float32)

    def loss(f):
        return lambda t, w: jnp.sum(jnp.sin(f(t, w, src, dst, 5)) * probe)

    kernel = lambda t, w, s, d, n: _cpu_kernel.weighted_gather_scatter_add(t, w, s, d, n)  # noqa: E731
    grad = jax.jit(jax.grad(loss(kernel), argnums=(0, 1)))
    text = grad.lower(table, weight).as_text()
    assert text.count(WEIGHTED) == 2 and text.count(DOT) == 1
    assert "stablehlo.scatter" not in text and "stablehlo.gather" not in text
    got = grad(table, weight)
    want = jax.jit(jax.grad(loss(_steps), argnums=(0, 1)))(table, weight)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
    # independent: d/dw[e, h] sum(probe * K) = <table[src e, h], probe[dst e, h]> (no sin)
    linear = jax.grad(lambda w: jnp.sum(kernel(table, w, src, dst, 5) * probe))(weight)
    np.testing.assert_allclose(np.asarray(linear), _loop_dot(table, probe, src, dst),
                               rtol=1e-5, atol=1e-5)
    # the edge dot's gradient w.r.t. a is the weighted sum of b's rows at ia
    a, b = table, jnp.asarray(rng.standard_normal((5, 3, 4)), jnp.float32)
    g = jnp.asarray(rng.standard_normal((61, 3)), jnp.float32)
    ga = jax.grad(lambda a: jnp.sum(_cpu_kernel.edge_dot(a, b, src, dst) * g))(a)
    np.testing.assert_allclose(np.asarray(ga), _loop_weighted(b, g, dst, src, 9), rtol=1e-5,
                               atol=1e-5)
    # forward mode and second order
    tangents = (jnp.ones_like(table), jnp.ones_like(weight))
    _, jvp = jax.jvp(lambda t, w: kernel(t, w, src, dst, 5), (table, weight), tangents)
    _, jvp_steps = jax.jvp(lambda t, w: _steps(t, w, src, dst, 5), (table, weight), tangents)
    np.testing.assert_allclose(np.asarray(jvp), np.asarray(jvp_steps), rtol=1e-5, atol=1e-5)
    hess = jax.hessian(lambda w: loss(kernel)(table, w))(weight[:, :1].repeat(3, 1))
    hess_steps = jax.hessian(lambda w: loss(_steps)(table, w))(weight[:, :1].repeat(3, 1))
    np.testing.assert_allclose(np.asarray(hess), np.asarray(hess_steps), rtol=1e-4, atol=1e-4)


def test_vmap_runs_the_steps_with_the_same_values(one_device):
    rng = np.random.default_rng(3)
    tables = jnp.asarray(rng.standard_normal((4, 9, 2, 3)), jnp.float32)
    weights = jnp.asarray(rng.standard_normal((4, 40, 2)), jnp.float32)
    src, dst = _edges(rng, 40, 9, 6)
    got = jax.vmap(lambda t, w: _cpu_kernel.weighted_gather_scatter_add(t, w, src, dst, 6))(
        tables, weights)
    dots = jax.vmap(lambda t: _cpu_kernel.edge_dot(t, t, src, src))(tables)
    for k in range(4):
        np.testing.assert_allclose(np.asarray(got[k]),
                                   _loop_weighted(tables[k], weights[k], src, dst, 6),
                                   rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(dots[k]), _loop_dot(tables[k], tables[k], src, src),
                                   rtol=1e-5, atol=1e-5)


def test_callers_pick_the_pair_on_the_cpu_only(one_device, monkeypatch):
    """``gather_weighted_sum`` and ``gather_dot`` call the kernels on the CPU, the XLA steps
    in a CUDA lowering and with ``TORCH2JAX_OPS_NATIVE=0``, with the same values;
    ``gather_dot`` of float16 rows accumulates in float32 and rounds once."""
    rng = np.random.default_rng(4)
    table = jnp.asarray(rng.standard_normal((9, 2, 3)), jnp.float32)
    weight = jnp.asarray(rng.standard_normal((40, 2)), jnp.float32)
    src, dst = _edges(rng, 40, 9, 6)
    ws = jax.jit(lambda t, w: gather_weighted_sum(t, w, src, dst, 6))
    dot = jax.jit(lambda t: gather_dot(t, t[:6], src, dst))
    assert _calls(ws, table, weight, target=WEIGHTED) == 1
    assert _calls(dot, table, target=DOT) == 1
    for f, args in ((ws, (table, weight)), (dot, (table,))):
        cuda = f.trace(*args).lower(lowering_platforms=("cuda",)).as_text()
        assert WEIGHTED not in cuda and DOT not in cuda
    got_ws, got_dot = ws(table, weight), dot(table)
    np.testing.assert_allclose(np.asarray(got_dot),
                               _loop_dot(table, table[:6], src, dst), rtol=1e-5, atol=1e-5)
    monkeypatch.setenv(_cpu_kernel.ENVIRONMENT, "0")
    ws_off = jax.jit(lambda t, w: gather_weighted_sum(t, w, src, dst, 6))
    dot_off = jax.jit(lambda t: gather_dot(t, t[:6], src, dst))
    assert _calls(ws_off, table, weight, target=WEIGHTED) == 0
    np.testing.assert_array_equal(np.asarray(ws_off(table, weight)), np.asarray(got_ws))
    np.testing.assert_allclose(np.asarray(dot_off(table)), np.asarray(got_dot), rtol=1e-6,
                               atol=1e-6)
    monkeypatch.setenv(_cpu_kernel.ENVIRONMENT, "1")
    # float16 rows: 2048 + 1 + 1 is 2048 added in float16 (1 is half an ulp, ties to
    # even), 2050 in float32, which float16 holds
    wide = jnp.asarray([[[2048.0, 1.0, 1.0]]], jnp.float16)
    ids = jnp.asarray([0], jnp.int32)
    got = gather_dot(wide, jnp.ones_like(wide), ids, ids)
    assert got.dtype == jnp.float16 and float(got[0, 0]) == 2050.0


@pytest.mark.parametrize("heads", [(4,), (1,)])
def test_softmax_aggregate_from_source_rows_equals_gathered_messages(heads, one_device):
    """``softmax_aggregate(..., src=)`` (the kernel pair on the CPU) against the gathered
    messages, with dropped targets, out-of-range sources, node-wise loops and dropout
    weights; value and gradients."""
    rng = np.random.default_rng(5)
    n, e, c = 7, 50, 6
    table = jnp.asarray(rng.standard_normal((n, *heads, c)), jnp.float32)
    scores = jnp.asarray(rng.standard_normal((e, *heads)), jnp.float32)
    weights = jnp.asarray(rng.integers(0, 2, (e, *heads)) * 2.0, jnp.float32)
    src = jnp.asarray(np.r_[rng.integers(0, n, e - 2), [n, -1]], jnp.int32)
    dst = jnp.asarray(np.r_[rng.integers(0, n - 1, e - 4), [n, n, 2, 3]], jnp.int32)
    loops = jnp.asarray(rng.standard_normal((3, *heads)), jnp.float32)

    def rows(t, s, w):
        return softmax_aggregate(s, t, dst, n, loops, t[:3], w, src=src)

    def gathered(t, s, w):
        return softmax_aggregate(s, gather_rows(t, src), dst, n, loops, t[:3], w)

    run = jax.jit(jax.value_and_grad(lambda t, s: jnp.sum(jnp.cos(rows(t, s, weights))),
                                     argnums=(0, 1)))
    assert _calls(run, table, scores, target=WEIGHTED) == 2
    assert _calls(run, table, scores, target=DOT) == 1
    value, grads = run(table, scores)
    value_g, grads_g = jax.jit(jax.value_and_grad(
        lambda t, s: jnp.sum(jnp.cos(gathered(t, s, weights))), argnums=(0, 1)))(table, scores)
    np.testing.assert_allclose(float(value), float(value_g), rtol=1e-6)
    for g, w in zip(grads, grads_g):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)
    out = np.asarray(jax.jit(rows)(table, scores, weights))
    assert (out[n - 1] == 0).all()  # node n - 1 gets no edge and no loop
