"""torch.nn's recurrent layers, attention, convolutions, pools and PReLU vs the real torch: the
cases of section "torch_nn" (torch2jax_ops/parity/cases/torch_nn.py), also run by the parity report."""
import pytest

from torch2jax_ops.parity import _suite as suite

CASES = suite.cases("torch_nn")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_layer_matches_torch(case):
    result = case.run()
    assert result.passed, str(result)
    assert result.leaves, "nothing was compared"
