"""HGTConv beyond the parity matrix (torch2jax_ops/parity/cases/hetero_hgt.py): jit, grad and vmap,
state_dict names, the call errors, which node types PyG returns, PyG's handling of missing
and unknown edge types, the dropped slot, the edge-type-order deviation, and a user model
with two HGTConv layers converted in one call."""
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch_geometric.nn as tnn

from torch2jax_ops.parity.cases.hetero import (
    CITES,
    HAS,
    PUBLISHES,
    WRITES,
    built,
    hetero_graph,
    inputs,
)
from torch2jax_ops.parity.cases.hetero_hgt import _hgt
from torch2jax_ops import dtypes
from torch2jax_ops.nn import Converter, UnsupportedModuleError, from_torch, state_dict
from torch2jax_ops.parity import assert_modules_parity, compare_arrays

TOL = dtypes.tolerance("float32")


def jx(t):
    return jnp.asarray(t.detach().numpy())


def jdict(d):
    return {k: jx(v) for k, v in d.items()}


def layer(out_channels=6, heads=2, graph="with-venue", args=inputs):
    """(PyG HGTConv in eval mode with perturbed weights, its port, torch args)."""
    module, a = built(_hgt(out_channels, heads), "float32", graph, args)
    return module, from_torch(module, copy=True), a


def assert_outputs_match(theirs, ours, **tol):
    assert set(ours) == set(theirs)
    for t in theirs:
        result = compare_arrays(theirs[t], ours[t], f"output[{t!r}]", **tol)
        assert result.passed, result


def assert_close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=TOL[0], atol=TOL[1])


# ------------------------------------------------------------------ names, jit, grad, vmap

@pytest.mark.parametrize("graph", ["dblp-like", "with-venue"])
@pytest.mark.parametrize("out_channels,heads", [(10, 1), (6, 2), (8, 4)])
def test_state_dict_names_and_shapes_match_pyg(graph, out_channels, heads):
    module, port, _ = layer(out_channels, heads, graph)
    ours = {k: tuple(v.shape) for k, v in state_dict(port).items()}
    assert ours == {k: tuple(v.shape) for k, v in module.state_dict().items()}


def test_jit_equals_eager():
    _, port, (x, e) = layer()
    xj, ej = jdict(x), jdict(e)
    eager = port(xj, ej)
    for jitted in (jax.jit(lambda a, b: port(a, b))(xj, ej), eqx.filter_jit(port)(xj, ej)):
        assert set(jitted) == set(eager) == {"author", "paper", "term"}
        for t in eager:
            assert_close(jitted[t], eager[t])


def test_input_gradients_under_jit_match_pyg():
    module, port, (x, e) = layer(8, 2)  # paper is 8 wide: its skip gate is on the gradient path
    rng = np.random.default_rng(3)
    weights = {t: rng.standard_normal((v.shape[0], 8)).astype(np.float32)
               for t, v in x.items() if t != "venue"}
    xt = {t: v.detach().clone().requires_grad_(True) for t, v in x.items()}
    out = module(xt, e)
    sum((out[t] * torch.as_tensor(w)).sum() for t, w in weights.items()).backward()

    def loss(xd):
        o = port(xd, jdict(e))
        return sum(jnp.sum(o[t] * w) for t, w in weights.items())

    grads = jax.jit(jax.grad(loss))(jdict(x))
    assert set(grads) == set(x)
    for t in x:  # venue only sends: its gradient flows through the keys and values of paper
        result = compare_arrays(xt[t].grad, grads[t], f"grad x_dict[{t!r}]", kind="grad")
        assert result.passed, result
    assert float(jnp.abs(grads["venue"]).max()) > 0


