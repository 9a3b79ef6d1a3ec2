"""``as_torch``'s fast path: the common call without the general machinery.

Where the time of a small ``as_torch`` call went (16x16 float32, CPU, see
benchmarks/RESULTS.md): a DLPack import per tensor (tens of us each), then JAX's
slow dispatch of a jitted function on freshly imported buffers (its C++ fast
path does not take them), ``to_torch``'s checks per output, the pytree
flattening and hashing of the cache key, and a ``torch.autograd.Function`` even
when nothing needs a gradient.

The fast path is taken when the call has only positional, plain CPU tensors
that JAX can take as they are (strided, compact, no conj/neg bit, a dtype JAX
holds in the current 64-bit mode), no ``torch.func`` transform or forward-AD
level is active, and JAX computes on its default CPU device. Then:

* small tensors (<= :data:`SMALL_BYTES`) enter JAX as NumPy views, which the
  jitted call copies while dispatching on its C++ fast path (about a microsecond
  for 1 KB); larger ones are shared over DLPack, as ``to_jax`` does;
* small results come back as fresh torch tensors through NumPy (a copy), larger
  ones over DLPack; torch never gets one buffer twice;
* the cache is keyed by the number of tensors (one ``_Bridged`` per arity);
* without a gradient to track, no ``autograd.Function`` at all; with one, the
  forward runs ``jax.vjp`` in its jitted call and keeps the residuals (as torch
  keeps its saved tensors), so the backward is one jitted call on them, with no
  recomputation. When the function returns one real scalar (a loss), the same
  jitted call also computes the gradient for a cotangent of exactly 1, which
  is what ``loss.backward()`` sends: the backward then only hands it over (the
  price: a forward with gradients enabled and no backward after it computes
  that gradient anyway). A second backward (``retain_graph=True``) or another
  cotangent recomputes, and a ``create_graph`` backward takes the general,
  differentiable path.

Everything else goes through the general path unchanged.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .. import _dtypes
from .._checking import is_inexact
from ._common import conj_if_complex

__all__ = ["SMALL_BYTES", "fast_call"]

#: tensors and results up to this size cross as NumPy copies, larger ones over DLPack
SMALL_BYTES = 256 * 1024
_state: dict = {}


def _torch_state() -> dict:
    """Torch-side constants, looked up once (torch is imported lazily by the bridge)."""
    if not _state:
        import torch

        _state.update(
            torch=torch,
            types=(torch.Tensor, torch.nn.Parameter),
            narrow={torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int16,
                    torch.int8, torch.uint8, torch.bool, torch.complex64},
            wide={torch.float64, torch.int64, torch.complex128},
            no_numpy={torch.bfloat16},
            strided=torch.strided,
            peek=getattr(getattr(torch._C, "_functorch", None), "peek_interpreter_stack",
                         None),
            forward_ad=torch.autograd.forward_ad,
        )
    return _state


def _transforms_active(state: dict) -> bool:
    peek = state["peek"]
    if peek is None or peek() is not None:
        return True
    return getattr(state["forward_ad"], "_current_level", -1) >= 0


def _on_default_cpu() -> bool:
    default = jax.config.jax_default_device  # type: ignore[attr-defined]
    return default is None and jax.default_backend() == "cpu"


def eligible(tensors: tuple, state: dict) -> bool:
    """Whether every tensor can enter JAX as it is (what ``to_jax`` shares or copies
    without converting)."""
    dtypes = state["narrow"] | state["wide"] if _dtypes.x64_enabled() else state["narrow"]
    types, strided = state["types"], state["strided"]
    for t in tensors:
        if (type(t) not in types or t.layout is not strided or t.device.type != "cpu"
                or t.dtype not in dtypes or not t.is_contiguous() or t.is_conj()
                or t.is_neg()):
            return False
    return True


def _import(t, state: dict):
    """A tensor as a JAX input: a NumPy view (small) or a DLPack import (large)."""
    if t.requires_grad:
        t = t.detach()
    if t.nbytes <= SMALL_BYTES and t.dtype not in state["no_numpy"]:
        return t.numpy()
    from ..dlpack import to_jax

    return to_jax(t)


def _export(leaves: list, inputs: tuple, state: dict) -> tuple:
    """JAX results as torch tensors; torch never gets one buffer twice."""
    torch = state["torch"]
    seen: Optional[set] = None
    out = []
    for leaf in leaves:
        if not isinstance(leaf, jax.Array):
            leaf = jnp.asarray(leaf)
        dtype = leaf.dtype
        if leaf.size * dtype.itemsize <= SMALL_BYTES and dtype != jnp.bfloat16:
            out.append(torch.from_numpy(np.array(leaf)))  # a fresh, writable copy
            continue
        tensor = torch.from_dlpack(leaf)
        if tensor.numel():
            if seen is None:
                seen = {t.data_ptr() for t in inputs if t.numel()}
                seen.update(t.data_ptr() for t in out if t.numel())
            if tensor.data_ptr() in seen:
                tensor = tensor.clone()
            seen.add(tensor.data_ptr())
        out.append(tensor)
    return tuple(out)


def _pull(pullback, cts, out_tree, avals, inexact_inputs):
    """``_Bridged.vjp_jax``'s conventions on a saved pullback (jitted: casts inside)."""
    it = iter(cts)
    full = [conj_if_complex(jnp.asarray(next(it)).astype(dtype)) if inexact
            else np.zeros(shape, jax.dtypes.float0) for shape, dtype, inexact in avals]
    grads = pullback(jax.tree_util.tree_unflatten(out_tree, full))
    return tuple(conj_if_complex(g) if inexact else None
                 for g, inexact in zip(grads, inexact_inputs))


