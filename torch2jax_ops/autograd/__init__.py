"""``torch.autograd`` on JAX: the functional derivative API and custom Functions.

* :mod:`torch2jax_ops.autograd.functional`: ``jacobian``, ``hessian``,
  ``vjp``, ``jvp``, ``hvp``, ``vhp`` with torch's signatures and return
  structures.
* :class:`Function` / :class:`FunctionCtx` / :func:`once_differentiable`:
  custom autograd Functions on ``jax.custom_vjp``.

``strict=True`` questions (which outputs depend on which inputs) are answered
by :func:`dependencies` (a walk over the jaxpr).

``torch.autograd.grad(outputs, inputs)`` has no counterpart: JAX records no
graph, so derivatives are taken of functions (``torch2jax_ops.func.grad``,
``jax.grad``), not of tensors. See ``migration_guide/autograd.md``.
"""
from .._dependence import dependencies
from . import functional
from ._function import Function, FunctionCtx, once_differentiable

__all__ = ["functional", "Function", "FunctionCtx", "once_differentiable", "dependencies"]
