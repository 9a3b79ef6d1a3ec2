"""Graph counts without editing the model: PyG graph-classification models written the PyG
way (pools, dense batches, norms and readouts called with ``batch`` and no size) run under
``jax.jit`` with ``JaxLoader`` / ``from_pyg`` batches, whose ``batch`` is a BatchVector that
carries the graph count. Models of our own in the style of PyG's examples; every check
compares with PyG on the same (unpadded) batch."""
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torch_scatter
from torch_geometric.data import Batch, Data
from torch_geometric.nn import (
    GCNConv,
    GraphConv,
    GraphNorm,
    Set2Set,
    TopKPooling,
    global_add_pool,
    global_max_pool,
    global_mean_pool,
)
from torch_geometric.utils import softmax, to_dense_batch

from torch2jax_ops import geometric as G
from torch2jax_ops.geometric import BatchVector
from torch2jax_ops.geometric.data import from_pyg
from torch2jax_ops.geometric.loader import JaxLoader
from torch2jax_ops.nn import from_torch
from torch2jax_ops.parity import assert_modules_parity, compare_arrays


class PoolNet(torch.nn.Module):
    """gcn -> readouts with `batch` only -> linear (the graph-classification template)."""

    def __init__(self, cin=4, hidden=16, out=3):
        super().__init__()
        self.conv1 = GCNConv(cin, hidden)
        self.conv2 = GCNConv(hidden, hidden)
        self.norm = GraphNorm(hidden)
        self.lin = torch.nn.Linear(3 * hidden, out)

    def forward(self, x, edge_index, batch):
        x = self.conv1(x, edge_index).relu()
        x = self.norm(self.conv2(x, edge_index), batch).relu()
        x = torch.cat([global_mean_pool(x, batch), global_add_pool(x, batch),
                       global_max_pool(x, batch)], dim=1)
        return F.log_softmax(self.lin(x), dim=-1)


class TopKNet(torch.nn.Module):
    """forward(self, data), two TopK poolings, readouts after each (proteins-style)."""

    def __init__(self, cin=4, hidden=16, out=2):
        super().__init__()
        self.conv1 = GraphConv(cin, hidden)
        self.pool1 = TopKPooling(hidden, ratio=0.6)
        self.conv2 = GraphConv(hidden, hidden)
        self.pool2 = TopKPooling(hidden, ratio=0.6)
        self.lin = torch.nn.Linear(2 * hidden, out)

    def forward(self, data):
        x, edge_index, batch = data.x, data.edge_index, data.batch
        x = F.relu(self.conv1(x, edge_index))
        x, edge_index, _, batch, _, _ = self.pool1(x, edge_index, None, batch)
        x1 = torch.cat([global_max_pool(x, batch), global_mean_pool(x, batch)], dim=1)
        x = F.relu(self.conv2(x, edge_index))
        x, edge_index, _, batch, _, _ = self.pool2(x, edge_index, None, batch)
        x2 = torch.cat([global_max_pool(x, batch), global_mean_pool(x, batch)], dim=1)
        return self.lin(x1 + x2)


class ReadoutNet(torch.nn.Module):
    """Set2Set, a dense batch with its mask, torch_scatter and a per-graph softmax: every
    other place PyG reads the graph count off `batch`."""

    def __init__(self, cin=4, hidden=8):
        super().__init__()
        self.conv = GCNConv(cin, hidden)
        self.set2set = Set2Set(hidden, processing_steps=2)
        self.gate = torch.nn.Linear(hidden, 1)

    def forward(self, x, edge_index, batch):
        x = self.conv(x, edge_index).tanh()
        dense, mask = to_dense_batch(x, batch)
        per_node = (dense * mask.unsqueeze(-1)).sum(dim=1)  # masked: padding never counts
        weights = softmax(self.gate(x), batch)
        attended = torch_scatter.scatter(weights * x, batch, dim=0, reduce="sum")
        means = torch_scatter.scatter(x, batch, dim=0, reduce="mean")
        return torch.cat([self.set2set(x, batch), per_node, attended, means], dim=1)


def _graphs(seed, sizes, cin=4):
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in sizes:
        e = 3 * n
        out.append(Data(x=torch.randn(n, cin, generator=g),
                        edge_index=torch.randint(0, n, (2, e), generator=g)))
    return out


