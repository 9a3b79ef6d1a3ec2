"""to_jax / to_torch / shares_memory / tree_to_jax / tree_to_torch against real torch.

Zero-copy is proven by pointer equality (``array.unsafe_buffer_pointer() ==
tensor.data_ptr()``); every trap of the DLPack exchange has a test of its own.
"""
import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from torch2jax_ops import dtypes, shares_memory, to_jax, to_torch, tree_to_jax, tree_to_torch

SHARED_DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64",
                 "uint8", "bool", "complex64", "complex128"]
SHAPES = {"1-D": (7,), "2-D": (3, 5), "0-d": (), "empty": (0, 4)}


def devices() -> list:
    """The devices to test: cpu, plus cuda when torch and JAX both see a GPU (absent, not
    skipped, on a CPU machine)."""
    found = ["cpu"]
    if torch.cuda.is_available() and any(d.platform == "gpu" for d in jax.devices()):
        found.append("cuda")
    return found


def jax_device(name: str):
    return jax.devices("cpu" if name == "cpu" else "gpu")[0]


def sample(name: str, shape: tuple) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    if name == "bool":
        return torch.rand(shape, generator=gen) > 0.5
    if name in dtypes.INT_NAMES:
        info = torch.iinfo(dtypes.torch_dtype(name))
        return torch.randint(max(info.min, -100), min(info.max, 100), shape, generator=gen,
                             dtype=dtypes.torch_dtype(name))
    return torch.randn(shape, generator=gen, dtype=dtypes.torch_dtype(name))


def as_numpy(x) -> np.ndarray:
    """Values of a tensor or array as float64/complex128/bool NumPy (bfloat16 included)."""
    if isinstance(x, torch.Tensor):
        x = x.cpu().resolve_conj().resolve_neg()
        x = x.to(torch.float32) if x.dtype in (torch.bfloat16, torch.float16) else x
        return x.numpy()
    x = np.asarray(x)
    return x.astype(np.float32) if x.dtype.name in ("bfloat16", "float16") else x


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize("name", SHARED_DTYPES)
def test_torch_to_jax_shares_the_buffer(name, shape, device):
    with dtypes.x64(dtypes.needs_x64(name)):
        tensor = sample(name, shape).to(device)
        array = to_jax(tensor, copy=False)
        assert array.devices() == {jax_device(device)}
        assert array.dtype == dtypes.jax_dtype(name) and array.shape == shape
        assert array.unsafe_buffer_pointer() == tensor.data_ptr()
        np.testing.assert_array_equal(as_numpy(array), as_numpy(tensor))


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize("name", SHARED_DTYPES)
def test_jax_to_torch_shares_the_buffer(name, shape, device):
    with dtypes.x64(dtypes.needs_x64(name)):
        values = np.asarray(to_jax(sample(name, shape), copy=True))
        # JAX's own buffer, made on the device from host values: moving an array from the CPU
        # device instead fails for empty arrays on a GPU (jax 0.11.2: "UNIMPLEMENTED:
        # AllocateForDelinearizationAsync is not supported")
        with jax.default_device(jax_device(device)):
            owned = jnp.array(values, copy=True)
        array = jax.device_put(owned, jax_device(device))
        assert array.devices() == {jax_device(device)}
        tensor = to_torch(array, copy=False)
        assert tensor.device.type == device
        assert tensor.dtype == dtypes.torch_dtype(name) and tuple(tensor.shape) == shape
        if array.size:
            assert tensor.data_ptr() == array.unsafe_buffer_pointer()
        else:  # no bytes to share: torch reports a null pointer for empty imports
            assert tensor.numel() == 0 and not shares_memory(tensor, array)
        np.testing.assert_array_equal(as_numpy(tensor), as_numpy(array))


@pytest.mark.parametrize("name", ["uint16", "uint32", "uint64"])
def test_unsigned_wide_types_are_shared_too(name):
    with dtypes.x64(dtypes.needs_x64(name)):
        tensor = torch.arange(5).to(dtypes.torch_dtype(name))
        array = to_jax(tensor, copy=False)
        assert array.unsafe_buffer_pointer() == tensor.data_ptr()
        assert to_torch(array).data_ptr() == tensor.data_ptr()


def test_round_trip_keeps_one_buffer():
    tensor = torch.randn(64, 32)
    assert to_torch(to_jax(tensor)).data_ptr() == tensor.data_ptr()


