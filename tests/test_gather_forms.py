"""The two gather forms and the slotted sum of the shared core, without torch.

``take_rows`` (a plain gather from the table with a fill row appended) and
``slot_sum`` (invalid ids summed into an extra slot that is cut off) are faster
forms of ``take_groups`` and ``jax.ops.segment_sum`` for some consumers; they
must give the same values and gradients, and never let an invalid id wrap
around or reach a real row.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

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
