"""The fx path of ``from_torch`` on models that once broke it (section "fx" of the suite,
parity_tests/cases/fx_models.py), and the errors it gives instead of crashing."""
import pytest

from torch2jax_ops.parity import _suite as suite

CASES = suite.cases("fx")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fx_model_matches_torch(case):
    result = case.run()
    assert result.passed, str(result)
    names = {leaf.path for leaf in result.leaves}
    assert any(n.startswith("grad ") for n in names), names