# ------------------------------------------------------------------ the traps

def test_contiguous_tensors_are_uncommitted_transposed_ones_keep_their_layout():
    """Without device=, a contiguous tensor's array is uncommitted (jit moves it to the
    committed weights); a transposed one is shared in its column-major layout, which JAX
    reads right only from a committed array (uncommitted, ``a[:, [0, 2]]`` came out as
    ``[[0, 2], [5, 7]]``): it stays committed."""
    t = torch.arange(10, dtype=torch.int32).reshape(5, 2).T
    a = to_jax(t)
    assert shares_memory(t, a) and a.committed
    np.testing.assert_array_equal(np.asarray(a[:, jnp.array([0, 2])]), [[0, 4], [1, 5]])
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda a: a + 0)(a)), t.numpy())
    contiguous = t.contiguous()
    c = to_jax(contiguous)
    assert not c.committed and shares_memory(contiguous, c)
    np.testing.assert_array_equal(np.asarray(c[:, jnp.array([0, 2])]), [[0, 4], [1, 5]])


def test_requires_grad_is_detached_never_an_error():
    weight = torch.nn.Parameter(torch.randn(4, 3))
    array = to_jax(weight, copy=False)
    assert shares_memory(weight, array)
    np.testing.assert_array_equal(np.asarray(array), weight.detach().numpy())
    # raw DLPack refuses such a tensor: the trap is real
    with pytest.raises(BufferError):
        jax.dlpack.from_dlpack(weight)


@pytest.mark.parametrize("make", [
    lambda: torch.arange(24.).reshape(4, 6).t(),                          # transpose
    lambda: torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
], ids=["transposed", "channels_last"])
def test_permuted_layouts_are_shared(make):
    tensor = make()
    array = to_jax(tensor, copy=False)
    assert array.unsafe_buffer_pointer() == tensor.data_ptr()
    np.testing.assert_array_equal(np.asarray(array), tensor.numpy())


@pytest.mark.parametrize("make", [
    lambda: torch.arange(24.).reshape(4, 6)[:, ::2],   # a slice with a step
    lambda: torch.arange(3.).expand(4, 3),             # stride 0
    lambda: torch.arange(24.).reshape(4, 6)[:, 1:3],   # rows with gaps
], ids=["step", "expand", "gaps"])
def test_non_compact_strides_copy_or_raise(make):
    tensor = make()
    array = to_jax(tensor)
    np.testing.assert_array_equal(np.asarray(array), tensor.numpy())
    assert not shares_memory(tensor, array)
    with pytest.raises(ValueError, match=r"strides .* copy=False.*contiguous"):
        to_jax(tensor, copy=False)


def test_unaligned_cpu_buffer_copies_or_raises():
    base = torch.arange(17, dtype=torch.float32)
    tensor = base[1:]                      # contiguous, 4 bytes past a 64-byte boundary
    assert tensor.data_ptr() % 64
    array = to_jax(tensor)
    np.testing.assert_array_equal(np.asarray(array), tensor.numpy())
    assert not shares_memory(tensor, array)
    with pytest.raises(ValueError, match="64-byte aligned"):
        to_jax(tensor, copy=False)


def test_unaligned_numpy_buffer_copies_or_raises():
    raw = np.zeros(256, dtype=np.uint8)
    offset = (-raw.ctypes.data) % 64 + 8        # 8 bytes past a 64-byte boundary
    values = raw[offset:offset + 8 * 9].view(np.float64)[:9]
    values[:] = np.arange(9)
    tensor = torch.from_numpy(values)
    assert tensor.data_ptr() % 64 == 8
    with dtypes.x64(True):
        np.testing.assert_array_equal(np.asarray(to_jax(tensor)), np.arange(9.0))
        with pytest.raises(ValueError, match="64-byte aligned"):
            to_jax(tensor, copy=False)


@pytest.mark.parametrize("name", ["int64", "uint64", "float64", "complex128"])
def test_x64_off_refuses_the_silent_downcast(name):
    tensor = sample(name, (5,)) if name != "uint64" else torch.arange(5).to(torch.uint64)
    with dtypes.x64(False):
        with pytest.raises(TypeError, match=r"64-bit mode.*jax_enable_x64.*allow_downcast=True"):
            to_jax(tensor)
        array = to_jax(tensor, allow_downcast=True)
        assert array.dtype == dtypes.jax_dtype(dtypes.X64_DOWNCAST[name])
        np.testing.assert_allclose(as_numpy(array), as_numpy(tensor), rtol=1e-6)
        with pytest.raises(ValueError, match="copy=False"):
            to_jax(tensor, copy=False, allow_downcast=True)


