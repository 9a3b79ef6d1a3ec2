"""Every ported PyG layer, aggregation, norm and pool vs the real PyG: the cases of the sections
"convs", "aggr", "norms" and "pools" (torch2jax_ops/parity/cases/convs_*.py, aggr.py, norms.py,
pools.py), also run by the parity report."""
import pytest

from torch2jax_ops.parity import _suite as suite

SECTIONS = ("convs", "aggr", "norms", "pools")
CASES = [c for c in suite.cases() if c.section in SECTIONS]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_layer_matches_pyg(case):
    result = case.run()
    assert result.passed, str(result)
    assert result.leaves, "nothing was compared"
