"""PyG's convs whose message is the source row (SAGEConv, GINConv) against the ports with
each of the CPU's two forms of ``geometric._core._edges.gather_aggregate``:

- ``native``: the C++ kernel (``geometric._core._cpu_kernel.gather_scatter_add``), which the
  ports use on the CPU at every size where it is built;
- ``streamed``: the XLA loop over blocks of edges (``torch_scatter._gather.streamed_sum``)
  that takes its place where the kernel is switched off or not built, with thresholds
  lowered so that a 300-edge graph runs through many blocks and a remainder.

The graph has self-loops, repeated edges and nodes that receive no message. Forward and
gradients (every parameter and ``x``) are compared with PyG in float32 and float64.

Both forms are the CPU's (``lax.platform_dependent``): the tests run on the CPU device, whatever
JAX's default device is (the GPU on a CUDA machine; testkit/devices.py).
"""
import jax
import numpy as np
import pytest
import torch
import torch_geometric.nn as pnn
from hypothesis import given, settings
from hypothesis import strategies as st

from testkit.devices import on_cpu, require_one_device
from torch2jax_ops import dtypes, to_jax
from torch2jax_ops.geometric._core import _cpu_kernel
from torch2jax_ops.nn import from_torch
from torch2jax_ops.parity import compare_arrays, compare_modules
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


#: what each form leaves in the lowered program
MARKS = {"native": "torch2jax_ops_gather_scatter_add", "streamed": "stablehlo.while"}


@pytest.fixture(autouse=True)
def _on_the_cpu():
    with on_cpu():
        yield


@pytest.fixture(params=list(MARKS))
def form(request, monkeypatch):
    require_one_device(f"the {request.param} form")
    if request.param == "streamed":
        monkeypatch.setenv(_cpu_kernel.ENVIRONMENT, "0")
        monkeypatch.setattr(_gather, "STREAM_ELEMENTS", 64)
        monkeypatch.setattr(_gather, "STREAM_BLOCK_ELEMENTS", 8 * 37)  # 37 edges of 8
    else:
        monkeypatch.delenv(_cpu_kernel.ENVIRONMENT, raising=False)
        assert _cpu_kernel.load_error() is None, _cpu_kernel.load_error()
    return request.param


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
def test_aggregation_forms_match_pyg(form, name, dtype):
    torch.manual_seed(0)
    layer = LAYERS[name]().to(getattr(torch, dtype))
    x, ei = _graph(dtype, "bipartite" in name)
    with dtypes.x64(dtype == "float64"):
        port = from_torch(layer, copy=True)
        jx = jax.tree.map(to_jax, x)
        lowered = jax.jit(lambda p, a, b: p(a, b)).lower(port, jx, to_jax(ei, allow_downcast=True))
        assert MARKS[form] in lowered.as_text()  # the form is what is compared
        result = compare_modules(layer, port, x, ei, name=name)
    assert result.passed, str(result)


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 12), segments=st.integers(1, 12), edges=st.integers(0, 60),
       features=st.sampled_from([(), (1,), (3,), (2, 3)]),
       dtype=st.sampled_from(["float32", "float64"]), seed=st.integers(0, 2**16))
def test_kernel_matches_torch_index_add(rows, segments, edges, features, dtype, seed):
    """``_cpu_kernel.gather_scatter_add`` against ``out.index_add_(0, dst, x[src])`` in torch,
    forward and the gradient of ``x`` (torch's autograd), on random graphs with repeated
    edges and empty targets."""
    rng = np.random.default_rng(seed)
    x = torch.tensor(rng.standard_normal((rows,) + features), dtype=getattr(torch, dtype),
                     requires_grad=True)
    src, dst = torch.tensor(rng.integers(0, rows, edges)), torch.tensor(
        rng.integers(0, segments, edges))
    out = torch.zeros((segments,) + features, dtype=x.dtype).index_add(0, dst, x[src])
    cot = torch.tensor(rng.standard_normal(out.shape), dtype=x.dtype)
    (gx,) = torch.autograd.grad(out, x, cot)
    with dtypes.x64(dtype == "float64"):
        ours, vjp = jax.vjp(lambda v: _cpu_kernel.gather_scatter_add(
            v, to_jax(src, allow_downcast=True), to_jax(dst, allow_downcast=True), segments),
            to_jax(x.detach()))
        (ours_gx,) = vjp(to_jax(cot))
        for theirs, mine in ((out.detach(), ours), (gx, ours_gx)):
            leaf = compare_arrays(theirs, mine)
            assert leaf.passed, leaf