def test_x64_off_never_truncates_an_integer():
    big = torch.tensor([1, 2**40], dtype=torch.int64)
    with dtypes.x64(False):
        # the trap: JAX alone turns 2**40 into 0 without a word, even with copy=False
        assert int(jax.dlpack.from_dlpack(big, copy=False)[1]) == 0
        with pytest.raises(OverflowError, match=r"\[1, 1099511627776\].*int32"):
            to_jax(big, allow_downcast=True)
        with pytest.raises(OverflowError, match="uint32"):
            to_jax(torch.tensor([2**33], dtype=torch.uint64), allow_downcast=True)
        with pytest.raises(OverflowError, match="uint32"):  # >= 2**63 reads negative as int64
            to_jax(torch.tensor([2**63 + 5], dtype=torch.uint64), allow_downcast=True)
    with dtypes.x64(True):
        assert int(to_jax(big)[1]) == 2**40


def test_conjugate_bit_is_resolved():
    z = torch.tensor([1 + 2j, -3 - 0.5j], dtype=torch.complex64)
    lazy = z.conj()
    assert lazy.is_conj()
    np.testing.assert_array_equal(np.asarray(to_jax(lazy)), np.conj(z.numpy()))
    with pytest.raises(ValueError, match="conjugate bit.*resolve_conj"):
        to_jax(lazy, copy=False)
    with pytest.raises(BufferError):  # raw DLPack refuses it
        jax.dlpack.from_dlpack(lazy)


def test_negative_bit_is_resolved():
    lazy = torch.tensor([1 + 2j, 3 - 1j]).conj().imag   # a negative-bit view
    assert lazy.is_neg()
    np.testing.assert_array_equal(np.asarray(to_jax(lazy)), [-2.0, 1.0])
    with pytest.raises(ValueError, match="negative bit"):
        to_jax(lazy, copy=False)


def test_a_tracer_cannot_go_to_torch():
    with pytest.raises(TypeError, match="traced value.*as_jax"):
        jax.jit(lambda x: to_torch(x))(jnp.ones(3))


@pytest.mark.parametrize("bad, error, words", [
    (np.ones(3), TypeError, "jnp.asarray"),
    (jnp.ones(3), TypeError, "already a JAX array"),
    (torch.tensor([[1.0, 0.0], [0.0, 2.0]]).to_sparse_bsr((1, 1)), TypeError,
     "to_sparse_csr"),
    (torch.sparse_coo_tensor(torch.zeros((0, 1), dtype=torch.int64), torch.ones(1, 3), (3,)),
     ValueError, "no sparse dimension"),
    (torch.ones(2, 3, 4).to_sparse_csr(), ValueError, "batched"),
    (torch.ones(3, device="meta"), ValueError, "meta"),
])
def test_to_jax_rejects_what_it_cannot_take(bad, error, words):
    with pytest.raises(error, match=words):
        to_jax(bad)


@pytest.mark.parametrize("bad, words", [(np.ones(3), "torch.from_numpy"),
                                        (torch.ones(3), "already a torch tensor"),
                                        ([1.0], "torch.as_tensor")])
def test_to_torch_rejects_what_it_cannot_take(bad, words):
    with pytest.raises(TypeError, match=words):
        to_torch(bad)


# ------------------------------------------------------------------ aliasing

def test_torch_writes_show_in_the_shared_jax_array():
    tensor = torch.zeros(4)
    shared, independent = to_jax(tensor), to_jax(tensor, copy=True)
    tensor.add_(1.0)
    np.testing.assert_array_equal(np.asarray(shared), np.ones(4))      # documented: aliased
    np.testing.assert_array_equal(np.asarray(independent), np.zeros(4))
    assert shares_memory(tensor, shared) and not shares_memory(tensor, independent)


