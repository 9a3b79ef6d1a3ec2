"""autograd.Function ports vs the torch originals: the ctx API, gradient rules, errors,
double backward, once_differentiable, and the three ported Functions under jit/vmap."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from parity_tests.conftest import require_torch
import torch

from torch2jax_ops import dtypes, to_jax
from torch2jax_ops.autograd import Function, once_differentiable
from torch2jax_ops.parity import assert_parity, compare_arrays
from torch2jax_ops.parity.cases.autograd import JAX_FUNCTIONS, inputs, torch_functions


def torch_grad(fn, *xs):
    xs = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in xs]
    out = fn(*xs)
    out = out[0] if isinstance(out, tuple) else out
    diff = [x for x in xs if x.requires_grad]
    return torch.autograd.grad(out.sum(), diff, allow_unused=True, materialize_grads=True)


@pytest.mark.parametrize("name", sorted(JAX_FUNCTIONS))
def test_ported_functions_under_jit_and_vmap_match_torch(name):
    extra = {"ClampWithGrad": (-0.5, 0.75)}.get(name, ())
    x = 2 * inputs([(6, 5)], "float32", 3)[0]
    original, port = torch_functions()[name], JAX_FUNCTIONS[name]
    expected = torch_grad(lambda t: original.apply(t, *extra), x)[0]
    per_row = jax.jit(jax.vmap(jax.grad(lambda r: port.apply(r, *extra).sum())))(to_jax(x))
    leaf = compare_arrays(expected, per_row, rtol=1e-6, atol=1e-7)
    assert leaf.passed, leaf


# one Function exercising the whole ctx API, written twice
class TorchAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, scale, tag):
        ctx.scale, ctx.tag = scale, tag
        ctx.save_for_backward(x, y)
        ctx.seen_needs = ctx.needs_input_grad
        idx = x.argmax()
        aux = x * 0 + 1
        ctx.mark_non_differentiable(aux)
        return x * y * scale, aux, idx

    @staticmethod
    def backward(ctx, g, g_aux, g_idx):
        x, y = ctx.saved_tensors
        assert tag_ok(ctx.tag)
        gx = g * y * ctx.scale if ctx.needs_input_grad[0] else None
        gy = (g * x * ctx.scale).unsqueeze(0).expand(2, *g.shape) / 2 \
            if ctx.needs_input_grad[1] else None
        record.append((tuple(ctx.needs_input_grad), float(g_aux.abs().sum()),
                       int(g_idx.abs().sum())))
        return gx, gy, None, None


class JaxAll(Function):
    @staticmethod
    def forward(ctx, x, y, scale, tag):
        ctx.scale, ctx.tag = scale, tag
        ctx.save_for_backward(x, y)
        idx = jnp.argmax(x)
        aux = x * 0 + 1
        ctx.mark_non_differentiable(aux)
        return x * y * scale, aux, idx

    @staticmethod
    def backward(ctx, g, g_aux, g_idx):
        x, y = ctx.saved_tensors
        assert tag_ok(ctx.tag)
        gx = g * y * ctx.scale if ctx.needs_input_grad[0] else None
        gy = jnp.broadcast_to(g * x * ctx.scale, (2,) + g.shape) / 2 \
            if ctx.needs_input_grad[1] else None  # extra broadcast dim: summed like torch
        record.append((tuple(ctx.needs_input_grad), float(jnp.abs(g_aux).sum()),
                       int(jnp.abs(g_idx).sum())))
        return gx, gy, None, None


record: list = []


def tag_ok(tag):
    return tag == "ok"


@pytest.mark.parametrize("wrt", [(0,), (1,), (0, 1)])
def test_ctx_api_needs_input_grad_non_differentiable_and_broadcast_grads(wrt):
    x, y = inputs([(4,), (4,)], "float64", 1)
    with dtypes.x64():
        record.clear()
        tx, ty = x.clone().requires_grad_(0 in wrt), y.clone().requires_grad_(1 in wrt)
        out, aux, _ = TorchAll.apply(tx, ty, 3.0, "ok")
        (out.sum() + aux.sum()).backward()
        theirs = record.pop()
        expected = [t.grad for t in (tx, ty) if t.requires_grad]

        def loss(*diff):
            args = [to_jax(x), to_jax(y)]
            for i, d in zip(wrt, diff):
                args[i] = d
            out, aux, _ = JaxAll.apply(*args, 3.0, "ok")
            return out.sum() + aux.sum()
        ours = jax.grad(loss, argnums=tuple(range(len(wrt))))(
            *(to_jax((x, y)[i]) for i in wrt))
        assert record.pop() == theirs  # needs_input_grad, zeros for marked and integer outputs
        for e, o in zip(expected, ours):
            leaf = compare_arrays(e, o, rtol=1e-12, atol=0.0)
            assert leaf.passed, leaf


def test_setup_context_style_keyword_defaults_and_materialize_grads():
    require_torch("2.13", "Function.apply with keyword arguments is newer")
    class TorchF(torch.autograd.Function):
        @staticmethod
        def forward(x, power=2):
            return x ** power, x.sum()

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, power = inputs
            ctx.save_for_backward(x)
            ctx.power = power
            ctx.set_materialize_grads(False)

        @staticmethod
        def backward(ctx, g, g_sum):
            (x,) = ctx.saved_tensors
            assert g_sum is None  # unused output, materialize off
            return g * ctx.power * x ** (ctx.power - 1), None

    class JaxF(Function):
        @staticmethod
        def forward(x, power=2):
            return x ** power, x.sum()

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, power = inputs
            ctx.save_for_backward(x)
            ctx.power = power
            ctx.set_materialize_grads(False)

        @staticmethod
        def backward(ctx, g, g_sum):
            (x,) = ctx.saved_tensors
            assert g_sum is None
            return g * ctx.power * x ** (ctx.power - 1), None

    x = inputs([(5,)], "float32", 2)[0]
    assert_parity(lambda t: TorchF.apply(t, power=3)[0], lambda t: JaxF.apply(t, power=3)[0], x)
    assert_parity(lambda t: TorchF.apply(t)[0], lambda t: JaxF.apply(t)[0], x)


def test_double_backward_through_a_differentiable_backward_matches_torch():
    class TorchCube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * g * x ** 2

    class JaxCube(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * g * x ** 2

    x = inputs([(4,)], "float64", 4)[0]
    with dtypes.x64():
        # the gradient of the gradient (torch: create_graph=True through backward)
        assert_parity(lambda t: torch.autograd.grad(TorchCube.apply(t).sum(), t,
                                                    create_graph=True)[0],
                      lambda t: jax.grad(lambda u: JaxCube.apply(u).sum())(t), x)
        hess_t = torch.autograd.functional.hessian(lambda u: TorchCube.apply(u).sum(), x)
        hess_j = jax.hessian(lambda u: JaxCube.apply(u).sum())(to_jax(x))
        leaf = compare_arrays(hess_t, hess_j, rtol=1e-12, atol=0.0)
        assert leaf.passed, leaf


def test_once_differentiable_raises_on_second_derivative_like_torch():
    class TorchSin(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.cos()

    class JaxSin(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return jnp.sin(x)

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * jnp.cos(x)

    x = inputs([(3,)], "float32", 5)[0]
    assert_parity(TorchSin.apply, JaxSin.apply, x)  # first order unchanged
    xt = x.clone().requires_grad_()
    v = torch.ones(3, requires_grad=True)  # torch marks the result only if an input needs grad
    (g,) = torch.autograd.grad(TorchSin.apply(xt), xt, v, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        g.sum().backward()
    with pytest.raises(RuntimeError, match="once_differentiable"):
        jax.grad(lambda u: jax.grad(lambda v: JaxSin.apply(v).sum())(u).sum())(to_jax(x))


@pytest.mark.parametrize("bad,match", [
    (lambda g: (g, None, g), "incorrect number of gradients"),
    (lambda g: (g, g), "different than None at position 2"),
    (lambda g: (g[:2], None), "invalid gradient at index 0"),
    (lambda g: (g, 1.0), "different than None at position 2"),
])
def test_bad_backward_returns_raise_like_torch(bad, match):
    def make(base):
        class F(base):
            @staticmethod
            def forward(ctx, x, k):
                return x * k

            @staticmethod
            def backward(ctx, g):
                out = bad(g)
                if base is torch.autograd.Function and isinstance(out[1], float):
                    out = (out[0], torch.ones(1))
                return out
        return F

    x = torch.ones(3)
    with pytest.raises(RuntimeError, match=match):
        make(torch.autograd.Function).apply(x.requires_grad_(), 2.0).sum().backward()
    with pytest.raises((RuntimeError, ValueError), match=match):
        jax.grad(lambda u: make(Function).apply(u, 2.0).sum())(jnp.ones(3))


def test_gradient_dtype_is_cast_to_the_input_and_extra_nones_allowed():
    class F(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g.astype(jnp.float16) * 2, None  # torch casts and allows the None

    g = jax.grad(lambda u: F.apply(u).sum())(jnp.ones(3, jnp.float32))
    assert g.dtype == jnp.float32
    np.testing.assert_array_equal(g, 2 * np.ones(3))


def test_save_for_backward_rejects_non_arrays_with_the_fix():
    class F(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, 3)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(TypeError, match=r"ctx\.name = value"):
        F.apply(jnp.ones(2))
    with pytest.raises(TypeError, match="forward's signature"):
        F.apply(jnp.ones(2), 5)
