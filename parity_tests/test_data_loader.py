"""from_pyg and JaxLoader against real PyG: batch-by-batch equality of the real part with PyG's
batches (DataLoader, NeighborLoader, LinkNeighborLoader), compilations per epoch, zero-copy,
and every error path."""
import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch_geometric.typing

from parity_tests import samplers
from torch_geometric.data import Batch, Data, HeteroData, InMemoryDataset
from torch_geometric.datasets import FakeDataset
from torch_geometric.loader import DataLoader

from torch2jax_ops import geometric as G, shares_memory
from torch2jax_ops.geometric.data import from_pyg
from torch2jax_ops.geometric.loader import JaxLoader, LadderWarning
from torch2jax_ops.geometric.loader._gather import fast_batches

SAMPLER = samplers.install()  # PyG's kernel, or a pure-torch one (parity_tests/samplers.py)
needs_sampler = pytest.mark.skipif(not SAMPLER, reason="PyG's neighbour sampling needs pyg-lib "
                                                       "or torch-sparse")
X64 = jax.config.jax_enable_x64


def fake_graphs(count=40, nodes=12, edge_dim=3, seed=0):
    random.seed(seed)
    torch.manual_seed(seed)
    return FakeDataset(num_graphs=count, avg_num_nodes=nodes, avg_degree=3, num_channels=5,
                       edge_dim=edge_dim, num_classes=3, task="graph")


def big_graph(nodes=400, seed=0):
    random.seed(seed)
    torch.manual_seed(seed)
    data = FakeDataset(num_graphs=1, avg_num_nodes=nodes, avg_degree=6, num_channels=4,
                       num_classes=3, task="node")[0]
    data.train_mask = torch.rand(data.num_nodes) < 0.5
    return data


def same(jax_array, tensor):
    np.testing.assert_array_equal(np.asarray(jax_array), tensor.detach().numpy())


def check_real_part(g, batch):
    """The real rows of a PaddedGraph are PyG's batch; the padding is jraph's convention."""
    n, e = batch.num_nodes, batch.num_edges
    graphs = batch.num_graphs if isinstance(batch, Batch) else 1
    same(g.x[:n], batch.x)
    same(g.edge_index[:, :e], batch.edge_index)
    if batch.edge_attr is not None:
        same(g.edge_attr[:e], batch.edge_attr)
    if batch.batch is not None:
        same(g.batch[:n], batch.batch)
    else:
        assert not np.asarray(g.batch[:n]).any()
    node_level = batch.y.shape[0] == n
    same(g.y[:n] if node_level else g.y[:graphs], batch.y)
    assert int(g.node_mask.sum()) == n and not bool(g.node_mask[n:].any())
    assert int(g.edge_mask.sum()) == e and int(g.graph_mask.sum()) == graphs
    assert (np.asarray(g.edge_index[:, e:]) == n).all()
    assert (np.asarray(g.batch[n:]) == graphs).all()
    assert g.edge_index.dtype == jnp.int32 and g.batch.dtype == jnp.int32


# ------------------------------------------------------------------ from_pyg

def test_from_pyg_shares_memory_with_torch(on_host):
    data = Data(x=torch.randn(6, 3), edge_index=torch.tensor([[0, 1, 2], [1, 2, 3]]),
                edge_attr=torch.randn(3, 2), y=torch.randn(6),
                train_mask=torch.tensor([True, False] * 3), weight=torch.randn(3))
    g = from_pyg(data)
    for name in ("x", "edge_attr", "y"):
        assert shares_memory(data[name], getattr(g, name)), name
    assert shares_memory(data.train_mask, g.extras["train_mask"])
    assert shares_memory(data.weight, g.extras["weight"])
    same(g.edge_index, data.edge_index)
    assert g.edge_index.dtype == jnp.int32  # ids: a checked int32 copy
    assert g.batch.tolist() == [0] * 6 and g.graph_mask.tolist() == [True]
    assert g.x.devices() == {jax.devices("cpu")[0]}
    copied = from_pyg(data, copy=True)
    assert not shares_memory(data.x, copied.x)
    np.testing.assert_array_equal(copied.x, g.x)
    with pytest.raises(ValueError, match="`edge_index` is int64 and becomes int32.*copy=False"):
        from_pyg(data, copy=False)
    shared = from_pyg(Data(x=data.x, edge_index=data.edge_index.int()), copy=False)
    assert shares_memory(data.x, shared.x)


