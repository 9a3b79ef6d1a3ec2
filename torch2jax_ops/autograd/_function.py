"""``torch.autograd.Function`` on JAX: port custom autograd Functions nearly verbatim.

>>> class Exp(Function):
...     @staticmethod
...     def forward(ctx, x):
...         y = jnp.exp(x)
...         ctx.save_for_backward(y)
...         return y
...     @staticmethod
...     def backward(ctx, g):
...         (y,) = ctx.saved_tensors
...         return g * y
>>> jax.grad(lambda x: Exp.apply(x).sum())(x)

Both torch styles work: ``forward(ctx, *args)``, or ``forward(*args)`` with
``setup_context(ctx, inputs, output)``. ``apply`` builds a ``jax.custom_vjp``
(``symbolic_zeros=True``, so ``ctx.needs_input_grad`` is exact), so the
Function works under ``jax.jit``, ``jax.grad``, ``jax.vmap`` and, when
``backward`` is itself made of differentiable JAX operations, grad-of-grad.

torch's rules that are kept:

* arguments that are arrays are inputs; anything else (ints, strings, flags,
  lists) is a non-differentiable constant whose gradient must be None;
* ``backward`` returns one gradient (or None) per ``forward`` argument;
  extra trailing Nones are allowed; a gradient with extra broadcast
  dimensions is summed to the input's shape; gradients are cast to the
  input's dtype; anything else raises, naming the position;
* ``backward`` receives a gradient per output, zeros for outputs marked with
  ``ctx.mark_non_differentiable``, integer outputs and unused outputs (None
  instead after ``ctx.set_materialize_grads(False)``);
* ``@once_differentiable`` backwards raise on a second differentiation.

Not available: forward-mode (``jax.jvp``/``jacfwd``) through a Function, as
for every ``custom_vjp`` function (a ``jvp`` staticmethod is not used);
``vmap`` staticmethods are not used either (JAX batches forward and backward
itself); ``ctx.mark_dirty`` is accepted and does nothing (JAX arrays are never
modified in place).
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero

from .._checking import is_array

__all__ = ["Function", "FunctionCtx", "once_differentiable"]

_INTERNAL = ("needs_input_grad", "_saved", "_non_differentiable", "_materialize",
             "_saved_for_forward")



class _Opaque:
    """A static value carried in a pytree's aux data (compared by identity)."""
    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value


@jax.tree_util.register_pytree_node_class
class _Residuals:
    """What ``backward`` needs: arrays as leaves, everything else static."""

    def __init__(self, arrays: list, static: _Opaque):
        self.arrays, self.static = arrays, static

    def tree_flatten(self):
        return list(self.arrays), self.static

    @classmethod
    def tree_unflatten(cls, static, arrays):
        return cls(list(arrays), static)


class FunctionCtx:
    """The ``ctx`` of a Function: ``save_for_backward``, ``saved_tensors``,
    ``needs_input_grad``, ``mark_non_differentiable``, ``set_materialize_grads``,
    and any attribute you set (``ctx.scale = 2``; arrays and non-arrays alike)."""

    def __init__(self, needs_input_grad: tuple = ()):
        self.needs_input_grad = tuple(needs_input_grad)
        self._saved: tuple = ()
        self._saved_for_forward: tuple = ()
        self._non_differentiable: list = []
        self._materialize = True

    def save_for_backward(self, *tensors: Any) -> None:
        """Keep arrays (or None) for ``backward``, read back with ``ctx.saved_tensors``."""
        for i, t in enumerate(tensors):
            if t is not None and not is_array(t):
                raise TypeError(f"save_for_backward can only save arrays or None, but argument {i} "
                                f"is a {type(t).__name__}; keep other values as attributes "
                                f"(ctx.name = value)")
        self._saved = tuple(tensors)

    def save_for_forward(self, *tensors: Any) -> None:
        """Accepted for ported code; forward mode through a Function is not available in JAX."""
        self._saved_for_forward = tuple(tensors)

    @property
    def saved_tensors(self) -> tuple:
        return self._saved

    def mark_non_differentiable(self, *outputs: Any) -> None:
        """These outputs get no gradient: ``backward`` receives zeros for them."""
        self._non_differentiable.extend(id(o) for o in outputs)

    def mark_dirty(self, *args: Any) -> None:
        """Accepted and ignored: JAX arrays are immutable, a port returns new arrays."""

    def set_materialize_grads(self, value: bool) -> None:
        """False: ``backward`` receives None (not zeros) for outputs without a gradient."""
        self._materialize = bool(value)

    # --- carrying the context from the forward rule to the backward rule -------------
    def _state(self) -> tuple[list, tuple]:
        """(arrays, static) describing everything ``backward`` can read."""
        attrs = {k: v for k, v in vars(self).items() if k not in _INTERNAL}
        leaves, treedef = jax.tree_util.tree_flatten((self._saved, attrs))
        arrays = [leaf for leaf in leaves if is_array(leaf)]
        where = [is_array(leaf) for leaf in leaves]
        others = [None if w else leaf for leaf, w in zip(leaves, where)]
        return arrays, (treedef, where, others, self.needs_input_grad, self._materialize)

    @classmethod
    def _rebuild(cls, arrays: list, static: tuple) -> FunctionCtx:
        treedef, where, others, needs, materialize = static
        it = iter(arrays)
        leaves = [next(it) if w else other for w, other in zip(where, others)]
        saved, attrs = jax.tree_util.tree_unflatten(treedef, leaves)
        ctx = cls(needs)
        ctx._saved, ctx._materialize = tuple(saved), materialize
        for k, v in attrs.items():
            setattr(ctx, k, v)
        return ctx


