"""``torch.func`` on JAX: grad, grad_and_value, vjp, jvp, linearize, jacrev, jacfwd, hessian, vmap, functional_call.

Each function keeps torch's name, signature, defaults and return structure;
where torch and JAX differ, torch wins:

* ``grad_and_value`` returns ``(grad, value)`` (``jax.value_and_grad``
  returns ``(value, grad)``); with ``has_aux``: ``(grad, (value, aux))``.
* ``jvp(func, primals, tangents)`` wants tuples, like torch.
* ``vmap(func, in_dims, out_dims, randomness, *, chunk_size)``: keyword
  arguments are passed through unbatched (``jax.vmap`` maps them);
  ``chunk_size`` runs the batch in chunks of that size (``lax.map`` with
  ``batch_size``) to bound memory; ``randomness`` applies to JAX's explicit
  PRNG keys (see :func:`vmap`).
* ``jacrev(..., chunk_size=)`` computes the Jacobian's rows in chunks.

Beyond torch: :func:`nth_grad` (a derivative whose order is data, so it can be
vmapped over orders) and :func:`jacobian_trace` (Hutchinson's estimator).
"""
from ._functional_call import functional_call
from ._grad import grad, grad_and_value, jvp, linearize, vjp
from ._higher import jacobian_trace, nth_grad
from ._jacobian import hessian, jacfwd, jacrev
from ._vmap import vmap

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "linearize", "jacrev", "jacfwd", "hessian",
           "vmap", "functional_call", "nth_grad", "jacobian_trace"]
