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


@pytest.mark.parametrize("padding_nodes", [1, 7])
def test_a_padded_batch_leaves_its_padding_graph_out_of_the_width(padding_nodes):
    """A JaxLoader / pad_graph batch: the padding graph (id 3, after three real graphs of
    2, 3 and 5 nodes) is the widest group when it has 7 nodes. PyG's W is the widest real
    graph (5); counting the padding graph would give W = 7: as many levels, but other
    slots move up unpaired, and different numbers. With 1 padding node both agree."""
    from torch2jax_ops.geometric import pad_graph

    torch.manual_seed(2)
    module = LCMAggregation(4, 4)
    port = from_torch(module)
    ids = [0, 0, 1, 1, 1, 2, 2, 2, 2, 2]
    x = torch.randn(10, 4)
    expected = module(x, torch.tensor(ids)).detach().numpy()
    graph = pad_graph(jnp.asarray(x.numpy()), jnp.zeros((2, 0), jnp.int32),
                      batch=jnp.asarray(ids), num_nodes=10 + padding_nodes, num_edges=1,
                      num_graphs=5)
    assert graph.batch.padded

    run = eqx.filter_jit(lambda p, g: p(g.x, g.batch))
    got = np.asarray(run(port, graph))
    np.testing.assert_allclose(got[:3], expected, rtol=1e-5, atol=1e-6)
    # the rule guarded: the same ids without the flag take the padding graph's width
    plain = BatchVector(graph.batch.ids, graph.batch.num_graphs)
    widest = np.asarray(run(port, graph._replace(batch=plain)))[:3]
    if padding_nodes > 5:
        assert np.abs(widest - expected).max() > 1e-3
    else:
        np.testing.assert_allclose(widest, expected, rtol=1e-5, atol=1e-6)


def test_a_pooled_padded_batch_stays_padded():
    """TopKPooling keeps the flag: its padding graph is still the highest group with nodes
    (dropped rows carry id num_graphs, past it). Here the pooled padding graph keeps 5 of
    its 8 nodes, more than any real graph keeps (3), so the width would differ without
    the flag."""
    from torch_geometric.nn import TopKPooling

    from torch2jax_ops.geometric import pad_graph

    torch.manual_seed(3)
    pool, lcm = TopKPooling(4, ratio=0.6), LCMAggregation(4, 4)
    ids = [0, 0, 1, 1, 1, 2, 2, 2, 2, 2]
    x = torch.randn(10, 4)
    edge_index = torch.tensor([[0, 2, 3, 5, 6, 7], [1, 3, 4, 6, 7, 8]])
    pooled = pool(x, edge_index, batch=torch.tensor(ids))
    expected = lcm(pooled[0], pooled[3]).detach().numpy()
    graph = pad_graph(jnp.asarray(x.numpy()), jnp.asarray(edge_index.numpy()),
                      batch=jnp.asarray(ids), num_nodes=18, num_edges=8, num_graphs=5)

    def run(ports, g):
        out = ports[0](g.x, g.edge_index, batch=g.batch)
        return out[3], ports[1](out[0], out[3])

    batch, got = eqx.filter_jit(run)((from_torch(pool), from_torch(lcm)), graph)
    assert isinstance(batch, BatchVector) and batch.padded
    np.testing.assert_allclose(np.asarray(got)[:3], expected, rtol=1e-5, atol=1e-6)
