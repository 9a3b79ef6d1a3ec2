"""HeteroLinear, HeteroDictLinear, segment_matmul and HEATConv beyond the parity matrix
(torch2jax_ops/parity/cases/hetero_linear.py): jit vs eager, vmap, call and conversion errors, the
order of ``type_vec``, empty types and segments, both matmul strategies and the row blocks,
a user model converted in one call, and the PyG quirks the ports mirror or correct."""
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch_geometric.nn as tnn

import torch2jax_ops
from torch2jax_ops.parity.cases.geometric import _perturbed, graph
from torch2jax_ops import dtypes
from torch2jax_ops.geometric.utils import _segment_matmul as segmm
from torch2jax_ops.geometric import segment_matmul
from torch2jax_ops.geometric.nn import HEATConv, HeteroDictLinear, HeteroLinear
from torch2jax_ops.nn import UnsupportedModuleError, from_torch, state_dict
from torch2jax_ops.nn._registry import functions
from torch2jax_ops.parity import assert_modules_parity


def jx(t):
    return jnp.asarray(t.detach().numpy())


def rng(seed=0):
    return np.random.default_rng(seed)


def close(ours, theirs, dtype="float32"):
    rtol, atol = dtypes.tolerance(dtype)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=rtol, atol=atol)


def per_row(x, type_vec, weight, bias=None):
    """The rule: row i is x_i @ weight[type_i] + bias[type_i] (numpy, float64)."""
    x, w = np.asarray(x, np.float64), np.asarray(weight, np.float64)
    out = np.einsum("nk,nkm->nm", x, w[np.asarray(type_vec)])
    return out if bias is None else out + np.asarray(bias, np.float64)[np.asarray(type_vec)]


def per_segment(inputs, ptr, other):
    """rows ptr[t]:ptr[t + 1] times other[t], every other row 0 (numpy, float64)."""
    inputs, other = np.asarray(inputs, np.float64), np.asarray(other, np.float64)
    out = np.zeros((inputs.shape[0], other.shape[-1]))
    for t in range(len(ptr) - 1):
        out[ptr[t]:ptr[t + 1]] = inputs[ptr[t]:ptr[t + 1]] @ other[t]
    return out


def hetero_linear(types=4, f_in=6, f_out=5, **kw):
    torch.manual_seed(0)
    return _perturbed(tnn.HeteroLinear(f_in, f_out, types, **kw), 1)


def heat(**kw):
    options = dict(in_channels=6, out_channels=4, num_node_types=3, num_edge_types=4,
                   edge_type_emb_dim=3, edge_dim=3, edge_attr_emb_dim=5, heads=2)
    options.update(kw)
    torch.manual_seed(0)
    return _perturbed(tnn.HEATConv(**options), 1)


def heat_inputs(name="loops-and-repeats", dtype="float32"):
    g = graph(name, dtype, features=6, edge_dim=3)
    n, e = g["num_nodes"], g["edge_index"].shape[1]
    node_type = torch.as_tensor(rng(4).integers(0, 3, n))
    edge_type = torch.as_tensor(rng(5).integers(0, 4, e))
    return g["x"], g["edge_index"], node_type, edge_type, g["edge_attr"]


# ------------------------------------------------------------------ registration and names

def test_converters_and_the_fx_function_are_registered():
    assert "pyg_lib.ops.segment_matmul" in functions()
    assert functions()["pyg_lib.ops.segment_matmul"] is segmm.segment_matmul
    assert isinstance(from_torch(hetero_linear()), HeteroLinear)
    assert isinstance(from_torch(tnn.HeteroDictLinear({"a": 2}, 3)), HeteroDictLinear)
    assert isinstance(from_torch(heat()), HEATConv)
    assert torch2jax_ops.geometric.utils.segment_matmul is segment_matmul


@pytest.mark.parametrize("make", [
    lambda: hetero_linear(), lambda: hetero_linear(bias=False),
    lambda: tnn.HeteroDictLinear({"author": 6, "paper": 8}, 5),
    lambda: heat(), lambda: heat(bias=False, heads=1)],
    ids=["hetero-linear", "hetero-linear-no-bias", "hetero-dict-linear", "heat", "heat-no-bias"])
