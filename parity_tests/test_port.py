"""Porting whole models with one call: the fx path of ``from_torch``, users' MessagePassing
layers, the equinox ``MessagePassing`` base, training mode, and the errors a user meets.

The numbers of the user-style models are in the parity matrix (section "models",
``port-*`` cases in torch2jax_ops/parity/cases/port_models.py); this file checks the
behaviour around them.
"""
import subprocess
import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torch_geometric.nn as tnn
from torch_geometric.nn import MessagePassing as PyGMessagePassing

import torch2jax_ops as t2j
from torch2jax_ops.parity.cases import port_models
from torch2jax_ops.geometric.nn import MessagePassing
from torch2jax_ops.nn import (TracedModule, UnsupportedModuleError, from_torch, state_dict,
                              stateful_call)
from torch2jax_ops.parity import assert_modules_parity, compare_modules

ROOT = Path(__file__).resolve().parent.parent


def jx(t):
    return t2j.to_jax(t) if t.dtype != torch.int64 else jnp.asarray(t.numpy(), jnp.int32)


def ring(n=6):
    src = torch.arange(n)
    return torch.stack([src, (src + 1) % n])


# ----------------------------------------------------------------- names and weights

def test_converted_model_keeps_torch_names_and_shares_weights(on_host):
    model, args, _ = port_models.build_model("residual-gcn", "float32")
    port = from_torch(model)
    assert isinstance(port, TracedModule)
    assert set(state_dict(port)) == set(model.state_dict())
    assert t2j.shares_memory(model.convs[1].lin.weight, port["convs.1"].lin.weight)
    params = {k: t2j.to_jax(v.detach()) * 0 for k, v in model.named_parameters()}
    zeroed = t2j.func.functional_call(port, params, tuple(jx(a) for a in args))
    assert jnp.allclose(zeroed, jnp.log(jnp.full_like(zeroed, 1 / zeroed.shape[-1])))


def test_converted_model_compiles_to_the_hand_written_program():
    """Under jit the replay costs nothing: the converted GCN traces to the same heavy
    operations (gathers, scatters, matmuls) as the hand-composed port of the same layers,
    and to as many equations give or take the activation's spelling (the table's relu is
    torch's ``where(x > 0, x, 0)``, the hand-written port's ``jax.nn.relu``)."""
    from torch2jax_ops.parity.cases.geometric import port, torch_models

    torch.manual_seed(0)
    model = torch_models()["GCN"](6, 4).eval()
    x, edge_index = jnp.ones((7, 6)), jx(ring(7))
    converted = jax.make_jaxpr(lambda a, b: from_torch(model)(a, b))(x, edge_index)
    hand = jax.make_jaxpr(lambda a, b: port(model)(a, b))(x, edge_index)
    def heavy(jaxpr):
        names = [e.primitive.name for e in jaxpr.eqns]
        return sorted(n for n in names if n in ("gather", "scatter-add", "scatter_add",
                                               "dot_general", "scatter"))
    assert heavy(converted) == heavy(hand) and heavy(hand)
    assert abs(len(converted.eqns) - len(hand.eqns)) <= 4


def test_float64_model_ports_under_x64():
    with t2j.dtypes.x64(True):
        model, args, _ = port_models.build_model("mean-update", "float64")
        result = assert_modules_parity(model, from_torch(model), *args)
        assert result["output"].dtype == "float64" and result.max_abs < 1e-12


# ------------------------------------------------------------ users' MessagePassing

class GatedConv(PyGMessagePassing):
    """A PyG layer as a user writes one: lin in forward, an MLP gate in message."""

    def __init__(self, f, o, flow="source_to_target"):
        super().__init__(aggr="add", flow=flow)
        self.lin = torch.nn.Linear(f, o)
        self.gate = torch.nn.Sequential(torch.nn.Linear(2 * o, 1), torch.nn.Sigmoid())

    def forward(self, x, edge_index):
        h = self.lin(x)
        return self.propagate(edge_index, x=h)

    def message(self, x_i, x_j):
        return self.gate(torch.cat([x_i, x_j], dim=-1)) * x_j


