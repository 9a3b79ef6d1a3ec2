"""PyG's convs whose message is the source row (SAGEConv, GINConv) against the ports with
the CPU's streamed aggregation (``geometric._edges.gather_aggregate`` running
``torch_scatter._gather.streamed_sum``) forced on.

At real sizes (1M edges x 64 features) the aggregation runs as a loop over blocks of
edges; the thresholds are lowered here so that a 300-edge graph takes the same path
through many blocks and a remainder, with self-loops, repeated edges and nodes that
receive no message. Forward and gradients (every parameter and ``x``) are compared with
PyG in float32 and float64.
"""
import jax
import numpy as np
import pytest
import torch
import torch_geometric.nn as pnn

from torch2jax_ops import dtypes, to_jax
from torch2jax_ops.nn import from_torch
from torch2jax_ops.parity import compare_modules
from torch2jax_ops.torch_scatter import _gather

N, E = 40, 300

LAYERS = {
    "SAGEConv-mean": lambda: pnn.SAGEConv(8, 8),
    "SAGEConv-sum": lambda: pnn.SAGEConv(8, 8, aggr="sum"),
    "SAGEConv-mean-narrowing": lambda: pnn.SAGEConv(8, 3),  # projects, then aggregates
    "SAGEConv-bipartite": lambda: pnn.SAGEConv((8, 5), 4),
    "GINConv": lambda: pnn.GINConv(torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.ReLU(),
                                                       torch.nn.Linear(6, 4)), train_eps=True),
}


@pytest.fixture
def streamed(monkeypatch):
    monkeypatch.setattr(_gather, "STREAM_ELEMENTS", 64)
    monkeypatch.setattr(_gather, "STREAM_BLOCK_ELEMENTS", 8 * 37)  # 37 edges of 8 features


def _graph(dtype, bipartite):
    rng = np.random.default_rng(0)
    src = rng.integers(0, N, E)
    dst = rng.integers(0, N - 6, E)  # the last 6 nodes receive nothing
    src[:10], dst[:10] = np.arange(10), np.arange(10)  # self-loops
    src[10:20], dst[10:20] = 3, 4  # a repeated edge
    x = torch.tensor(rng.standard_normal((N, 8)), dtype=getattr(torch, dtype))
    ei = torch.tensor(np.stack([src, dst]))
    if bipartite:
        return (x, torch.tensor(rng.standard_normal((N, 5)), dtype=x.dtype)), ei
    return x, ei


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(LAYERS))
def test_streamed_aggregation_matches_pyg(streamed, name, dtype):
    torch.manual_seed(0)
    layer = LAYERS[name]().to(getattr(torch, dtype))
    x, ei = _graph(dtype, "bipartite" in name)
    with dtypes.x64(dtype == "float64"):
        port = from_torch(layer, copy=True)
        jx = jax.tree.map(to_jax, x)
        lowered = jax.jit(lambda p, a, b: p(a, b)).lower(port, jx, to_jax(ei, allow_downcast=True))
        assert "while" in lowered.as_text()  # the streamed loop is what is compared
        result = compare_modules(layer, port, x, ei, name=name)
    assert result.passed, str(result)
