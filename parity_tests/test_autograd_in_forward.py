"""torch.autograd.grad inside a converted forward (nn/_fx/_autograd.py, autograd_grad): forces as
-d energy / d pos, PyG's EquilibriumAggregation inner optimiser. The recorded graph from
the inputs to the outputs is evaluated again as a function and differentiated by jax.vjp."""
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from torch2jax_ops.nn import UnsupportedModuleError, from_torch
from torch2jax_ops.parity import compare_modules


class Forces(torch.nn.Module):
    """A SchNet-style energy model that returns its forces."""

    def __init__(self, create_graph=True):
        super().__init__()
        self.embed = torch.nn.Linear(3, 16)
        self.out = torch.nn.Linear(16, 1)
        self.create_graph = create_graph

    def forward(self, pos, scale):
        h = torch.tanh(self.embed(pos)) * scale
        distances = (pos[:, None, :] - pos[None, :, :]).pow(2).sum(-1)
        energy = self.out(h).sum() + 0.1 * torch.exp(-distances).sum()
        forces = -torch.autograd.grad(energy, pos, create_graph=self.create_graph,
                                      retain_graph=True)[0]
        return energy, forces


def _pos():
    torch.manual_seed(0)
    return torch.randn(5, 3, requires_grad=True), torch.tensor(1.5)


@pytest.mark.parametrize("jit", [True, False])
@pytest.mark.parametrize("create_graph", [True, False])
def test_forces_and_their_parameter_gradients_match_torch(jit, create_graph):
    pos, scale = _pos()
    model = Forces(create_graph)
    result = compare_modules(model, from_torch(model), pos, scale, jit=jit)
    assert result.passed, result
    forces = model(pos, scale)[1]
    assert forces.abs().max() > 1e-2          # a real gradient, not zeros
    if create_graph:   # the forces' own dependence on the weights is compared (2nd order)
        assert result["grad embed.weight"].max_abs < 1e-5


def test_create_graph_false_gives_constant_gradients():
    """Without create_graph torch detaches the gradient: the port's forces carry no
    parameter gradient either (the rule guarded: a port that kept it would differ)."""
    pos, scale = _pos()
    port = from_torch(Forces(create_graph=False))
    import jax

    def forces_sum(p):
        return p(jnp.asarray(pos.detach().numpy()), jnp.asarray(1.5))[1].sum()

    grads = jax.grad(lambda p: forces_sum(p))(port)
    assert float(jnp.abs(grads.embed.weight).max()) == 0.0
    port_graph = from_torch(Forces(create_graph=True))
    grads = jax.grad(lambda p: forces_sum(p))(port_graph)
    assert float(jnp.abs(grads.embed.weight).max()) > 0.0


def test_an_unused_input_is_an_error_as_in_torch():
    class Unused(torch.nn.Module):
        def forward(self, x, y):
            return torch.autograd.grad((x * x).sum(), [x, y])[0]

    x, y = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="appears to not have been used"):
        Unused()(x, y)
    with pytest.raises(UnsupportedModuleError, match=r"not used to compute the outputs.*"
                                                     r"allow_unused=True"):
        from_torch(Unused())(jnp.ones(3), jnp.ones(3))


def test_equilibrium_aggregation_matches_pyg():
    from torch_geometric.nn.aggr import EquilibriumAggregation

    torch.manual_seed(0)
    aggr = EquilibriumAggregation(4, 3, [8], grad_iter=3)
    x = torch.randn(7, 4)
    index = torch.tensor([0, 0, 1, 1, 1, 2, 2])
    result = compare_modules(aggr, from_torch(aggr), x, index)
    assert result.passed, result
    assert np.abs(aggr(x, index).detach().numpy()).max() > 1e-3