def _forward_vjp(call, *arrays):
    """The outputs and what the backward needs, in one jitted call.

    A loss (one real scalar output): its gradient for a cotangent of exactly 1,
    what ``loss.backward()`` sends (any other cotangent recomputes). Anything
    else: ``jax.vjp``'s pullback, whose residuals are arrays.
    """
    outs, pullback = jax.vjp(call, *arrays)
    leaves, tree = jax.tree_util.tree_flatten(outs)
    if (len(leaves) == 1 and leaves[0].shape == ()
            and jnp.issubdtype(leaves[0].dtype, jnp.floating)):
        grads = pullback(jax.tree_util.tree_unflatten(tree, [jnp.ones_like(leaves[0])]))
        return outs, None, tuple(conj_if_complex(g) if is_inexact(a) else None
                                 for g, a in zip(grads, arrays))
    return outs, pullback, None


class FastBridged:
    """The jitted pieces of one ``_Bridged`` (one arity) for the fast path."""

    def __init__(self, bridged: Any):
        self.bridged = bridged
        self.jitted = bridged.jitted
        self.forward_vjp = jax.jit(partial(_forward_vjp, bridged.call))
        self.pull = jax.jit(_pull, static_argnums=(2, 3, 4))

    def backward(self, box: Any, cts: tuple, state: dict) -> tuple:
        """Gradients for the inexact outputs' cotangents ``cts``, in torch's conventions,
        from the saved pullback (first backward) or by recomputing (later ones)."""
        pullback, box.pullback = box.pullback, None  # residuals go with the first backward
        grads, box.grads = box.grads, None
        if grads is not None and len(cts) == 1 and cts[0].dim() == 0 and cts[0].item() == 1.0:
            present = [g for g in grads if g is not None]
            exported = iter(_export(present, cts, state))
            return tuple(None if g is None else next(exported) for g in grads)
        if pullback is None:  # a second backward, or a loss's cotangent other than 1
            return tuple(self.bridged.vjp_now(box.arrays, cts))
        if eligible(cts, state):
            arrays = tuple(_import(c, state) for c in cts)
        else:
            from ..dlpack import to_jax

            arrays = tuple(to_jax(c, allow_downcast=self.bridged.allow_downcast) for c in cts)
        grads = self.pull(pullback, arrays, box.out_tree, box.avals, box.inexact_inputs)
        present = [g for g in grads if g is not None]
        exported = iter(_export(present, cts, state))
        return tuple(None if g is None else next(exported) for g in grads)


class _Box:
    tree: Any = None
    out_tree: Any = None
    avals: Any = None
    arrays: Any = None
    pullback: Any = None
    grads: Any = None
    inexact_inputs: Any = None


_function: list = []


def _function_class():
    if _function:
        return _function[0]
    torch = _torch_state()["torch"]

    class _FastCall(torch.autograd.Function):
        """Forward keeps what the backward needs; backward applies it.

        Old-style (``forward(ctx, ...)``, no ``setup_context``): torch then skips
        binding the arguments to ``forward``'s signature on every call
        (``inspect.signature``, tens of microseconds). The fast path never runs
        under ``torch.func``, which would need the new style.
        """

        @staticmethod
        def forward(ctx, fast, box, arrays, *tensors):
            outs, pullback, grads = fast.forward_vjp(*arrays)
            leaves, box.tree = jax.tree_util.tree_flatten(outs)
            box.pullback, box.grads, box.arrays = pullback, grads, arrays
            if pullback is not None:  # what applying it needs (a loss does not)
                box.out_tree = box.tree
                box.avals = tuple((leaf.shape, np.dtype(leaf.dtype), is_inexact(leaf))
                                  for leaf in leaves)
                box.inexact_inputs = tuple(bool(is_inexact(a)) for a in arrays)
            result = _export(leaves, tensors, _torch_state())
            ctx.fast, ctx.box = fast, box
            ctx.save_for_backward(*tensors)
            ctx.mark_non_differentiable(*[o for o in result
                                          if not (o.is_floating_point() or o.is_complex())])
            return result

        @staticmethod
        def backward(ctx, *cts):
            tensors = ctx.saved_tensors  # torch checks here that no input changed in place
            float_cts = tuple(c for c in cts if c.is_floating_point() or c.is_complex())
            if torch.is_grad_enabled():  # create_graph: the general, differentiable vjp
                grads = ctx.fast.bridged.vjp()(tuple(tensors), float_cts)
            else:
                grads = ctx.fast.backward(ctx.box, float_cts, _torch_state())
            return (None, None, None, *grads)

    _function.append(_FastCall)
    return _FastCall


def fast_call(as_torch_fn: Any, args: tuple, kwargs: dict,
              make_bridged: Callable[[tuple], Any]) -> Any:
    """The call through the fast path, or ``NotImplemented`` when it does not apply.

    ``make_bridged(args)`` returns the general path's ``_Bridged`` for these arguments.
    """
    if kwargs or not args:
        return NotImplemented
    state = _torch_state()
    if (_transforms_active(state) or not _on_default_cpu()
            or not eligible(args, state)):
        return NotImplemented
    fast = as_torch_fn.fast.get(len(args))
    if fast is None:
        fast = as_torch_fn.fast[len(args)] = FastBridged(make_bridged(args))
    arrays = tuple(_import(t, state) for t in args)
    torch = state["torch"]
    if torch.is_grad_enabled() and any(t.requires_grad for t in args):
        box = _Box()
        outs = _function_class().apply(fast, box, arrays, *args)
        return jax.tree_util.tree_unflatten(box.tree, outs)
    leaves, tree = jax.tree_util.tree_flatten(fast.jitted(*arrays))
    return jax.tree_util.tree_unflatten(tree, _export(leaves, args, state))