def test_state_dict_names_and_shapes_match_pyg(make):
    layer = make()
    ours = state_dict(from_torch(layer))
    assert {k: tuple(v.shape) for k, v in ours.items()} == \
        {k: tuple(v.shape) for k, v in layer.state_dict().items()}


# ------------------------------------------------------------------ HeteroLinear: the rule

def test_unsorted_type_vec_keeps_each_rows_own_weight():
    """An order where a sorted-by-position reading would give another answer."""
    layer = hetero_linear().eval()
    x = torch.as_tensor(rng(1).standard_normal((9, 6)), dtype=torch.float32)
    type_vec = torch.tensor([3, 0, 2, 0, 1, 3, 1, 2, 0])
    port = from_torch(layer)
    ours = np.asarray(port(jx(x), jx(type_vec)))
    w, b = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    close(ours, per_row(x.numpy(), type_vec.numpy(), w, b))
    close(ours, layer(x, type_vec).detach().numpy())
    # ignoring the order (rows taken as if sorted) would change every misplaced row
    as_if_sorted = per_row(x.numpy(), np.sort(type_vec.numpy()), w, b)
    assert np.abs(ours - as_if_sorted).max() > 0.1


def test_a_type_with_no_rows_gets_no_gradient():
    layer = hetero_linear().eval()
    port = from_torch(layer)
    x = jnp.asarray(rng(1).standard_normal((7, 6)), jnp.float32)
    type_vec = jnp.array([3, 0, 3, 1, 0, 1, 3])  # type 2 has no rows

    def loss(p):
        return jnp.sum(p(x, type_vec) ** 2)

    grads = jax.grad(loss)(port)
    assert np.all(np.asarray(grads.weight[2]) == 0) and np.all(np.asarray(grads.bias[2]) == 0)
    assert np.abs(np.asarray(grads.weight[0])).max() > 0
    close(port(x, type_vec), per_row(x, type_vec, port.weight, port.bias))


def test_jit_equals_eager_and_vmap_equals_a_loop():
    port = from_torch(hetero_linear().eval())
    xs = jnp.asarray(rng(1).standard_normal((3, 8, 6)), jnp.float32)
    types = jnp.asarray(rng(2).integers(0, 4, (3, 8)))
    eager = port(xs[0], types[0])
    close(eqx.filter_jit(port)(xs[0], types[0]), eager)
    batched = jax.vmap(port)(xs, types)
    for i in range(3):
        close(batched[i], port(xs[i], types[i]))
    shared = jax.vmap(port, in_axes=(0, None))(xs, types[0])
    close(shared[1], port(xs[1], types[0]))


def test_both_matmul_strategies_and_row_blocks_agree(monkeypatch):
    """project-all (few types) and per-row weights (many), whole or in row blocks."""
    x = jnp.asarray(rng(1).standard_normal((37, 6)), jnp.float32)
    weight = jnp.asarray(rng(2).standard_normal((5, 6, 4)), jnp.float32)
    bias = jnp.asarray(rng(3).standard_normal((5, 4)), jnp.float32)
    types = jnp.asarray(rng(4).integers(0, 5, 37))
    truth = per_row(x, types, weight, bias)
    for project in (True, False):
        monkeypatch.setattr(segmm, "_project_all_faster", lambda t, k, m, p=project: p)
        close(segmm.typed_matmul(x, types, weight, bias), truth)
        monkeypatch.setattr(segmm, "_BLOCK_ELEMENTS", 50)  # blocks of 2-12 rows, a remainder
        close(segmm.typed_matmul(x, types, weight, bias), truth)
        g_ours = jax.grad(lambda w: jnp.sum(segmm.typed_matmul(x, types, w, bias) ** 2))(weight)
        monkeypatch.undo()
        g_ref = jax.grad(lambda w: jnp.sum(segmm.typed_matmul(x, types, w, bias) ** 2))(weight)
        close(g_ours, g_ref)


