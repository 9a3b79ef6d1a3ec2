"""``as_torch``: a JAX function as a differentiable torch function (autograd and torch.func)."""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .. import _dtypes
from .._checking import is_inexact
from ..dlpack import to_jax, to_torch
from . import _fast
from ._common import conj_if_complex, join_call, split_call

__all__ = ["as_torch"]


class _Bridged:
    """A JAX function on a flat list of arrays, keyed by the static arguments."""

    def __init__(self, fn: Callable, key: tuple, allow_downcast: bool):
        self.fn, self.key, self.allow_downcast = fn, key, allow_downcast
        self.jitted = jax.jit(self.call)
        self.batched: dict[tuple, Callable] = {}
        self._vjp: Optional[Callable] = None
        self._vjp_jit: Optional[Callable] = None
        self._jvp: Optional[Callable] = None

    def call(self, *arrays):
        args, kwargs = join_call(self.key, arrays)
        return self.fn(*args, **kwargs)

    def batched_call(self, axes: tuple) -> Callable:
        """The function under ``jax.vmap(in_axes=axes)``, as a torch function (bridged)."""
        if axes not in self.batched:
            self.batched[axes] = as_torch(jax.vmap(self.call, in_axes=axes),
                                          allow_downcast=self.allow_downcast)
        return self.batched[axes]

    def vjp_jax(self, primals: tuple, cts: tuple) -> tuple:
        """Gradients w.r.t. the inexact primals (None for the others), in torch's
        complex convention; ``cts`` holds one cotangent per inexact output."""
        outs, pullback = jax.vjp(self.call, *primals)
        leaves, tree = jax.tree_util.tree_flatten(outs)
        it = iter(cts)
        full = [conj_if_complex(next(it)).astype(o.dtype) if is_inexact(o)
                else np.zeros(o.shape, jax.dtypes.float0) for o in leaves]
        grads = pullback(jax.tree_util.tree_unflatten(tree, full))
        return tuple(conj_if_complex(g) if is_inexact(p) else None for g, p in zip(grads, primals))

    def vjp(self) -> Callable:
        """:meth:`vjp_jax` as a torch function, itself bridged (so it is differentiable)."""
        if self._vjp is None:
            self._vjp = as_torch(self.vjp_jax, allow_downcast=self.allow_downcast)
        return self._vjp

    def vjp_now(self, primals: tuple, cts: tuple) -> tuple:
        """First-order backward without a graph: :meth:`vjp_jax` jitted, on the JAX
        arrays the forward already imported (no second DLPack import, no nested
        autograd.Function)."""
        if self._vjp_jit is None:
            self._vjp_jit = jax.jit(self.vjp_jax)
        arrays = tuple(to_jax(c, allow_downcast=self.allow_downcast) for c in cts)
        box = _TreeBox()
        grads = _outputs(box, self._vjp_jit(primals, arrays), cts)
        return jax.tree_util.tree_unflatten(box.tree, grads)

    def jvp(self) -> Callable:
        """``(primals, tangents) -> output tangents`` as a torch function (itself bridged)."""
        if self._jvp is None:
            def jvp_jax(primals, tangents):
                full = [t.astype(p.dtype) if is_inexact(p) else np.zeros(p.shape, jax.dtypes.float0)
                        for p, t in zip(primals, tangents)]
                outs, out_tangents = jax.jvp(self.call, tuple(primals), tuple(full))
                return tuple(t if is_inexact(o) else None for o, t in
                             zip(jax.tree_util.tree_leaves(outs),
                                 jax.tree_util.tree_leaves(out_tangents)))
            self._jvp = as_torch(jvp_jax, allow_downcast=self.allow_downcast)
        return self._jvp


class _TreeBox:
    """Carries the output pytree structure out of ``Function.apply``, and the imported
    input arrays to ``setup_context`` (not a pytree itself, so torch.func passes this
    very object through)."""
    tree: Any = None
    arrays: Optional[tuple] = None


def _outputs(tree_box: _TreeBox, result: Any, inputs: tuple) -> tuple:
    """JAX results as torch tensors on the inputs' device; the pytree structure goes into
    ``tree_box`` (a function closing over arrays elsewhere -- weights left on the CPU --
    still hands torch its results where its inputs live)."""
    leaves, tree_box.tree = jax.tree_util.tree_flatten(result)
    seen = {t.data_ptr() for t in inputs if t.numel()}
    device = inputs[0].device if inputs else None
    out = []
    for leaf in leaves:
        tensor = to_torch(leaf if isinstance(leaf, jax.Array) else jnp.asarray(leaf))
        if device is not None and tensor.device != device:
            tensor = tensor.to(device)
        if tensor.numel() and tensor.data_ptr() in seen:  # never hand torch one buffer twice
            tensor = tensor.clone()
        seen.add(tensor.data_ptr())
        out.append(tensor)
    return tuple(out)


