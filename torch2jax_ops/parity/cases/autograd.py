"""Parity cases for the derivative APIs: torch.autograd.functional, torch.func, custom Functions.

Every test function is written once against a small ``ops`` namespace and
run with torch's ops on the torch side and JAX's on ours, so the two sides
compute the same math by construction.

On the torch side the derivative calls use ``create_graph=True`` (torch.func
results are differentiable anyway), so the suite's gradient check
differentiates the derivative once more: a Hessian case also checks third
derivatives, ``nth_grad`` of order 4 checks the fifth.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable

import jax
import jax.numpy as jnp
import numpy as np

from torch2jax_ops import dtypes
from torch2jax_ops.parity._suite import Case, register

FLOATS = ("float16", "bfloat16", "float32", "float64")
#: torch 2.11 (the GPU image) handles vmap outputs with out_dims=None differently; verified
#: from 2.13 (issue 22's GPU run: 3 out_dims cases, chunked vmap with an unbatched output)
MIN_TORCH_VMAP_UNBATCHED = "2.13"
WIDE = ("float32", "float64")
#: half-precision derivatives are differences of rounded O(1) terms: norm-wise
NORMWISE = {"float16": True, "bfloat16": True}


# ----------------------------------------------------------------- one math, two libraries

class _TorchOps:
    def __getattr__(self, name):
        import torch
        return getattr(torch, name)

    @staticmethod
    def softmax(x):
        import torch
        return torch.softmax(x, dim=-1)

    @staticmethod
    def logsumexp(x):
        import torch
        return torch.logsumexp(x, dim=-1)


class _JaxOps:
    def __getattr__(self, name):
        return getattr(jnp, name)

    @staticmethod
    def softmax(x):
        return jax.nn.softmax(x, axis=-1)

    @staticmethod
    def logsumexp(x):
        return jax.nn.logsumexp(x, axis=-1)


TORCH_OPS, JAX_OPS = _TorchOps(), _JaxOps()


@dataclasses.dataclass(frozen=True)
class TestFunction:
    """``fn(ops, *xs)`` with the shapes of its inputs; ``scalar`` if it returns one number."""
    name: str
    fn: Callable
    shapes: tuple
    scalar: bool = False

    def torch(self, *xs):
        return self.fn(TORCH_OPS, *xs)

    def jax(self, *xs):
        return self.fn(JAX_OPS, *xs)


def _poly(o, x):
    return x ** 3 - 2 * x ** 2 + x


def _sinexp(o, x):
    return o.sin(o.exp(x)) * x


def _mlp(o, x, w1, b1, w2):
    return o.tanh(x @ w1 + b1) @ w2


def _multi(o, x, y):  # two inputs, two outputs
    return x * y.sum(), o.exp(x) - y[:1] * x


FUNCTIONS = {f.name: f for f in (
    TestFunction("poly", _poly, ((5,),)),
    TestFunction("sinexp", _sinexp, ((4,),)),
    TestFunction("mlp", _mlp, ((3, 4), (4, 5), (5,), (5, 2))),
    TestFunction("softmax", lambda o, x: o.softmax(x), ((2, 5),)),
    TestFunction("multi", _multi, ((3,), (2,))),
    TestFunction("poly-sum", lambda o, x: _poly(o, x).sum(), ((5,),), True),
    TestFunction("sinexp-sum", lambda o, x: _sinexp(o, x).sum(), ((4,),), True),
    TestFunction("mlp-sq", lambda o, *a: (_mlp(o, *a) ** 2).sum(), ((3, 4), (4, 5), (5,), (5, 2)),
                 True),
    TestFunction("logsumexp", lambda o, x, y: o.logsumexp(x * y), ((6,), (6,)), True),
)}
VECTOR = [f for f in FUNCTIONS.values() if not f.scalar]
SCALAR = [f for f in FUNCTIONS.values() if f.scalar]


def inputs(shapes: Iterable[tuple], dtype: str, seed: int = 0) -> tuple:
    """torch inputs of moderate size (|x| ~ 0.5), so high derivatives stay O(1)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    return tuple((0.5 * torch.randn(shape, generator=gen, dtype=torch.float64))
                 .to(dtypes.torch_dtype(dtype)) for shape in shapes)


def _pack(xs: tuple) -> Any:
    """torch.autograd.functional's convention: one input -> the array, several -> a tuple."""
    return xs[0] if len(xs) == 1 else tuple(xs)


def _options(dtype: str) -> dict:
    return {"normwise": NORMWISE.get(dtype, False)}


# ------------------------------------------------------------ torch.autograd.functional

