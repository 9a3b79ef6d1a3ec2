"""Whole functions across the torch/JAX boundary, with gradients both ways.

* :func:`as_torch` turns a JAX function into a torch function: tensors in,
  tensors out over DLPack (zero-copy), the JAX side jit-compiled and cached
  per input shape, and a ``torch.autograd.Function`` whose backward is
  ``jax.vjp``. It works under ``loss.backward()`` and under ``torch.func``
  (grad, vjp, jacrev, jacfwd, jvp, vmap, hessian). Swap one layer of a
  running torch model for its JAX port and keep training.
* :func:`as_jax` is the reverse: a torch function called from JAX through
  ``jax.pure_callback`` (so it works under ``jax.jit`` and ``jax.vmap``) with
  a custom VJP that runs torch autograd (``jax.grad``, ``jax.vjp``,
  ``jax.jacrev``; not forward mode).

Both are recursive: the backward of a bridged function is itself a bridged
function, so second derivatives (``torch.autograd.grad(create_graph=True)``,
``jax.grad(jax.grad(...))``) go through too.

Complex gradients: torch's convention is the conjugate of JAX's; the bridge
converts (torch's vjp of ``g`` = conj(JAX's vjp of conj(g))).
"""
from ._as_jax import InPlaceError, as_jax
from ._as_torch import as_torch

__all__ = ["as_torch", "as_jax", "InPlaceError"]