def test_vmap_over_a_batch_of_x_dicts_equals_a_loop():
    _, port, (x, e) = layer()
    ej = jdict(e)
    rng = np.random.default_rng(4)
    batch = {t: jnp.asarray(rng.standard_normal((3,) + tuple(v.shape)), jnp.float32)
             for t, v in x.items()}
    stacked = jax.jit(jax.vmap(port, in_axes=(0, None)))(batch, ej)
    for i in range(3):
        one = port({t: v[i] for t, v in batch.items()}, ej)
        assert set(one) == set(stacked)
        for t in one:
            assert_close(stacked[t][i], one[t])


# ---------------------------------------------------------------- errors a user meets

def test_a_missing_node_type_is_a_key_error_naming_x_dict():
    module, port, (x, e) = layer()
    x = {t: v for t, v in x.items() if t != "author"}
    with pytest.raises(KeyError):
        module(x, e)  # PyG: KeyError too
    with pytest.raises(KeyError, match=r"`x_dict` has no features for the node type 'author'"):
        port(jdict(x), jdict(e))


def test_an_unknown_edge_type_is_a_key_error_naming_edge_index_dict():
    module, port, (x, e) = layer()
    extra = ("author", "cites", "author")
    e = {**e, extra: torch.tensor([[0, 1], [1, 0]])}
    with pytest.raises(KeyError):
        module(x, e)  # PyG: edge_types_map[edge_type]
    with pytest.raises(KeyError, match=r"`edge_index_dict` has the edge type \('author', "
                                       r"'cites', 'author'\).*not in the layer's metadata"):
        port(jdict(x), jdict(e))


@pytest.mark.parametrize("bad,error,message", [
    (jnp.zeros((3, 4), jnp.int32), ValueError, r"must have shape \[2, num_edges\]"),
    (jnp.zeros((2, 4), jnp.float32), TypeError, r"must hold integers"),
    (jnp.array([[0, 8], [0, 0]]), IndexError, r"contains the node id 8, but there are only 7"),
    (jnp.array([[0, 0], [0, 10]]), IndexError, r"contains the node id 10, but there are only 9"),
])
def test_a_malformed_edge_index_names_its_edge_type(bad, error, message):
    _, port, (x, e) = layer()
    ej = {**jdict(e), WRITES: bad}
    with pytest.raises(error, match=r"edge_index_dict\[\('author', 'writes', 'paper'\)\].*"
                                    + message):
        port(jdict(x), ej)


def test_other_call_errors_name_the_argument():
    _, port, (x, e) = layer()
    xj, ej = jdict(x), jdict(e)
    with pytest.raises(ValueError, match=r"`x_dict\['author'\]` must have shape "
                                         r"\[num_nodes, 6\].*got \(7, 5\)"):
        port({**xj, "author": xj["author"][:, :5]}, ej)
    with pytest.raises(TypeError, match=r"`x_dict\['term'\]` must be floating point"):
        port({**xj, "term": jnp.ones((5, 4), jnp.int32)}, ej)
    with pytest.raises(TypeError, match=r"`x_dict\['paper'\]` is a torch tensor"):
        port({**xj, "paper": x["paper"]}, ej)
    with pytest.raises(TypeError, match=r"`x_dict` must be a dict"):
        port(list(xj.values()), ej)
    with pytest.raises(TypeError, match=r"`edge_index_dict` must be a dict"):
        port(xj, list(ej.values()))
    with pytest.raises(ValueError, match=r"`edge_index_dict` is empty"):
        port(xj, {})


def test_lazy_layers_are_refused_until_a_torch_forward_sized_them():
    data = hetero_graph("dblp-like")
    conv = tnn.HGTConv(-1, 8, data.metadata(), heads=2)
    with pytest.raises(UnsupportedModuleError, match=r"(?i)run one forward in torch first"):
        from_torch(conv)
    with pytest.raises(UnsupportedModuleError, match=r"not sized yet .*`kqv_lin.lins.author"
                                                     r".weight`.*Run one forward in torch"):
        Converter().convert(conv)
    conv(*inputs(data))
    assert set(state_dict(from_torch(conv))) == set(conv.state_dict())


# ------------------------------------------------------------- which types PyG returns