def _batches(seed=0):
    sizes = [[5, 7, 4], [6, 3], [8, 5, 6, 4], [3, 9]]
    return [Batch.from_data_list(_graphs(seed + i, s)) for i, s in enumerate(sizes)]


MODELS = {"pool": PoolNet, "topk": TopKNet, "readout": ReadoutNet}


def _call(port, name, g):
    if name == "topk":
        return port(g)
    return port(g.x, g.edge_index, g.batch)


def _torch_call(model, name, b):
    if name == "topk":
        return model(b)
    return model(b.x, b.edge_index, b.batch)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_jaxloader_batches_under_jit_match_pyg_once_per_level(name):
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    port = from_torch(model)
    batches = _batches()
    ladder = G.BucketLadder(nodes=(32,), edges=(96,), graphs=(6,))  # one level
    traces = []

    @jax.jit
    def step(g):
        traces.append(1)
        return _call(port, name, g)

    loader = JaxLoader(batches, ladder=ladder, prefetch=0)
    seen = 0
    for b, g in zip(batches, loader):
        assert isinstance(g.batch, BatchVector) and g.batch.num_graphs == 6
        out = step(g)
        assert out.shape[0] == 6  # padded graph count: real rows first, then padding
        real = b.num_graphs
        with torch.no_grad():
            expected = _torch_call(model, name, b)
        result = compare_arrays(expected, out[:real], "output", "output")
        assert result.passed, str(result)
        seen += 1
    assert seen == len(batches) and len(traces) == 1  # one compilation for the one level


@pytest.mark.parametrize("name", sorted(MODELS))
def test_compare_modules_takes_pyg_inputs(name):
    """compare_modules with the PyG inputs as written (a Batch for forward(self, data),
    plain tensors otherwise): outputs and every gradient."""
    torch.manual_seed(1)
    model = MODELS[name]().eval()
    port = from_torch(model)
    b = _batches(5)[2]
    args = (b,) if name == "topk" else (b.x, b.edge_index, b.batch)
    assert_modules_parity(model, port, *args)


def test_from_pyg_batch_keeps_pygs_counts_under_jit():
    """An unpadded from_pyg batch under jit: exactly PyG's shapes (graph count and the
    largest graph for to_dense_batch), read from the BatchVector."""
    b = _batches()[2]
    g = from_pyg(b)
    assert (g.batch.num_graphs, g.batch.max_num_nodes) == (4, 8)
    dense, mask = jax.jit(lambda g: G.to_dense_batch(g.x, g.batch))(g)
    t_dense, t_mask = to_dense_batch(b.x, b.batch)
    np.testing.assert_array_equal(np.asarray(dense), t_dense.numpy())
    np.testing.assert_array_equal(np.asarray(mask), t_mask.numpy())


def test_an_explicit_size_wins_over_the_carried_count():
    b = _batches()[0]
    g = from_pyg(b)
    out = jax.jit(lambda g: G.global_add_pool(g.x, g.batch, size=5))(g)
    assert out.shape == (5, 4)
    np.testing.assert_allclose(np.asarray(out[:3]),
                               global_add_pool(b.x, b.batch).numpy(), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(out[3:]), 0)


def test_a_plain_batch_array_under_jit_still_names_the_fix():
    b = _batches()[0]
    g = from_pyg(b)
    with pytest.raises(ValueError, match=r"global_mean_pool: `size` is required under jax.jit"
                                         r".*BatchVector"):
        jax.jit(lambda x, ids: G.global_mean_pool(x, ids))(g.x, g.batch.ids)


def test_torch_ops_in_a_traced_forward_see_plain_ids():
    """torch's own functions and tensor methods read the batch as a tensor (the count is
    only for the ops that would infer it), so PyG-style bookkeeping still works."""

    class Counting(torch.nn.Module):
        def forward(self, x, batch):
            sizes = F.one_hot(batch, 3).sum(0)  # a torch function
            first = (batch == 0).to(x.dtype)  # an operator
            return x.sum(-1) * first + sizes[batch].to(x.dtype) + batch.float()

    b = _batches()[0]
    g = from_pyg(b)
    port = from_torch(Counting())
    expected = Counting()(b.x, b.batch)
    np.testing.assert_allclose(np.asarray(port(g.x, g.batch)), expected.numpy(), rtol=1e-6)
    assert_modules_parity(Counting(), port, b.x, b.batch)


