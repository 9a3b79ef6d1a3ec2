"""HeteroData on the JAX side: from_pyg, pad_hetero, HeteroLadder, and JaxLoader over
heterogeneous loaders, checked against PyG's own batches and layers."""
import warnings

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from torch2jax_ops import shares_memory
from torch2jax_ops.geometric.data import HeteroGraph, HeteroLadder, from_pyg, pad_hetero
from torch2jax_ops.geometric.loader import JaxLoader, LadderWarning
from torch2jax_ops.geometric.loader._progress import compilations
from torch2jax_ops.nn import from_torch
from torch2jax_ops.parity.cases.hetero import CITES, WRITES, _heteroconv, built, hetero_graph


def labelled(name="dblp-like"):
    data = hetero_graph(name)
    data["paper"].y = torch.arange(9) % 3
    data["paper"].train_mask = torch.tensor([True, False] * 4 + [True])
    data[CITES].edge_weight = torch.linspace(0.5, 1.5, data[CITES].edge_index.shape[1])
    return data


def neighbor_batches(data, batch_size=3, seed=0):
    pytest.importorskip("torch_sparse", reason="PyG samples heterogeneous neighbourhoods with "
                                               "pyg-lib or torch-sparse")
    from torch_geometric.loader import NeighborLoader

    torch.manual_seed(seed)
    return NeighborLoader(data, num_neighbors=[3, 2], batch_size=batch_size, shuffle=False,
                          input_nodes=("paper", None))


# --------------------------------------------------------------------------- from_pyg

def test_from_pyg_keeps_every_type_its_order_and_shares_features(on_host):
    data = labelled("with-venue")
    g = from_pyg(data)
    assert isinstance(g, HeteroGraph)
    assert g.metadata() == data.metadata()  # PyG's order, not sorted
    for t in data.node_types:
        assert shares_memory(g.x_dict[t], data[t].x)
        np.testing.assert_array_equal(np.asarray(g.x_dict[t]), data[t].x.numpy())
        assert bool(g.node_mask_dict[t].all()) and g.node_mask_dict[t].shape == (data[t].num_nodes,)
    for r in data.edge_types:
        assert g.edge_index_dict[r].dtype == jnp.int32
        np.testing.assert_array_equal(np.asarray(g.edge_index_dict[r]),
                                      data[r].edge_index.numpy())
    assert g.edge_index_dict[("term", "related", "term")].shape == (2, 0)
    np.testing.assert_array_equal(np.asarray(g.y_dict["paper"]), np.arange(9) % 3)
    assert set(g.node_extras["paper"]) == {"train_mask"}
    np.testing.assert_allclose(np.asarray(g.edge_extras[CITES]["edge_weight"]),
                               data[CITES].edge_weight.numpy())


def test_from_pyg_names_the_typed_attribute_that_does_not_fit():
    data = labelled()
    data["paper"].n_id = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 2 ** 40])
    with pytest.raises(OverflowError, match=r"'paper'\.n_id"):
        from_pyg(data)
    data = labelled()
    data[WRITES].edge_attr = torch.randn(data[WRITES].edge_index.shape[1], 2, dtype=torch.float64)
    with pytest.raises(TypeError, match=r"\('author', 'writes', 'paper'\)\.edge_attr"):
        from_pyg(data)
    g = from_pyg(data, allow_downcast=True)
    assert g.edge_attr_dict[WRITES].dtype == jnp.float32


# --------------------------------------------------------------------------- padding

def test_padding_reaches_no_real_node_under_a_ported_heteroconv():
    """Padding edges join padding nodes only: a conv on the padded graph equals PyG on the
    real one. (Padding edges into node 0 of a type would change node 0's sum.)"""
    module, (x_dict, edge_index_dict) = built(_heteroconv("sum"), "float32", "with-venue")
    data = hetero_graph("with-venue")
    g = from_pyg(data)
    padded = pad_hetero(g, {t: n + 3 for t, n in g.num_nodes_dict().items()},
                        {r: e + 5 for r, e in g.num_edges_dict().items()})
    for r, index in padded.edge_index_dict.items():
        e = data[r].edge_index.shape[1]
        src, _, dst = r
        assert (np.asarray(index[0, e:]) == data[src].num_nodes).all()
        assert (np.asarray(index[1, e:]) == data[dst].num_nodes).all()
    port = from_torch(module)
    out = eqx.filter_jit(lambda m, g: m(g.x_dict, g.edge_index_dict))(port, padded)
    expected = module(x_dict, edge_index_dict)
    for t, value in expected.items():
        n = value.shape[0]
        np.testing.assert_allclose(np.asarray(out[t][:n]), value.detach().numpy(), rtol=1e-5,
                                   atol=1e-5)


def test_pad_hetero_refuses_sizes_without_a_padding_node():
    g = from_pyg(hetero_graph())
    nodes, edges = g.num_nodes_dict(), g.num_edges_dict()
    with pytest.raises(ValueError, match=r"num_nodes\['paper'\]"):
        pad_hetero(g, {**{t: n + 1 for t, n in nodes.items()}, "paper": nodes["paper"]}, edges)
    with pytest.raises(ValueError, match=r"num_edges\[\('paper', 'cites', 'paper'\)\]"):
        pad_hetero(g, {t: n + 1 for t, n in nodes.items()}, {**edges, CITES: 3})