def _import_torch_function():
    import torch

    class _Call(torch.autograd.Function):
        """forward: the jitted JAX function; backward/jvp/vmap: JAX's vjp/jvp/vmap."""

        @staticmethod
        def forward(bridged, tree_box, *tensors):
            arrays = tuple(to_jax(t, allow_downcast=bridged.allow_downcast) for t in tensors)
            tree_box.arrays = arrays
            return _outputs(tree_box, bridged.jitted(*arrays), tensors)

        @staticmethod
        def setup_context(ctx, inputs, output):
            bridged, tree_box, *tensors = inputs
            ctx.bridged, ctx.arrays = bridged, tree_box.arrays
            ctx.save_for_backward(*tensors)
            ctx.save_for_forward(*tensors)
            ctx.mark_non_differentiable(*[o for o in output
                                          if not (o.is_floating_point() or o.is_complex())])

        @staticmethod
        def backward(ctx, *cts):
            tensors = ctx.saved_tensors  # torch checks here that no input changed in place
            float_cts = tuple(c for c in cts if c.is_floating_point() or c.is_complex())
            if torch.is_grad_enabled() or ctx.arrays is None:  # create_graph / torch.func
                grads = ctx.bridged.vjp()(tuple(tensors), float_cts)
            else:
                grads = ctx.bridged.vjp_now(ctx.arrays, float_cts)
            return (None, None, *grads)

        @staticmethod
        def jvp(ctx, _bridged_t, _box_t, *tangents):
            tensors = ctx.saved_tensors
            full = tuple(torch.zeros_like(p) if t is None else t for p, t in zip(tensors, tangents))
            return tuple(ctx.bridged.jvp()(tuple(tensors), full))

        @staticmethod
        def vmap(info, in_dims, bridged, tree_box, *tensors):
            # The tensors may still be wrapped by outer torch.func levels, so the
            # batched call goes through a bridged function of its own.
            out = bridged.batched_call(tuple(in_dims[2:]))(*tensors)
            leaves, tree_box.tree = jax.tree_util.tree_flatten(out)
            return tuple(leaves), tuple(0 for _ in leaves)

    return _Call


@functools.cache
def _call_class():
    return _import_torch_function()


class _AsTorch:
    def __init__(self, jax_fn: Callable, allow_downcast: bool):
        self.jax_fn, self.allow_downcast = jax_fn, allow_downcast
        self.cache: dict[tuple, _Bridged] = {}
        self.fast: dict[int, Any] = {}  # arity -> _fast.FastBridged
        functools.update_wrapper(self, jax_fn)

    def _bridged(self, key: tuple) -> _Bridged:
        bridged = self.cache.get(key)
        if bridged is None:
            bridged = self.cache[key] = _Bridged(self.jax_fn, key, self.allow_downcast)
        return bridged

    def _bridged_for(self, args: tuple) -> _Bridged:
        import torch

        _, key = split_call(args, {}, lambda x: isinstance(x, torch.Tensor), op="as_torch")
        return self._bridged(key)

    def __call__(self, *args, **kwargs):
        result = _fast.fast_call(self, args, kwargs, self._bridged_for)
        if result is not NotImplemented:
            return result
        import torch

        op = f"as_torch({getattr(self.jax_fn, '__name__', 'fn')})"
        tensors, key = split_call(args, kwargs, lambda x: isinstance(x, torch.Tensor), op=op)
        if not (self.allow_downcast or jax.config.jax_enable_x64):
            wide = [f"{i} ({_dtypes.name_of(t.dtype)})" for i, t in enumerate(tensors)
                    if _dtypes.name_of(t.dtype) in _dtypes.X64_NAMES]
            if wide:
                raise TypeError(f"{op}: tensor argument(s) {', '.join(wide)} need JAX's 64-bit "
                                f"mode, which is off (JAX would silently downcast). Enable it "
                                f"(jax.config.update('jax_enable_x64', True)), or wrap with "
                                f"as_torch(fn, allow_downcast=True) to pass them as 32-bit "
                                f"(integers that do not fit raise)")
        bridged = self._bridged(key)
        tree_box = _TreeBox()
        outs = _call_class().apply(bridged, tree_box, *tensors)
        return jax.tree_util.tree_unflatten(tree_box.tree, outs)


def as_torch(jax_fn: Callable, *, allow_downcast: bool = False) -> Callable:
    """A JAX function as a differentiable torch function.

    Args:
      jax_fn: a function of JAX arrays (any pytree of them, plus hashable
        static arguments: Python numbers, strings, None) returning a pytree
        of arrays. It must be traceable by ``jax.jit``.
      allow_downcast: with JAX's 64-bit mode off, pass int64/float64 tensors
        (a torch ``long`` index, say) as their 32-bit types, as
        :func:`~torch2jax_ops.dlpack.to_jax` does (integers that do not fit
        raise). Without it such tensors raise TypeError naming the argument.

    Returns:
      ``f(*args, **kwargs)`` taking the same arguments with torch tensors in
      place of the arrays, and returning the same pytree with torch tensors.
      Tensors cross over DLPack without a copy. Gradients (``backward``,
      ``torch.autograd.grad``, ``torch.func.grad/vjp/jacrev``) come from
      ``jax.vjp``, forward mode (``torch.func.jvp/jacfwd``) from ``jax.jvp``,
      and ``torch.func.vmap`` runs ``jax.vmap``. One jit compilation per
      input shape/dtype and per value of the static arguments. Integer
      outputs are non-differentiable; integer inputs get no gradient.

    float64 tensors need JAX's 64-bit mode (``to_jax`` explains). A call with
    positional CPU tensors only takes a fast path (small tensors cross as
    copies, no ``autograd.Function`` without a gradient to track, and the
    forward keeps ``jax.vjp``'s residuals for the first backward, as torch keeps
    its saved tensors); other calls recompute the forward inside ``jax.vjp`` in
    the backward (like ``torch.utils.checkpoint``). See ``bridge/_fast.py``.
    """
    if not callable(jax_fn):
        raise TypeError(f"as_torch: expected a callable, got {type(jax_fn).__name__}")
    return _AsTorch(jax_fn, allow_downcast)
