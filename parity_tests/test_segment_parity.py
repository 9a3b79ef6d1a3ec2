"""segment_csr / segment_coo / gather_csr / gather_coo vs real torch_scatter: the hand-picked
matrix (defined once in torch2jax_ops.parity.cases.segment, also run by the parity report)."""
import pytest

from torch2jax_ops.parity import _suite as suite

CASES = suite.cases("segment")


def test_matrix_covers_every_op_and_dtype():
    ops = {c.op.split("-")[0] for c in CASES}
    assert ops == {
        "segment_csr", "segment_sum_csr", "segment_add_csr", "segment_mean_csr",
        "segment_min_csr", "segment_max_csr", "gather_csr",
        "segment_coo", "segment_sum_coo", "segment_add_coo", "segment_mean_coo",
        "segment_min_coo", "segment_max_coo", "gather_coo"}
    for op in ops:
        assert {c.dtype for c in CASES if c.op.split("-")[0] == op} >= {
            "float16", "bfloat16", "float32", "float64", "int32", "int64"}, op


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_segment_ops_match_torch_scatter(case):
    result = case.run()
    assert result.passed, str(result)
    assert result.leaves, "nothing was compared"