def test_the_crossover_rule_picks_what_was_measured():
    assert segmm._project_all_faster(8, 64, 64)       # 73 ms vs 361 ms (f+b)
    assert segmm._project_all_faster(32, 64, 64)      # 150 vs 232
    assert not segmm._project_all_faster(48, 64, 64)  # 451 vs 196
    assert not segmm._project_all_faster(32, 16, 16)  # 67 vs 23
    assert segmm._project_all_faster(48, 128, 128)    # 307 vs 634


# ------------------------------------------------------------------ HeteroLinear: errors

@pytest.mark.parametrize("type_vec, error, match", [
    ([0, 1, 4, 2], IndexError, r"`type_vec` contains 4.*valid range \[0, 4\)"),
    ([0, -1, 2, 2], IndexError, r"`type_vec` contains negative values.*\[0, 4\)"),
    ([0, 1, 2], ValueError, r"`type_vec` must be 1-D with one type per row of `x` \(4\)"),
    ([0.0, 1.0, 2.0, 3.0], TypeError, r"`type_vec` must have an integer dtype"),
], ids=["too-large", "negative", "length", "float"])
def test_hetero_linear_call_errors_name_the_argument(type_vec, error, match):
    port = from_torch(hetero_linear())
    x = jnp.zeros((4, 6))
    with pytest.raises(error, match=match):
        port(x, jnp.asarray(type_vec))


def test_hetero_linear_x_errors_and_traced_type_checks():
    port = from_torch(hetero_linear())
    with pytest.raises(ValueError, match=r"`x` must be \[num_rows, in_channels=6\]"):
        port(jnp.zeros((4, 5)), jnp.zeros(4, jnp.int32))
    with pytest.raises(TypeError, match="`x` is a torch tensor"):
        port(torch.zeros(4, 6), jnp.zeros(4, jnp.int32))
    f = torch2jax_ops.checked(jax.jit(lambda x, t: port(x, t)))
    with pytest.raises(Exception, match=r"`type_vec` has values outside \[0, 4\)"):
        f(jnp.zeros((3, 6)), jnp.array([0, 7, 1]))
    # unchecked under jit: the row of the invalid type is 0 (no weight, no bias)
    out = eqx.filter_jit(port)(jnp.ones((3, 6)), jnp.array([0, 7, 1]))
    assert np.all(np.asarray(out[1]) == 0) and np.abs(np.asarray(out[0])).max() > 0


def test_lazy_layers_are_refused_until_torch_ran_them():
    """Unsized lazy parameters are named, with what to do (before the lazy-init hook PyG
    registers could be reported as a hook)."""
    lazies = [(tnn.HeteroLinear(-1, 4, 3), r"not sized yet \(`weight`\)"),
              (tnn.HeteroDictLinear({"a": 3, "b": -1}, 4), r"not sized yet \(`lins.b.weight`\)"),
              (tnn.HEATConv(-1, 4, 3, 4, 3, 3, 5), "not sized yet")]
    for layer, match in lazies:
        with pytest.raises(UnsupportedModuleError, match=match + ".*Run one forward in torch"):
            from_torch(layer)
    lazy = tnn.HeteroLinear(-1, 4, 3)
    lazy(torch.randn(5, 6), torch.tensor([0, 1, 2, 0, 1]))
    assert from_torch(lazy).in_channels == 6


# ------------------------------------------------------------------ HeteroDictLinear

def test_hetero_dict_linear_keeps_pygs_keys_and_order():
    """Types the layer lacks are ignored, types the input lacks are absent (as PyG)."""
    torch.manual_seed(0)
    layer = _perturbed(tnn.HeteroDictLinear({"paper": 8, "author": 6, "venue": 2}, 5), 1)
    x_dict = {"term": torch.randn(2, 4), "author": torch.randn(3, 6), "paper": torch.randn(4, 8)}
    theirs = layer(x_dict)
    port = from_torch(layer)
    ours = port({k: jx(v) for k, v in x_dict.items()})
    assert list(ours) == list(theirs) == ["paper", "author"]
    for key in ours:
        close(ours[key], theirs[key].detach().numpy())
    close(eqx.filter_jit(port)({k: jx(v) for k, v in x_dict.items()})["author"],
          ours["author"])


