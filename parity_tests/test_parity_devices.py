"""Where the parity tools put the torch tensors they make, and torch's TF32 switches around a
comparison (issue 34): checked on the CPU. The tensors a tool makes follow the device of the
tensor they belong to (``_devices.device_of``); the "meta" device stands in for a GPU here,
a device other than the CPU that every torch build has. test_parity_on_cuda.py runs the
tools themselves on a GPU."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings

from torch2jax_ops.parity import _devices, compare, fuzz
from torch2jax_ops.parity._random import torch_draws

META = torch.device("meta")


# ---------------------------------------------------------------- the device rule

def test_tensor_like_makes_the_values_in_the_dtype_and_on_the_device_of_its_tensor():
    values = np.random.default_rng(0).standard_normal((2, 3))
    on_cpu = _devices.tensor_like(values, torch.zeros(1, dtype=torch.bfloat16))
    assert on_cpu.dtype == torch.bfloat16 and on_cpu.device.type == "cpu"
    # rounded once, from the float64 values (the rounding the JAX side's copy gets)
    assert torch.equal(on_cpu, torch.tensor(values).to(torch.bfloat16))
    elsewhere = _devices.tensor_like(values, torch.empty(2, 3, dtype=torch.float16, device=META))
    assert elsewhere.device == META and elsewhere.dtype == torch.float16
    assert tuple(elsewhere.shape) == (2, 3)
    assert _devices.device_of(torch.empty(1, device=META)) == META


def test_every_cotangent_is_made_on_the_device_its_output_gives(monkeypatch):
    outputs = []

    def theirs(x, y):
        out = (x.sin(), (x * y).sum(0))
        outputs.extend(out)
        return out

    def ours(x, y):
        return jnp.sin(x), (x * y).sum(0)

    x, y = torch.randn(4, 3), torch.randn(4, 3)
    asked = []
    real = _devices.device_of

    def spy(tensor):
        asked.append(tensor)
        return real(tensor)

    monkeypatch.setattr(_devices, "device_of", spy)
    assert compare(theirs, ours, x, y).passed
    assert {id(t) for t in outputs} <= {id(t) for t in asked}  # one cotangent per output

    # a cotangent on another device than its output is what autograd refuses (issue 34's
    # "expected device cuda:0 but got cpu"): the device of each one is device_of's answer
    monkeypatch.setattr(_devices, "device_of", lambda tensor: META)
    with pytest.raises(RuntimeError, match="expected device cpu but got meta"):
        compare(theirs, ours, x, y)


def test_the_cotangent_is_the_seeded_draw_rounded_to_the_outputs_dtype():
    # torch's gradient of the identity is its cotangent; the port's (stop_gradient) is zero:
    # the gradient leaf's error is the cotangent itself, the same numbers as before issue 34
    x = torch.randn(5, 4)
    result = compare(lambda t: t * 1.0, jax.lax.stop_gradient, x, seed=3)
    cotangent = np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32)
    leaf = result["grad[0]"]
    assert not leaf.passed and leaf.max_abs == float(np.abs(cotangent).max())
    assert leaf.worst_index == np.unravel_index(np.argmax(np.abs(cotangent)), (5, 4))
    assert result["output"].passed and result["output"].max_abs == 0.0


# ---------------------------------------------------------------- random draws

def test_replayed_draws_come_back_on_the_device_and_in_the_dtype_asked_for():
    with torch_draws() as draws:
        torch.rand(2, 3)
        torch.randn(4)
    with torch_draws(replay=draws):
        u = torch.rand(2, 3, device=META)
        z = torch.randn(4, dtype=torch.float16, device=META)
    assert u.device == META and z.device == META and z.dtype == torch.float16


def test_the_patched_draws_of_a_tensor_are_made_on_its_device():
    def drawing(x):
        return (F.dropout(x, 0.5), torch.empty_like(x).uniform_(-1, 1),
                torch.empty_like(x).normal_(), torch.normal(x, 0.5),
                F.rrelu(x - 1.0, training=True), F.dropout2d(x[None, :, :, None], 0.5))

    with torch_draws() as draws:
        on_cpu = drawing(torch.ones(3, 4))
    assert [d.kind for d in draws] == ["keep", "uniform", "normal", "normal", "uniform", "keep"]
    with torch_draws(replay=draws):  # the same draws for a tensor on another device
        elsewhere = drawing(torch.ones(3, 4, device=META))
    assert [t.device for t in elsewhere] == [META] * len(on_cpu)
    assert [t.shape for t in elsewhere] == [t.shape for t in on_cpu]


# ---------------------------------------------------------------- fuzzing on a device

def test_fuzzed_problems_are_made_on_the_device_asked_for():
    @settings(max_examples=8, deadline=None, database=None)
    @given(problem=fuzz.scatter_inputs(("float32", "int64"), device=META))
    def check(problem):
        assert problem.src.device == META and problem.index.device == META
        assert problem.index.dtype == torch.int64
        assert problem.src.dtype == getattr(torch, problem.dtype)

    check()


def test_fuzzed_problems_stay_on_the_cpu_by_default():
    @settings(max_examples=8, deadline=None, database=None)
    @given(problem=fuzz.scatter_inputs(("float32",)))
    def check(problem):
        assert problem.src.device.type == "cpu" and problem.index.device.type == "cpu"
        if problem.dim_size is not None:  # read off the host copy of the ids, as before
            ids = problem.index.numpy()
            assert problem.dim_size >= (int(ids.max()) + 1 if ids.size else 0)

    check()


def test_fuzz_scatter_draws_its_problems_on_its_device(monkeypatch):
    asked, seen = [], set()
    drawing = fuzz.scatter_inputs

    def spy(*args, **kwargs):
        asked.append(kwargs.get("device"))
        return drawing(*args, **kwargs)

    def scatter_sum(src, index, dim=-1, dim_size=None):  # torch's own, torch_scatter's rules
        seen.add(src.device)
        dim = dim % src.dim()
        if index.dim() == 1:  # a 1-D index runs along dim
            index = index.view([1] * dim + [-1])
        index = index.view(tuple(index.shape) + (1,) * (src.dim() - index.dim()))
        size = list(src.shape)
        size[dim] = dim_size if dim_size is not None else (
            int(index.max()) + 1 if index.numel() else 0)
        return torch.zeros(size, dtype=src.dtype).scatter_add(dim, index.expand(src.shape), src)

    monkeypatch.setattr(fuzz, "scatter_inputs", spy)
    cpu = torch.device("cpu")
    fuzz.fuzz_scatter(scatter_sum, fuzz_port, dtypes=("float32",), device=cpu, max_examples=10,
                      skip=lambda p: p.src.numel() == 0 and p.index.numel() > 0)
    assert asked == [cpu] and seen == {cpu}


def fuzz_port(src, index, dim=-1, dim_size=None):
    import torch2jax_ops as t2j

    return t2j.scatter_sum(src, index, dim=dim, dim_size=dim_size)


# ---------------------------------------------------------------- TF32 switches

#: torch's per-backend float32 precision settings (torch >= 2.9), as a fresh process has them
DEFAULTS = {("generic", "all"): "none", ("cuda", "all"): "none", ("mkldnn", "all"): "none",
            ("cuda", "matmul"): "none", ("cuda", "conv"): "tf32", ("cuda", "rnn"): "tf32",
            ("mkldnn", "matmul"): "none", ("mkldnn", "conv"): "none", ("mkldnn", "rnn"): "none"}
_FP32_KEYS = tuple(DEFAULTS)


def _state():
    """Every switch as torch reads it; "refused" where torch refuses (mixed legacy/new)."""
    def read(get):
        try:
            return get()
        except RuntimeError:
            return "refused"

    legacy = (read(torch.get_float32_matmul_precision),
              read(lambda: torch.backends.cuda.matmul.allow_tf32),
              read(lambda: torch.backends.cudnn.allow_tf32))
    return legacy + tuple(torch._C._get_fp32_precision_getter(*key) for key in _FP32_KEYS)


@pytest.fixture
def fresh_torch_precision():
    """torch's defaults before and after the test (set by hand, not by the code under test)."""
    def reset():
        torch.set_float32_matmul_precision("highest")
        torch.backends.cudnn.allow_tf32 = True
        for key, value in DEFAULTS.items():
            torch._C._set_fp32_precision_setter(*key, value)

    reset()
    assert _state() == ("highest", False, True, *DEFAULTS.values())
    yield
    reset()


