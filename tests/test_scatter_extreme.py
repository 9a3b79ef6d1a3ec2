"""min/max of the scatter family without torch: the blocked arg pass (what XLA:CPU runs
on large inputs) against a loop with torch_scatter's CPU rules, values-only calls that
never compute the arg, and ``deterministic=True`` sums."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import torch2jax_ops as t2j
from torch2jax_ops.torch_scatter import _extreme


def torch_scatter_loop(src, index, size, kind, out=None):
    """torch_scatter's CPU kernel along axis 0 of 2-D src: strict compare from the start
    value (or out), first winner's position, unmasked start values become 0."""
    better = np.greater if kind == "max" else np.less
    init = _extreme.extreme_init(src.dtype, kind)
    length, width = src.shape
    value = np.full((size, width), init, src.dtype) if out is None else out.copy()
    arg = np.full((size, width), length, np.int64)
    for e in range(length):
        for f in range(width):
            g = index[e] if index.ndim == 1 else index[e, f]
            if better(src[e, f], value[g, f]):
                value[g, f], arg[g, f] = src[e, f], e
    if out is None:
        empty = value == init
        value[empty] = 0
    return value, arg


def awkward(rng, length, width, dtype=np.float32):
    """Ties, NaN, +-inf and the lowest finite value, on a coarse grid (many ties)."""
    x = rng.integers(-3, 4, (length, width)).astype(dtype)
    r = rng.uniform(size=x.shape)
    x[r < 0.05] = np.nan
    x[(r >= 0.05) & (r < 0.08)] = -np.inf
    x[(r >= 0.08) & (r < 0.10)] = np.inf
    x[(r >= 0.10) & (r < 0.12)] = np.finfo(dtype).min
    return x


@pytest.fixture(params=[pytest.param(None, marks=pytest.mark.slow), 7],
                ids=["one-pass", "blocks-of-7"])  # the parity suite covers the one pass too
def block(request, monkeypatch):
    """BLOCK_ELEMENTS small enough that the CPU loop runs many blocks (and a last,
    overlapping one); None keeps the default (one pass at these sizes)."""
    if request.param is not None:
        monkeypatch.setattr(_extreme, "BLOCK_ELEMENTS", request.param)
    return request.param


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("with_out", [False, True])
@pytest.mark.parametrize("two_d_index", [False, True])
def test_values_and_arg_follow_torch_scatter_rules(block, kind, with_out, two_d_index):
    rng = np.random.default_rng(hash((kind, with_out, two_d_index)) % 2**32)
    length, width, size = 53, 3, 9
    src = awkward(rng, length, width)
    index = rng.integers(0, size - 2, (length, width) if two_d_index else length)
    out = awkward(rng, size, width) if with_out else None
    want_value, want_arg = torch_scatter_loop(src, index, size, kind, out)
    fn = t2j.scatter_max if kind == "max" else t2j.scatter_min

    def call(s, i, o):
        return fn(s, i, 0, out=o, dim_size=None if with_out else size)

    for run in (call, jax.jit(call)):
        value, arg = run(jnp.asarray(src), jnp.asarray(index, jnp.int32),
                         None if out is None else jnp.asarray(out))
        np.testing.assert_array_equal(np.asarray(value), want_value)
        np.testing.assert_array_equal(np.asarray(arg), want_arg)
        only = jax.jit(lambda s, i, o: t2j.scatter(s, i, 0, out=o, dim_size=None if with_out
                                                   else size, reduce=kind))
        np.testing.assert_array_equal(
            np.asarray(only(jnp.asarray(src), jnp.asarray(index, jnp.int32),
                            None if out is None else jnp.asarray(out))), want_value)


@pytest.mark.parametrize("kind", ["max", "min"])
def test_gradient_goes_to_the_first_winner_with_and_without_arg(block, kind):
    rng = np.random.default_rng(3)
    length, width, size = 40, 2, 6
    src = jnp.asarray(rng.integers(-2, 3, (length, width)).astype(np.float32))
    index = jnp.asarray(rng.integers(0, size, length), jnp.int32)
    weights = jnp.asarray(rng.uniform(1, 2, (size, width)).astype(np.float32))
    _, want_arg = torch_scatter_loop(np.asarray(src), np.asarray(index), size, kind)
    want = np.zeros((length, width), np.float32)
    for g in range(size):
        for f in range(width):
            if want_arg[g, f] < length:
                want[want_arg[g, f], f] = weights[g, f]
    with_arg = jax.jit(jax.grad(lambda s: jnp.sum(getattr(t2j, f"scatter_{kind}")(
        s, index, 0, dim_size=size)[0] * weights)))
    values_only = jax.jit(jax.grad(lambda s: jnp.sum(t2j.scatter(
        s, index, 0, dim_size=size, reduce=kind) * weights)))
    np.testing.assert_array_equal(np.asarray(with_arg(src)), want)
    np.testing.assert_array_equal(np.asarray(values_only(src)), want)