@register("autograd")
def functional_cases() -> Iterable[Case]:
    from torch2jax_ops.autograd import functional as ours

    def case(op, dtype, label, torch_call, jax_call, shapes, seed=0, grad=True):
        def build():
            options = {**_options(dtype), "grad": grad}
            return torch_call, jax.jit(jax_call), inputs(shapes, dtype, seed), {}, options
        return Case("autograd", f"autograd.functional.{op}", dtype, label, build)

    for f in VECTOR:
        for strategy in ("reverse-mode", "forward-mode"):
            for dtype in (FLOATS if strategy == "reverse-mode" else WIDE):
                def t_jac(*xs, f=f, strategy=strategy):
                    import torch
                    forward = strategy == "forward-mode"
                    return torch.autograd.functional.jacobian(
                        f.torch, _pack(xs), create_graph=not forward, strategy=strategy,
                        vectorize=forward)

                def j_jac(*xs, f=f, strategy=strategy):
                    return ours.jacobian(f.jax, _pack(xs), strategy=strategy)
                # torch: forward-mode jacobians are not differentiable (create_graph=False)
                yield case("jacobian", dtype, f"{f.name}-{strategy}", t_jac, j_jac, f.shapes,
                           grad=strategy == "reverse-mode")
        # softmax's vjp is a difference of O(1) terms (sum of a row of the Jacobian
        # is 0): no relative accuracy in float16/bfloat16 on either side
        for dtype in (WIDE if f.name == "softmax" else FLOATS):
            def t_vjp(*xs, f=f):
                import torch
                n = len(f.shapes)
                out = f.torch(*xs[:n])
                outs = out if isinstance(out, tuple) else (out,)
                v = tuple(torch.linspace(-1, 1, o.numel(), dtype=o.dtype).reshape(o.shape)
                          for o in outs)
                return torch.autograd.functional.vjp(f.torch, _pack(xs[:n]),
                                                     v if isinstance(out, tuple) else v[0],
                                                     create_graph=True)

            def j_vjp(*xs, f=f):
                n = len(f.shapes)
                out = f.jax(*xs[:n])
                outs = out if isinstance(out, tuple) else (out,)
                v = tuple(jnp.linspace(-1, 1, o.size, dtype=o.dtype).reshape(o.shape)
                          for o in outs)
                return ours.vjp(f.jax, _pack(xs[:n]), v if isinstance(out, tuple) else v[0])
            yield case("vjp", dtype, f.name, t_vjp, j_vjp, f.shapes)

            def t_jvp(*xs, f=f):
                import torch
                n = len(f.shapes)
                return torch.autograd.functional.jvp(f.torch, _pack(xs[:n]), _pack(xs[n:]),
                                                     create_graph=True)

            def j_jvp(*xs, f=f):
                n = len(f.shapes)
                return ours.jvp(f.jax, _pack(xs[:n]), _pack(xs[n:]))
            yield case("jvp", dtype, f.name, t_jvp, j_jvp, f.shapes * 2, seed=1)

    for f in SCALAR:
        for dtype in WIDE:
            for strategy in ("reverse-mode", "forward-mode"):
                def t_hess(*xs, f=f, strategy=strategy):
                    import torch
                    forward = strategy == "forward-mode"
                    return torch.autograd.functional.hessian(
                        f.torch, _pack(xs), create_graph=not forward,
                        outer_jacobian_strategy=strategy, vectorize=forward)

                def j_hess(*xs, f=f, strategy=strategy):
                    return ours.hessian(f.jax, _pack(xs), outer_jacobian_strategy=strategy)
                yield case("hessian", dtype, f"{f.name}-{strategy}", t_hess, j_hess, f.shapes,
                           grad=strategy == "reverse-mode")
            for op in ("hvp", "vhp"):
                def t_prod(*xs, f=f, op=op):
                    import torch
                    n = len(f.shapes)
                    return getattr(torch.autograd.functional, op)(
                        f.torch, _pack(xs[:n]), _pack(xs[n:]), create_graph=True)

                def j_prod(*xs, f=f, op=op):
                    n = len(f.shapes)
                    return getattr(ours, op)(f.jax, _pack(xs[:n]), _pack(xs[n:]))
                yield case(op, dtype, f.name, t_prod, j_prod, f.shapes * 2, seed=2)


# -------------------------------------------------------------------------- torch.func

@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Linear:
    """``nn.Linear`` as a pytree: ``weight`` (out, in), ``bias`` (out,)."""
    weight: Any
    bias: Any

    def __call__(self, x):
        return x @ self.weight.T + self.bias


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class TwoLayer:
    """``lin2(tanh(lin1(x)))`` with torch's parameter names ``lin1.weight`` ..."""
    lin1: Linear
    lin2: Linear

    def __call__(self, x):
        return self.lin2(jnp.tanh(self.lin1(x)))


