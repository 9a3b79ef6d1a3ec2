"""HeteroBatchNorm's port against PyG: training mode under jit, the running statistics of the
types present, eval mode, the errors. (The "hetero" parity cases compare outputs and
gradients on the typed graphs; these tests follow the buffers over several steps.)"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch_geometric")

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import torch  # noqa: E402
import torch_geometric.nn as tnn  # noqa: E402

from torch2jax_ops.geometric.nn import HeteroBatchNorm  # noqa: E402
from torch2jax_ops.nn import from_torch, state_dict, stateful_call  # noqa: E402

#: 10 rows of types 0 and 1; type 2 has no row in this batch
TYPES = [0, 0, 1, 1, 1, 0, 1, 0, 0, 1]


def _layer(momentum):
    torch.manual_seed(0)
    m = tnn.HeteroBatchNorm(6, 3, momentum=momentum)
    with torch.no_grad():
        m.weight.normal_()
        m.bias.normal_()
        m.running_mean.normal_()
        m.running_var.uniform_(0.5, 1.5)
    return m


@pytest.mark.parametrize("momentum", [0.1, None])
def test_training_steps_move_the_present_types_only(momentum):
    """Three jitted training steps: outputs, the gradient w.r.t. x / weight / bias (none
    through the batch statistics, which PyG takes under no_grad), and after each step the
    running statistics -- type 2 has no rows and keeps its own, as PyG's
    ``torch.unique(type_vec)`` update leaves it -- and ``num_batches_tracked`` (counted only
    with ``momentum=None``, as PyG)."""
    m = _layer(momentum)
    port = from_torch(m, copy=True)
    assert isinstance(port, HeteroBatchNorm) and port.training
    tv = torch.tensor(TYPES)

    @eqx.filter_jit
    def step(p, x, t):
        def loss(px):
            out, new = stateful_call(px[0], px[1], t)
            return jnp.sum(out ** 2), (out, new)
        (_, (out, new)), grads = eqx.filter_value_and_grad(loss, has_aux=True)((p, x))
        return out, new, grads

    before = m.running_mean[2].clone()
    for i in range(3):
        x = torch.randn(10, 6, generator=torch.Generator().manual_seed(i), requires_grad=True)
        m.zero_grad()
        out_t = m(x, tv)
        (out_t ** 2).sum().backward()
        out, port, (g_p, g_x) = step(port, jnp.asarray(x.detach().numpy()),
                                     jnp.asarray(tv.numpy()))
        np.testing.assert_allclose(np.asarray(out), out_t.detach().numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(g_x), x.grad.numpy(), rtol=1e-5, atol=1e-5)
        for name in ("weight", "bias"):
            np.testing.assert_allclose(np.asarray(getattr(g_p, name)),
                                       getattr(m, name).grad.numpy(), rtol=1e-5, atol=1e-5)
        ours = state_dict(port)
        for name, buf in m.state_dict().items():
            np.testing.assert_allclose(np.asarray(ours[name]), buf.numpy(), rtol=1e-5,
                                       atol=1e-6, err_msg=f"step {i}: {name}")
    assert torch.equal(m.running_mean[2], before)  # the rule the mask mirrors
    assert not torch.equal(m.running_mean[0], _layer(momentum).running_mean[0])
    assert int(ours["num_batches_tracked"]) == (3 if momentum is None else 0)


def test_eval_mode_uses_the_running_statistics():
    m = _layer(0.1).eval()
    port = from_torch(m)
    assert not port.training
    x = torch.randn(10, 6)
    tv = torch.tensor(TYPES[:8] + [2, 2])
    with torch.no_grad():
        expected = m(x, tv)
    got = jax.jit(lambda p, x, t: p(x, t))(port, jnp.asarray(x.numpy()), jnp.asarray(tv.numpy()))
    np.testing.assert_allclose(np.asarray(got), expected.numpy(), rtol=1e-5, atol=1e-6)


def test_type_errors_name_the_argument():
    port = from_torch(_layer(0.1))
    x = jnp.ones((4, 6))
    with pytest.raises(IndexError, match="type_vec.*num_types=3"):
        port(x, jnp.array([0, 1, 3, 0]))
    with pytest.raises(IndexError, match="type_vec"):
        port(x, jnp.array([0, -1, 1, 0]))
    with pytest.raises(ValueError, match="one type per row"):
        port(x, jnp.array([0, 1]))
    # under jit nothing can raise: a row with an id outside [0, 3) is NaN, never wrapped
    got = eqx.filter_jit(lambda p, x, t: p(x, t))(port, x, jnp.array([0, -1, 3, 2]))
    assert np.isfinite(np.asarray(got[0])).all() and np.isfinite(np.asarray(got[3])).all()
    assert np.isnan(np.asarray(got[1:3])).all()
