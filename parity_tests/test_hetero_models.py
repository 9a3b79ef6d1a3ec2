"""Heterogeneous models ported in one call beyond the parity matrix: jit, grad and vmap over
dict inputs, the output rules PyG has for node types no edge reaches, and the errors a user
meets (lazy layers not sized, hooks that a port cannot run)."""
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch_geometric.nn as tnn

from torch2jax_ops.parity.cases.hetero import _han, _heteroconv, built, hetero_graph, inputs
from torch2jax_ops import to_jax
from torch2jax_ops.nn import UnsupportedModuleError, from_torch


def jax_inputs(x_dict, edge_index_dict):
    return ({k: to_jax(v) for k, v in x_dict.items()},
            {k: to_jax(v, allow_downcast=True) for k, v in edge_index_dict.items()})


def test_heteroconv_port_under_jit_grad_and_vmap():
    module, (x_dict, edge_index_dict) = built(_heteroconv("mean"), "float32", "dblp-like")
    port = from_torch(module)
    xj, ej = jax_inputs(x_dict, edge_index_dict)

    def loss(x, port=port):
        return sum(jnp.sum(v ** 2) for v in port(x, ej).values())

    # grad w.r.t. every node type's features under jit == torch.autograd
    grads = jax.jit(jax.grad(loss))(xj)
    xt = {k: v.clone().requires_grad_(True) for k, v in x_dict.items()}
    sum((v ** 2).sum() for v in module(xt, edge_index_dict).values()).backward()
    for k in x_dict:
        np.testing.assert_allclose(np.asarray(grads[k]), xt[k].grad.numpy(), rtol=1e-4,
                                   atol=1e-5)
    # vmap over a batch of feature dicts == a loop
    batch = {k: jnp.stack([v, 2 * v, -v]) for k, v in xj.items()}
    stacked = jax.vmap(lambda x: port(x, ej))(batch)
    for i, scale in enumerate((1.0, 2.0, -1.0)):
        one = port({k: scale * v for k, v in xj.items()}, ej)
        for k in one:
            np.testing.assert_allclose(np.asarray(stacked[k][i]), np.asarray(one[k]),
                                       rtol=1e-5, atol=1e-6)


def test_node_types_no_edge_reaches_are_left_out_or_none_as_in_pyg():
    """HeteroConv drops 'venue' (only sends); HANConv returns None for it. Returning zeros
    instead would add a key (HeteroConv) or a tensor (HAN) that PyG does not have."""
    for make, missing in ((_heteroconv("sum"), "absent"), (_han(heads=2), "none")):
        module, args = built(make, "float32", "with-venue")
        expected = module(*args)
        out = eqx.filter_jit(lambda m, a: m(*a))(from_torch(module), jax_inputs(*args))
        assert set(out) == set(expected)
        if missing == "absent":
            assert "venue" not in out
        else:
            assert expected["venue"] is None and out["venue"] is None


def test_lazy_layers_not_sized_name_the_parameters_and_the_fix():
    module = _heteroconv("sum")(hetero_graph())  # no torch forward yet
    with pytest.raises(UnsupportedModuleError, match=r"not sized yet .*Run one forward in torch"):
        from_torch(module)


def test_a_torch_forward_hook_is_refused_not_dropped():
    module, args = built(_heteroconv("sum"), "float32", "dblp-like")
    conv = module.convs["<paper___cites___paper>"]
    conv.register_forward_hook(lambda m, i, o: o * 2)
    with pytest.raises(UnsupportedModuleError, match=r"torch hooks \(_forward_hooks\)"):
        from_torch(module)(*jax_inputs(*args))


def test_a_model_taking_a_heterodata_batch_attribute_by_attribute():
    """A forward that reads x_dict and edge_index_dict off its arguments, and returns a
    tensor of one type (PyG's examples' classifier head)."""
    data = hetero_graph()

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = tnn.HeteroConv({r: tnn.SAGEConv((-1, -1), 8) for r in data.edge_types})
            self.head = tnn.Linear(8, 2)

        def forward(self, x_dict, edge_index_dict):
            return self.head(self.conv(x_dict, edge_index_dict)["author"]).log_softmax(-1)

    torch.manual_seed(0)
    net = Net().eval()
    expected = net(*inputs(data))
    out = from_torch(net)(*jax_inputs(*inputs(data)))
    np.testing.assert_allclose(np.asarray(out), expected.detach().numpy(), rtol=1e-5, atol=1e-6)
