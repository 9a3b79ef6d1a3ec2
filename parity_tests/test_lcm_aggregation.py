"""PyG's LCMAggregation port (geometric/nn/aggr/_lcm.py): the GRU-cell tree over the widest
group, with PyG's width as a traced size under jit."""
import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from torch_geometric.nn.aggr import LCMAggregation

from torch2jax_ops.geometric import BatchVector
from torch2jax_ops.nn import from_torch
from torch2jax_ops.parity import compare_modules

GROUPINGS = ([0, 0, 0, 1, 1, 2, 2, 2, 2, 2], [0, 1, 1, 2, 2, 2, 2, 2, 2, 2],
             [0, 0, 1, 1, 1, 2, 2, 2, 3, 3], [0] * 10)


@pytest.mark.parametrize("project", [False, True])
@pytest.mark.parametrize("grouping", range(len(GROUPINGS)))
def test_lcm_matches_pyg(project, grouping):
    torch.manual_seed(0)
    module = LCMAggregation(4, 6 if project else 4, project=project)
    x, index = torch.randn(10, 4), torch.tensor(GROUPINGS[grouping])
    for jit in (True, False):
        result = compare_modules(module, from_torch(module), x, index, jit=jit)
        assert result.passed, result


def test_one_program_serves_every_width():
    """Widths 5, 7, 3 and 10 (odd levels moving a slot up, 1 to 4 levels) from one compiled
    program: the tree runs with PyG's width as a traced size."""
    torch.manual_seed(1)
    module = LCMAggregation(4, 4)
    port = from_torch(module)
    traces = []

    @eqx.filter_jit
    def run(p, x, ids):
        traces.append(1)
        return p(x, ids)

    x = torch.randn(10, 4)
    for ids in GROUPINGS:
        n = max(ids) + 1
        got = run(port, jnp.asarray(x.numpy()), BatchVector(jnp.asarray(ids), 4))[:n]
        expected = module(x, torch.tensor(ids)).detach().numpy()
        np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5, atol=1e-6)
    assert len(traces) == 1