def test_out_gets_the_gradient_where_it_wins(block):
    src = jnp.array([[1.0], [5.0], [2.0]])
    index = jnp.array([0, 0, 1])
    out = jnp.array([[3.0], [2.0]])  # group 0: src wins (5 > 3); group 1: out ties, keeps
    grads = jax.grad(lambda s, o: jnp.sum(t2j.scatter(s, index, 0, out=o, reduce="max")),
                     argnums=(0, 1))(src, out)
    np.testing.assert_array_equal(np.asarray(grads[0]), [[0.0], [1.0], [0.0]])
    np.testing.assert_array_equal(np.asarray(grads[1]), [[0.0], [1.0]])


def test_vmap_of_the_blocked_pass(block):
    rng = np.random.default_rng(5)
    src = jnp.asarray(awkward(rng, 30, 2)[None].repeat(3, 0) + np.arange(3, dtype=np.float32)[:, None, None])
    index = jnp.asarray(rng.integers(0, 5, 30), jnp.int32)
    batched = jax.vmap(lambda s: t2j.scatter_max(s, index, 0, dim_size=5))(src)
    for b in range(3):
        value, arg = t2j.scatter_max(src[b], index, 0, dim_size=5)
        np.testing.assert_array_equal(np.asarray(batched[0][b]), np.asarray(value))
        np.testing.assert_array_equal(np.asarray(batched[1][b]), np.asarray(arg))


def _primitives(jaxpr, found=None):
    found = set() if found is None else found
    for eqn in jaxpr.eqns:
        found.add(eqn.primitive.name)
        if eqn.primitive.name == "scatter-add":
            found.add(f"scatter-add sorted={eqn.params['indices_are_sorted']}")
            found.add(f"scatter-add {eqn.outvars[0].aval.dtype} "
                      f"sorted={eqn.params['indices_are_sorted']}")
        for value in eqn.params.values():
            for v in (value if isinstance(value, (tuple, list)) else (value,)):
                if isinstance(v, jax.extend.core.ClosedJaxpr):
                    _primitives(v.jaxpr, found)
                elif isinstance(v, jax.extend.core.Jaxpr):
                    _primitives(v, found)
    return found


def test_values_only_forward_never_computes_the_arg():
    """scatter(reduce="max") in the forward: one segment_max (and a NaN rerun under a
    cond), no segment_min over positions; the backward finds the winners."""
    src, index = jnp.ones((10, 3)), jnp.arange(10) % 4
    forward = _primitives(jax.make_jaxpr(
        lambda s, i: t2j.scatter(s, i, 0, dim_size=4, reduce="max"))(src, index).jaxpr)
    assert "scatter-max" in forward and "scatter-min" not in forward and "iota" not in forward
    with_arg = _primitives(jax.make_jaxpr(
        lambda s, i: t2j.scatter_max(s, i, 0, dim_size=4))(src, index).jaxpr)
    assert "scatter-min" in with_arg


@pytest.mark.parametrize("op", ["scatter", "scatter_sum", "scatter_add", "scatter_mean"])
def test_deterministic_sum_is_a_sort_and_a_sorted_segment_sum(op):
    rng = np.random.default_rng(7)
    src = jnp.asarray(rng.normal(size=(500, 4)).astype(np.float32))
    index = jnp.asarray(rng.integers(0, 37, 500), jnp.int32)
    reduce = {"scatter": {"reduce": "sum"}}.get(op, {})

    def run(deterministic):
        return jax.jit(lambda s, i: getattr(t2j, op)(s, i, 0, dim_size=37, **reduce,
                                                     deterministic=deterministic))

    prims = _primitives(jax.make_jaxpr(
        lambda s, i: getattr(t2j, op)(s, i, 0, dim_size=37, **reduce,
                                      deterministic=True))(src, index).jaxpr)
    # the CPU's sorted segment sum; the scan for other platforms counts rows (integers)
    assert "sort" in prims and "scatter-add float32 sorted=True" in prims
    assert "scatter-add float32 sorted=False" not in prims
    default, fixed = run(False)(src, index), run(True)(src, index)
    np.testing.assert_allclose(np.asarray(fixed), np.asarray(default), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(run(True)(src, index)), np.asarray(fixed))
    weights = jnp.asarray(rng.normal(size=(37, 4)).astype(np.float32))

    def grad(deterministic):
        return jax.grad(lambda s: jnp.sum(getattr(t2j, op)(
            s, index, 0, dim_size=37, **reduce, deterministic=deterministic) * weights))(src)

    np.testing.assert_allclose(np.asarray(grad(True)), np.asarray(grad(False)), rtol=1e-6)


def _sorted_case(rng, length=600, width=3, segments=40):
    ids = np.sort(rng.integers(-3, segments + 3, length)).astype(np.int32)  # invalid ends too
    ids[(ids >= 10) & (ids < 14)] = 9  # empty groups 10..13 between full ones
    rows = rng.normal(size=(length, width)).astype(np.float32) * 10 ** rng.uniform(
        -3, 3, (length, 1)).astype(np.float32)  # magnitudes over six decades
    return jnp.asarray(rows), jnp.asarray(np.sort(ids))