def test_ladder_picks_the_lowest_level_fitting_every_type_and_grows():
    nodes = [{"a": 10, "b": 3}, {"a": 12, "b": 30}, {"a": 50, "b": 4}]
    edges = [{("a", "r", "b"): 20}, {("a", "r", "b"): 25}, {("a", "r", "b"): 90}]
    ladder = HeteroLadder.from_sizes(nodes, edges, quantiles=(0.5, 1.0))
    for n, e in zip(nodes, edges):
        level = ladder.levels[ladder.pick(n, e)]
        assert all(level[0][t] > n[t] for t in n) and all(level[1][r] >= e[r] for r in e)
    low, top = ladder.levels[0], ladder.levels[-1]
    assert ladder.pick(nodes[0], edges[0]) == 0 and low[0]["a"] < top[0]["a"]
    # the second batch fits level 0 in "a" but not in "b": the level must fit every type
    assert ladder.pick(nodes[1], edges[1]) == len(ladder.levels) - 1
    big = ({"a": 100, "b": 1}, {("a", "r", "b"): 5})
    assert not ladder.fits(*big)
    grown = ladder.grown(*big)
    assert grown.fits(*big) and len(grown.levels) == len(ladder.levels) + 1


# ---------------------------------------------------------------------------- loader

def test_jax_loader_yields_pygs_neighbor_batches_padded_per_type():
    data = labelled()
    batches = list(neighbor_batches(data))
    loader = JaxLoader(batches)
    assert len(loader) == len(batches) == 3
    seen = 0
    for batch, g in zip(batches, loader):
        assert isinstance(g, HeteroGraph)
        for t in batch.node_types:
            n = batch[t].num_nodes
            np.testing.assert_array_equal(np.asarray(g.x_dict[t][:n]), batch[t].x.numpy())
            assert not np.asarray(g.x_dict[t][n:]).any()
            assert int(g.node_mask_dict[t].sum()) == n
            np.testing.assert_array_equal(np.asarray(g.node_extras[t]["n_id"][:n]),
                                          batch[t].n_id.numpy())
        for r in batch.edge_types:
            e = batch[r].edge_index.shape[1]
            np.testing.assert_array_equal(np.asarray(g.edge_index_dict[r][:, :e]),
                                          batch[r].edge_index.numpy())
            assert int(g.edge_mask_dict[r].sum()) == e
        n = batch["paper"].num_nodes
        np.testing.assert_array_equal(np.asarray(g.y_dict["paper"][:n]), batch["paper"].y)
        assert int(g.seed_mask_dict["paper"].sum()) == batch["paper"].batch_size
        assert not bool(g.seed_mask_dict["paper"][batch["paper"].batch_size:].any())
        seen += 1
    assert seen == 3


def test_a_jitted_step_compiles_once_per_ladder_level():
    data = labelled()
    batches = list(neighbor_batches(data, batch_size=2)) * 2
    module, _ = built(_heteroconv("mean"), "float32", "dblp-like")
    port = from_torch(module)
    loader = JaxLoader(batches)

    @eqx.filter_jit
    def step(port, g):
        out = port(g.x_dict, g.edge_index_dict)
        return jnp.sum(jnp.where(g.seed_mask_dict["paper"][:, None], out["paper"], 0.0))

    before = None
    for g in loader:
        if before is None:
            before = compilations()
        step(port, g)
    levels = len(loader.ladder.levels)
    assert compilations() - before <= levels


def test_a_batch_beyond_the_top_level_grows_the_ladder_with_a_warning():
    data = labelled()
    batches = list(neighbor_batches(data, batch_size=1))
    small = HeteroLadder.from_sizes([{t: 1 for t in data.node_types}],
                                    [{r: 1 for r in data.edge_types}], multiple=1)
    loader = JaxLoader(batches, ladder=small)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graphs = list(loader)
    assert len(graphs) == len(batches)
    messages = [str(w.message) for w in caught if issubclass(w.category, LadderWarning)]
    assert messages and "HeteroLadder.from_sizes" in messages[0]
    assert len(loader.ladder.levels) > 1


def test_jax_loader_wraps_a_neighbor_loader_on_heterodata_directly():
    data = labelled()
    loader = JaxLoader(neighbor_batches(data), prefetch=1)
    graphs = list(loader)
    assert len(graphs) == 3 and all(isinstance(g, HeteroGraph) for g in graphs)
    assert {t for t in graphs[0].x_dict} == set(data.node_types)


def test_a_mixed_loader_names_the_odd_batch():
    data = labelled()
    from torch_geometric.data import Data

    batches = [data, Data(x=torch.randn(3, 2), edge_index=torch.zeros(2, 0, dtype=torch.long))]
    with pytest.raises(TypeError, match="batch 1: expected a torch_geometric.data.HeteroData"):
        list(JaxLoader(batches))


def test_jax_loader_wraps_an_hgt_loader():
    pytest.importorskip("torch_sparse", reason="HGTLoader samples with torch-sparse")
    from torch_geometric.loader import HGTLoader

    data = labelled()
    torch.manual_seed(0)
    sampler = HGTLoader(data, num_samples={t: [3, 2] for t in data.node_types}, batch_size=3,
                        input_nodes=("paper", None))
    batches = list(sampler)
    for batch, g in zip(batches, JaxLoader(batches)):
        for t in batch.node_types:
            n = batch[t].num_nodes
            np.testing.assert_array_equal(np.asarray(g.x_dict[t][:n]), batch[t].x.numpy())
        assert int(g.seed_mask_dict["paper"].sum()) == batch["paper"].batch_size
    assert [type(g) for g in JaxLoader(sampler)] == [HeteroGraph] * len(sampler)