def test_from_pyg_on_a_batch_keeps_everything(on_host):
    dataset = fake_graphs(6)
    batch = Batch.from_data_list([dataset[i] for i in range(6)])
    batch.name = "six graphs"  # not a tensor: kept as it is
    g = from_pyg(batch)
    same(g.x, batch.x)
    same(g.batch, batch.batch)
    same(g.y, batch.y)
    same(g.extras["ptr"], batch.ptr)
    assert g.graph_mask.shape == (6,) and g.extras["name"] == "six graphs"
    assert shares_memory(batch.x, g.x) and shares_memory(batch.edge_attr, g.edge_attr)
    assert g.seed_mask is None


def test_from_pyg_seed_mask_from_batch_size_and_device():
    data = Data(x=torch.randn(5, 2), edge_index=torch.tensor([[0, 1], [1, 2]]),
                n_id=torch.arange(5), batch_size=2)
    g = from_pyg(data, device=jax.devices()[0])
    assert g.seed_mask.tolist() == [True, True, False, False, False]
    assert "batch_size" not in g.extras and g.extras["n_id"].tolist() == list(range(5))
    assert g.extras["n_id"].dtype == (jnp.int64 if X64 else jnp.int32)


def test_from_pyg_errors_name_the_attribute_and_the_fix():
    edges = torch.tensor([[0, 1], [1, 0]])
    with pytest.raises(TypeError, match="from_pyg: expected a torch_geometric.data.Data or Batch"
                                        ".*got builtins.dict"):
        from_pyg({"x": torch.ones(2, 2), "edge_index": edges})
    with pytest.raises(TypeError, match="got torch.Tensor"):
        from_pyg(torch.ones(3))
    with pytest.raises(TypeError, match="a list of graphs: collate it"):
        from_pyg([Data(x=torch.ones(2, 1), edge_index=edges)])
    empty = from_pyg(HeteroData())  # a HeteroData is taken (test_hetero_data.py), per type
    assert empty.metadata() == ([], []) and empty.x_dict == {}
    if not X64:
        wide = Data(x=torch.ones(2, 2, dtype=torch.float64), edge_index=edges)
        with pytest.raises(TypeError, match="`x` is float64.*allow_downcast=True"):
            from_pyg(wide)
        assert from_pyg(wide, allow_downcast=True).x.dtype == jnp.float32
        with pytest.raises(OverflowError, match="`n_id` holds values in"):
            from_pyg(Data(x=torch.ones(2, 1), edge_index=edges, n_id=torch.tensor([0, 2 ** 40])))
    with pytest.raises(OverflowError, match="`edge_index` holds values in.*node and graph ids"):
        from_pyg(Data(x=torch.ones(2, 1), edge_index=edges + 2 ** 33))
    with pytest.raises(TypeError, match="`adj` is a torch.sparse_coo tensor"):
        from_pyg(Data(x=torch.ones(2, 1), edge_index=edges, adj=torch.eye(2).to_sparse()))
    with pytest.raises(TypeError, match="`device` must be a jax.Device"):
        from_pyg(Data(x=torch.ones(2, 1), edge_index=edges), device="cuda")


def test_cuda_tensors_with_a_cpu_only_jax_get_a_clear_message():
    from torch2jax_ops.geometric.data._rules import check_torch_device
    if any(d.platform != "cpu" for d in jax.devices()):
        pytest.skip("this JAX has a GPU")
    with pytest.raises(ValueError, match=r"`x` is on cuda:0, but this JAX has only cpu devices.*"
                                         r"data = data.cpu\(\)"):
        check_torch_device(torch.device("cuda:0"), "x", op="from_pyg")


