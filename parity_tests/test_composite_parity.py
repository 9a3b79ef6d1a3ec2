"""scatter_std / scatter_logsumexp / scatter_softmax / scatter_log_softmax vs real torch_scatter:
the hand-picked matrix (defined once in torch2jax_ops.parity.cases.composite, also run by the
parity report), and the integer-input errors both libraries raise."""
import jax.numpy as jnp
import pytest
import torch
import torch_scatter

import torch2jax_ops as t2j
from torch2jax_ops.parity import _suite as suite

CASES = suite.cases("composite")


def test_matrix_covers_every_op_and_dtype():
    ops = {c.op.split("-")[0] for c in CASES}
    assert ops == {"scatter_std", "scatter_logsumexp", "scatter_softmax", "scatter_log_softmax"}
    for op in ops:
        assert {c.dtype for c in CASES if c.op == op} >= {
            "float16", "bfloat16", "float32", "float64"}, op
    assert {c.dtype for c in CASES if c.op == "scatter_std"} >= {"int32", "int64"}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_composites_match_torch_scatter(case):
    result = case.run()
    assert result.passed, str(result)
    assert result.leaves, "nothing was compared"


@pytest.mark.parametrize("op", ["scatter_logsumexp", "scatter_softmax", "scatter_log_softmax"])
def test_integer_src_is_rejected_like_torch_scatter(op):
    src, index = torch.tensor([1, 2, 3]), torch.tensor([0, 0, 1])
    with pytest.raises(ValueError, match="floating point"):
        getattr(torch_scatter, op)(src, index)
    with pytest.raises(ValueError, match=f"`{op}` can only be computed over arrays with "
                                         f"floating point data types, got `src` of dtype int32"):
        getattr(t2j, op)(jnp.array([1, 2, 3]), jnp.array([0, 0, 1]))
