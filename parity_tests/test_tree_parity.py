"""tree.weighted_sum against a model soup computed by torch on real state_dicts."""
import pytest
import torch

from torch2jax_ops import dtypes, tree_to_jax, tree_to_torch
from torch2jax_ops.dlpack import default_device
from torch2jax_ops.tree import weighted_sum


def net(seed: int, dtype) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.BatchNorm1d(16),
                                torch.nn.ReLU(), torch.nn.Linear(16, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 3))
    model(torch.randn(32, 6))  # training mode: moves the BatchNorm statistics
    return model.to(dtype)


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_soup_matches_torch(name):
    dtype = dtypes.torch_dtype(name)
    models = [net(seed, dtype) for seed in range(3)]
    weights = [0.5, 0.3, 0.2]
    states = [m.state_dict() for m in models]
    expected = {key: (sum(w * s[key].double() for w, s in zip(weights, states)).to(dtype)
                      if s0.is_floating_point() else s0)
                for key, s0 in states[0].items()}
    with dtypes.x64(True):
        soup = tree_to_torch(weighted_sum([tree_to_jax(s) for s in states], weights,
                                          integer_leaves="first"))
    # tree_to_jax places the checkpoints on JAX's default device (the GPU on a CUDA machine),
    # the soup is summed there and tree_to_torch hands it to torch there
    where = {"cpu": "cpu", "gpu": "cuda"}[default_device().platform]
    # the dtype's tolerance: the soup sums in float32 for float16/bfloat16 and rounds once,
    # the reference in float64; the two roundings may differ by 1 ulp (2**-10 for float16,
    # inside its rtol of 1e-3), as they did on a GPU, whose float32 dot sums in its own order
    rtol, atol = dtypes.tolerance(name)
    for key, value in expected.items():
        assert soup[key].dtype == value.dtype and soup[key].device.type == where, key
        torch.testing.assert_close(soup[key].cpu(), value, rtol=rtol, atol=atol, msg=key)
    souped = net(0, dtype)
    souped.load_state_dict(soup)
    reference = net(0, dtype)
    reference.load_state_dict(expected)
    souped.eval(), reference.eval()
    x = torch.randn(8, 6, dtype=dtype)
    torch.testing.assert_close(souped(x), reference(x), rtol=rtol * 4, atol=atol * 4)