def test_hetero_dict_linear_call_errors():
    port = from_torch(tnn.HeteroDictLinear({"a": 3}, 4))
    with pytest.raises(ValueError, match=r"`x_dict\['a'\]` must have 3 features"):
        port({"a": jnp.zeros((2, 5))})
    with pytest.raises(TypeError, match="`x_dict` must be a dict"):
        port(jnp.zeros((2, 3)))


# ------------------------------------------------------------------ segment_matmul

def test_segment_matmul_empty_segments_and_ptr_not_from_zero():
    inputs = jnp.asarray(rng(1).standard_normal((12, 4)), jnp.float32)
    other = jnp.asarray(rng(2).standard_normal((5, 4, 3)), jnp.float32)
    ptr = [2, 2, 5, 5, 9, 9]  # empty segments 0, 2, 4; rows 0-1 and 9-11 in none
    out = segment_matmul(inputs, jnp.asarray(ptr), other)
    close(out, per_segment(inputs, ptr, other))
    assert np.all(np.asarray(out[:2]) == 0) and np.all(np.asarray(out[9:]) == 0)
    g_in, g_other = jax.grad(lambda a, b: jnp.sum(segment_matmul(a, jnp.asarray(ptr), b) ** 2),
                             argnums=(0, 1))(inputs, other)
    assert np.all(np.asarray(g_in[:2]) == 0) and np.all(np.asarray(g_in[9:]) == 0)
    for t in (0, 2, 4):  # an empty segment's matrix gets no gradient
        assert np.all(np.asarray(g_other[t]) == 0)
    assert np.abs(np.asarray(g_other[1])).max() > 0


def test_segment_matmul_degenerate_shapes():
    other = jnp.ones((2, 3, 4))
    assert segment_matmul(jnp.zeros((0, 3)), jnp.array([0, 0, 0]), other).shape == (0, 4)
    none = segment_matmul(jnp.ones((5, 3)), jnp.array([4]), jnp.ones((0, 3, 4)))  # T = 0
    assert none.shape == (5, 4) and np.all(np.asarray(none) == 0)


def test_segment_matmul_matches_pygs_forward_naive_with_gradients():
    """PyG's own loop (what HeteroLinear runs without pyg_lib) in float64."""
    with dtypes.x64():
        inputs = torch.as_tensor(rng(1).standard_normal((10, 4)), dtype=torch.float64)
        other = torch.as_tensor(rng(2).standard_normal((4, 4, 3)), dtype=torch.float64)
        ptr = torch.tensor([0, 3, 3, 7, 10])
        lin = tnn.HeteroLinear(4, 3, 4, bias=False).double()
        with torch.no_grad():
            lin.weight.copy_(other)
        inputs.requires_grad_(True)
        theirs = lin.forward_naive(inputs, ptr)
        cot = torch.as_tensor(rng(3).standard_normal((10, 3)))
        theirs.backward(cot)

        def f(a, b):
            return jnp.sum(segment_matmul(a, jx(ptr), b) * jx(cot))
        g_in, g_other = jax.grad(f, argnums=(0, 1))(jx(inputs), jx(other))
        close(segment_matmul(jx(inputs), jx(ptr), jx(other)), theirs.detach().numpy(),
              "float64")
        close(g_in, inputs.grad.numpy(), "float64")
        close(g_other, lin.weight.grad.numpy(), "float64")