def test_padded_graph_reads_extras_as_attributes():
    b = _batches()[0]
    b.train_mask = torch.tensor([True, False] * 8)[:b.num_nodes]
    g = from_pyg(b)
    np.testing.assert_array_equal(np.asarray(g.train_mask), b.train_mask.numpy())
    with pytest.raises(AttributeError, match="PaddedGraph has no attribute 'val_mask'.*"
                                             "train_mask"):
        g.val_mask  # noqa: B018


def test_batch_vector_is_not_an_array_to_jax():
    """JAX functions refuse it (nothing silently drops the count); the package's ops and
    array operators take it."""
    v = BatchVector(jnp.asarray([0, 0, 1]), 2)
    with pytest.raises((TypeError, ValueError)):
        jnp.sum(v)
    assert jnp.sum(v.ids) == 1 and int((v == 0).sum()) == 2 and v.shape == (3,)
    np.testing.assert_array_equal(np.asarray(v), [0, 0, 1])
    leaves, tree = jax.tree_util.tree_flatten(v)
    assert len(leaves) == 1 and jax.tree_util.tree_unflatten(tree, leaves).num_graphs == 2
    with pytest.raises(TypeError, match="`num_graphs` must be a Python int"):
        BatchVector(jnp.zeros(3, jnp.int32), jnp.asarray(2))


def test_batch_device_in_a_jitted_forward():
    """`batch.device` (AttentiveFP-style `torch.arange(n, device=batch.device)`) under jit
    with a BatchVector: the ids' device (None while traced), never an error."""

    class Readout(torch.nn.Module):
        def forward(self, x, batch):
            size = int(batch.max()) + 1
            ones = torch.ones(size, device=batch.device)
            return global_add_pool(x, batch) * ones.unsqueeze(-1)

    b = _batches()[1]
    g = from_pyg(b)
    port = from_torch(Readout())
    out = jax.jit(lambda x, batch: port(x, batch))(g.x, g.batch)
    np.testing.assert_allclose(np.asarray(out), Readout()(b.x, b.batch).numpy(), rtol=1e-6)