USER_SETTINGS = {
    "legacy cuda matmul tf32": lambda: setattr(torch.backends.cuda.matmul, "allow_tf32", True),
    "legacy cudnn tf32 off": lambda: setattr(torch.backends.cudnn, "allow_tf32", False),
    "matmul precision medium": lambda: torch.set_float32_matmul_precision("medium"),
    "matmul precision high": lambda: torch.set_float32_matmul_precision("high"),
    "new api: everything tf32": lambda: setattr(torch.backends, "fp32_precision", "tf32"),
    # torch itself then refuses to read the legacy matmul switches: the tools must not fail
    "new api: cuda matmul tf32": lambda: setattr(torch.backends.cuda.matmul, "fp32_precision",
                                                 "tf32"),
    "new api: mkldnn matmul bf16": lambda: setattr(torch.backends.mkldnn.matmul,
                                                   "fp32_precision", "bf16"),
}

#: what torch reads inside a comparison at precision="highest", whatever the user set
HIGHEST = ("highest", False, False)


@pytest.mark.parametrize("user", list(USER_SETTINGS))
def test_highest_turns_every_tf32_switch_off_and_gives_the_users_back(user,
                                                                      fresh_torch_precision):
    USER_SETTINGS[user]()
    before = _state()
    assert before != ("highest", False, True, *DEFAULTS.values())  # the user changed something
    inside = []

    def theirs(a, b):
        inside.append(_state())
        return a @ b

    a, b = torch.randn(8, 5), torch.randn(5, 3)
    assert compare(theirs, jnp.matmul, a, b).passed
    assert inside[0][:3] == HIGHEST, inside[0]
    leaves = dict(zip(_FP32_KEYS, inside[0][3:]))
    assert {leaves[k] for k in _FP32_KEYS if k[1] != "all"} == {"ieee"}, leaves
    assert _state() == before  # given back, legacy and per-backend switches alike


def test_a_restored_switch_still_follows_its_parent(fresh_torch_precision):
    torch.backends.fp32_precision = "tf32"  # the user sets the parent; the children follow
    compare(lambda a: a @ a, lambda a: a @ a, torch.randn(3, 3))
    torch.backends.fp32_precision = "ieee"  # and later changes it: they follow again
    assert torch.backends.cuda.matmul.fp32_precision == "ieee"
    assert torch.backends.mkldnn.matmul.fp32_precision == "ieee"


def test_default_precision_leaves_the_users_tf32_on_and_errors_give_it_back(
        fresh_torch_precision):
    torch.backends.cuda.matmul.allow_tf32 = True
    seen = []

    def theirs(x):
        seen.append(torch.backends.cuda.matmul.allow_tf32)
        return x * 2

    compare(theirs, lambda x: x * 2, torch.ones(2), precision="default")
    assert seen == [True]

    def failing(x):
        seen.append(torch.backends.cuda.matmul.allow_tf32)
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        compare(failing, lambda x: x, torch.ones(2))
    assert seen[-1] is False and torch.backends.cuda.matmul.allow_tf32 is True
    assert torch.get_float32_matmul_precision() == "high"
