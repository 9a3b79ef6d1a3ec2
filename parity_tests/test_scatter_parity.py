"""The scatter family vs real torch_scatter: the hand-picked case matrix.

The matrix (op x reduce x dtype x layout, out=, NaN/inf, extreme values) is
defined once in torch2jax_ops.parity.cases.scatter and is also what the
`torch2jax-ops parity` report runs.
"""
import pytest

from torch2jax_ops.parity import _suite as suite

CASES = suite.cases("scatter")


def test_matrix_covers_every_op_and_dtype():
    seen = {(c.op, c.dtype) for c in CASES}
    ops = {c.op for c in CASES}
    assert {"scatter_sum", "scatter_add", "scatter_mean", "scatter_mul", "scatter_min",
            "scatter_max", "scatter-sum", "scatter-mul", "scatter-max"} <= ops
    assert len(seen) == len(ops) * 6 and len(CASES) > 700


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_scatter_family_matches_torch_scatter(case):
    result = case.run()
    assert result.passed, str(result)
    assert result.leaves, "nothing was compared"