def torch_two_layer():
    import torch

    class TorchTwoLayer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin1, self.lin2 = torch.nn.Linear(4, 6), torch.nn.Linear(6, 3)

        def forward(self, x):
            return self.lin2(torch.tanh(self.lin1(x)))
    return TorchTwoLayer()


@register("autograd")
def func_cases() -> Iterable[Case]:
    from torch2jax_ops import func as ours

    def case(op, dtype, label, torch_call, jax_call, args_fn, min_torch=None):
        def build():
            return torch_call, jax.jit(jax_call), args_fn(dtype), {}, _options(dtype)
        return Case("autograd", f"func.{op}", dtype, label, build, min_torch)

    for f in SCALAR:
        for dtype in FLOATS:
            nums = tuple(range(len(f.shapes)))
            yield case("grad", dtype, f.name,
                       lambda *xs, f=f, n=nums: __import__("torch").func.grad(f.torch, n)(*xs),
                       lambda *xs, f=f, n=nums: ours.grad(f.jax, n)(*xs),
                       lambda d, f=f: inputs(f.shapes, d))
            yield case("grad_and_value", dtype, f.name,
                       lambda *xs, f=f: __import__("torch").func.grad_and_value(f.torch)(*xs),
                       lambda *xs, f=f: ours.grad_and_value(f.jax)(*xs),
                       lambda d, f=f: inputs(f.shapes, d))
        for dtype in WIDE:
            yield case("hessian", dtype, f.name,
                       lambda *xs, f=f: __import__("torch").func.hessian(f.torch)(*xs),
                       lambda *xs, f=f: ours.hessian(f.jax)(*xs),
                       lambda d, f=f: inputs(f.shapes, d))
    for f in VECTOR:
        n = len(f.shapes)
        for dtype in (WIDE if f.name == "softmax" else FLOATS):
            def t_vjp(*xs, f=f, n=n):
                import torch
                out, fn = torch.func.vjp(f.torch, *xs[:n])
                cts = torch.utils._pytree.tree_map(
                    lambda o: torch.linspace(-1, 1, o.numel(), dtype=o.dtype).reshape(o.shape), out)
                return out, fn(cts)

            def j_vjp(*xs, f=f, n=n):
                out, fn = ours.vjp(f.jax, *xs[:n])
                return out, fn(jax.tree_util.tree_map(
                    lambda o: jnp.linspace(-1, 1, o.size, dtype=o.dtype).reshape(o.shape), out))
            yield case("vjp", dtype, f.name, t_vjp, j_vjp, lambda d, f=f: inputs(f.shapes, d))
        for dtype in WIDE:
            yield case("jvp", dtype, f.name,
                       lambda *xs, f=f, n=n: __import__("torch").func.jvp(f.torch, xs[:n], xs[n:]),
                       lambda *xs, f=f, n=n: ours.jvp(f.jax, xs[:n], xs[n:]),
                       lambda d, f=f: inputs(f.shapes * 2, d, 3))
            nums = tuple(range(n))
            for chunk in (None, 2):
                yield case("jacrev", dtype, f"{f.name}-chunk{chunk}",
                           lambda *xs, f=f, c=chunk, a=nums: __import__("torch").func.jacrev(
                               f.torch, a, chunk_size=c)(*xs),
                           lambda *xs, f=f, c=chunk, a=nums: ours.jacrev(f.jax, a, chunk_size=c)(*xs),
                           lambda d, f=f: inputs(f.shapes, d))
            yield case("jacfwd", dtype, f.name,
                       lambda *xs, f=f, a=nums: __import__("torch").func.jacfwd(f.torch, a)(*xs),
                       lambda *xs, f=f, a=nums: ours.jacfwd(f.jax, a)(*xs),
                       lambda d, f=f: inputs(f.shapes, d))

    # vmap: per-example gradients of the MLP loss, batch on different dims, in chunks.
    mlp_sq = FUNCTIONS["mlp-sq"]
    for dtype in FLOATS:
        for in_dims, chunk in (((0, None, None, None), None), ((1, None, None, 0), 3),
                               ((0, None, None, None), 1)):
            def shapes(d, dims=in_dims):
                base = list(mlp_sq.shapes)
                for i, dim in enumerate(dims):
                    if dim is not None:
                        base[i] = base[i][:dim] + (7,) + base[i][dim:]
                return inputs(base, d, 4)
            label = f"in_dims{in_dims}-chunk{chunk}".replace(" ", "")
            yield case("vmap", dtype, label,
                       lambda *xs, d=in_dims, c=chunk: __import__("torch").func.vmap(
                           __import__("torch").func.grad(mlp_sq.torch, (1, 2, 3)), d,
                           chunk_size=c)(*xs),
                       lambda *xs, d=in_dims, c=chunk: ours.vmap(
                           ours.grad(mlp_sq.jax, (1, 2, 3)), d, chunk_size=c)(*xs),
                       shapes)
        yield case("vmap", dtype, "out_dims(1,None)",
                   lambda x, y: __import__("torch").func.vmap(
                       lambda a, b: (a * b.sum(), b), (0, None), (1, None))(x, y),
                   lambda x, y: ours.vmap(lambda a, b: (a * b.sum(), b), (0, None), (1, None))(x, y),
                   lambda d: inputs(((5, 3), (4,)), d, 5),
                   min_torch=MIN_TORCH_VMAP_UNBATCHED)

    for dtype in FLOATS:
        def fc_args(d):
            module = torch_two_layer().to(dtypes.torch_dtype(d))
            params = {k: v.detach().clone() for k, v in module.named_parameters()}
            params["lin1.weight"] = params["lin1.weight"] * 0.5  # not the module's own values
            return inputs(((5, 4),), d, 6) + (params,)

        def t_fc(x, params):
            import torch
            torch.manual_seed(0)
            module = torch_two_layer().to(x.dtype)
            return torch.func.functional_call(module, params, (x,))

        def j_fc(x, params):
            zeros = {k: jnp.zeros_like(v) for k, v in params.items()}
            module = TwoLayer(Linear(zeros["lin1.weight"], zeros["lin1.bias"]),
                              Linear(zeros["lin2.weight"], zeros["lin2.bias"]))
            return ours.functional_call(module, params, (x,))
        yield case("functional_call", dtype, "two-layer", t_fc, j_fc, fc_args)


