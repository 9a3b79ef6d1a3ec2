"""geometric.loader without torch: ladder growth, padding of y and extras, the prefetch thread.

Batches here are dicts of NumPy arrays (``x``, ``edge_index``, ``y``, ``batch``,
``batch_size`` ...), which JaxLoader takes like PyG batches.
"""
import gc
import sys
import threading
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from torch2jax_ops import geometric as G
from torch2jax_ops.geometric.loader import EpochStats, JaxLoader, LadderWarning
from torch2jax_ops.geometric.loader._progress import compilations

RNG = np.random.default_rng(0)


def graph(n, e, graphs=1, **extra):
    """A mini-batch of ``graphs`` graphs with ``n`` nodes and ``e`` edges in total."""
    batch = np.sort(np.concatenate([np.arange(graphs), RNG.integers(0, graphs, n - graphs)]))
    item = {"x": RNG.standard_normal((n, 3)).astype(np.float32),
            "edge_index": RNG.integers(0, n, (2, e)), "batch": batch,
            "edge_attr": RNG.standard_normal((e, 2)).astype(np.float32)}
    item.update(extra)
    return item


def prefetch_threads():
    return [t for t in threading.enumerate() if t.name == "JaxLoader-prefetch" and t.is_alive()]


def test_no_torch_needed():
    import subprocess
    code = ("import sys, torch2jax_ops.geometric.loader, torch2jax_ops.geometric.data; "
            "assert 'torch' not in sys.modules, 'imports torch'")
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------- PaddedGraph

def test_padded_graph_keeps_its_seven_fields_and_gains_defaults():
    fields = [jnp.zeros((4, 2)), jnp.zeros((2, 3), jnp.int32), None, jnp.zeros(4, jnp.int32),
              jnp.ones(4, bool), jnp.ones(3, bool), jnp.ones(2, bool)]
    a, b = G.PaddedGraph(*fields), G.PaddedGraph(*fields)
    assert a.y is None and a.seed_mask is None and a.extras == {}
    assert a.extras is not b.extras  # a fresh dict each, never a shared default
    assert (a.num_nodes, a.num_edges, a.num_graphs) == (4, 3, 2)
    out = jax.jit(lambda g: g.x.sum() + g.edge_mask.sum())(a)  # still a pytree
    assert float(out) == 3.0
    again = jax.tree_util.tree_map(lambda v: v, a._replace(extras={"w": jnp.ones(3)}))
    assert isinstance(again, G.PaddedGraph) and again.extras["w"].shape == (3,)


def test_pad_graph_pads_y_at_its_level_and_marks_seeds():
    x, edges = np.ones((5, 2), np.float32), np.array([[0, 1, 2], [1, 2, 3]], np.int32)
    node = G.pad_graph(x, edges, num_nodes=8, num_edges=4, y=np.arange(5), num_seeds=2)
    assert node.y.tolist() == [0, 1, 2, 3, 4, 0, 0, 0]
    assert node.seed_mask.tolist() == [True, True] + [False] * 6
    batch = np.array([0, 0, 1, 1, 1])
    graph = G.pad_graph(x, edges, num_nodes=8, num_edges=4, batch=batch, num_graphs=4,
                        y=np.array([7, 9]))
    assert graph.y.tolist() == [7, 9, 0, 0]
    with pytest.raises(ValueError, match="`y` has 3 rows: neither one per node"):
        G.pad_graph(x, edges, num_nodes=8, num_edges=4, y=np.arange(3))
    with pytest.raises(ValueError, match="y_level='graph' needs one per graph"):
        G.pad_graph(x, edges, num_nodes=8, num_edges=4, y=np.arange(5), y_level="graph")
    with pytest.raises(ValueError, match="`num_seeds`=6 is more than the 5 real nodes"):
        G.pad_graph(x, edges, num_nodes=8, num_edges=4, num_seeds=6)


# --------------------------------------------------------------------- ladders

def test_ladder_from_sizes_merges_close_levels_and_fits_everything():
    sizes = RNG.normal(2000, 40, 300).astype(int)
    ladder = G.BucketLadder.from_sizes(sizes, 10 * sizes, np.full(300, 64))
    assert ladder.levels == 1  # median, p90 and max within 20%: one level
    assert all(ladder.fits(n, 10 * n, 64) for n in sizes)
    spread = G.BucketLadder.from_sizes([10, 100, 1000], [20, 200, 2000])
    assert spread.levels == 2 and spread.pick(10, 20) == 0 and spread.pick(1000, 2000) == 1
    with pytest.raises(ValueError, match="one entry per batch"):
        G.BucketLadder.from_sizes([1, 2], [3])