def test_segment_matmul_jit_and_vmap():
    inputs = jnp.asarray(rng(1).standard_normal((2, 10, 4)), jnp.float32)
    other = jnp.asarray(rng(2).standard_normal((3, 4, 2)), jnp.float32)
    ptrs = jnp.array([[0, 2, 6, 10], [1, 1, 4, 8]])
    close(jax.jit(segment_matmul)(inputs[0], ptrs[0], other),
          segment_matmul(inputs[0], ptrs[0], other))
    batched = jax.vmap(segment_matmul, in_axes=(0, 0, None))(inputs, ptrs, other)
    for i in range(2):
        close(batched[i], per_segment(inputs[i], np.asarray(ptrs[i]), other))


@pytest.mark.parametrize("inputs, ptr, other, error, match", [
    ((10, 4), [0, 5, 10], (3, 4, 2), ValueError,
     r"`ptr` must be 1-D with T \+ 1 = 4 entries \(T = other.shape\[0\] = 3"),
    ((10, 4), [[0, 5, 10]], (2, 4, 2), ValueError, r"`ptr` must be 1-D with T \+ 1 = 3"),
    ((10, 4), [0.0, 5.0, 10.0], (2, 4, 2), TypeError, r"`ptr` must have an integer dtype"),
    ((10, 4), [0, 6, 4], (2, 4, 2), ValueError,
     r"`ptr` must be non-decreasing.*ptr\[1\] = 6 > ptr\[2\] = 4"),
    ((10, 4), [0, 5, 11], (2, 4, 2), ValueError, r"`ptr` ends at 11.*\[0, 10\]"),
    ((10, 4), [-1, 5, 10], (2, 4, 2), ValueError, r"`ptr` starts at -1.*\[0, 10\]"),
    ((10, 4), [0, 5, 10], (2, 3, 2), ValueError,
     r"`other` has matrices of 3 rows.*other.shape\[1\] must equal inputs.shape\[1\]"),
    ((10, 4), [0, 5, 10], (4, 2), ValueError, r"`other` must be 3-D \[T, K, M\]"),
    ((2, 10, 4), [0, 5, 10], (2, 4, 2), ValueError, r"`inputs` must be 2-D \[N, K\]"),
], ids=["ptr-length", "ptr-2d", "ptr-float", "ptr-falls", "ptr-past-end", "ptr-negative",
        "other-k", "other-2d", "inputs-3d"])
def test_segment_matmul_errors_name_the_argument(inputs, ptr, other, error, match):
    with pytest.raises(error, match=match):
        segment_matmul(jnp.zeros(inputs), jnp.asarray(ptr), jnp.zeros(other))


def test_segment_matmul_dtype_and_traced_ptr_errors():
    with pytest.raises(TypeError, match="`other` has dtype int32 but `inputs` has float32"):
        segment_matmul(jnp.zeros((4, 2)), jnp.array([0, 4]), jnp.zeros((1, 2, 2), jnp.int32))
    with pytest.raises(TypeError, match="`inputs` is a torch tensor"):
        segment_matmul(torch.zeros(4, 2), jnp.array([0, 4]), jnp.zeros((1, 2, 2)))
    f = torch2jax_ops.checked(jax.jit(segment_matmul))
    with pytest.raises(Exception, match=r"`ptr` must be non-decreasing with values in \[0, 4\]"):
        f(jnp.zeros((4, 2)), jnp.array([0, 3, 1]), jnp.zeros((2, 2, 2)))


# ------------------------------------------------------------------ HEATConv

def test_heat_jit_equals_eager_and_pyg():
    layer = heat(heads=3).eval()
    args = heat_inputs()
    port = from_torch(layer)
    eager = port(*map(jx, args))
    close(eqx.filter_jit(port)(*map(jx, args)), eager)
    close(eager, layer(*args).detach().numpy())


def test_heat_vmap_over_feature_batches():
    port = from_torch(heat().eval())
    x, ei, nt, et, ea = map(jx, heat_inputs())
    xs = jnp.stack([x, 2 * x, -x])
    batched = jax.vmap(port, in_axes=(0, None, None, None, None))(xs, ei, nt, et, ea)
    for i in range(3):
        close(batched[i], port(xs[i], ei, nt, et, ea))