# --------------------------------------------------------------- DataLoader

def test_dataloader_batches_equal_pygs_batch_by_batch():
    dataset = fake_graphs(50)
    pyg = list(DataLoader(dataset, batch_size=8))
    loader = JaxLoader(DataLoader(dataset, batch_size=8))
    assert len(loader) == len(pyg) == 7
    ours = list(loader)
    assert len(ours) == 7
    for g, batch in zip(ours, pyg):
        check_real_part(g, batch)
        assert g.y.shape == (g.num_graphs,)  # graph-level labels, padded per graph
        ptr = np.asarray(g.extras["ptr"])
        same(ptr[:batch.num_graphs + 1], batch.ptr)


def test_shuffled_dataloader_keeps_pygs_order_under_the_same_seed():
    dataset = fake_graphs(30)
    torch.manual_seed(5)
    pyg = list(DataLoader(dataset, batch_size=4, shuffle=True))
    loader = JaxLoader(DataLoader(dataset, batch_size=4, shuffle=True))
    loader.ladder  # no draw from torch's generator: the ladder comes from per-graph sizes
    torch.manual_seed(5)
    for g, batch in zip(loader, pyg):
        check_real_part(g, batch)


def test_an_epoch_compiles_at_most_once_per_level():
    dataset = fake_graphs(120, nodes=20, edge_dim=0)
    loader = JaxLoader(DataLoader(dataset, batch_size=16, shuffle=True))
    traces = []

    @jax.jit
    def step(g):
        traces.append(g.num_nodes)
        pooled = G.global_add_pool(g.x, g.batch, g.num_graphs)
        return jnp.sum(jnp.where(g.graph_mask[:, None], pooled, 0))

    for _ in range(3):
        for g in loader:
            step(g)
        assert len(traces) <= loader.ladder.levels
    assert loader.stats.compilations <= loader.ladder.levels  # the epoch counter agrees


def test_a_batch_beyond_the_ladder_grows_it_mid_epoch():
    dataset = fake_graphs(20)
    loader = JaxLoader(DataLoader(dataset, batch_size=10), ladder=G.BucketLadder((16,), (32,),
                                                                               (2,)))
    with pytest.warns(LadderWarning, match=r"BucketLadder.geometric\(max_nodes="):
        out = list(loader)
    assert len(out) == 2 and loader.ladder.levels >= 2


class _Graphs(InMemoryDataset):
    """A user's in-memory dataset: every kind of attribute PyG concatenates."""

    def __init__(self, count=30, seed=0, transform=None, data_class=Data):
        super().__init__(None, transform=transform)
        gen = torch.Generator().manual_seed(seed)
        graphs = []
        for _ in range(count):
            n = int(torch.randint(3, 12, (1,), generator=gen))
            e = int(torch.randint(1, 30, (1,), generator=gen))
            graphs.append(data_class(
                x=torch.randn(n, 4, generator=gen),
                edge_index=torch.randint(0, n, (2, e), generator=gen),
                edge_weight=torch.rand(e, generator=gen),
                train_mask=torch.rand(n, generator=gen) < 0.5,
                anchor_index=torch.randint(0, n, (3,), generator=gen),
                y=torch.randn(1, 2, generator=gen)))
        self._data, self.slices = self.collate(graphs)


class _OwnData(Data):
    def __inc__(self, key, value, *args, **kwargs):
        return 0 if key == "anchor_index" else super().__inc__(key, value, *args, **kwargs)


def _leaves(graphs):
    return [jax.tree_util.tree_leaves_with_path(g) for g in graphs]


