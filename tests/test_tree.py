"""tree.weighted_sum without torch: values, one contraction per (shape, dtype), jit, errors."""
import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from torch2jax_ops import dtypes
from torch2jax_ops.tree import weighted_sum


def model(seed: int) -> dict:
    keys = jax.random.split(jax.random.key(seed), 5)
    return collections.OrderedDict(
        layer1={"w": jax.random.normal(keys[0], (8, 8)), "b": jax.random.normal(keys[1], (8,))},
        layer2={"w": jax.random.normal(keys[2], (8, 8)), "b": jax.random.normal(keys[3], (8,))},
        head=[jax.random.normal(keys[4], (8, 2)), "relu"],
    )


def reference(trees, weights):
    """An independent formula: a Python loop over the trees, in float64."""
    leaves = [jax.tree_util.tree_leaves(t) for t in trees]
    out = []
    for i, first in enumerate(leaves[0]):
        if isinstance(first, str):
            out.append(first)
            continue
        total = sum(w * np.asarray(leaf[i], dtype=np.float64) for w, leaf in zip(weights, leaves))
        out.append(total)
    return out


def test_values_match_a_loop():
    trees, weights = [model(s) for s in range(3)], [0.2, 0.5, 0.3]
    got = jax.tree_util.tree_leaves(weighted_sum(trees, weights))
    for g, r in zip(got, reference(trees, weights)):
        if isinstance(r, str):
            assert g == r
        else:
            np.testing.assert_allclose(np.asarray(g), r, rtol=1e-6, atol=1e-6)


def test_structure_and_dtypes_are_kept():
    out = weighted_sum([model(0), model(1)], [0.5, 0.5])
    assert isinstance(out, collections.OrderedDict) and list(out) == ["layer1", "layer2", "head"]
    assert out["head"][1] == "relu" and out["layer1"]["w"].dtype == jnp.float32


def test_one_contraction_per_shape_and_dtype():
    trees = [model(s) for s in range(4)]
    jaxpr = jax.make_jaxpr(lambda w: jax.tree_util.tree_leaves(weighted_sum(trees, w))[:-1])(
        jnp.full(4, 0.25))
    dots = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "dot_general"]
    assert len(dots) == 3  # (8, 8) x 2 layers, (8,) x 2 layers, (8, 2): three groups


def test_jit_with_traced_weights_and_grad():
    trees = [model(s) for s in range(2)]
    soup = jax.jit(lambda w: weighted_sum([{k: t[k] for k in ("layer1", "layer2")}
                                           for t in trees], w))
    out = soup(jnp.array([0.25, 0.75]))
    np.testing.assert_allclose(out["layer2"]["b"], 0.25 * trees[0]["layer2"]["b"]
                               + 0.75 * trees[1]["layer2"]["b"], rtol=1e-6)
    # d/dw_k of sum(soup) = sum(tree_k): weights can be learned ("learned soups")
    grad = jax.grad(lambda w: sum(jnp.sum(x) for x in jax.tree_util.tree_leaves(
        weighted_sum([t["layer1"] for t in trees], w))))(jnp.array([0.5, 0.5]))
    np.testing.assert_allclose(grad, [sum(float(jnp.sum(x)) for x in jax.tree_util.tree_leaves(
        t["layer1"])) for t in trees], rtol=1e-5)


def test_half_precision_accumulates_in_float32():
    ones = [{"w": jnp.full((3,), 1.0 + 2.0**-10, jnp.float16)} for _ in range(64)]
    out = weighted_sum(ones, [1.0] * 64)["w"]
    assert out.dtype == jnp.float16
    # 64 * (1 + 2**-10) = 64.0625 rounds to 64.0625 in float16 (exactly representable);
    # float16 accumulation would have lost the small parts on the way.
    assert float(out[0]) == 64.0625


def test_complex_and_float64_leaves():
    with dtypes.x64(True):
        trees = [{"z": jnp.array([1 + 2j, 3j], jnp.complex128), "d": jnp.arange(3.0)}
                 for _ in range(2)]
        out = weighted_sum(trees, jnp.array([0.25, 0.5]))
        assert out["z"].dtype == jnp.complex128 and out["d"].dtype == jnp.float64
        np.testing.assert_allclose(out["z"], 0.75 * np.array([1 + 2j, 3j]))


def test_integer_leaves_need_a_choice():
    trees = [{"w": jnp.ones(2), "steps": jnp.array(s)} for s in (10, 13)]
    with pytest.raises(TypeError, match=r"\['steps'\] is int32.*integer_leaves='first'"):
        weighted_sum(trees, [0.5, 0.5])
    assert int(weighted_sum(trees, [0.5, 0.5], integer_leaves="first")["steps"]) == 10
    assert int(weighted_sum(trees, [0.5, 0.5], integer_leaves="round")["steps"]) == 12  # 11.5 -> even
    with pytest.raises(ValueError, match="integer_leaves must be one of"):
        weighted_sum(trees, [0.5, 0.5], integer_leaves="mean")


@pytest.mark.parametrize("other, words", [
    ({"a": jnp.ones(2), "c": jnp.ones(3)}, r"first differing path: \['b'\] is in trees\[0\]"),
    ({"a": jnp.ones(2), "b": jnp.ones(3), "c": jnp.ones(1)},
     r"first differing path: \['c'\] is in trees\[1\] but not in trees\[0\]"),
    ({"a": jnp.ones(2), "b": jnp.ones(4)}, r"\['b'\] is float32\[3\] in trees\[0\] but float32\[4\]"),
    ({"a": jnp.ones(2), "b": jnp.ones(3, jnp.float16)}, r"\['b'\] is float32\[3\].*float16\[3\]"),
    ({"a": [jnp.ones(2)], "b": jnp.ones(3)}, r"first differing path: \['a'\] is in trees\[0\]"),
])
def test_mismatched_trees_name_the_first_differing_path(other, words):
    with pytest.raises(ValueError, match=words):
        weighted_sum([{"a": jnp.ones(2), "b": jnp.ones(3)}, other], [0.5, 0.5])


def test_containers_and_non_array_leaves_must_agree():
    with pytest.raises(ValueError, match="different containers"):
        weighted_sum([{"a": [jnp.ones(2)]}, {"a": (jnp.ones(2),)}], [1.0, 1.0])
    with pytest.raises(ValueError, match=r"non-array leaf at \['act'\] differs"):
        weighted_sum([{"act": "relu"}, {"act": "gelu"}], [1.0, 1.0])


def test_bad_weights_and_empty_input():
    trees = [model(0), model(1)]
    with pytest.raises(ValueError, match=r"weights must have shape \(2,\)"):
        weighted_sum(trees, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="trees is empty"):
        weighted_sum([], [])


def test_numpy_leaves_are_combined():
    out = weighted_sum([{"w": np.ones(3, np.float32)}, {"w": np.zeros(3, np.float32)}], [2.0, 1.0])
    np.testing.assert_array_equal(np.asarray(out["w"]), [2.0, 2.0, 2.0])