def test_heat_call_errors_name_the_argument():
    port = from_torch(heat())
    x, ei, nt, et, ea = map(jx, heat_inputs())
    with pytest.raises(ValueError, match=r"`edge_attr` \[num_edges, edge_dim=3\] is required"):
        port(x, ei, nt, et)
    with pytest.raises(IndexError, match=r"`edge_type` contains 4.*valid range \[0, 4\)"):
        port(x, ei, nt, et.at[0].set(4), ea)
    with pytest.raises(ValueError, match=r"`edge_type` must be 1-D with one type per edge"):
        port(x, ei, nt, et[:-1], ea)
    with pytest.raises(IndexError, match=r"`type_vec` contains 3.*valid range \[0, 3\)"):
        port(x, ei, nt.at[0].set(3), et, ea)
    with pytest.raises(ValueError, match=r"`edge_attr` must be \[num_edges, edge_dim=3\]"):
        port(x, ei, nt, et, ea[:, :2])
    with pytest.raises(IndexError, match=r"`edge_index` contains the node id 9.*\[0, 8\)"):
        port(x, ei.at[0, 0].set(9), nt, et, ea)


def test_heat_requires_edge_attr_as_pyg_does():
    """PyG's quirk mirrored: edge_attr is optional in the signature, but the message embeds
    it, so PyG fails without it; the port says so instead."""
    layer = heat()
    x, ei, nt, et, _ = heat_inputs()
    with pytest.raises(TypeError, match="NoneType"):
        layer(x, ei, nt, et)
    with pytest.raises(ValueError, match="edge_attr"):
        from_torch(layer)(jx(x), jx(ei), jx(nt), jx(et))


def test_heat_dropped_slot_edges_send_nothing():
    """An edge whose source is the dropped slot N is no edge: same as deleting it."""
    port = from_torch(heat().eval())
    x, ei, nt, et, ea = map(jx, heat_inputs())
    n = x.shape[0]
    padded = port(x, ei.at[0, 0].set(n), nt, et, ea)
    deleted = port(x, ei[:, 1:], nt, et[1:], ea[1:])
    close(padded, deleted)


def test_heat_training_dropout_takes_a_key():
    layer = heat(dropout=0.5).train()
    port = from_torch(layer)
    assert port.training
    args = tuple(map(jx, heat_inputs()))
    a = port(*args, key=jax.random.key(0))
    close(port(*args, key=jax.random.key(0)), a)
    assert np.abs(np.asarray(port(*args, key=jax.random.key(1)) - a)).max() > 0
    evaluated = from_torch(layer.eval())(*args)
    assert np.abs(np.asarray(evaluated - a)).max() > 0


class Net(torch.nn.Module):
    """A user's model: HEATConv then a per-node-type output head."""

    def __init__(self):
        super().__init__()
        self.conv = tnn.HEATConv(6, 8, num_node_types=3, num_edge_types=4,
                                 edge_type_emb_dim=3, edge_dim=3, edge_attr_emb_dim=4, heads=2)
        self.head = tnn.HeteroLinear(16, 2, num_types=3)

    def forward(self, x, edge_index, node_type, edge_type, edge_attr):
        h = self.conv(x, edge_index, node_type, edge_type, edge_attr).relu()
        return self.head(h, node_type)


@pytest.mark.parametrize("name", ["loops-and-repeats", "karate"])
def test_user_model_converts_in_one_call(name):
    """One from_torch, PyG's answer at 1e-4: output, every parameter's and the input
    (x, edge_attr) gradients."""
    torch.manual_seed(0)
    model = _perturbed(Net(), 3)
    port = from_torch(model)
    result = assert_modules_parity(model, port, *heat_inputs(name), rtol=1e-4, atol=1e-4)
    paths = {leaf.path for leaf in result.leaves}
    assert {"grad args[0]", "grad args[4]", "grad conv.att.weight",
            "grad head.weight"} <= paths, sorted(paths)
    assert isinstance(port.conv, HEATConv) and isinstance(port.head, HeteroLinear)
