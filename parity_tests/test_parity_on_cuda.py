"""The parity tools with torch on a GPU (issue 34): a torch model and its tensors on CUDA
against its port on JAX's GPU, inputs on mixed devices (CPU and CUDA), random draws made on
the GPU, and TF32: a user's TF32 switch is off inside a comparison at precision="highest" and
on again after it. Only a GPU can check these (``-m gpu``); skipped unless torch sees a CUDA
device and JAX a GPU. test_parity_devices.py checks the device rule on the CPU."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch_geometric.nn import GATConv, GCNConv

import torch2jax_ops as t2j
from testkit.random_draws import EveryDraw
from torch2jax_ops.geometric.utils import spmm
from torch2jax_ops.nn import from_torch
from torch2jax_ops.parity import (
    assert_modules_parity,
    assert_parity,
    compare,
    compare_modules,
    compare_weights,
    fuzz,
)
from torch2jax_ops.parity._random import torch_draws


def _no_gpu() -> str:
    """Why these tests cannot run here ("" when they can)."""
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    try:
        jax.devices("gpu")
    except RuntimeError:
        return "JAX has no GPU backend (jax[cuda] is not installed)"
    return ""


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(bool(_no_gpu()), reason=_no_gpu() or "-")]

CUDA = torch.device("cuda")
CPU = torch.device("cpu")
RNG = np.random.default_rng(0)
X = torch.tensor(RNG.standard_normal((6, 4)), dtype=torch.float32)
EDGES = torch.tensor([[0, 1, 2, 3, 4, 5, 1, 3], [1, 2, 3, 4, 5, 0, 3, 0]])


def _platforms(tree) -> set:
    """The platforms of every JAX array in ``tree`` ("gpu" for an NVIDIA GPU)."""
    return {d.platform for a in jax.tree_util.tree_leaves(tree) if isinstance(a, jax.Array)
            for d in a.devices()}


def _paths(result) -> set:
    return {leaf.path for leaf in result.leaves}


class GCNStack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = GCNConv(4, 8)
        self.conv2 = GCNConv(8, 3)

    def forward(self, x, edge_index):
        return self.conv2(F.relu(self.conv1(x, edge_index)), edge_index)


class MovingGCNStack(GCNStack):
    """Takes its inputs from any device, as user code often does: moves them to its own."""

    def forward(self, x, edge_index):
        device = self.conv1.lin.weight.device
        x, edge_index = x.to(device), edge_index.to(device)
        return self.conv2(F.relu(self.conv1(x, edge_index)), edge_index)


# ---------------------------------------------------------------- modules on CUDA

@pytest.mark.parametrize("jit", [True, False])
def test_compare_modules_of_a_gcn_stack_on_cuda(jit):
    torch.manual_seed(0)
    model = GCNStack().to(CUDA).eval()
    port = from_torch(model)
    assert _platforms(port) == {"gpu"}
    result = compare_modules(model, port, X.to(CUDA), EDGES.to(CUDA), jit=jit)
    assert result.passed, str(result)
    assert {"output", "grad conv1.lin.weight", "grad conv2.bias", "grad args[0]"} <= _paths(result)
    assert result["output"].shape == (6, 3)
    # the module is left as it was: on the GPU, with no gradients of its own
    assert all(p.device.type == "cuda" and p.grad is None for p in model.parameters())
    # each side's own weights (copied from the GPU tensors) and the weights themselves
    assert compare_modules(model, port, X.to(CUDA), EDGES.to(CUDA), weights="own").passed
    assert compare_weights(model, port).passed


@pytest.mark.parametrize("jit", [True, False])
def test_compare_modules_of_a_gat_on_cuda(jit):
    torch.manual_seed(0)
    conv = GATConv(4, 3, heads=2).to(CUDA).eval()
    result = assert_modules_parity(conv, from_torch(conv), X.to(CUDA), EDGES.to(CUDA), jit=jit)
    assert {"output", "grad att_src", "grad lin.weight", "grad args[0]"} <= _paths(result)


@pytest.mark.parametrize("x_on, edges_on", [(CPU, CUDA), (CUDA, CPU), (CPU, CPU)],
                         ids=["x-cpu", "edges-cpu", "both-cpu"])
def test_compare_modules_with_inputs_on_mixed_devices(x_on, edges_on):
    # the output is on the GPU (the module's device) while x may be on the CPU: its
    # cotangent is made on the GPU, and torch's gradient of x comes back on the CPU
    torch.manual_seed(0)
    model = MovingGCNStack().to(CUDA).eval()
    result = compare_modules(model, from_torch(model), X.to(x_on), EDGES.to(edges_on))
    assert result.passed, str(result)
    assert {"output", "grad conv1.lin.weight", "grad args[0]"} <= _paths(result)


# ---------------------------------------------------------------- functions on CUDA

def segment_mean(x, index, w):
    """A torch_scatter-free function: tanh(x @ w) averaged per group (3 groups)."""
    x_device = x.device
    h = torch.tanh(x @ w.to(x_device))
    index = index.to(x_device)
    total = torch.zeros(3, h.shape[1], dtype=h.dtype, device=x_device).index_add(0, index, h)
    count = torch.zeros(3, dtype=h.dtype, device=x_device).index_add(
        0, index, torch.ones(index.shape, dtype=h.dtype, device=x_device))
    return total / count.clamp(min=1)[:, None]


def segment_mean_jax(x, index, w):
    h = jnp.tanh(x @ w)
    total = jnp.zeros((3, h.shape[1]), h.dtype).at[index].add(h)
    count = jnp.zeros(3, h.dtype).at[index].add(1.0)
    return total / jnp.maximum(count, 1)[:, None]


W = torch.tensor(RNG.standard_normal((4, 5)), dtype=torch.float32)
GROUPS = torch.tensor([0, 2, 2, 0, 1, 0])


@pytest.mark.parametrize("x_on, index_on, w_on", [(CUDA, CUDA, CUDA), (CUDA, CPU, CUDA),
                                                  (CUDA, CUDA, CPU), (CPU, CUDA, CUDA)],
                         ids=["all-cuda", "index-cpu", "w-cpu", "x-cpu"])
def test_assert_parity_of_a_function_on_cuda_and_mixed_devices(x_on, index_on, w_on):
    result = assert_parity(segment_mean, segment_mean_jax, X.to(x_on), GROUPS.to(index_on),
                           W.to(w_on))
    assert _paths(result) == {"output", "grad[0]", "grad[2]"}


def test_outputs_on_two_devices_each_get_their_own_cotangent():
    x, y = X.to(CUDA), X.to(CPU) + 1
    result = compare(lambda x, y: (x.sin(), y.cos() * 2),
                     lambda x, y: (jnp.sin(x), jnp.cos(y) * 2), x, y)
    assert result.passed, str(result)
    assert _paths(result) == {"output[0]", "output[1]", "grad[0]", "grad[1]"}


def test_the_port_gets_the_cuda_tensor_itself_on_the_gpu():
    x = X.to(CUDA)
    seen = []

    def port(a):
        seen.append(a)
        return jnp.sin(a)

    assert compare(torch.sin, port, x, grad=False).passed
    assert _platforms(seen[0]) == {"gpu"} and t2j.shares_memory(x, seen[0])  # DLPack, no copy


def test_a_sparse_csr_input_on_cuda_is_differentiated_by_its_values():
    weights = torch.tensor(RNG.uniform(0.5, 2.0, EDGES.shape[1]), dtype=torch.float32)
    adj = torch.sparse_coo_tensor(EDGES.flip(0), weights, (6, 6)).coalesce().to_sparse_csr()
    adj = adj.to(CUDA).requires_grad_(True)
    result = compare(lambda a, x: a @ x, spmm, adj, X.to(CUDA))
    assert result.passed, str(result)
    assert result["grad[0]"].shape == (EDGES.shape[1],)  # read at the stored entries


def test_the_parity_fixture_on_cuda(parity):
    torch.manual_seed(0)
    model = GCNStack().to(CUDA).eval()
    parity.modules(model, from_torch(model), X.to(CUDA), EDGES.to(CUDA))
    parity(segment_mean, segment_mean_jax, X.to(CUDA), GROUPS.to(CUDA), W.to(CUDA))
    assert len(parity.results) == 2 and all(r.passed for r in parity.results)


def test_fuzzing_a_cuda_scatter_against_its_port():
    seen = set()

    def scatter_sum(src, index, dim=-1, dim_size=None):  # torch's own, 1-D index along dim
        seen.add(src.device.type)
        dim = dim % src.dim()
        size = list(src.shape)
        size[dim] = dim_size if dim_size is not None else (
            int(index.max()) + 1 if index.numel() else 0)
        return torch.zeros(size, dtype=src.dtype, device=src.device).index_add(dim, index, src)

    problems = fuzz.scatter_inputs(("float32",), full_index=False, device=CUDA)
    fuzz.fuzz_scatter(scatter_sum, t2j.scatter_sum, strategy=problems, max_examples=15,
                      skip=lambda p: p.src.numel() == 0 and p.index.numel() > 0)  # as validating.md
    assert seen == {"cuda"}


# ---------------------------------------------------------------- random draws on CUDA

@pytest.mark.parametrize("mode", ["eval", "train"])
def test_the_random_draws_of_a_cuda_model_are_made_there_and_replayed(mode):
    torch.manual_seed(0)
    model = EveryDraw().to(CUDA).train(mode == "train")
    x = torch.randn(6, 4, device=CUDA)
    result = compare_modules(model, from_torch(model), x)
    assert result.passed, str(result)
    with torch.no_grad():
        model.eval()
        with torch_draws() as draws:
            first = model(x)
        with torch_draws(replay=draws):  # the float64 reference's path: the same draws
            again = model(x)
    assert again.device.type == "cuda" and torch.equal(first, again)


# ---------------------------------------------------------------- TF32

@pytest.fixture
def users_tf32():
    """The user turned TF32 on for cuBLAS before calling the tools, as training scripts do;
    cuDNN's TF32 is on by torch's default. Both come back after the test."""
    saved = (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    yield
    torch.set_float32_matmul_precision(saved[0])
    torch.backends.cudnn.allow_tf32 = saved[1]


def _matmul_error(a, b) -> float:
    """How far torch's float32 product is from the float64 one: a few 1e-6 in float32 for
    these sizes, about 1e-2 in TF32 (10 mantissa bits)."""
    a, b = a.detach(), b.detach()
    return float((a @ b - (a.double() @ b.double())).abs().max())


def _conv_error(x, w) -> float:
    x, w = x.detach(), w.detach()
    return float((F.conv2d(x, w) - F.conv2d(x.double(), w.double())).abs().max())


def _uniform(generator, *shape):
    return torch.rand(*shape, device=CUDA, generator=generator) * 2 - 1


def test_a_users_tf32_is_off_inside_highest_and_on_again_after(users_tf32):
    gen = torch.Generator(device=CUDA).manual_seed(0)
    a, b = torch.randn(256, 256, device=CUDA, generator=gen), \
        torch.randn(256, 256, device=CUDA, generator=gen)
    assert _matmul_error(a, b) > 1e-3, "this GPU did not use TF32 when allowed: no check"
    inside = []

    def theirs(a, b):
        inside.append((torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
                       torch.get_float32_matmul_precision(), _matmul_error(a, b)))
        return a @ b

    result = compare(theirs, jnp.matmul, a, b, rtol=1e-4, atol=1e-4)  # TF32: ~1e-2 off
    flag, cudnn, precision, error = inside[0]
    assert (flag, cudnn, precision) == (False, False, "highest")
    assert error < 1e-3, error  # torch's product was float32 inside
    assert result.passed, str(result)  # and JAX's too
    assert result.precision == "highest" and result["output"].max_abs < 1e-3
    # the user's switches are back, and the GPU uses TF32 again
    assert torch.backends.cuda.matmul.allow_tf32 is True
    assert torch.get_float32_matmul_precision() == "high"
    assert torch.backends.cudnn.allow_tf32 is True
    assert _matmul_error(a, b) > 1e-3

    inside.clear()
    compare(theirs, jnp.matmul, a, b, grad=False, precision="default")
    assert inside[0][0] is True and inside[0][3] > 1e-3  # "default": torch as the user set it


def test_cudnn_convolutions_compare_in_float32_too(users_tf32):
    gen = torch.Generator(device=CUDA).manual_seed(1)
    x, w = _uniform(gen, 8, 64, 32, 32), _uniform(gen, 64, 64, 3, 3)
    assert _conv_error(x, w) > 1e-3, "cuDNN did not use TF32 when allowed: no check"
    inside = []

    def theirs(x, w):
        inside.append(_conv_error(x, w))
        return F.conv2d(x, w)

    result = compare(theirs, lambda x, w: jax.lax.conv_general_dilated(x, w, (1, 1), "VALID"),
                     x, w, grad=False, rtol=1e-4, atol=1e-4)
    assert inside[0] < 1e-3, inside  # float32 inside the comparison
    assert result.passed, str(result)
    assert torch.backends.cudnn.allow_tf32 is True and _conv_error(x, w) > 1e-3
