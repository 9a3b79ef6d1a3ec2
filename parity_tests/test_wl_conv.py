"""PyG's WLConv and its port (torch2jax_ops/geometric/nn/conv/_wl_conv.py): the suite's
section "wl" (colours and histograms against PyG, exactly), the colour table's life across
calls, the traced-input error and bad input."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from torch_geometric.nn import WLConv

from torch2jax_ops import to_jax
from torch2jax_ops.geometric.nn import WLConv as JaxWLConv
from torch2jax_ops.nn import from_torch
from torch2jax_ops.parity import _suite as suite
from torch2jax_ops.parity.cases.wl import _graphs

CASES = suite.cases("wl")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_wl_matches_pyg(case):
    result = case.run()
    assert result.passed, str(result)
    assert result.leaves, "nothing was compared"


def _j(t):
    return to_jax(t, allow_downcast=True)


def test_table_grows_across_calls_as_pygs_dict():
    """Graphs coloured in separate calls get the ids PyG's one growing dict gives them."""
    ours, theirs = from_torch(WLConv()), WLConv()
    for seed in range(3):
        x, edge_index, _ = _graphs(seed, colours=2 + seed)
        expected = theirs(x, edge_index)
        got = ours(_j(x), _j(edge_index))
        np.testing.assert_array_equal(np.asarray(got), expected.numpy())
        assert ours.hashmap == theirs.hashmap  # same keys (hash of the tuple), same ids
        h = ours.histogram(got, norm=False)
        assert h.shape == (1, len(theirs.hashmap))
        np.testing.assert_array_equal(np.asarray(h), theirs.histogram(expected).numpy())
    assert len(ours.hashmap) > 10


def test_conversion_copies_pygs_hashmap_and_leaves_it_alone():
    conv = WLConv()
    x, edge_index, _ = _graphs(0)
    conv(x, edge_index)
    before = dict(conv.hashmap)
    port = from_torch(conv)
    assert port.hashmap == before
    port(_j(x + 1), _j(edge_index))  # new tuples: the port's table grows ...
    assert len(port.hashmap) > len(before)
    assert conv.hashmap == before  # ... the torch module's dict does not
    shared = jax.tree_util.tree_map(lambda a: a, port)  # copies share the table
    assert shared.hashmap == port.hashmap
    port.reset_parameters()
    assert port.hashmap == {} and shared.hashmap == {}


def test_runs_under_jit_on_constants_and_names_the_fix_when_traced():
    conv = JaxWLConv()
    x, edge_index, batch = (_j(t) for t in _graphs(0))
    eager = conv(x, edge_index)
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda: conv(x, edge_index))()), eager)
    with pytest.raises(ValueError, match=r"`x` is traced.*close over them"):
        jax.jit(conv)(x, edge_index)
    with pytest.raises(ValueError, match=r"`batch` is traced"):
        jax.jit(lambda b: conv.histogram(eager, b))(batch)


def test_empty_graph_gives_pygs_empty_float_tensor():
    conv, theirs = JaxWLConv(), WLConv()
    x, e = torch.zeros(0, dtype=torch.int64), torch.zeros((2, 0), dtype=torch.int64)
    expected = theirs(x, e)
    got = conv(_j(x), _j(e))
    assert got.shape == tuple(expected.shape) == (0,)
    assert got.dtype == jnp.float32 and expected.dtype == torch.float32


@pytest.mark.parametrize("args, error, match", [
    ((jnp.asarray([[1, 1], [0, 1]]), jnp.zeros((2, 0), jnp.int32)), ValueError, "one-hot"),
    ((jnp.asarray([0.0, 1.0]), jnp.zeros((2, 0), jnp.int32)), TypeError, "integer colours"),
    ((jnp.asarray([0, 1]), jnp.asarray([[0, 2], [1, 0]])), IndexError,
     r"`edge_index`.*valid range \[0, 2\)"),
    ((jnp.asarray([0, 1]), jnp.asarray([0, 1])), ValueError, r"`edge_index` must be integer \[2"),
])
def test_bad_input_names_the_argument(args, error, match):
    with pytest.raises(error, match=match):
        JaxWLConv()(*args)


def test_histogram_checks_colours_and_batch():
    conv = JaxWLConv()
    conv(jnp.asarray([0, 1, 1]), jnp.asarray([[0, 1], [1, 2]]))
    with pytest.raises(IndexError, match=r"colours must lie in \[0, 3\)"):
        conv.histogram(jnp.asarray([0, 5, 1]))
    with pytest.raises(ValueError, match="`batch` is empty"):
        conv.histogram(jnp.zeros(0, jnp.int32), jnp.zeros(0, jnp.int32))


def test_traced_model_histogram_is_the_ports_own():
    """conv.histogram in a traced forward runs the port's method (its own table's width),
    not PyG's code on the torch module (whose dict this port never fills)."""
    from torch2jax_ops.parity.cases.wl import _wl_model

    model = _wl_model(2, norm=False)
    port = from_torch(model)
    x, edge_index, batch = _graphs(0)
    colours, hists = port(_j(x), _j(edge_index), _j(batch))
    assert all(len(conv.hashmap) == 0 for conv in model.convs)  # torch never ran
    for conv, h in zip((port["convs.0"], port["convs.1"]), hists):
        assert h.shape == (3, len(conv.hashmap)) and len(conv.hashmap) > 0
    expected_colours, expected = model(x, edge_index, batch)
    np.testing.assert_array_equal(np.asarray(colours), expected_colours.numpy())
    for h, e in zip(hists, expected):
        np.testing.assert_array_equal(np.asarray(h), e.numpy())