def test_ladder_grows_by_one_level_that_fits_and_keeps_the_old_ones():
    ladder = G.BucketLadder((16,), (32,), (2,))
    assert not ladder.fits(40, 10)
    grown = ladder.grown(40, 10)
    assert grown.levels == 2 and grown.fits(40, 10) and grown.nodes[0] == 16
    assert grown.pick(40, 10) == 1 and grown.pick(5, 10) == 0
    assert grown.nodes[1] >= 24 and grown.edges[1] >= 48  # at least 1.5x the old top


def test_loader_grows_the_ladder_with_a_warning_never_a_crash():
    items = [graph(n, 2 * n) for n in (10, 20, 80, 12)]
    loader = JaxLoader(items, ladder=G.BucketLadder((16,), (32,), (2,)))
    with pytest.warns(LadderWarning) as caught:
        out = list(loader)
    assert len(out) == 4 and [g.num_nodes for g in out][0] == 16
    messages = [str(w.message) for w in caught]
    assert len(messages) == 2  # 20 nodes, then 80
    assert "BucketLadder.geometric(max_nodes=" in messages[0] and "batch 1 has 20 nodes" in \
        messages[0]
    assert loader.ladder.levels == 3 and out[3].num_nodes == 16  # the small one: level 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(list(loader)) == 4  # the next epoch fits


def test_default_ladder_comes_from_one_pass_over_sizes():
    items = [graph(n, 3 * n, 2) for n in (30, 31, 29, 200)]
    loader = JaxLoader(items)
    assert loader.ladder.fits(200, 600, 2) and loader.ladder.levels == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = list(loader)
    assert {g.num_nodes for g in out[:3]} == {loader.ladder.nodes[0]}


def test_one_shot_iterator_is_sized_by_its_first_batch():
    items = [graph(20, 40), graph(22, 44), graph(100, 200)]
    loader = JaxLoader(iter(items))
    with pytest.warns(LadderWarning):
        out = list(loader)
    assert [g.num_nodes for g in out][:2] == [out[0].num_nodes] * 2 and len(out) == 3


# ----------------------------------------------------------------- padding

def test_real_part_is_exact_and_the_padding_follows_jraphs_convention():
    item = graph(10, 25, 3, y=np.array([0, 1, 2]), train_mask=np.arange(10) % 2 == 0)
    (g,) = list(JaxLoader([item]))
    n, e = 10, 25
    np.testing.assert_array_equal(g.x[:n], item["x"])
    np.testing.assert_array_equal(g.edge_index[:, :e], item["edge_index"])
    np.testing.assert_array_equal(g.edge_attr[:e], item["edge_attr"])
    np.testing.assert_array_equal(g.batch[:n], item["batch"])
    assert g.edge_index.dtype == jnp.int32 and g.batch.dtype == jnp.int32
    assert (np.asarray(g.edge_index[:, e:]) == n).all()  # padding edges: the first padding node
    assert (np.asarray(g.batch[n:]) == 3).all()  # padding nodes: the padding graph
    assert int(g.node_mask.sum()) == n and int(g.edge_mask.sum()) == e
    assert g.graph_mask.tolist()[:4] == [True, True, True, False]
    assert g.y.shape == (g.num_graphs,) and g.y.tolist()[:3] == [0, 1, 2]  # graph-level
    assert g.extras["train_mask"].shape == (g.num_nodes,)
    assert g.extras["train_mask"].tolist()[:n] == item["train_mask"].tolist()
    assert not bool(g.extras["train_mask"][n:].any())


def test_node_level_y_seed_mask_and_other_sized_extras():
    items = []
    for n, labels in ((40, 7), (50, 9)):
        items.append(graph(n, 2 * n, y=RNG.integers(0, 4, n), batch_size=8,
                           edge_label=RNG.random(labels).astype(np.float32),
                           edge_label_index=RNG.integers(0, n, (2, labels)),
                           n_id=np.arange(n) + 1000, num_sampled_nodes=[8, 12, 20]))
    out = list(JaxLoader(items))
    for g, item in zip(out, items):
        n = item["x"].shape[0]
        labels = item["edge_label"].shape[0]
        assert g.y.shape == (g.num_nodes,) and g.y.tolist()[:n] == item["y"].tolist()
        assert g.seed_mask.tolist() == [True] * 8 + [False] * (g.num_nodes - 8)
        slots = g.extras["edge_label"].shape[0]
        assert slots >= 9 and g.extras["edge_label_index"].shape == (2, slots)
        assert int(g.extras["edge_label_mask"].sum()) == labels
        assert (np.asarray(g.extras["edge_label_index"][:, labels:]) == n).all()
        assert g.extras["n_id"].tolist()[:n] == item["n_id"].tolist()
        assert g.extras["num_sampled_nodes"].tolist() == [8, 12, 20]
    assert out[0].extras["edge_label"].shape == out[1].extras["edge_label"].shape