@pytest.mark.parametrize("shuffle,drop_last", [(False, False), (True, True)])
def test_in_memory_fast_path_equals_pygs_collation(shuffle, drop_last):
    """A DataLoader over an InMemoryDataset is gathered with NumPy (loader/_gather.py): the
    same padded batches as PyG's own collation of the same order, every attribute."""
    dataset = _Graphs()
    make = lambda: DataLoader(dataset, batch_size=7, shuffle=shuffle, drop_last=drop_last)  # noqa: E731
    assert fast_batches(make()) is not None
    torch.manual_seed(3)
    pyg = list(make())  # PyG's Collater: Batch objects
    torch.manual_seed(3)
    fast = JaxLoader(make(), prefetch=0)
    ours = list(fast)
    slow = list(JaxLoader(pyg, ladder=fast.ladder, prefetch=0))
    assert len(ours) == len(slow) == len(pyg) == (4 if drop_last else 5)
    for g, h, batch in zip(ours, slow, pyg):
        check_real_part(g, batch)
        assert sorted(g.extras) == sorted(h.extras) == ["anchor_index", "anchor_mask",
                                                       "edge_weight", "ptr", "train_mask"]
        for (path, a), (path_h, b) in zip(*_leaves([g, h])):
            assert path == path_h
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=str(path))
        # anchor_index holds node ids: shifted by the nodes of the graphs before it
        k = 3 * batch.num_graphs
        same(g.extras["anchor_index"][:k], batch.anchor_index)


def test_fast_path_only_where_it_is_provably_the_same():
    dataset = _Graphs(count=6)
    assert fast_batches(DataLoader(dataset, batch_size=2)) is not None
    assert fast_batches(DataLoader(dataset, batch_size=2, follow_batch=["x"])) is None
    assert fast_batches(DataLoader(dataset, batch_size=2, exclude_keys=["y"])) is None
    assert fast_batches(DataLoader(dataset, batch_size=2, num_workers=1)) is None
    assert fast_batches(DataLoader(_Graphs(count=6, transform=lambda d: d),
                                   batch_size=2)) is None
    assert fast_batches(DataLoader(_Graphs(count=6, data_class=_OwnData), batch_size=2)) is None
    assert fast_batches(DataLoader(dataset[1:4], batch_size=2)) is not None
    assert fast_batches([dataset[0]]) is None
    # a subset (dataset[1:4]) maps positions through its indices, a custom __inc__ is PyG's way
    for loader in (DataLoader(dataset[1:4], batch_size=2),
                   DataLoader(_Graphs(count=6, data_class=_OwnData), batch_size=2)):
        for g, batch in zip(JaxLoader(loader, prefetch=0), loader):
            check_real_part(g, batch)
            same(g.extras["anchor_index"][:3 * batch.num_graphs], batch.anchor_index)


def test_fast_path_node_ids_are_int32_only_where_they_fit():
    """The fast path gathers node ids as int32 when every shifted id fits; a stored id that
    does not fit keeps int64 and meets the same OverflowError as PyG's collation."""
    dataset = _Graphs(count=6)
    (g,) = list(JaxLoader(DataLoader(dataset, batch_size=6), prefetch=0))
    assert g.edge_index.dtype == g.batch.dtype == g.extras["anchor_index"].dtype == jnp.int32
    # fits int32 as stored, but not once shifted by the nodes of the graphs before it
    dataset._data.edge_index[0, -1] = 2 ** 31 - 3  # the last graph's last edge
    loader = DataLoader(dataset, batch_size=6)
    assert fast_batches(loader) is not None
    with pytest.raises(OverflowError, match="`edge_index` holds values in.*node and graph ids"):
        list(JaxLoader(loader, prefetch=0))
    with pytest.raises(OverflowError, match="`edge_index` holds values in.*node and graph ids"):
        list(JaxLoader(list(loader), prefetch=0))  # PyG's own batches: the same error


def test_progress_bar_with_rich(capsys):
    pytest.importorskip("rich")
    list(JaxLoader(DataLoader(fake_graphs(8), batch_size=4), progress=True))
    err = capsys.readouterr().err
    assert "batches/s" in err and "compilations" in err and "2/2" in err