def _is_overridden(cls: type, name: str) -> bool:
    return getattr(cls, name) is not getattr(Function, name)


class Function:
    """Base class for custom differentiable functions, torch-style (see the module doc).

    Subclass it with static ``forward`` and ``backward`` (and optionally
    ``setup_context``) and call ``MyFunction.apply(*args)``.
    """

    generate_vmap_rule = True  # JAX batches Functions itself; kept for ported code

    @staticmethod
    def forward(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("You must implement the forward function for a custom "
                                  "autograd.Function.")

    @staticmethod
    def setup_context(ctx: FunctionCtx, inputs: tuple, output: Any) -> None:
        raise NotImplementedError("setup_context is not overridden.")

    @staticmethod
    def backward(ctx: FunctionCtx, *grad_outputs: Any) -> Any:
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward mode "
                                  "AD.")

    @staticmethod
    def vjp(ctx: FunctionCtx, *grad_outputs: Any) -> Any:
        """torch's alias of ``backward``; override either one."""
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward mode "
                                  "AD.")

    @classmethod
    def _run_forward(cls, ctx: FunctionCtx, args: tuple, kwargs: dict) -> Any:
        if _is_overridden(cls, "setup_context"):
            out = cls.forward(*args, **kwargs)
            cls.setup_context(ctx, args, out)
            return out
        return cls.forward(ctx, *args, **kwargs)

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run the Function: ``forward``'s value, with ``backward`` as its derivative."""
        new_style = _is_overridden(cls, "setup_context")
        try:
            if new_style:
                bound = inspect.signature(cls.forward).bind(*args, **kwargs)
            else:
                bound = inspect.signature(cls.forward).bind(None, *args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{cls.__name__}.apply: {exc} (forward's signature: "
                            f"{inspect.signature(cls.forward)})") from None
        bound.apply_defaults()
        args = bound.args if new_style else bound.args[1:]
        kwargs = bound.kwargs
        args = tuple(jnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args)
        positions = [i for i, a in enumerate(args) if is_array(a)]
        out_info: dict = {}

        def fill(values: tuple) -> tuple:
            full = list(args)
            for i, v in zip(positions, values):
                full[i] = v
            return tuple(full)

        def split_outputs(out: Any, ctx: FunctionCtx) -> tuple:
            is_tuple = isinstance(out, tuple)
            items = out if is_tuple else (out,)
            arrays = [o for o in items if is_array(o)]
            spec = (is_tuple, tuple(None if is_array(o) else _Opaque(o) for o in items))
            if "spec" in out_info and len(out_info["spec"][1]) != len(spec[1]):
                raise RuntimeError(f"{cls.__name__}.forward returned a different output "
                                   f"structure on a second trace")
            out_info["spec"] = spec
            nondiff = tuple(id(o) in ctx._non_differentiable for o in arrays)
            return tuple(jnp.asarray(o) for o in arrays), nondiff

        def primal(*values):
            ctx = FunctionCtx((False,) * len(args))
            arrays, _ = split_outputs(cls._run_forward(ctx, fill(values), kwargs), ctx)
            return arrays

        def fwd(*wrapped):
            values = tuple(w.value for w in wrapped)
            perturbed = dict(zip(positions, (bool(w.perturbed) for w in wrapped)))
            ctx = FunctionCtx(tuple(perturbed.get(i, False) for i in range(len(args))))
            arrays, nondiff = split_outputs(cls._run_forward(ctx, fill(values), kwargs), ctx)
            saved, static = ctx._state()
            shapes = tuple((o.shape, o.dtype) for o in arrays)
            return arrays, _Residuals(saved, _Opaque((static, nondiff, shapes)))

        def bwd(res: _Residuals, cotangents: tuple) -> tuple:
            static, nondiff, shapes = res.static.value
            ctx = FunctionCtx._rebuild(res.arrays, static)
            grads_out = []
            for ct, marked, (shape, dtype) in zip(cotangents, nondiff, shapes):
                if isinstance(ct, SymbolicZero) or marked or not jnp.issubdtype(dtype, jnp.inexact):
                    ct = jnp.zeros(shape, dtype) if ctx._materialize else None
                grads_out.append(ct)
            backward = cls.backward if _is_overridden(cls, "backward") else cls.vjp
            grads = backward(ctx, *grads_out)
            return _input_cotangents(cls.__name__, grads, args, positions, res)

        f = jax.custom_vjp(primal)
        f.defvjp(fwd, bwd, symbolic_zeros=True)
        arrays = f(*(args[i] for i in positions))
        is_tuple, spec = out_info["spec"]
        it = iter(arrays)
        items = tuple(next(it) if s is None else s.value for s in spec)
        return items if is_tuple else items[0]


def _sum_to(grad: Any, shape: tuple, name: str, index: int) -> Any:
    """torch's rule: a gradient with broadcast dimensions is summed to the input's shape."""
    if grad.shape == shape:
        return grad
    try:
        if np.broadcast_shapes(shape, grad.shape) != grad.shape:
            raise ValueError
    except ValueError:
        raise ValueError(f"Function {name}Backward returned an invalid gradient at index {index} "
                         f"- got {list(grad.shape)} but expected shape compatible with "
                         f"{list(shape)}") from None
    lead = grad.ndim - len(shape)
    grad = grad.sum(axis=tuple(range(lead))) if lead else grad
    keep = tuple(i for i, s in enumerate(shape) if s == 1 and grad.shape[i] != 1)
    return grad.sum(axis=keep, keepdims=True) if keep else grad


def _input_cotangents(name: str, grads: Any, args: tuple, positions: list, res: Any) -> tuple:
    """``backward``'s return value -> one cotangent per array argument (custom_vjp's bwd)."""
    grads = grads if isinstance(grads, tuple) else (grads,)
    if len(grads) < len(args) or any(g is not None for g in grads[len(args):]):
        raise RuntimeError(f"function {name}Backward returned an incorrect number of gradients "
                           f"(expected {len(args)}, got {len(grads)}): one per forward argument, "
                           f"None for those without a gradient")
    for i, (g, a) in enumerate(zip(grads, args)):
        if g is not None and not is_array(a):
            raise RuntimeError(f"function {name}Backward returned a gradient different than None "
                               f"at position {i + 1}, but the corresponding forward input was not "
                               f"an array (a {type(a).__name__})")
    out: list[Optional[jax.Array]] = []
    for i in positions:
        g, a = grads[i], args[i]
        if g is None or not jnp.issubdtype(a.dtype, jnp.inexact):
            out.append(None)
            continue
        if not is_array(g):
            if isinstance(g, (int, float)):
                g = jnp.full(a.shape, g, a.dtype)
            else:
                raise TypeError(f"function {name}Backward returned a {type(g).__name__} at "
                                f"position {i}; expected an array or None")
        out.append(_sum_to(g, tuple(a.shape), name, i).astype(a.dtype))
    return tuple(out)


def once_differentiable(backward: Callable) -> Callable:
    """Decorate a ``backward`` that must not be differentiated again (torch's decorator).

    First-order gradients are unchanged; differentiating through this
    backward (grad-of-grad, hessian) raises ``RuntimeError`` instead of
    silently treating it as constant.
    """
    @functools.wraps(backward)
    def wrapper(ctx: FunctionCtx, *grads: Any) -> Any:
        arrays, static = ctx._state()
        g_leaves, g_tree = jax.tree_util.tree_flatten(grads)

        @jax.custom_jvp
        def run(ctx_arrays, grad_leaves):
            inner = FunctionCtx._rebuild(list(ctx_arrays), static)
            return backward(inner, *jax.tree_util.tree_unflatten(g_tree, grad_leaves))

        @run.defjvp
        def _no_second_derivative(primals, tangents):
            raise RuntimeError("trying to differentiate twice a function that was marked with "
                               "@once_differentiable")

        return run(tuple(arrays), list(g_leaves))
    return wrapper