def test_ptr_pads_to_csr_of_the_padded_batch():
    item = graph(10, 20, 2)
    item["ptr"] = np.array([0, int((item["batch"] == 0).sum()), 10])
    (g,) = list(JaxLoader([item]))
    ptr = np.asarray(g.extras["ptr"])
    assert ptr.shape == (g.num_graphs + 1,) and ptr[:3].tolist() == item["ptr"].tolist()
    assert (ptr[3:] == g.num_nodes).all()


def test_int64_values_become_int32_only_when_they_fit():
    ok = graph(10, 20, n_id=np.arange(10, dtype=np.int64))
    (g,) = list(JaxLoader([ok]))
    assert g.extras["n_id"].dtype == jnp.int32
    if not jax.config.jax_enable_x64:
        bad = graph(10, 20, n_id=np.arange(10, dtype=np.int64) + 2 ** 40)
        with pytest.raises(OverflowError, match="`n_id` holds values in"):
            list(JaxLoader([bad]))
    huge = graph(10, 20)
    huge["edge_index"] = huge["edge_index"] + 2 ** 33
    with pytest.raises(OverflowError, match="`edge_index`"):
        list(JaxLoader([huge], ladder=G.BucketLadder((16,), (32,), (2,))))


def test_float64_is_refused_naming_the_attribute_unless_downcast():
    item = graph(6, 8, weight=np.ones(8, np.float64))
    if jax.config.jax_enable_x64:
        pytest.skip("float64 is kept under jax_enable_x64")
    with pytest.raises(TypeError, match="`weight` is float64"):
        list(JaxLoader([item]))
    (g,) = list(JaxLoader([item], allow_downcast=True))
    assert g.extras["weight"].dtype == jnp.float32


def test_unpaddable_attributes_raise_naming_them_or_are_excluded():
    item = graph(6, 8, names=["a", "bb"], ragged=[[1, 2], [3]])
    with pytest.raises(TypeError, match="attribute `names` is a ragged or non-numeric list.*"
                                        "exclude=\\('names',\\)"):
        list(JaxLoader([item]))
    (g,) = list(JaxLoader([item], exclude=("names", "ragged")))
    assert "names" not in g.extras and "ragged" not in g.extras


def test_items_that_are_not_graphs_raise_naming_their_type():
    with pytest.raises(TypeError, match=r"batch 0: expected a torch_geometric.data.Data or Batch"
                                        r".*got builtins.int"):
        list(JaxLoader([5], ladder=G.BucketLadder((16,), (32,), (2,))))
    with pytest.raises(TypeError, match="got builtins.str"):
        JaxLoader(["graph"]).ladder  # the sizes pass checks too
    with pytest.raises(TypeError, match="`loader` must be iterable"):
        iter(JaxLoader(42, ladder=G.BucketLadder((16,), (32,), (2,))))


def test_bad_arguments_name_the_argument():
    with pytest.raises(TypeError, match="`ladder` must be a BucketLadder"):
        JaxLoader([], ladder=(16, 32))
    with pytest.raises(ValueError, match="`prefetch` must be an int >= 0"):
        JaxLoader([], prefetch=-1)
    with pytest.raises(TypeError, match="`device` must be a jax.Device"):
        JaxLoader([], device="cuda:0")
    with pytest.raises(TypeError, match="has no len"):
        len(JaxLoader(iter([])))


# ------------------------------------------------------- compilations, devices

def test_an_epoch_compiles_at_most_once_per_level():
    items = [graph(int(n), int(3 * n), 4) for n in RNG.integers(20, 400, 40)]
    loader = JaxLoader(items)
    traces = []

    @jax.jit
    def step(g):
        traces.append(g.x.shape)
        h = G.global_mean_pool(g.x, g.batch, g.num_graphs)
        return jnp.sum(jnp.where(g.graph_mask[:, None], h, 0)) + jnp.sum(g.edge_attr)

    for g in loader:
        step(g)
    assert 1 <= len(traces) <= loader.ladder.levels
    assert len(traces) == len(loader.stats.levels)
    first = len(traces)
    for g in loader:
        step(g)
    assert len(traces) == first  # the next epoch compiles nothing


