"""The two gather forms and the slotted sum of the shared core, without torch.

``take_rows`` (a plain gather from the table with a fill row appended) and
``slot_sum`` (invalid ids summed into an extra slot that is cut off) are faster
forms of ``take_groups`` and ``jax.ops.segment_sum`` for some consumers; they
must give the same values and gradients, and never let an invalid id wrap
around or reach a real row.

The streamed sum is a form the CPU picks (``lax.platform_dependent``), equal to one pass to
the bit there (XLA:CPU adds in a fixed order): its tests run on the CPU device, whatever
JAX's default device is (the GPU on a CUDA machine; testkit/devices.py).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from testkit.devices import on_cpu, require_one_device
from testkit.scatter_refs import edges as _edges
from testkit.scatter_refs import one_pass as _one_pass
from testkit.scatter_refs import reference_sum as _reference_sum
from torch2jax_ops.torch_scatter._gather import slot_sum, take_groups, take_rows

#: every kind of id: valid ones, negative ones (must not wrap), past the end
IDS = np.array([0, 3, -1, 2, 4, 1, -4, 3, 7, 0], np.int32)


def reference_take(table, ids, fill):
    out = np.full((len(ids),) + table.shape[1:], fill, table.dtype)
    ok = (ids >= 0) & (ids < table.shape[0])
    out[ok] = table[ids[ok]]
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
@pytest.mark.parametrize("fill", [0, 5])
def test_take_rows_values(dtype, fill):
    table = np.arange(4 * 3, dtype=dtype).reshape(4, 3) + 1
    got = take_rows(jnp.asarray(table), jnp.asarray(IDS), fill)
    assert got.dtype == table.dtype
    np.testing.assert_array_equal(np.asarray(got), reference_take(table, IDS, fill))
    # -1 would read the last row (4..) if it wrapped: it reads the fill instead
    assert (np.asarray(got)[2] == fill).all()
    np.testing.assert_array_equal(np.asarray(got), np.asarray(take_groups(jnp.asarray(table),
                                                                          jnp.asarray(IDS), fill)))


def test_take_rows_empty_table_and_multi_axis():
    empty = jnp.zeros((0, 2), jnp.float32)
    np.testing.assert_array_equal(np.asarray(take_rows(empty, jnp.asarray([0, -1, 3]))),
                                  np.zeros((3, 2)))
    table = jnp.arange(5 * 2 * 3, dtype=jnp.float32).reshape(5, 2, 3)
    ids = jnp.asarray([[4, -2], [1, 5]])
    got = np.asarray(take_rows(table, ids))
    assert got.shape == (2, 2, 2, 3)
    np.testing.assert_array_equal(got[0, 0], np.asarray(table[4]))
    assert (got[0, 1] == 0).all() and (got[1, 1] == 0).all()


def test_take_rows_gradient_equals_take_groups():
    rng = np.random.default_rng(0)
    table = jnp.asarray(rng.standard_normal((4, 3)), jnp.float32)
    w = jnp.asarray(rng.standard_normal((len(IDS), 3)), jnp.float32)
    ids = jnp.asarray(IDS)
    g_rows = jax.grad(lambda t: (take_rows(t, ids) * w).sum())(table)
    g_groups = jax.grad(lambda t: (take_groups(t, ids) * w).sum())(table)
    np.testing.assert_allclose(np.asarray(g_rows), np.asarray(g_groups), rtol=1e-6)
    # row 3 is read twice: its gradient is the sum of both weights; invalid ids add nothing
    np.testing.assert_allclose(np.asarray(g_rows[3]), np.asarray(w[1] + w[7]), rtol=1e-6)
    assert np.isclose(float(g_rows.sum()), float(w[(IDS >= 0) & (IDS < 4)].sum()), rtol=1e-5)


def test_slot_sum_drops_invalid_ids():
    rng = np.random.default_rng(1)
    rows = rng.standard_normal((len(IDS), 2)).astype(np.float32)
    got = np.asarray(slot_sum(jnp.asarray(rows), jnp.asarray(IDS), 4))
    want = np.zeros((4, 2), np.float32)
    for r, i in zip(rows, IDS):
        if 0 <= i < 4:
            want[i] += r
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # -1 and -4 would land on rows 3 and 0 if they wrapped, 7 nowhere: the result
    # matches jax's own segment_sum (which drops them) exactly
    np.testing.assert_array_equal(got, np.asarray(jax.ops.segment_sum(jnp.asarray(rows),
                                                                     jnp.asarray(IDS), 4)))


def test_slot_sum_gradient_and_jvp():
    rng = np.random.default_rng(2)
    rows = jnp.asarray(rng.standard_normal((len(IDS), 2)), jnp.float32)
    w = jnp.asarray(rng.standard_normal((4, 2)), jnp.float32)
    ids = jnp.asarray(IDS)
    grad = np.asarray(jax.grad(lambda r: (slot_sum(r, ids, 4) * w).sum())(rows))
    ok = (IDS >= 0) & (IDS < 4)
    np.testing.assert_array_equal(grad[~ok], 0)  # invalid rows reach nothing
    np.testing.assert_allclose(grad[ok], np.asarray(w)[IDS[ok]], rtol=1e-6)
    tangent = jnp.ones_like(rows)
    _, out_t = jax.jvp(lambda r: slot_sum(r, ids, 4), (rows,), (tangent,))
    np.testing.assert_array_equal(np.asarray(out_t)[:, 0], np.bincount(IDS[ok], minlength=4))


def test_forms_have_no_mask_after_the_gather():
    """What makes them faster: no select over the gathered [1000, 8] rows (forward of
    take_rows, gradient of slot_sum); the masked forms have one."""
    rows = jnp.ones((1000, 8), jnp.float32)
    table = jnp.ones((100, 8), jnp.float32)
    ids = jnp.arange(1000, dtype=jnp.int32) % 100

    def masks(f, x):
        text = jax.jit(f).lower(x, ids).as_text()
        return sum("stablehlo.select" in line and "tensor<1000x8xf32>" in line
                   for line in text.splitlines())

    assert masks(lambda t, i: take_rows(t, i).sum(), table) == 0
    assert masks(lambda t, i: take_groups(t, i).sum(), table) == 1
    assert masks(jax.grad(lambda r, i: (slot_sum(r, i, 100) ** 2).sum()), rows) == 0
    assert masks(jax.grad(lambda r, i: (jax.ops.segment_sum(r, i, 100) ** 2).sum()), rows) == 1


# ------------------------------------------------------------------ streamed sum

@pytest.fixture
def host():
    """The CPU device, where the library picks the loop."""
    with on_cpu():
        yield


@pytest.fixture
def small_blocks(monkeypatch, host):
    """Stream from 40 gathered elements on, in blocks of 24 elements (8 rows of 3): many
    blocks and a remainder. The CPU kernel (tests/test_cpu_kernel.py) is switched off: it
    would take the place of the loop."""
    from torch2jax_ops.geometric._core import _cpu_kernel
    from torch2jax_ops.torch_scatter import _gather

    monkeypatch.setenv(_cpu_kernel.ENVIRONMENT, "0")
    monkeypatch.setattr(_gather, "STREAM_ELEMENTS", 40)
    monkeypatch.setattr(_gather, "STREAM_BLOCK_ELEMENTS", 24)


@pytest.mark.parametrize("sorted_ids", [False, True])
def test_streamed_sum_equals_one_pass_and_reference(sorted_ids, host):
    from torch2jax_ops.torch_scatter._gather import streamed_sum

    rng = np.random.default_rng(0)
    table = jnp.asarray(rng.standard_normal((9, 3)), jnp.float32)
    src, dst = _edges(rng, 103, 9, 6, invalid=not sorted_ids)
    if sorted_ids:
        order = np.argsort(np.asarray(dst), kind="stable")
        src, dst = src[order], dst[order]
    run = jax.jit(lambda t, s, d: streamed_sum(t, s, d, 6, sorted_ids, 8))  # 12 blocks + 7
    streamed = np.asarray(run(table, src, dst))
    # the same scatter-adds in the same order: equal to the bit
    np.testing.assert_array_equal(streamed, np.asarray(jax.jit(_one_pass, static_argnums=3)(
        table, src, dst, 6)))
    np.testing.assert_allclose(streamed, _reference_sum(table, src, dst, 6), rtol=1e-5, atol=1e-6)


def test_streamed_sum_drops_invalid_ids_without_wrapping(host):
    from torch2jax_ops.torch_scatter._gather import streamed_sum

    table = jnp.arange(1, 13, dtype=jnp.float32).reshape(4, 3)
    # 20 edges: -1 must not read row 3, dst -1 must not reach segment 2, ids past the end
    src = jnp.asarray([0, -1, 3, 4, 1] * 4, jnp.int32)
    dst = jnp.asarray([0, 1, -1, 1, 2] * 4, jnp.int32)
    got = np.asarray(streamed_sum(table, src, dst, 3, False, 6))
    np.testing.assert_array_equal(got, np.stack([4 * np.arange(1, 4), np.zeros(3),
                                                 4 * np.arange(4, 7)]).astype(np.float32))


def test_streamed_sum_gradient_jvp_and_vmap(host):
    from torch2jax_ops.torch_scatter._gather import streamed_sum

    rng = np.random.default_rng(1)
    table = jnp.asarray(rng.standard_normal((9, 2)), jnp.float32)
    src, dst = _edges(rng, 61, 9, 5)
    w = jnp.asarray(rng.standard_normal((5, 2)), jnp.float32)
    grad = np.asarray(jax.grad(lambda t: (streamed_sum(t, src, dst, 5, False, 8) * w).sum())(
        table))
    one = np.asarray(jax.grad(lambda t: (_one_pass(t, src, dst, 5) * w).sum())(table))
    # the transposed loop runs the blocks in reverse: sums in another order, last bits
    np.testing.assert_allclose(grad, one, rtol=1e-5, atol=1e-7)
    # d loss / d table[r] = sum of w[dst] over the valid edges leaving r
    expected = np.zeros((9, 2))
    for s, d in zip(np.asarray(src), np.asarray(dst)):
        if 0 <= s < 9 and 0 <= d < 5:
            expected[s] += np.asarray(w)[d]
    np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-6)
    tangent = jnp.ones_like(table)
    _, jvp = jax.jvp(lambda t: streamed_sum(t, src, dst, 5, False, 8), (table,), (tangent,))
    np.testing.assert_allclose(np.asarray(jvp), _reference_sum(tangent, src, dst, 5), rtol=1e-6)
    tables = jnp.stack([table, 2 * table])
    batched = np.asarray(jax.vmap(lambda t: streamed_sum(t, src, dst, 5, False, 8))(tables))
    np.testing.assert_allclose(batched[1], 2 * batched[0], rtol=1e-6)
    np.testing.assert_allclose(batched[0], _reference_sum(table, src, dst, 5), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_gather_aggregate_streams_and_equals_gather_then_aggregate(small_blocks, reduce):
    from torch2jax_ops.geometric._core._edges import aggregate, gather_aggregate, gather_rows

    require_one_device("the streamed loop")
    rng = np.random.default_rng(2)
    x = jnp.asarray(rng.standard_normal((9, 4)), jnp.float32)
    src = jnp.asarray(rng.integers(0, 9, 50), jnp.int32)
    dst = jnp.asarray(np.r_[rng.integers(0, 6, 45), [7] * 5], jnp.int32)  # 6 empty, 5 dropped
    run = jax.jit(lambda x, s, d: gather_aggregate(x, s, d, 7, reduce))
    assert "while" in run.lower(x, src, dst).as_text()  # the loop is what is checked (CPU)
    got = np.asarray(run(x, src, dst))
    two_steps = np.asarray(aggregate(gather_rows(x, src), dst, 7, reduce))
    np.testing.assert_allclose(got, two_steps, rtol=1e-6, atol=1e-7)
    counts = np.bincount(np.asarray(dst), minlength=8)[:7]
    total = _reference_sum(x, src, dst, 7)
    want = total / np.maximum(counts, 1)[:, None] if reduce == "mean" else total
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert (counts == 0).any() and (got[counts == 0] == 0).all()  # empty targets: 0


def test_gather_aggregate_half_accumulates_in_float32(small_blocks):
    from torch2jax_ops.geometric._core._edges import gather_aggregate

    # 2048 + 1 + 1 + ... in float16 stays 2048 (1 is below half an ulp); float32 counts them
    x = jnp.asarray([[2048.0], [1.0]], jnp.float16)
    src = jnp.asarray([0] + [1] * 40, jnp.int32)
    got = gather_aggregate(x, src, jnp.zeros(41, jnp.int32), 1)
    assert got.dtype == jnp.float16 and float(got[0, 0]) == 2088.0


def test_one_pass_with_several_devices():
    """With several devices the edge arrays may be sharded (GSPMD would have to gather
    what the loop slices block by block): one pass there, checked on 2 forced CPU devices."""
    import subprocess
    import sys
    from pathlib import Path

    script = (
        "import jax, jax.numpy as jnp\n"
        "from torch2jax_ops.torch_scatter import _gather\n"
        "from torch2jax_ops.geometric._core._edges import gather_aggregate\n"
        "_gather.STREAM_ELEMENTS, _gather.STREAM_BLOCK_ELEMENTS = 40, 24\n"
        "assert jax.device_count() == 2 and _gather.stream_block((9, 3), 103) is None\n"
        "f = jax.jit(lambda t, s, d: gather_aggregate(t, s, d, 6))\n"
        "args = (jnp.ones((9, 3)), jnp.zeros(103, jnp.int32), jnp.zeros(103, jnp.int32))\n"
        "text = f.lower(*args).as_text()\n"
        "assert 'while' not in text and 'gather_scatter_add' not in text\n"
        "assert float(f(*args)[0, 0]) == 103.0\n"
        "print('one pass')\n")
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu",
           "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300, cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0 and "one pass" in done.stdout, done.stderr[-3000:]
