"""Beyond torch: ``nth_grad`` (a derivative order that is data) and ``jacobian_trace`` (Hutchinson)."""
from __future__ import annotations

import operator
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import _dtypes
from .._checking import debug_check, is_array
from ._common import _normalize_argnums, _scalar_output


def _concrete_int(x: Any) -> Optional[int]:
    """``x`` as a Python int when its value is known now, None when traced."""
    if isinstance(x, jax.core.Tracer):
        return None
    try:
        return operator.index(x)
    except TypeError:
        arr = np.asarray(x)
        if arr.shape != () or not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"nth_grad: order must be an integer scalar, got {x!r}") from None
        return int(arr)


def nth_grad(func: Callable, order: Any, *args: Any, argnum: int = 0,
             max_order: int = 8) -> jax.Array:
    """The ``order``-th derivative of a scalar function of a scalar, at ``args``.

    ``func(*args)`` returns a scalar; the derivative is taken w.r.t. the
    scalar ``args[argnum]`` (other arguments are held fixed). ``order`` may be
    traced: the derivatives 0..``max_order`` are built once (nested
    ``jax.grad``) and one is chosen with ``lax.switch``, so

    >>> vmap(lambda k, x: nth_grad(jnp.sin, k, x))(orders, xs)

    evaluates a different order per element. ``max_order`` is static (the
    table's size; compile time grows with it).

    A concrete ``order`` outside ``[0, max_order]`` raises ``ValueError``.
    A traced one cannot raise: the result is NaN, and :func:`torch2jax_ops.checked`
    turns it into an error naming ``order``.
    """
    if isinstance(max_order, bool) or not isinstance(max_order, int) or max_order < 0:
        raise ValueError(f"nth_grad: max_order must be a Python int >= 0 (static), got "
                         f"{max_order!r}")
    argnum = _normalize_argnums(argnum, len(args), op="nth_grad")
    x = args[argnum]
    if np.ndim(x) != 0 or not jnp.issubdtype(jnp.result_type(x), jnp.inexact):
        raise TypeError(f"nth_grad: args[{argnum}] must be a floating-point scalar (shape ()), "
                        f"got {jnp.result_type(x)} of shape {tuple(np.shape(x))}; for arrays, "
                        f"vmap nth_grad over them")
    x = jnp.asarray(x)

    def at(x_):
        call = list(args)
        call[argnum] = x_
        return _scalar_output(func(*call), op="nth_grad")

    known = _concrete_int(order)
    if known is not None and not 0 <= known <= max_order:
        raise ValueError(f"nth_grad: order={known} is outside [0, max_order={max_order}]; "
                         f"raise max_order (static) to take higher derivatives")
    table = [at]
    for _ in range(max_order if known is None else known):
        table.append(jax.grad(table[-1]))
    if known is not None:
        return table[known](x)
    order = jnp.asarray(order)
    if not jnp.issubdtype(order.dtype, jnp.integer):
        raise TypeError(f"nth_grad: order must be an integer, got {order.dtype}")
    valid = (order >= 0) & (order <= max_order)
    debug_check(valid, f"nth_grad: order is outside [0, max_order={max_order}]")
    value = lax.switch(jnp.clip(order, 0, max_order), table, x)
    return jnp.where(valid, value, jnp.nan)


def jacobian_trace(func: Callable, x: Any, *, key: Any, num_samples: int) -> Any:
    """Hutchinson's estimate of ``trace(d func / d x)`` (e.g. a divergence), Rademacher probes.

    ``func`` maps ``x`` to an array of ``x``'s shape. The estimate is
    ``mean_s <v_s, J v_s>`` over ``num_samples`` (static) probes
    ``v = jax.random.rademacher(key, (num_samples, *x.shape), x.dtype)``: the
    same probes a torch port can rebuild to compare. Unbiased; variance
    ``2 * sum_{i != j} J_ij^2 / num_samples`` (for symmetric ``J``). Uses one
    linearisation and ``num_samples`` vjps (reverse mode), so ``func`` may
    contain custom-VJP ops. Differentiable w.r.t. anything ``func`` closes over.
    Half-precision inputs accumulate in float32.
    """
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1:
        raise ValueError(f"jacobian_trace: num_samples must be a Python int >= 1 (static), got "
                         f"{num_samples!r}")
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"jacobian_trace: x must be a floating-point array, got {x.dtype}")
    out, pullback = jax.vjp(func, x)
    if not is_array(out) or out.shape != x.shape:
        raise ValueError(f"jacobian_trace: func(x) must have x's shape {tuple(x.shape)} (a square "
                         f"Jacobian), got {getattr(out, 'shape', type(out).__name__)}")
    probes = jax.random.rademacher(key, (num_samples,) + x.shape, dtype=x.dtype)
    (vjs,) = jax.vmap(pullback)(jnp.asarray(probes, out.dtype))
    acc = _dtypes.accumulation_dtype(x.dtype)
    products = jnp.sum((vjs.astype(acc) * probes.astype(acc)).reshape(num_samples, -1), axis=1)
    return jnp.mean(products).astype(x.dtype)