def test_loader_errors_name_the_item_or_attribute():
    with pytest.raises(TypeError, match=r"batch 0: expected a torch_geometric.data.Data or Batch"
                                        r".*got torch.Tensor"):
        JaxLoader([torch.ones(3)]).ladder
    bad = fake_graphs(4)
    batch = Batch.from_data_list([bad[0], bad[1]])
    batch.smiles = ["C", "CC"]
    with pytest.raises(TypeError, match="`smiles` is a ragged or non-numeric list"):
        list(JaxLoader([batch]))
    (g,) = list(JaxLoader([batch], exclude=("smiles",)))
    assert "smiles" not in g.extras
    if not X64:
        wide = Batch.from_data_list([bad[0]])
        wide.x = wide.x.double()
        with pytest.raises(TypeError, match="`x` is float64"):
            list(JaxLoader([wide]))
    odd = Data(x=torch.ones(4, 1), edge_index=torch.tensor([[0], [1]]), y=torch.ones(3))
    with pytest.raises(ValueError, match="`y` has 3 rows: neither one per node"):
        list(JaxLoader([odd]))


# ------------------------------------------------------- sampling loaders

@needs_sampler
def test_neighbor_loader_batches_equal_pygs_batch_by_batch():
    from torch_geometric.loader import NeighborLoader

    data = big_graph()
    torch.manual_seed(3)
    pyg = list(NeighborLoader(data, num_neighbors=[5, 3], batch_size=32))
    loader = JaxLoader(NeighborLoader(data, num_neighbors=[5, 3], batch_size=32))
    loader.ladder  # one pass over sizes (samples once), before the seed
    torch.manual_seed(3)
    ours = list(loader)
    assert len(ours) == len(pyg) == len(loader)
    for g, batch in zip(ours, pyg):
        check_real_part(g, batch)
        n = batch.num_nodes
        assert g.y.shape == (g.num_nodes,)
        assert g.seed_mask.tolist() == [i < batch.batch_size for i in range(g.num_nodes)]
        same(g.extras["n_id"][:n], batch.n_id)
        same(g.extras["train_mask"][:n], batch.train_mask)
        same(g.extras["e_id"][:batch.num_edges], batch.e_id)
        mask = np.asarray(g.extras["input_id_mask"])
        same(g.extras["input_id"][mask], batch.input_id)
    assert len({g.num_nodes for g in ours}) <= loader.ladder.levels


@needs_sampler
def test_link_neighbor_loader_pads_and_masks_edge_labels():
    from torch_geometric.loader import LinkNeighborLoader

    data = big_graph(300)
    torch.manual_seed(4)
    kwargs = dict(num_neighbors=[4, 2], batch_size=16, neg_sampling_ratio=1.0,
                  edge_label_index=data.edge_index[:, :100])
    pyg = list(LinkNeighborLoader(data, **kwargs))
    loader = JaxLoader(LinkNeighborLoader(data, **kwargs))
    loader.ladder
    torch.manual_seed(4)
    ours = list(loader)
    shapes = {g.extras["edge_label_index"].shape for g in ours}
    assert len(shapes) == 1  # one padded size over the epoch
    for g, batch in zip(ours, pyg):
        check_real_part(g, batch)
        labels = batch.edge_label.shape[0]
        mask = g.extras["edge_label_mask"]
        assert int(mask.sum()) == labels
        same(g.extras["edge_label"][:labels], batch.edge_label)
        same(g.extras["edge_label_index"][:, :labels], batch.edge_label_index)
        assert (np.asarray(g.extras["edge_label_index"][:, labels:]) == batch.num_nodes).all()


@needs_sampler
def test_cluster_loader_batches_equal_pygs():
    from torch_geometric.loader import ClusterData, ClusterLoader

    data = big_graph(200)
    try:
        clusters = ClusterData(data, num_parts=8, log=False)
    except (ImportError, RuntimeError, AttributeError) as exc:
        pytest.skip(f"ClusterData needs METIS: {exc}")
    torch.manual_seed(2)
    pyg = list(ClusterLoader(clusters, batch_size=2))
    loader = JaxLoader(ClusterLoader(clusters, batch_size=2))
    loader.ladder
    torch.manual_seed(2)
    for g, batch in zip(loader, pyg):
        check_real_part(g, batch)
