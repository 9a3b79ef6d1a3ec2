"""compare / compare_modules replay torch's random draws (torch2jax_ops/parity/_random.py):
a model that draws random numbers in its forward is checked draw for draw."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from testkit.random_draws import EveryDraw
from torch2jax_ops.nn import _functions_nn as fn
from torch2jax_ops.nn import from_torch
from torch2jax_ops.parity import ParityError, compare, compare_modules
from torch2jax_ops.parity._random import torch_draws


@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.parametrize("jit", [True, False])
def test_every_random_function_is_replayed(mode, jit):
    torch.manual_seed(0)
    model = EveryDraw().train(mode == "train")
    x = torch.randn(6, 4)
    port = from_torch(model)
    result = compare_modules(model, port, x, jit=jit)
    assert result.passed, result
    # the draws matter: the port on its own key gives other numbers
    out = port(jnp.asarray(x.numpy()), key=jax.random.key(1))
    assert not np.allclose(np.asarray(out), model(x).detach().numpy(), atol=1e-3)


def test_the_patches_are_gone_after_the_block_even_on_an_error():
    before = (torch.rand, torch.randperm, F.dropout, F.rrelu)
    with pytest.raises(RuntimeError, match="boom"):
        with torch_draws() as draws:
            torch.rand(3)
            torch.empty(2).normal_()
            raise RuntimeError("boom")
    assert [d.kind for d in draws] == ["uniform", "normal"]
    assert (torch.rand, torch.randperm, F.dropout, F.rrelu) == before
    assert "normal_" not in torch.Tensor.__dict__ and "uniform_" not in torch.Tensor.__dict__


def test_a_replayed_torch_run_takes_the_recorded_draws_in_another_dtype():
    """The float64 reference run of a failing float32 leaf replays the float32 run's draws."""
    with torch_draws() as draws:
        u, perm = torch.rand(4), torch.randperm(4)
    with torch_draws(replay=draws) as again:
        u64, perm2 = torch.rand(4, dtype=torch.float64), torch.randperm(4)
    assert u64.dtype == torch.float64 and len(again) == 2
    np.testing.assert_array_equal(u64.numpy(), u.double().numpy())
    np.testing.assert_array_equal(perm2.numpy(), perm.numpy())
    with torch_draws(replay=draws), pytest.raises(RuntimeError, match="draw #1"):
        torch.randn(4)   # another kind than the recorded uniform


def test_a_port_that_draws_in_another_order_is_an_error_naming_both():
    def theirs(x):
        return x[torch.randperm(4)] + torch.rand(4)

    def ours(x):
        return x + fn.rand(4)[fn.randperm(4)]   # uniform first: torch drew the permutation first

    with pytest.raises(ValueError, match=r"draw #1 is uniform of shape \(4,\), but torch's "
                                         r"was randperm"):
        compare(theirs, ours, torch.randn(4))


def test_a_port_that_draws_fewer_times_is_an_error():
    def theirs(x):
        return x * torch.rand(4) + torch.rand(4)

    def ours(x):
        return x * fn.rand(4)

    with pytest.raises(ParityError, match=r"torch drew random numbers 2 time\(s\).*only 1"):
        compare(theirs, ours, torch.randn(4))


def test_a_port_that_draws_more_times_is_an_error():
    def theirs(x):
        return x * torch.rand(4)

    def ours(x):
        return x * fn.rand(4) + fn.randn(4)

    with pytest.raises(ValueError, match=r"after the 1 draw\(s\) the torch run made"):
        compare(theirs, ours, torch.randn(4))


def test_without_replay_the_same_port_fails_the_comparison():
    """The rule guarded: a port that ignores torch's draws (its own constant mask) fails."""
    def theirs(x):
        return F.dropout(x, 0.5)

    def ours(x):
        return x * 2.0   # keeps everything

    torch.manual_seed(0)
    assert not compare(theirs, ours, torch.randn(64)).passed


def test_in_place_draws_keep_torchs_gradients():
    """F.dropout(inplace=True) passes the gradient through the kept entries; an in-place
    fill (x.normal_()) cuts it, as torch's own ops do."""
    class InPlace(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            h = self.lin(x)
            F.dropout(h, 0.5, training=True, inplace=True)
            noise = (h * 1.0).normal_(0.0, 0.1)
            return h + noise

    torch.manual_seed(0)
    model = InPlace()
    result = compare_modules(model, from_torch(model), torch.randn(6, 4))
    assert result.passed, result
    assert result["grad lin.weight"].max_abs < 1e-5
