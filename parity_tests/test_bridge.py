"""as_torch / as_jax: values and gradients against the same math written natively.

``as_torch(f_jax)`` is checked against torch autograd of the torch version of
``f``; ``as_jax(f_torch)`` against JAX autodiff of the JAX version. Float64
cases run with JAX's 64-bit mode so the comparison is tight.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.func as tfunc
import torch_scatter

import torch2jax_ops as t2j
from torch2jax_ops import as_jax, as_torch, dtypes, to_jax, to_torch
from torch2jax_ops.bridge import InPlaceError
from torch2jax_ops.parity import _suite as suite


# The same math twice: (jax version, torch version).
def layer_jax(x, w, b):
    return jnp.tanh(x @ w + b) * x[:, :1]


def layer_torch(x, w, b):
    return torch.tanh(x @ w + b) * x[:, :1]


def sample(*shapes, dtype=torch.float64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=gen, dtype=dtype) for s in shapes]


SHAPES = [(5, 3), (3, 4), (4,)]


@pytest.fixture
def x64():
    with dtypes.x64(True):
        yield


def close(a, b, name="float64"):
    rtol, atol = dtypes.tolerance(name, "grad")
    torch.testing.assert_close(a, b, rtol=rtol, atol=atol)


# ------------------------------------------------------------------ as_torch

@pytest.mark.parametrize("name", ["float32", "float64"])
def test_as_torch_backward_matches_torch(name):
    with dtypes.x64(name == "float64"):
        dtype = dtypes.torch_dtype(name)
        ours = [t.requires_grad_() for t in sample(*SHAPES, dtype=dtype)]
        theirs = [t.detach().clone().requires_grad_() for t in ours]
        out = as_torch(layer_jax)(*ours)
        ref = layer_torch(*theirs)
        close(out, ref, name)
        cot = torch.randn_like(ref)
        (out * cot).sum().backward()
        (ref * cot).sum().backward()
        for a, b in zip(ours, theirs):
            close(a.grad, b.grad, name)


def test_as_torch_under_every_torch_func_transform(x64):
    x, w, b = sample(*SHAPES)
    ours = as_torch(layer_jax)
    loss_ours = lambda x: ours(x, w, b).pow(2).sum()
    loss_ref = lambda x: layer_torch(x, w, b).pow(2).sum()
    close(tfunc.grad(loss_ours)(x), tfunc.grad(loss_ref)(x))
    close(tfunc.jacrev(ours, argnums=(0, 1))(x, w, b)[1], tfunc.jacrev(layer_torch, argnums=(0, 1))(x, w, b)[1])
    close(tfunc.jacfwd(ours)(x, w, b), tfunc.jacfwd(layer_torch)(x, w, b))
    close(tfunc.hessian(loss_ours)(x), tfunc.hessian(loss_ref)(x))
    close(tfunc.jacrev(tfunc.jacrev(loss_ours))(x), tfunc.hessian(loss_ref)(x))
    tangent = torch.randn_like(x)
    for a, r in zip(tfunc.jvp(loss_ours, (x,), (tangent,)), tfunc.jvp(loss_ref, (x,), (tangent,))):
        close(a, r)
    out, pullback = tfunc.vjp(lambda x: ours(x, w, b), x)
    ref, ref_pullback = tfunc.vjp(lambda x: layer_torch(x, w, b), x)
    close(pullback(torch.ones_like(out))[0], ref_pullback(torch.ones_like(ref))[0])
    xs = torch.stack([x, 2 * x, -x])
    close(tfunc.vmap(ours, in_dims=(0, None, None))(xs, w, b),
          tfunc.vmap(layer_torch, in_dims=(0, None, None))(xs, w, b))
    close(tfunc.vmap(tfunc.grad(loss_ours))(xs), tfunc.vmap(tfunc.grad(loss_ref))(xs))


def test_as_torch_double_backward(x64):
    x, w, b = sample(*SHAPES)
    grads = []
    for fn in (as_torch(layer_jax), layer_torch):
        leaf = x.clone().requires_grad_()
        g, = torch.autograd.grad(fn(leaf, w, b).sum(), leaf, create_graph=True)
        gg, = torch.autograd.grad((g ** 2).sum(), leaf)
        grads.append(gg)
    close(*grads)


def test_as_torch_swaps_a_torch_scatter_op_and_trains(x64):
    """One op of a running torch model replaced by its JAX port: same training run."""
    src, index = torch.randn(40, 8, dtype=torch.float64), torch.randint(0, 6, (40,))
    softmax = as_torch(lambda s, i: t2j.scatter_softmax(s, i, dim=0, dim_size=6))
    runs = []
    for op in (lambda s: softmax(s, index), lambda s: torch_scatter.scatter_softmax(s, index, dim=0)):
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 8).double()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(5):
            opt.zero_grad()
            loss = (op(model(src)) * src).sum()
            loss.backward()
            opt.step()
        runs.append((loss.detach(), [p.detach().clone() for p in model.parameters()]))
    close(runs[0][0], runs[1][0])
    for a, b in zip(runs[0][1], runs[1][1]):
        close(a, b)


def test_as_torch_pytrees_static_arguments_and_integer_outputs(x64):
    def jax_fn(params, x, scale, *, mode):
        y = x @ params["w"] * scale
        return {"y": y if mode == "linear" else jnp.tanh(y), "arg": jnp.argmax(y, axis=-1)}

    def torch_fn(params, x, scale, *, mode):
        y = x @ params["w"] * scale
        return {"y": y if mode == "linear" else torch.tanh(y), "arg": torch.argmax(y, dim=-1)}

    x, w = sample((5, 3), (3, 4))
    w.requires_grad_()
    fn = as_torch(jax_fn)
    out = fn({"w": w}, x, 2.0, mode="tanh")
    ref = torch_fn({"w": w}, x, 2.0, mode="tanh")
    assert torch.equal(out["arg"], ref["arg"]) and not out["arg"].requires_grad
    close(out["y"], ref["y"])
    close(torch.autograd.grad(out["y"].sum(), w)[0], torch.autograd.grad(ref["y"].sum(), w)[0])
    fn({"w": w}, x, 2.0, mode="linear")
    fn({"w": w}, x[:2], 2.0, mode="linear")
    assert len(fn.cache) == 2  # one entry per static value; shapes are jit's own cache


def test_as_torch_integer_inputs_get_no_gradient():
    src = torch.randn(6, 2, requires_grad=True)
    index = torch.tensor([0, 1, 0, 2, 1, 0], dtype=torch.int32)
    out = as_torch(lambda s, i: t2j.scatter_sum(s, i, dim=0, dim_size=3))(src, index)
    out.sum().backward()
    torch.testing.assert_close(src.grad, torch.ones(6, 2))


def test_as_torch_long_index_with_64_bit_mode_off():
    src = torch.randn(6, 2, requires_grad=True)
    index = torch.tensor([0, 1, 0, 2, 1, 0])  # int64, as PyG's
    op = lambda s, i: t2j.scatter_mean(s, i, dim=0, dim_size=3)
    with dtypes.x64(False):
        with pytest.raises(TypeError, match=r"argument\(s\) 1 \(int64\)"):
            as_torch(op)(src, index)
        out = as_torch(op, allow_downcast=True)(src, index)
        grad, = torch.autograd.grad(out.sum(), src)
        with pytest.raises(OverflowError):
            as_torch(op, allow_downcast=True)(src, index + 2**40)
    ref = torch_scatter.scatter_mean(src, index, dim=0, dim_size=3)
    close(out, ref, "float32")
    close(grad, torch.autograd.grad(ref.sum(), src)[0], "float32")


def test_as_torch_complex_gradient_follows_torch_convention(x64):
    z = torch.tensor([1 + 2j, 0.5 - 1j], dtype=torch.complex128, requires_grad=True)
    ref_z = z.detach().clone().requires_grad_()
    as_torch(lambda z: (jnp.abs(z) ** 2 * z.real).sum())(z).backward()
    (ref_z.abs() ** 2 * ref_z.real).sum().backward()
    close(z.grad, ref_z.grad, "complex128")


def test_as_torch_outputs_never_share_a_buffer_with_inputs():
    x = torch.randn(4)
    a, b = as_torch(lambda x: (x, x))(x)
    assert len({a.data_ptr(), b.data_ptr(), x.data_ptr()}) == 3


def test_as_torch_errors_name_the_fix():
    with dtypes.x64(False):
        with pytest.raises(TypeError, match=r"argument\(s\) 0 \(float64\).*allow_downcast=True"):
            as_torch(jnp.sin)(torch.ones(3, dtype=torch.float64))
    with pytest.raises(TypeError, match="hashable"):
        as_torch(lambda x, opts: x)(torch.ones(2), {"a": [1]}.items())
    with pytest.raises(TypeError, match="expected a callable"):
        as_torch(3)


def test_in_place_torch_write_after_forward_is_caught():
    x = torch.randn(3, requires_grad=True)
    z = x * 2.0
    out = as_torch(jnp.sin)(z)
    z.add_(1.0)  # the input is saved for the backward (it recomputes in JAX)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


# ------------------------------------------------------------------ as_jax

def jax_sample(*shapes, dtype=jnp.float64, seed=0):
    return [jnp.asarray(t.numpy()).astype(dtype) for t in sample(*shapes, seed=seed)]


def jclose(a, b, name="float64"):
    rtol, atol = dtypes.tolerance(name, "grad")
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_as_jax_grad_matches_jax(name):
    with dtypes.x64(name == "float64"):
        x, w, b = jax_sample(*SHAPES, dtype=jnp.dtype(name))
        ours = as_jax(layer_torch)
        jclose(ours(x, w, b), layer_jax(x, w, b), name)
        loss = lambda f: (lambda x, w, b: jnp.sum(f(x, w, b) ** 2))
        for a, r in zip(jax.grad(loss(ours), (0, 1, 2))(x, w, b),
                        jax.grad(loss(layer_jax), (0, 1, 2))(x, w, b)):
            jclose(a, r, name)
        jclose(jax.jit(jax.grad(loss(ours)))(x, w, b), jax.grad(loss(layer_jax))(x, w, b), name)


def test_as_jax_under_jit_vmap_jacrev_and_second_order(x64):
    x, w, b = jax_sample(*SHAPES)
    ours = as_jax(layer_torch)
    jclose(jax.jit(ours)(x, w, b), layer_jax(x, w, b))
    xs = jnp.stack([x, 2 * x])
    jclose(jax.vmap(ours, (0, None, None))(xs, w, b), jax.vmap(layer_jax, (0, None, None))(xs, w, b))
    jclose(jax.jacrev(ours, 1)(x, w, b), jax.jacrev(layer_jax, 1)(x, w, b))
    scalar = lambda f: (lambda x: jnp.sum(f(x, w, b) ** 2))
    jclose(jax.grad(lambda x: jnp.sum(jax.grad(scalar(ours))(x) ** 2))(x),
           jax.grad(lambda x: jnp.sum(jax.grad(scalar(layer_jax))(x) ** 2))(x))
    jclose(jax.jacrev(jax.jacrev(scalar(ours)))(x), jax.hessian(scalar(layer_jax))(x))
    jclose(jax.jit(jax.vmap(jax.grad(scalar(ours))))(xs), jax.vmap(jax.grad(scalar(layer_jax)))(xs))


def test_as_jax_calls_real_torch_scatter_under_jit(x64):
    src = jax_sample((30, 4))[0]
    index = jnp.asarray(np.random.default_rng(0).integers(0, 5, 30))
    ts_softmax = as_jax(lambda s, i: torch_scatter.scatter_softmax(s, i, dim=0))
    ours = lambda s: t2j.scatter_softmax(s, index, dim=0, dim_size=5)
    loss = lambda f: (lambda s: jnp.sum(f(s) * src))
    jclose(jax.jit(lambda s: ts_softmax(s, index))(src), ours(src))
    jclose(jax.grad(loss(lambda s: ts_softmax(s, index)))(src), jax.grad(loss(ours))(src))


def test_as_jax_result_shapes_given_inferred_or_from_a_function(x64):
    x = jnp.arange(6.0)
    given = as_jax(lambda x: x[x > 2], result_shape=jax.ShapeDtypeStruct((3,), jnp.float64))
    jclose(given(x), [3.0, 4.0, 5.0])
    by_function = as_jax(lambda x: x.reshape(2, -1).sum(0),
                         result_shape=lambda x: jax.ShapeDtypeStruct((x.shape[0] // 2,), x.dtype))
    jclose(jax.jit(by_function)(x), [3.0, 5.0, 7.0])
    # not runnable on 'meta' (.item()): inferred from one call on zeros instead
    scaled = as_jax(lambda x: x * (1.0 + x.sum().item()))
    jclose(scaled(x), x * 16.0)


def test_as_jax_integer_outputs_and_64_bit_mode():
    def top(x):
        return torch.argmax(x, dim=-1), x.max(-1).values

    x = jnp.asarray(np.random.default_rng(0).normal(size=(4, 5)), jnp.float32)
    with dtypes.x64(False):
        with pytest.raises(TypeError, match="returns int64.*allow_downcast=True"):
            as_jax(top)(x)
        arg, best = as_jax(top, allow_downcast=True)(x)
        assert arg.dtype == jnp.int32
        np.testing.assert_array_equal(arg, jnp.argmax(x, -1))
        grad = jax.grad(lambda x: jnp.sum(as_jax(top, allow_downcast=True)(x)[1]))(x)
        np.testing.assert_array_equal(grad, jax.nn.one_hot(jnp.argmax(x, -1), 5))


def test_as_jax_complex_gradient_follows_jax_convention(x64):
    z = jnp.array([1 + 2j, 0.5 - 1j])
    ours = jax.grad(lambda z: jnp.sum(as_jax(lambda z: z.abs() ** 2 * z.real)(z)))(z)
    jclose(ours, jax.grad(lambda z: jnp.sum(jnp.abs(z) ** 2 * z.real))(z), "complex128")


def test_as_jax_errors_name_the_fix():
    def bump(x):
        x.add_(1.0)
        return x

    with pytest.raises(InPlaceError, match="modified an input in place.*Clone"):
        as_jax(bump)(jnp.ones(3))
    with pytest.raises(TypeError, match="got a torch.Tensor.*to_jax"):
        as_jax(torch.sin)(torch.ones(3))
    with pytest.raises(ValueError, match="vmap_method"):
        as_jax(torch.sin, vmap_method="parallel")
    with pytest.raises(TypeError, match="forward-mode"):  # documented: reverse mode only
        jax.jvp(as_jax(torch.sin), (jnp.ones(3),), (jnp.ones(3),))


def test_round_trip_as_jax_of_as_torch(x64):
    x, w, b = jax_sample(*SHAPES)
    there_and_back = as_jax(as_torch(layer_jax))
    jclose(there_and_back(x, w, b), layer_jax(x, w, b))
    jclose(jax.grad(lambda x: jnp.sum(there_and_back(x, w, b)))(x),
           jax.grad(lambda x: jnp.sum(layer_jax(x, w, b)))(x))


# ------------------------------------------------------------------ the report's section

BRIDGE_CASES = suite.cases("bridge")


@pytest.mark.parametrize("case", BRIDGE_CASES, ids=[c.id for c in BRIDGE_CASES])
def test_bridge_section_of_the_parity_report(case):
    result = case.run()
    assert result.passed, str(result)
    assert any(leaf.kind == "grad" for leaf in result.leaves), "no gradient was compared"