# ------------------------------------------------------------------ any order, traces

def torch_nth_grad(f: Callable, order: int, x):
    """The order-th derivative by torch's repeated autograd.grad (create_graph=True)."""
    import torch

    y = f(x)
    for _ in range(order):
        (y,) = torch.autograd.grad(y, x, create_graph=True)
    return y


@register("autograd")
def higher_order_cases() -> Iterable[Case]:
    from torch2jax_ops import func as ours

    funcs = {"sin(exp)": (lambda o, x: o.sin(o.exp(x))),
             "x^5-3x^3": (lambda o, x: x ** 5 - 3 * x ** 3),
             "tanh*exp": (lambda o, x: o.tanh(x) * o.exp(-x))}
    for name, fn in funcs.items():
        for dtype in WIDE:
            for order in range(5):
                def t(x, fn=fn, order=order):
                    return torch_nth_grad(lambda z: fn(TORCH_OPS, z), order, x)

                def j(x, fn=fn, order=order):
                    return ours.nth_grad(lambda z: fn(JAX_OPS, z), order, x)

                def build(dtype=dtype, t=t, j=j):
                    import torch
                    x = torch.tensor(0.3, dtype=dtypes.torch_dtype(dtype))
                    return t, jax.jit(j), (x,), {}, {}
                yield Case("autograd", "func.nth_grad", dtype, f"{name}-order{order}", build)

            def t_all(xs, fn=fn):
                import torch
                return torch.stack([torch_nth_grad(lambda z: fn(TORCH_OPS, z), k, x)
                                    for k, x in enumerate(xs.unbind(0))])

            def j_all(xs, fn=fn):
                orders = jnp.arange(xs.shape[0])
                return jax.vmap(lambda k, x: ours.nth_grad(lambda z: fn(JAX_OPS, z), k, x,
                                                           max_order=4))(orders, xs)

            def build_all(dtype=dtype, t=t_all, j=j_all):
                import torch
                xs = torch.linspace(-0.4, 0.6, 5, dtype=dtypes.torch_dtype(dtype))
                return t, jax.jit(j), (xs,), {}, {}
            yield Case("autograd", "func.nth_grad", dtype, f"{name}-vmap-orders0-4", build_all)

    # Hutchinson: the same Rademacher probes on both sides.
    for dtype in WIDE:
        def build_trace(dtype=dtype):
            import torch
            x = inputs(((6,),), dtype, 8)[0]
            w = inputs(((6, 6),), dtype, 9)[0]
            key = jax.random.key(0)
            with dtypes.x64(dtype == "float64"):
                probes = np.asarray(jax.random.rademacher(key, (16, 6), dtype=dtype))
            v = torch.tensor(probes)

            def t(x, w):
                y = torch.tanh(w @ x) * x
                total = 0
                for row in v:
                    (g,) = torch.autograd.grad(y, x, row, create_graph=True)
                    total = total + (g * row).sum()
                return total / len(v)

            def j(x, w):
                return ours.jacobian_trace(lambda z: jnp.tanh(w @ z) * z, x, key=key,
                                           num_samples=16)
            return t, jax.jit(j), (x, w), {}, {}
        yield Case("autograd", "func.jacobian_trace", dtype, "tanh-layer-16-probes", build_trace)