@pytest.mark.parametrize("flow", ["source_to_target", "target_to_source"])
def test_user_message_passing_layer_ports_in_both_flows(flow):
    torch.manual_seed(0)
    layer = GatedConv(4, 5, flow)
    edge_index = torch.tensor([[0, 0, 1, 2, 3, 4], [1, 2, 2, 3, 4, 0]])  # asymmetric
    x = torch.randn(6, 4)
    port = from_torch(layer)
    assert set(state_dict(port)) == set(layer.state_dict())
    assert_modules_parity(layer, port, x, edge_index)
    other = "target_to_source" if flow == "source_to_target" else "source_to_target"
    assert not np.allclose(np.asarray(port(jx(x), jx(edge_index))),
                           GatedConv(4, 5, other).load_state_dict(layer.state_dict()) and
                           from_torch(GatedConv(4, 5, other))(jx(x), jx(edge_index)))


def test_user_layer_error_names_the_missing_argument_and_the_line():
    class NeedsWeight(PyGMessagePassing):
        def forward(self, x, edge_index):
            return self.propagate(edge_index, x=x)  # forgot edge_weight=

        def message(self, x_j, edge_weight):
            return edge_weight.view(-1, 1) * x_j

    with pytest.raises(TypeError, match=r"message\(\) needs `edge_weight`"):
        from_torch(NeedsWeight())(jnp.ones((3, 2)), jx(ring(3)))


# --------------------------------------------------------- the equinox base class

class EdgeConv(MessagePassing):
    """The hand-written JAX counterpart of an EdgeConv-style PyG layer."""
    lin: t2j.nn.Linear
    aggr = "max"

    def __call__(self, x, edge_index):
        return self.propagate(edge_index, x=x)

    def message(self, x_i, x_j):
        return self.lin(jnp.concatenate([x_i, x_j - x_i], axis=-1))


class TorchEdgeConv(PyGMessagePassing):
    def __init__(self, f, o):
        super().__init__(aggr="max")
        self.lin = torch.nn.Linear(2 * f, o)

    def forward(self, x, edge_index):
        return self.propagate(edge_index, x=x)

    def message(self, x_i, x_j):
        return self.lin(torch.cat([x_i, x_j - x_i], dim=-1))


def test_equinox_base_matches_pyg_including_empty_nodes():
    torch.manual_seed(1)
    layer = TorchEdgeConv(3, 4)
    ours = EdgeConv(t2j.nn.Linear(t2j.to_jax(layer.lin.weight.detach()),
                                  t2j.to_jax(layer.lin.bias.detach())))
    x, edge_index = torch.randn(6, 3), torch.tensor([[0, 1, 2, 3], [1, 2, 3, 1]])  # 0,4,5 empty
    expected = layer(x, edge_index).detach().numpy()
    got = jax.jit(lambda m, a, b: m(a, b))(ours, jx(x), jx(edge_index))
    assert np.allclose(got, expected, atol=1e-6)
    assert np.all(np.asarray(got)[[0, 4, 5]] == 0)  # PyG: empty targets give 0, not -inf


def test_equinox_base_bipartite_and_node_dim():
    class Heads(MessagePassing):
        node_dim = 0

        def __call__(self, x, edge_index):
            return self.propagate(edge_index, x=x)

    x_src, x_dst = jnp.arange(24.0).reshape(4, 2, 3), jnp.zeros((2, 2, 3))
    edge_index = jnp.array([[0, 1, 3], [1, 1, 0]])
    out = Heads()((x_src, x_dst), edge_index)
    assert out.shape == (2, 2, 3)
    assert jnp.allclose(out[1], x_src[0] + x_src[1]) and jnp.allclose(out[0], x_src[3])


def test_equinox_base_drops_the_dropped_slot():
    class Sum(MessagePassing):
        def __call__(self, x, edge_index):
            return self.propagate(edge_index, x=x)

    x = jnp.array([[1.0], [2.0], [4.0]])
    out = Sum()(x, jnp.array([[0, 3, 1], [2, 2, 3]]))  # id 3 = num_nodes: dropped
    assert out[:, 0].tolist() == [0.0, 0.0, 1.0]


# -------------------------------------------------------------------- training mode

def test_batch_norm_training_mode_matches_torch_and_updates_running_stats():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.BatchNorm1d(6, momentum=0.3),
                                torch.nn.ReLU()).train()
    x = torch.randn(9, 4)
    port = from_torch(model, copy=True)
    out, new = jax.jit(lambda m, a: stateful_call(m, a))(port, t2j.to_jax(x))
    expected = model(x)  # torch updates the running statistics in place
    assert np.allclose(out, expected.detach().numpy(), atol=1e-6)
    bn = model[1]
    assert np.allclose(new[1].running_mean, bn.running_mean.numpy(), atol=1e-6)
    assert np.allclose(new[1].running_var, bn.running_var.numpy(), atol=1e-6)
    assert int(new[1].num_batches_tracked) == int(bn.num_batches_tracked) == 1
    assert np.allclose(port[1].running_mean, 0)  # the old port is unchanged (immutable)
    # integer buffers (num_batches_tracked) are leaves too: differentiate the float ones
    grads = eqx.filter_grad(lambda m: jnp.sum(stateful_call(m, t2j.to_jax(x))[0] ** 2))(port)
    expected.square().sum().backward()
    assert np.allclose(grads[0].weight, model[0].weight.grad.numpy(), atol=1e-5)