def test_only_metadata_destinations_are_returned_even_without_incoming_edges():
    """venue only sends: PyG leaves it out (no key, not None). term is a destination in the
    metadata but gets no edge here: PyG returns out_lin(gelu(0)) mixed with x by the skip
    gate (out_channels 4 = term's width), not None and not zeros."""
    def no_term_edges(data):
        x, e = inputs(data)
        return x, {et: v for et, v in e.items() if et[-1] != HAS[-1]}

    module, a = built(_hgt(4, 2), "float32", "with-venue", no_term_edges)
    port = from_torch(module, copy=True)
    x, e = a
    theirs, ours = module(x, e), port(jdict(x), jdict(e))
    assert set(theirs) == set(ours) == {"author", "paper", "term"}
    assert_outputs_match(theirs, ours)
    gate = torch.sigmoid(module.skip["term"])
    starved = gate * module.out_lin.lins["term"].bias + (1 - gate) * x["term"]
    assert torch.allclose(theirs["term"], starved, atol=1e-6)
    assert float(jnp.abs(ours["term"]).min()) > 0
    # a downstream sum over the returned types sees exactly PyG's types
    total = sum(float(v.detach().sum()) for v in theirs.values())
    assert abs(sum(float(v.sum()) for v in ours.values()) - total) < 1e-4 * max(1, abs(total))


def test_node_types_unknown_to_the_layer_are_ignored():
    module, port, (x, e) = layer()
    x = {**x, "extra": torch.randn(4, 3)}
    theirs = module(x, e)
    ours = port(jdict(x), jdict(e))
    assert "extra" not in ours
    assert_outputs_match(theirs, ours)


def test_a_known_edge_type_missing_from_the_input_is_skipped_as_pyg():
    module, port, (x, e) = layer(graph="dblp-like")
    e = {et: v for et, v in e.items() if et != CITES}
    theirs = module(x, e)
    assert_outputs_match(theirs, port(jdict(x), jdict(e)))
    full = port(jdict(x), jdict(inputs(hetero_graph("dblp-like"))[1]))
    assert not np.allclose(np.asarray(full["paper"]), theirs["paper"].detach().numpy())


def test_padding_edges_in_the_dropped_slot_reach_no_node():
    _, port, (x, e) = layer()
    xj, ej = jdict(x), jdict(e)
    n_venue, n_paper = x["venue"].shape[0], x["paper"].shape[0]
    padded = dict(ej)
    padded[PUBLISHES] = jnp.concatenate(
        [ej[PUBLISHES], jnp.array([[n_venue, 0, n_venue], [2, n_paper, n_paper]])], axis=1)
    clean, ours = port(xj, ej), jax.jit(lambda a, b: port(a, b))(xj, padded)
    for t in clean:
        assert_close(ours[t], clean[t])


# ------------------------------------------------------------------------ a user model

class Net(torch.nn.Module):
    """Two HGT layers and a classifier on the authors, as PyG's hgt_dblp.py example."""

    def __init__(self, metadata):
        super().__init__()
        self.conv1 = tnn.HGTConv(-1, 8, metadata, heads=2)
        self.conv2 = tnn.HGTConv(8, 8, metadata, heads=2)
        self.lin = torch.nn.Linear(8, 3)

    def forward(self, x_dict, edge_index_dict):
        h = self.conv1(x_dict, edge_index_dict)
        h = {"author": h["author"].relu(), "paper": h["paper"].relu(),
             "term": h["term"].relu()}
        h = self.conv2(h, edge_index_dict)
        return self.lin(h["author"])


def test_a_user_model_with_two_hgt_layers_converts_in_one_call():
    module, a = built(lambda data: Net(data.metadata()), "float32", "dblp-like")
    port = from_torch(module, copy=True)
    x, e = a
    out = port(jdict(x), jdict(e))
    assert out.shape == (7, 3)
    assert_modules_parity(module, port, x, e, rtol=1e-4, atol=1e-4)