class RootNet(torch.nn.Module):
    """UPFD-style: each graph's root (first) node, found where the sorted batch changes."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x, edge_index, batch):
        from torch_geometric.nn import global_max_pool

        h = global_max_pool(self.lin(x), batch)
        root = (batch[1:] - batch[:-1]).nonzero(as_tuple=False).view(-1)
        root = torch.cat([root.new_zeros(1), root + 1], dim=0)
        return torch.cat([self.lin(x[root]), h], dim=-1)


@pytest.mark.parametrize("nodes", [32, 24], ids=["one-padding-graph", "empty-padding-graphs"])
def test_graph_roots_from_batch_boundaries_under_jit(nodes):
    """(batch[1:] - batch[:-1]).nonzero() has num_graphs - 1 entries: a static count with a
    BatchVector. With a 24-node budget the loader adds a level of 8 graph slots, 3 of them
    empty: their roots are padding rows; the real rows still equal PyG's."""
    torch.manual_seed(0)
    model = RootNet().eval()
    port = from_torch(model)
    b = Batch.from_data_list(_graphs(3, [8, 5, 6, 5]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the added ladder level
        (g,) = list(JaxLoader([b], ladder=G.BucketLadder(nodes=(nodes,), edges=(96,),
                                                         graphs=(5,)), prefetch=0))
    out = jax.jit(lambda g: port(g.x, g.edge_index, g.batch))(g)
    assert out.shape == (g.batch.num_graphs, 6) and g.batch.num_graphs == {32: 5, 24: 8}[nodes]
    with torch.no_grad():
        expected = model(b.x, b.edge_index, b.batch)
    assert compare_arrays(expected, out[:4], "output", "output").passed
    # the rule guarded: the roots are the graphs' first nodes (0, 8, 13, 19)
    np.testing.assert_allclose(np.asarray(out[:4, :3]),
                               model.lin(b.x[[0, 8, 13, 19]]).detach().numpy(), rtol=1e-5,
                               atol=1e-6)


class SortedReadout(torch.nn.Module):
    """An aggregation that asserts a sorted index (PyG's Aggregation.assert_sorted_index:
    `if not torch.all(index[:-1] <= index[1:])`) and one whose result depends on the width."""

    def __init__(self, width_dependent=False):
        super().__init__()
        from torch_geometric.nn import aggr

        self.lin = torch.nn.Linear(4, 4)
        self.aggr = (aggr.LSTMAggregation(4, 4) if width_dependent
                     else aggr.SortAggregation(k=3))

    def forward(self, x, edge_index, batch):
        return self.aggr(self.lin(x), batch)


def test_a_batch_vector_is_sorted_so_pygs_sortedness_check_passes_under_jit():
    torch.manual_seed(0)
    model = SortedReadout().eval()
    port = from_torch(model)
    b = Batch.from_data_list(_graphs(4, [5, 3, 6]))
    (g,) = list(JaxLoader([b], ladder=G.BucketLadder(nodes=(20,), edges=(64,), graphs=(4,)),
                          prefetch=0))
    out = jax.jit(lambda g: port(g.x, g.edge_index, g.batch))(g)
    with torch.no_grad():
        expected = model(b.x, b.edge_index, b.batch)
    assert compare_arrays(expected, out[:3], "output", "output").passed
    with pytest.raises(ValueError, match="BatchVector: `ids` must be sorted"):
        BatchVector(jnp.asarray([0, 1, 0]), 2)


def test_a_width_dependent_aggregation_refuses_a_padded_batch_under_jit():
    """LSTMAggregation's last step depends on the padded width: the padded batch's width is
    the budget, not PyG's largest graph, so under jit it is an error; a from_pyg batch
    (PyG's largest graph as max_num_nodes) gives PyG's numbers."""

    from torch2jax_ops.nn import UnsupportedModuleError

    torch.manual_seed(0)
    model = SortedReadout(width_dependent=True).eval()
    port = from_torch(model)
    b = Batch.from_data_list(_graphs(4, [5, 3, 6]))
    (g,) = list(JaxLoader([b], ladder=G.BucketLadder(nodes=(20,), edges=(64,), graphs=(4,)),
                          prefetch=0))
    with pytest.raises(UnsupportedModuleError, match=r"LSTMAggregation runs over each group "
                                                     r"padded to the dense width"):
        jax.jit(lambda g: port(g.x, g.edge_index, g.batch))(g)
    exact = from_pyg(b)
    out = eqx.filter_jit(lambda p, g: p(g.x, g.edge_index, g.batch))(port, exact)
    with torch.no_grad():
        expected = model(b.x, b.edge_index, b.batch)
    assert compare_arrays(expected, out, "output", "output").passed


class LCMReadout(torch.nn.Module):
    """A user's readout with PyG's LCMAggregation over the batch vector."""

    def __init__(self):
        super().__init__()
        from torch_geometric.nn import aggr

        self.lin = torch.nn.Linear(4, 4)
        self.aggr = aggr.LCMAggregation(4, 4)

    def forward(self, x, edge_index, batch):
        return self.aggr(self.lin(x), batch)


def test_lcm_in_a_model_runs_on_a_padded_batch_under_jit():
    """LCMAggregation's tree depends on the widest graph. A JaxLoader batch's BatchVector
    says it is padded, so the port leaves the padding graph (here 11 padding nodes, wider
    than any real graph) out of the width: PyG's numbers under jit. The same ids without
    the flag could hide a padding graph: still an error."""
    from torch2jax_ops.nn import UnsupportedModuleError

    torch.manual_seed(0)
    model = LCMReadout().eval()
    port = from_torch(model)
    b = Batch.from_data_list(_graphs(4, [5, 3, 1]))
    (g,) = list(JaxLoader([b], ladder=G.BucketLadder(nodes=(20,), edges=(64,), graphs=(4,)),
                          prefetch=0))
    assert g.batch.padded and int(np.sum(np.asarray(g.batch.ids) == 3)) == 11
    out = jax.jit(lambda g: port(g.x, g.edge_index, g.batch))(g)
    with torch.no_grad():
        expected = model(b.x, b.edge_index, b.batch)
    assert compare_arrays(expected, out[:3], "output", "output").passed
    unflagged = g._replace(batch=BatchVector(g.batch.ids, g.batch.num_graphs))
    with pytest.raises(UnsupportedModuleError, match=r"LCMAggregation runs over each group "
                                                     r"padded to the dense width"):
        jax.jit(lambda g: port(g.x, g.edge_index, g.batch))(unflagged)