def test_cumulative_batch_norm_counts_batches():
    bn = torch.nn.BatchNorm1d(3, momentum=None).train()
    port = from_torch(bn, copy=True)
    for seed in range(3):
        x = torch.randn(5, 3, generator=torch.Generator().manual_seed(seed))
        _, port = stateful_call(port, t2j.to_jax(x))
        bn(x)
    assert np.allclose(port.running_mean, bn.running_mean.numpy(), atol=1e-6)
    assert np.allclose(port.running_var, bn.running_var.numpy(), atol=1e-6)


def test_dropout_in_a_converted_model_has_torch_distribution():
    class Net(torch.nn.Module):
        def forward(self, x):
            return F.dropout(x, p=0.3, training=self.training)

    port = from_torch(Net().train())
    x = jnp.ones((200, 500))
    out = port(x, key=jax.random.key(0))
    kept = np.asarray(out != 0)
    assert abs(kept.mean() - 0.7) < 3 * np.sqrt(0.7 * 0.3 / kept.size)
    assert np.allclose(np.asarray(out)[kept], 1 / 0.7)  # survivors scaled by 1 / (1 - p)
    assert jnp.array_equal(out, port(x, key=jax.random.key(0)))
    assert not jnp.array_equal(out, port(x, key=jax.random.key(1)))
    with pytest.raises(ValueError, match=r"needs a PRNG key.*key=jax\.random\.key"):
        port(x)
    assert jnp.array_equal(from_torch(Net().eval())(x), x)


def test_gat_attention_dropout_keeps_the_expected_rate():
    torch.manual_seed(0)
    conv = tnn.GATConv(3, 2, heads=1, dropout=0.5, add_self_loops=False).train()
    port = from_torch(conv)
    n = 400
    edge_index = jnp.stack([jnp.arange(n), jnp.zeros(n, jnp.int32)])  # n edges into node 0
    x = jnp.ones((n, 3))
    eval_out = from_torch(conv.eval())(x, edge_index)[0]
    outs = jnp.stack([port(x, edge_index, key=jax.random.key(k))[0] for k in range(20)])
    # equal features and scores: alpha = 1/n per edge, half kept and doubled on average
    assert jnp.allclose(outs.mean(0), eval_out, rtol=0.05)
    assert not jnp.allclose(outs[0], outs[1])


# ---------------------------------------------------------------- errors a user meets

def test_not_a_module():
    with pytest.raises(TypeError, match="expected a torch.nn.Module, got function"):
        from_torch(lambda x: x)


def test_unsupported_leaf_names_path_class_and_how_to_register():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = torch.nn.PixelShuffle(2)
            self.unused = torch.nn.PixelShuffle(2)  # never called: no error for it

        def forward(self, x):
            return self.bag(x)

    port = from_torch(Net())
    with pytest.raises(UnsupportedModuleError) as info:
        port(jnp.array([[1, 2], [3, 4]]))
    message = str(info.value)
    assert "`bag` (torch.nn.modules.pixelshuffle.PixelShuffle)" in message
    assert "register_converter('torch.nn.modules.pixelshuffle.PixelShuffle')" in message