def test_jax_copy_flag_alone_does_not_copy_but_ours_does():
    tensor = torch.zeros(4)
    raw = jax.dlpack.from_dlpack(tensor, copy=True)   # JAX 0.10.2 on CPU: still shared
    ours = to_jax(tensor, copy=True)
    tensor.fill_(7.0)
    assert float(ours[0]) == 0.0 and not shares_memory(tensor, ours)
    assert float(raw[0]) == 7.0 and shares_memory(tensor, raw)  # the trap: JAX's flag shares


def test_torch_view_of_a_jax_array_is_writable_and_aliased():
    array = jnp.zeros(3)
    view, independent = to_torch(array), to_torch(array, copy=True)
    view[0] = 5.0
    assert float(array[0]) == 5.0                       # documented: keep it read-only
    independent[1] = 9.0
    assert float(array[1]) == 0.0
    assert shares_memory(view, array) and not shares_memory(independent, array)


def test_shares_memory_sees_partial_views_in_either_order():
    tensor = torch.arange(10.0)
    array = to_jax(tensor)
    assert shares_memory(tensor[3:5], array) and shares_memory(array, tensor[::3])
    assert not shares_memory(tensor.clone(), array)
    assert not shares_memory(torch.empty(0), jnp.zeros(0))
    with pytest.raises(TypeError, match="torch.Tensor and a jax.Array"):
        shares_memory(np.ones(2), array)


# ------------------------------------------------------------------ trees

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 4)
        self.bn = torch.nn.BatchNorm1d(4)
        self.out = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.out(torch.relu(self.bn(self.lin(x))))


def test_state_dict_round_trip_is_zero_copy_per_leaf(on_host):
    torch.manual_seed(0)
    net = Net()
    state = net.state_dict()
    with dtypes.x64(True):
        tree = tree_to_jax(state, copy=False)
        assert isinstance(tree, collections.OrderedDict) and list(tree) == list(state)
        assert tree._metadata == state._metadata
        for key, tensor in state.items():
            assert tree[key].unsafe_buffer_pointer() == tensor.data_ptr(), key
        back = tree_to_torch(tree)
        for key, tensor in state.items():
            assert back[key].data_ptr() == tensor.data_ptr() and back[key].dtype == tensor.dtype
    other = Net()
    other.load_state_dict(back)
    x = torch.randn(5, 3)
    net.eval(), other.eval()
    torch.testing.assert_close(other(x), net(x), rtol=0, atol=0)


def test_tree_errors_name_the_leaf(on_host):
    state = Net().state_dict()
    with dtypes.x64(False):
        with pytest.raises(TypeError, match=r"at \['bn.num_batches_tracked'\].*64-bit"):
            tree_to_jax(state)
        tree = tree_to_jax(state, allow_downcast=True)
        assert tree["bn.num_batches_tracked"].dtype == jnp.int32
    with pytest.raises(ValueError, match=r"at \['w'\]\[1\].*strides"):
        tree_to_jax({"w": [torch.ones(2), torch.ones(4)[::2]]}, copy=False)


def test_optimizer_state_keeps_its_non_tensor_leaves(on_host):
    torch.manual_seed(0)
    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    net(torch.randn(5, 3)).sum().backward()
    opt.step()
    state = opt.state_dict()
    tree = tree_to_jax(state)
    group = tree["param_groups"][0]
    assert group["lr"] == 1e-3 and group["betas"] == (0.9, 0.999) and group["foreach"] is None
    for index, slots in state["state"].items():
        for name, tensor in slots.items():
            assert tree["state"][index][name].unsafe_buffer_pointer() == tensor.data_ptr()
    again = torch.optim.Adam(Net().parameters(), lr=1e-3)
    again.load_state_dict(tree_to_torch(tree))
    torch.testing.assert_close(again.state_dict()["state"][0]["exp_avg"],
                               state["state"][0]["exp_avg"])


# ------------------------------------------------------------------ sparse tensors

def sparse_cases() -> dict:
    """Sparse tensors as PyG code builds them: an adjacency with an explicit zero, in each
    layout; an uncoalesced COO with repeated entries; a hybrid COO with a dense dim."""
    dense = torch.tensor([[0.0, 2.0, 0.0, 1.5], [3.0, 0.0, 4.0, 0.0], [0.0, 0.0, 0.0, -1.0]])
    repeated = torch.sparse_coo_tensor(torch.tensor([[2, 0, 2, 1], [1, 3, 1, 0]]),
                                       torch.tensor([1.0, 2.0, 5.0, -3.0]), (3, 4))
    hybrid = torch.sparse_coo_tensor(torch.tensor([[0, 2], [1, 3]]),
                                     torch.arange(6.0).reshape(2, 3), (3, 4, 3))
    return {"coo": dense.to_sparse(), "csr": dense.to_sparse_csr(),
            "csc": dense.to_sparse_csc(), "coo-repeated": repeated, "coo-hybrid": hybrid}