def test_stats_count_the_steps_compilations_not_the_loaders_own():
    """Batches are placed by a jitted identity (one program per level): those compilations
    are the loader's, not the user's; ``stats.compilations`` counts the user's only."""
    items = [graph(n, 2 * n, 4) for n in (7, 9, 300, 11)]  # two ladder levels
    loader = JaxLoader(items, ladder=G.BucketLadder((16, 512), (32, 1024), (5, 5)))
    before = compilations()
    batches = list(loader)
    assert compilations() - before == 0 and loader.stats.compilations == 0
    assert [g.num_nodes for g in batches] == [16, 16, 512, 16]
    assert all(g.x.committed and g.edge_index.dtype == jnp.int32 for g in batches)
    step = jax.jit(lambda g: jnp.sum(g.x))
    for g in loader:
        step(g)
    assert loader.stats.compilations == 2  # the step's, one per level


def test_batches_land_on_the_default_device_or_the_one_asked():
    device = jax.devices()[-1]
    (g,) = list(JaxLoader([graph(5, 6)], device=device))
    assert g.x.devices() == {device} and g.extras == {}
    with jax.default_device(jax.devices()[0]):
        loader = JaxLoader([graph(5, 6)])
        (g,) = list(loader)
    assert g.edge_index.devices() == {jax.devices()[0]}


# ------------------------------------------------------------- the thread

class Counting:
    """An iterable that records how many items were pulled from it."""

    def __init__(self, items, fail_at=None):
        self.items, self.fail_at, self.pulled = items, fail_at, 0

    def __len__(self):
        return len(self.items)

    def __iter__(self):
        for index, item in enumerate(self.items):
            if index == self.fail_at:
                raise RuntimeError("the wrapped loader broke")
            self.pulled += 1
            yield item


def test_order_and_len_are_the_wrapped_loaders():
    items = [graph(5 + i, 10, y=np.arange(5 + i)) for i in range(7)]
    for prefetch in (0, 1, 3):
        loader = JaxLoader(items, prefetch=prefetch)
        assert len(loader) == 7
        sizes = [int(g.node_mask.sum()) for g in loader]
        assert sizes == [5 + i for i in range(7)]


def test_prefetch_bounds_how_far_the_thread_runs_ahead():
    source = Counting([graph(5, 10) for _ in range(20)])
    loader = JaxLoader(source, prefetch=2, ladder=G.BucketLadder((16,), (32,), (2,)))
    it = iter(loader)
    next(it)
    time.sleep(0.3)
    assert source.pulled <= 1 + 2 + 1  # the one consumed, `prefetch` queued, one in hand
    it.close()


def test_exceptions_in_the_thread_reraise_with_their_traceback():
    source = Counting([graph(5, 10) for _ in range(6)], fail_at=3)
    loader = JaxLoader(source, ladder=G.BucketLadder((16,), (32,), (2,)))
    seen = []
    with pytest.raises(RuntimeError, match="the wrapped loader broke") as info:
        for g in loader:
            seen.append(g)
    assert len(seen) == 3
    frames = [f.name for f in __import__("traceback").extract_tb(info.value.__traceback__)]
    assert "__iter__" in frames  # Counting.__iter__, in the worker thread
    assert any("prefetch thread" in note for note in info.value.__notes__)
    assert not prefetch_threads()


def test_breaking_out_stops_the_thread():
    source = Counting([graph(5, 10) for _ in range(50)])
    loader = JaxLoader(source, prefetch=2, ladder=G.BucketLadder((16,), (32,), (2,)))
    for index, g in enumerate(loader):
        if index == 2:
            break
    gc.collect()
    deadline = time.time() + 5
    while prefetch_threads() and time.time() < deadline:
        time.sleep(0.01)
    assert not prefetch_threads()
    assert source.pulled < 10
    assert loader.stats.batches == 3


def test_stats_and_the_plain_progress_line(capsys, monkeypatch):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "rich" else real(name, *a))
    loader = JaxLoader([graph(5, 10) for _ in range(4)], progress=True)
    list(loader)
    err = capsys.readouterr().err
    assert "JaxLoader: 4/4 batches" in err and "batches/s" in err and "compilations" in err
    stats = loader.stats
    assert isinstance(stats, EpochStats) and stats.batches == 4
    assert 0 <= stats.wait_seconds <= stats.seconds and 0 <= stats.wait_share <= 1