def test_data_dependent_forward_points_at_the_users_line():
    class Net(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # depends on values
                return x
            return -x

    port = from_torch(Net())
    assert port(jnp.ones(3)).tolist() == [1.0, 1.0, 1.0]  # known values: decided as torch
    with pytest.raises(UnsupportedModuleError,
                       match=r"control flow on a tensor's values.*test_port\.py:\d+.*if x\.sum"):
        jax.jit(lambda a: port(a))(jnp.ones(3))


def test_shape_dependent_control_flow_is_fine():
    class Net(torch.nn.Module):
        def forward(self, x, w=None):
            if x.dim() == 1:
                x = x.unsqueeze(-1)
            if w is not None:
                x = x * w
            return x.sum(-1) if x.size(-1) > 1 else x.squeeze(-1)

    port = from_torch(Net())
    assert port(jnp.arange(3.0)).tolist() == [0.0, 1.0, 2.0]
    assert port(jnp.ones((2, 3)), jnp.full((2, 3), 2.0)).tolist() == [6.0, 6.0]


def test_wrong_number_of_inputs_and_torch_tensors():
    model, args, _ = port_models.build_model("residual-gcn", "float32")
    port = from_torch(model)
    with pytest.raises(TypeError, match=r"ResidualGCN\.forward\(x, edge_index\).*missing"):
        port(jx(args[0]))
    with pytest.raises(TypeError, match=r"got a torch\.Tensor.*to_jax"):
        port(*args)


def test_unmapped_function_names_it_and_the_fix():
    class Net(torch.nn.Module):
        def forward(self, x):
            return torch.fft.fft(x).real

    with pytest.raises(UnsupportedModuleError,
                       match=r"no JAX mapping for `torch\._C\._fft\.fft_fft|no JAX mapping for "
                             r"`torch\.fft"):
        from_torch(Net())(jnp.ones(4))


def test_in_place_update_of_a_view_read_through_its_base_is_refused():
    """torch writes the update through to the viewed tensor; a later read of that tensor
    (or of another view of it) would see the old values here: an error at that read."""
    class Net(torch.nn.Module):
        def forward(self, x):
            x[:, 0].mul_(0)
            return x

    class Sibling(torch.nn.Module):
        def forward(self, x):
            h = x * 2
            a, b = h.view(4), h.reshape(2, 2)
            a.add_(1)
            return b

    with pytest.raises(UnsupportedModuleError, match="in-place update of a view"):
        from_torch(Net())(jnp.ones((2, 2)))
    with pytest.raises(UnsupportedModuleError, match=r"in-place update of a view \(view of "
                                                     r"another tensor, .*test_port\.py:\d+"):
        from_torch(Sibling())(jnp.ones((2, 2)))


def test_in_place_update_of_a_view_whose_base_is_not_read_again():
    """SGFormer's attention: vs = v(x).reshape(...); vs.masked_fill_(~mask, 0); qs[qs == 0]
    = eps. Nothing reads v(x) afterwards, so the view alone taking the update is torch's
    computation: torch's numbers."""
    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q = torch.nn.Linear(4, 4)
            self.v = torch.nn.Linear(4, 4)

        def forward(self, x, mask):
            qs, vs = self.q(x).reshape(2, 3, 2, 2), self.v(x).reshape(2, 3, 2, 2)
            vs.masked_fill_(~mask[:, :, None, None], 0.0)
            qs[qs > 0.1] = 0.1
            return (qs * vs).sum(-1)

    torch.manual_seed(0)
    model = Attention()
    x, mask = torch.randn(2, 3, 4), torch.tensor([[True, True, False], [True, False, False]])
    result = compare_modules(model, from_torch(model), x, mask)
    assert result.passed, result
    out = model(x, mask)
    assert (out[~mask] == 0).all() and not (out[mask] == 0).all()   # the mask took effect


def test_in_place_ops_on_a_tensor_rebind_it():
    class Net(torch.nn.Module):
        def forward(self, x):
            h = x * 2
            h.relu_()
            h[:, 0] = 1.0
            return h

    x = torch.tensor([[-1.0, 2.0], [3.0, -4.0]])
    assert from_torch(Net())(jx(x)).tolist() == Net()(x).tolist()


# --------------------------------------------------------------------- item 6 (fix)

def test_from_state_dict_needs_no_other_import():
    """GCNConv.from_state_dict is a real classmethod (it used to be attached by another
    module at import time, so `pytest -k pre_2_0` failed on its own)."""
    code = ("import torch\n"
            "from torch2jax_ops.geometric.nn.conv._gcn_conv import GCNConv\n"
            "s = {'weight': torch.randn(3, 2), 'bias': torch.zeros(2)}\n"
            "assert GCNConv.from_state_dict(s).lin.weight.shape == (2, 3)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_registered_converter_of_the_user_wins_over_fx():
    class Gate(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.tensor([2.0]))

        def forward(self, x):
            return x * self.w

    class JaxGate(eqx.Module):
        w: jax.Array

        def __call__(self, x):
            return x * self.w + 100.0  # recognisably ours

    path = f"{Gate.__module__}.{Gate.__qualname__}"
    t2j.nn.register_converter(path)(lambda m, ctx: JaxGate(ctx.array(m.w)))
    try:
        assert from_torch(Gate())(jnp.ones(1)).tolist() == [102.0]
    finally:
        from torch2jax_ops.nn import _registry
        _registry.unregister("module", path)
