"""``torch.cdist``'s port (torch2jax_ops/nn/_cdist.py), torch-free: values against a
NumPy reference, torch's choice of formula, gradients at zero distance, bad input."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from torch2jax_ops.nn._cdist import cdist, uses_matmul
from torch2jax_ops.nn._registry import functions


def reference(a: np.ndarray, b: np.ndarray, p: float) -> np.ndarray:
    d = np.abs(a[..., :, None, :] - b[..., None, :, :])
    if p == 0:
        return (d != 0).sum(-1).astype(a.dtype)
    if p == math.inf:
        return d.max(-1)
    return (d ** p).sum(-1) ** (1 / p)


def test_registered_under_both_torch_names():
    table = functions()
    assert table["torch.cdist"] is table["torch.functional.cdist"]


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 2.0, 3.0, math.inf])
def test_values_match_the_p_norm(p):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 1, 4, 3)), rng.normal(size=(3, 5, 3))
    a[0, 0, 0] = b[1, 2]  # a zero distance, and zero differences (p = 0 counts them)
    out = cdist(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32), p)
    assert out.shape == (2, 3, 4, 5)
    np.testing.assert_allclose(np.asarray(out), reference(a, b, p), rtol=2e-6, atol=2e-6)


def test_torchs_formula_rule():
    mode = "use_mm_for_euclid_dist_if_necessary"
    assert not uses_matmul(2.0, 25, 25, mode)
    assert uses_matmul(2.0, 26, 3, mode) and uses_matmul(2.0, 3, 26, mode)
    assert uses_matmul(2.0, 1, 1, "use_mm_for_euclid_dist")
    assert not uses_matmul(2.0, 100, 100, "donot_use_mm_for_euclid_dist")
    assert not uses_matmul(1.0, 100, 100, "use_mm_for_euclid_dist")


def test_matmul_form_keeps_torchs_cancellation():
    # s(1 + eps)^2 rounds to s(1 + 2 eps) in float32: torch's matmul form gives 0 for the
    # distance to s, the direct form s * eps (= 0.25); each compute_mode gives torch's number
    x1 = jnp.full((26, 1), 1024 * (1 + 2.0 ** -12), jnp.float32)
    x2 = jnp.asarray([[1024.0]], jnp.float32)
    assert float(cdist(x1, x2)[0, 0]) == 0.0
    assert float(cdist(x1, x2, compute_mode="donot_use_mm_for_euclid_dist")[0, 0]) == 0.25
    assert float(cdist(x1[:2], x2)[0, 0]) == 0.25  # 2 rows: direct by default
    assert float(cdist(x1[:2], x2, compute_mode="use_mm_for_euclid_dist")[0, 0]) == 0.0


@pytest.mark.parametrize("mode", ["donot_use_mm_for_euclid_dist", "use_mm_for_euclid_dist"])
def test_p2_gradient_is_zero_at_zero_distance(mode):
    x1 = jnp.asarray([[1.0, 2.0], [1.0, 2.0]])
    x2 = jnp.asarray([[1.0, 2.0], [0.0, 0.0]])
    g1, g2 = jax.grad(lambda a, b: jnp.sum(cdist(a, b, 2.0, mode)), (0, 1))(x1, x2)
    unit = np.array([1.0, 2.0]) / math.sqrt(5)
    np.testing.assert_allclose(np.asarray(g1), [unit, unit], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(g2), [[0, 0], -2 * unit], rtol=1e-6)


def test_other_p_gradients_follow_torchs_rules():
    x1, x2 = jnp.asarray([[1.0, -2.0]]), jnp.asarray([[3.0, 0.0], [1.0, 0.0]])
    grad = jax.grad(lambda a, p: jnp.sum(cdist(a, x2, p)))
    np.testing.assert_array_equal(np.asarray(grad(x1, math.inf)), [[-1.0, -2.0]])  # ties: each
    np.testing.assert_array_equal(np.asarray(grad(x1, 0.0)), [[0.0, 0.0]])
    # p = 0.5: sign(d) |d|^(p-1) / dist^(p-1) per coordinate; the zero difference (column 0
    # against row 1) gets 0, not inf: row 0 gives [-2, -2], row 1 [0, -1]
    np.testing.assert_allclose(np.asarray(grad(x1, 0.5)), [[-2.0, -3.0]], rtol=1e-6)


def test_empty_inputs():
    assert cdist(jnp.zeros((0, 3)), jnp.ones((4, 3))).shape == (0, 4)
    out = cdist(jnp.ones((2, 3, 0)), jnp.ones((2, 4, 0)), 1.0)
    np.testing.assert_array_equal(np.asarray(out), np.zeros((2, 3, 4)))
    g = jax.grad(lambda a: jnp.sum(cdist(a, jnp.ones((4, 3)))))(jnp.zeros((0, 3)))
    assert g.shape == (0, 3)


def test_under_jit():
    a, b = jnp.arange(6.0).reshape(3, 2), jnp.ones((2, 2))
    np.testing.assert_allclose(np.asarray(jax.jit(cdist, static_argnums=2)(a, b, 1.0)),
                               reference(np.asarray(a), np.asarray(b), 1.0))


@pytest.mark.parametrize("args, kwargs, error, match", [
    ((jnp.ones((3, 4)), jnp.ones((3, 5))), {}, ValueError, "same number of columns.*4 and 5"),
    ((jnp.ones((3, 4)), jnp.ones((3, 4)), -1.0), {}, ValueError, r"`p` must be >= 0.*-1"),
    ((jnp.ones((3, 4)), jnp.ones((3, 4)), float("nan")), {}, ValueError, "`p` must be >= 0"),
    ((jnp.ones(4), jnp.ones((3, 4))), {}, ValueError, "`x1` must have at least 2 dims"),
    ((jnp.ones((2, 4)), jnp.ones(4)), {}, ValueError, "`x2` must have at least 2 dims"),
    ((jnp.ones((2, 4), jnp.int32), jnp.ones((2, 4), jnp.int32)), {}, TypeError,
     "`x1` must have a floating dtype"),
    ((jnp.ones((2, 4)), jnp.ones((2, 4), jnp.float16)), {}, TypeError, "same dtype"),
    ((jnp.ones((2, 2, 4)), jnp.ones((3, 2, 4))), {}, ValueError, "batch dims.*do not broadcast"),
    ((jnp.ones((2, 4)), jnp.ones((2, 4))), {"compute_mode": "fast"}, ValueError,
     "`compute_mode`='fast' is not one of"),
])
def test_bad_input_names_the_argument(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        cdist(*args, **kwargs)