def sparse_values(t):
    return t._values() if t.layout == torch.sparse_coo else t.values()


@pytest.mark.parametrize("name", list(sparse_cases()))
def test_sparse_tensor_to_jax(name, on_host):
    from jax.experimental import sparse as jsparse

    t = sparse_cases()[name]
    array = to_jax(t)
    kind = jsparse.BCSR if t.layout == torch.sparse_csr else jsparse.BCOO
    assert isinstance(array, kind) and array.shape == tuple(t.shape)
    # the same matrix as torch's to_dense: repeated COO entries add up
    np.testing.assert_array_equal(np.asarray(array.todense()), t.to_dense().numpy())
    assert shares_memory(sparse_values(t), array.data)  # values zero-copy
    assert array.indices.dtype == jnp.int32
    # sorted / unique flags only where torch knows them (a coalesced COO)
    known = t.layout == torch.sparse_coo and t.is_coalesced()
    assert (array.indices_sorted, array.unique_indices) == (known, known)


@pytest.mark.parametrize("name", ["coo", "csr", "csc", "coo-repeated"])
def test_sparse_matmul_matches_torch(name):
    t = sparse_cases()[name]
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(0))
    np.testing.assert_allclose(np.asarray(to_jax(t) @ to_jax(x)),
                               torch.sparse.mm(t, x).numpy(), rtol=1e-6)
    # and under jit, with a gradient for the dense operand
    grad = jax.jit(jax.grad(lambda a, y: jnp.sum((a @ y) ** 2), argnums=1))(to_jax(t), to_jax(x))
    xt = x.clone().requires_grad_()
    torch.sparse.mm(t, xt).square().sum().backward()
    np.testing.assert_allclose(np.asarray(grad), xt.grad.numpy(), rtol=1e-5)


@pytest.mark.parametrize("name", list(sparse_cases()))
def test_sparse_round_trip(name):
    t = sparse_cases()[name]
    array = to_jax(t)
    back = to_torch(array)
    assert back.layout == (torch.sparse_csr if t.layout == torch.sparse_csr else torch.sparse_coo)
    np.testing.assert_array_equal(back.to_dense().numpy(), t.to_dense().numpy())
    assert shares_memory(sparse_values(back), array.data)
    if back.layout == torch.sparse_csr:  # CSR keeps int32 indices, shared
        assert back.col_indices().dtype == torch.int32
        assert shares_memory(back.col_indices(), array.indices)
    else:
        assert back._indices().dtype == torch.int64
        assert back.is_coalesced() == (name == "coo")


def test_sparse_float64_values_follow_the_dense_rules():
    t = torch.tensor([[0.0, 1.5], [2.0**-30, 0.0]], dtype=torch.float64).to_sparse()
    with dtypes.x64(False):
        with pytest.raises(TypeError, match="64-bit mode"):
            to_jax(t)
        down = to_jax(t, allow_downcast=True)
        assert down.data.dtype == jnp.float32
        np.testing.assert_array_equal(np.asarray(down.todense()), t.to_dense().float().numpy())
    with dtypes.x64(True):
        wide = to_jax(t)
        assert wide.data.dtype == jnp.float64 and wide.indices.dtype == jnp.int64
        np.testing.assert_array_equal(np.asarray(wide.todense()), t.to_dense().numpy())


def test_sparse_requires_grad_is_detached_and_batched_bcoo_is_refused():
    from jax.experimental import sparse as jsparse

    t = torch.tensor([[0.0, 1.0], [2.0, 0.0]]).to_sparse().requires_grad_()
    np.testing.assert_array_equal(np.asarray(to_jax(t).todense()), [[0.0, 1.0], [2.0, 0.0]])
    batched = jsparse.BCOO.fromdense(jnp.eye(3)[None].repeat(2, 0), n_batch=1)
    with pytest.raises(ValueError, match="bcoo_update_layout"):
        to_torch(batched)
