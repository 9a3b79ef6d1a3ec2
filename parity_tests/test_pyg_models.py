"""Models built from PyG's own model classes (BasicGNN family, autoencoders, LightGCN, MLP,
Linear, to_captum_model) ported with one ``from_torch`` call: the cases of the section
"pyg_models" (torch2jax_ops/parity/cases/pyg_models.py), and the errors where a model
cannot port, plus the fixes those models needed."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from torch2jax_ops import _dtypes, func
from torch2jax_ops.nn import UnsupportedModuleError, from_torch
from torch2jax_ops.parity import _suite as suite
from torch2jax_ops.parity import compare_modules
from torch2jax_ops.parity.cases import pyg_models

CASES = suite.cases("pyg_models")


def test_section_covers_the_model_classes():
    ops = {c.op.split("-")[0] for c in CASES}
    assert {"GCN", "GraphSAGE", "GIN", "GAT", "GATv2", "PNA", "EdgeCNN", "GAE", "VGAE", "ARGA",
            "ARGVA", "LightGCN", "MLP", "Linear", "to_captum_model"} <= ops
    assert {c.dtype for c in CASES} == {"float32", "float64"}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_pyg_model_matches_torch(case):
    result = case.run()
    assert result.passed, str(result)
    names = {leaf.path for leaf in result.leaves}
    assert "output" in names or any(n.startswith("output") for n in names), names
    assert any(n.startswith("grad ") for n in names), names


def _captum(mask_type):
    from torch_geometric.nn import models as M
    from torch_geometric.nn import to_captum_model

    torch.manual_seed(0)
    model = M.GCN(5, 8, 2, 3).double().eval()
    data = pyg_models.graph("float64")
    mask = torch.rand(1, data["edge_index"].shape[1], dtype=torch.float64)
    if mask_type == "edge":
        args = (mask, data["x"], data["edge_index"])
    else:
        args = (data["x"].unsqueeze(0), mask, data["edge_index"])
    return model, to_captum_model(model, mask_type=mask_type, output_idx=3), args


@pytest.mark.parametrize("mask_type", ["edge", "node_and_edge"])
def test_captum_edge_masks_are_refused_naming_the_cause(mask_type):
    """PyG multiplies every message by the edge mask (explain mode); the port's layers do
    not: the call raises instead of returning another number, and the torch model is left
    as it was (no explain mode, no mask)."""
    model, wrapped, args = _captum(mask_type)
    expected = wrapped(*args)  # torch runs it (and clears its masks)
    with _dtypes.x64(True):
        port = from_torch(wrapped)
        with pytest.raises(UnsupportedModuleError, match="set_masks.*multiplies every message"):
            port(*(jnp.asarray(a.numpy()) for a in args))
    assert all(not getattr(m, "_explain", False) and getattr(m, "_edge_mask", None) is None
               for m in model.modules())
    assert torch.equal(wrapped(*args), expected)


def test_autoencoder_methods_name_the_wrapper_to_write():
    """A port runs forward; gae.encode / decode are reached through a wrapper's forward."""
    from torch_geometric.nn import models as M

    port = from_torch(M.GAE(pyg_models._encoder(False)).float().eval())
    with pytest.raises(AttributeError, match="no method 'decode'.*forward only.*self.model.decode"):
        _ = port.decode
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = port.nothing


class _Scaled(torch.nn.Module):
    """A parameter scaled by a floating buffer before any input is touched (LightGCN's
    ``embedding.weight * alpha[0]``)."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(6, 4, dtype=torch.float64))
        self.register_buffer("alpha", torch.tensor([0.5, 2.0], dtype=torch.float64))

    def forward(self, index):
        w = self.weight * self.alpha[0]
        return (w[index[0]] * w[index[1]]).sum(-1)


def test_reparametrized_parameter_keeps_its_gradient():
    """compare_modules traces the port while the torch module holds plain tensors in its
    parameter slots: fx proxied Parameters only, so `weight * alpha[0]` was computed in
    torch and frozen, and the port's gradient was 0."""
    torch.manual_seed(0)
    model = _Scaled()
    index = torch.tensor([[0, 1, 2, 5, 5], [1, 1, 3, 0, 4]])
    with _dtypes.x64(True):
        result = compare_modules(model, from_torch(model), index)
    assert result.passed, str(result)
    assert result["grad weight"].max_abs == pytest.approx(0.0, abs=1e-12)


def test_port_reads_its_own_floating_buffer():
    """A floating buffer the forward computes with is the port's array: replacing it
    (functional_call, a loaded checkpoint) changes the port's result as it changes torch's."""
    torch.manual_seed(0)
    model = _Scaled()
    index = torch.tensor([[0, 1, 2, 5, 5], [1, 1, 3, 0, 4]])
    alpha = torch.tensor([3.0, 2.0], dtype=torch.float64)
    with torch.no_grad():
        expected = torch.func.functional_call(model, {"alpha": alpha}, (index,)).numpy()
    with _dtypes.x64(True):
        port = from_torch(model)
        got = func.functional_call(port, {"alpha": jnp.asarray(alpha.numpy())},
                                   (jnp.asarray(index.numpy()),), {})
        np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-13)
        assert not np.allclose(np.asarray(port(jnp.asarray(index.numpy()))), expected)


def test_duplicate_self_loop_weights_get_torchs_gradient():
    """PyG's add_remaining_self_loops writes the last loop's weight; torch's backward hands
    the gradient to every loop of the node (GCN with edge_weight on a graph with a repeated
    self-loop): the port gave the overwritten loops, and under GCN all of them, 0."""
    from torch_geometric.nn import GCNConv
    from torch_geometric.utils import add_remaining_self_loops

    from torch2jax_ops.geometric import add_remaining_self_loops_static

    ei = np.array([[0, 1, 0, 2], [0, 2, 0, 1]])
    w = np.array([1.0, 2.0, 3.0, 4.0])
    cot = np.arange(1.0, 6.0)
    tw = torch.tensor(w, requires_grad=True)
    _, attr = add_remaining_self_loops(torch.tensor(ei), tw, num_nodes=3)
    (attr * torch.tensor(cot)).sum().backward()
    with _dtypes.x64(True):
        def f(v):
            _, out = add_remaining_self_loops_static(jnp.asarray(ei), v, num_nodes=3)
            return out[np.array([1, 3, 4, 5, 6])]  # torch's order: 2 non-loops, 3 loops
        np.testing.assert_array_equal(np.asarray(f(jnp.asarray(w))), attr.detach().numpy())
        g = jax.grad(lambda v: (f(v) * cot).sum())(jnp.asarray(w))
        np.testing.assert_array_equal(np.asarray(g), tw.grad.numpy())
        assert tw.grad[0] == tw.grad[2] == 3.0
        # an infinite loop weight stays infinite (not inf - inf = nan)
        inf = f(jnp.asarray([np.inf, 2.0, 3.0, 4.0]))
        assert np.isfinite(np.asarray(inf)).all()
        _, out = add_remaining_self_loops_static(jnp.asarray(ei), jnp.asarray(
            [1.0, 2.0, np.inf, 4.0]), num_nodes=3)
        assert np.asarray(out)[4] == np.inf

        torch.manual_seed(0)
        conv = GCNConv(5, 4).double()
        data = pyg_models.graph("float64")
        assert (data["edge_index"][:, 0] == data["edge_index"][:, 5]).all()  # a repeated loop
        result = compare_modules(conv, from_torch(conv), data["x"], data["edge_index"],
                                 data["edge_weight"])
    assert result.passed, str(result)
