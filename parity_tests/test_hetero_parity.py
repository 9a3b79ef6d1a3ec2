"""Heterogeneous layers and models vs the real PyG: the cases of the section "hetero"
(torch2jax_ops/parity/cases/hetero*.py), also run by the parity report."""
import pytest

from torch2jax_ops.parity import _suite as suite

CASES = [c for c in suite.cases() if c.section == "hetero"]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hetero_layer_matches_pyg(case):
    result = case.run()
    assert result.passed, str(result)
    assert result.leaves, "nothing was compared"
    # every node type's features carry a gradient (the hetero inputs are dicts)
    assert any(leaf.path.startswith("grad args") for leaf in result.leaves), \
        [leaf.path for leaf in result.leaves]
