"""RGATConv(attention_mechanism="within-relation") under jit: PyG's per-relation loop over
boolean masks becomes one softmax grouped by (target, relation). The parity cases compare
outputs and gradients; these pin that the grouping is what matters and leaves no trace."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch_geometric")

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import torch  # noqa: E402
import torch_geometric.nn as tnn  # noqa: E402

from torch2jax_ops.nn import from_torch  # noqa: E402


def _graph():
    torch.manual_seed(0)
    x = torch.randn(8, 6)
    # target 0 gets edges of relations 0, 1 and 2; target 5 of relation 1 only; relation 2
    # never reaches target 3
    edge_index = torch.tensor([[1, 2, 3, 4, 6, 7, 0, 1, 2, 0],
                               [0, 0, 0, 0, 5, 5, 3, 3, 7, 7]])
    edge_type = torch.tensor([0, 1, 1, 2, 1, 1, 0, 1, 2, 2])
    return x, edge_index, edge_type


def _jax(*tensors):
    return [jnp.asarray(t.numpy()).astype(jnp.int32 if t.dtype == torch.long else jnp.float32)
            for t in tensors]


@pytest.mark.parametrize("mod", [None, "f-scaled"])
def test_within_relation_under_jit(mod):
    x, ei, et = _graph()
    torch.manual_seed(1)
    within = tnn.RGATConv(6, 4, 3, heads=2, attention_mechanism="within-relation", mod=mod)
    across = tnn.RGATConv(6, 4, 3, heads=2, attention_mechanism="across-relation", mod=mod)
    across.load_state_dict(within.state_dict())
    port = from_torch(within)
    args = _jax(x, ei, et)
    got = eqx.filter_jit(lambda p, *a: p(*a))(port, *args)
    with torch.no_grad():
        expected, other = within(x, ei, et), across(x, ei, et)
    np.testing.assert_allclose(np.asarray(got), expected.numpy(), rtol=1e-5, atol=1e-5)
    # the grouping is what the rule changes: across-relation gives other numbers
    assert not np.allclose(np.asarray(got), other.numpy(), atol=1e-3)
    assert within.attention_mechanism == "within-relation"  # restored after the trace
    assert "message" not in within.__dict__