def test_scan_sum_is_the_segment_sum_without_a_float_scatter():
    """The non-CPU deterministic path (a segmented scan), run here: the segment sum up to
    rounding, exactly 0 for empty groups, ids outside [0, n) reach no group, the same bits
    twice, and its gradient is the sum's (a gather)."""
    from torch2jax_ops.torch_scatter._deterministic import scan_sum

    rng = np.random.default_rng(11)
    rows, ids = _sorted_case(rng)
    ours = jax.jit(scan_sum, static_argnums=2)
    want = jax.ops.segment_sum(rows.astype(jnp.float64) if jax.config.jax_enable_x64
                               else rows, ids, 40)
    got = ours(rows, ids, 40)
    scale = np.asarray(jax.ops.segment_sum(jnp.abs(rows), ids, 40))
    assert np.all(np.abs(np.asarray(got) - np.asarray(want)) <= 1e-5 * scale + 1e-30)
    assert np.all(np.asarray(got)[10:14] == 0) and np.asarray(got).shape == (40, 3)
    np.testing.assert_array_equal(np.asarray(ours(rows, ids, 40)), np.asarray(got))
    weights = jnp.asarray(rng.normal(size=(40, 3)).astype(np.float32))
    grad = jax.grad(lambda r: jnp.sum(scan_sum(r, ids, 40) * weights))(rows)
    reference = jax.grad(lambda r: jnp.sum(jax.ops.segment_sum(r, ids, 40) * weights))(rows)
    np.testing.assert_array_equal(np.asarray(grad), np.asarray(reference))
    assert np.all(np.asarray(grad)[np.asarray(ids) < 0] == 0)
    empty = scan_sum(jnp.zeros((0, 3)), jnp.zeros((0,), jnp.int32), 4)
    np.testing.assert_array_equal(np.asarray(empty), np.zeros((4, 3)))


def _float_scatters(mlir: str) -> list:
    """(result type, unique_indices?) of every stablehlo.scatter producing floats."""
    import re

    found = []
    for match in re.finditer(r'"stablehlo\.scatter"\((.*?)\) -> tensor<([^>]*)>', mlir, re.S):
        if "xf32" in match.group(2) or match.group(2) == "f32":
            found.append((match.group(2), "unique_indices = true" in match.group(1)))
    return found


@pytest.mark.parametrize("op", ["scatter_sum", "scatter_mean"])
def test_deterministic_sum_on_a_gpu_has_no_float_scatter(op):
    """Lowered for CUDA (jax.export, no GPU needed): deterministic=True sums by the scan, so
    the program holds no float scatter-add whose order the hardware picks (the gradient's
    only float scatter is the sort's permutation, unique indices: each row written once).
    For the CPU the sorted segment sum is kept (a sequential loop there)."""
    from jax import export

    src = jax.ShapeDtypeStruct((500, 4), jnp.float32)
    index = jax.ShapeDtypeStruct((500,), jnp.int32)

    def forward(s, i):
        return getattr(t2j, op)(s, i, 0, dim_size=37, deterministic=True)

    def gradient(s, i):
        return jax.grad(lambda s: jnp.sum(forward(s, i) ** 2))(s)

    def lowered(fn, platform):
        return export.export(jax.jit(fn), platforms=[platform])(src, index).mlir_module()

    assert _float_scatters(lowered(forward, "cuda")) == []

    def tangent(s, i):  # forward mode too (a custom_vjp there would refuse jvp)
        return jax.jvp(lambda s: forward(s, i), (s,), (jnp.ones_like(s),))[1]

    assert _float_scatters(lowered(tangent, "cuda")) == []
    assert all(unique for _, unique in _float_scatters(lowered(gradient, "cuda")))
    assert _float_scatters(lowered(forward, "cpu"))  # the sorted segment sum


def test_deterministic_keeps_out_and_integers():
    out = jnp.full((3, 2), 10.0)
    src, index = jnp.ones((5, 2)), jnp.array([2, 0, 2, 1, 2])
    np.testing.assert_array_equal(
        np.asarray(t2j.scatter_sum(src, index, 0, out=out, deterministic=True)),
        [[11, 11], [11, 11], [13, 13]])
    ints = t2j.scatter_mean(jnp.arange(10).reshape(5, 2), index, 0, deterministic=True)
    np.testing.assert_array_equal(np.asarray(ints),
                                  np.asarray(t2j.scatter_mean(jnp.arange(10).reshape(5, 2),
                                                              index, 0)))


def test_deterministic_mul_says_what_is_available():
    with pytest.raises(NotImplementedError, match="sum'/'add'/'mean'"):
        t2j.scatter(jnp.ones(3), jnp.array([0, 0, 1]), reduce="mul", deterministic=True)
    # min/max are order-independent: accepted
    t2j.scatter(jnp.ones(3), jnp.array([0, 0, 1]), reduce="max", deterministic=True)