# ------------------------------------------------------------ custom autograd Functions

def torch_functions() -> dict:
    """Three real-world-style torch Functions (the originals the ports below mirror)."""
    import torch

    class StraightThroughSign(torch.autograd.Function):
        """sign(x) forward; identity gradient where |x| <= 1 (binarised networks)."""
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.sign(x)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * (x.abs() <= 1).to(grad.dtype)

    class ClampWithGrad(torch.autograd.Function):
        """clamp(x, lo, hi) whose gradient passes where it pushes x back into range."""
        @staticmethod
        def forward(x, lo, hi):
            return x.clamp(lo, hi)

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, lo, hi = inputs
            ctx.save_for_backward(x)
            ctx.lo, ctx.hi = lo, hi

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            inside = (x >= ctx.lo) & (x <= ctx.hi)
            back_in = ((x < ctx.lo) & (grad < 0)) | ((x > ctx.hi) & (grad > 0))
            return grad * (inside | back_in).to(grad.dtype), None, None

    class StableLogSumExp(torch.autograd.Function):
        """logsumexp over the last dim, max-shifted; backward from the saved output."""
        @staticmethod
        def forward(ctx, x):
            m = x.amax(dim=-1, keepdim=True)
            out = (x - m).exp().sum(-1, keepdim=True).log() + m
            ctx.save_for_backward(x, out)
            return out.squeeze(-1)

        @staticmethod
        def backward(ctx, grad):
            x, out = ctx.saved_tensors
            return grad.unsqueeze(-1) * (x - out).exp()

    return {"StraightThroughSign": StraightThroughSign, "ClampWithGrad": ClampWithGrad,
            "StableLogSumExp": StableLogSumExp}


def _jax_functions() -> dict:
    from torch2jax_ops.autograd import Function

    class StraightThroughSign(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return jnp.sign(x)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * (jnp.abs(x) <= 1).astype(grad.dtype)

    class ClampWithGrad(Function):
        @staticmethod
        def forward(x, lo, hi):
            return jnp.clip(x, lo, hi)

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, lo, hi = inputs
            ctx.save_for_backward(x)
            ctx.lo, ctx.hi = lo, hi

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            inside = (x >= ctx.lo) & (x <= ctx.hi)
            back_in = ((x < ctx.lo) & (grad < 0)) | ((x > ctx.hi) & (grad > 0))
            return grad * (inside | back_in).astype(grad.dtype), None, None

    class StableLogSumExp(Function):
        @staticmethod
        def forward(ctx, x):
            m = x.max(axis=-1, keepdims=True)
            out = jnp.log(jnp.exp(x - m).sum(-1, keepdims=True)) + m
            ctx.save_for_backward(x, out)
            return out.squeeze(-1)

        @staticmethod
        def backward(ctx, grad):
            x, out = ctx.saved_tensors
            return grad[..., None] * jnp.exp(x - out)

    return {"StraightThroughSign": StraightThroughSign, "ClampWithGrad": ClampWithGrad,
            "StableLogSumExp": StableLogSumExp}


#: The JAX ports of :func:`torch_functions`, nearly line for line.
JAX_FUNCTIONS = _jax_functions()


@register("autograd")
def function_cases() -> Iterable[Case]:
    calls = {"StraightThroughSign": ((), ((4, 5),)),
             "ClampWithGrad": ((-0.5, 0.75), ((4, 5),)),
             "StableLogSumExp": ((), ((3, 6),))}
    for name, (extra, shapes) in calls.items():
        for dtype in FLOATS:
            def build(name=name, extra=extra, shapes=shapes, dtype=dtype):
                original = torch_functions()[name]
                port = JAX_FUNCTIONS[name]
                xs = tuple(2 * x for x in inputs(shapes, dtype, 10))  # values on both sides of 1
                return (lambda x: original.apply(x, *extra), jax.jit(lambda x: port.apply(x, *extra)),
                        xs, {}, _options(dtype))
            yield Case("autograd", f"autograd.Function:{name}", dtype, "ported", build)
