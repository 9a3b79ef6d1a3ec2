"""``torch.func.grad``, ``grad_and_value``, ``vjp``, ``jvp``, ``linearize`` on JAX."""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .._checking import is_inexact
from .._dependence import dependencies
from ._common import (
    Argnums,
    _check_floating,
    _float0_zeros,
    _name,
    _normalize_argnums,
    _scalar_output,
)


def grad(func: Callable, argnums: Argnums = 0, has_aux: bool = False) -> Callable:
    """``torch.func.grad``: the gradient of a scalar function w.r.t. ``args[argnums]``.

    Returns a function with ``func``'s arguments returning the gradient (a
    tuple of them for a tuple ``argnums``, pytrees for pytree arguments), or
    ``(grad, aux)`` with ``has_aux=True`` (``func`` then returns
    ``(output, aux)``). Same as ``jax.grad(func, argnums, has_aux)``.
    """
    inner = _grad_and_value(func, argnums, has_aux, op=f"grad({_name(func)})")

    @functools.wraps(func)
    def run(*args, **kwargs):
        g, value = inner(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return run


def grad_and_value(func: Callable, argnums: Argnums = 0, has_aux: bool = False) -> Callable:
    """``torch.func.grad_and_value``: returns ``(grad, value)``, torch's order.

    With ``has_aux=True``: ``(grad, (value, aux))``. (``jax.value_and_grad``
    returns ``(value, grad)`` and ``((value, aux), grad)``.)
    """
    return _grad_and_value(func, argnums, has_aux, op=f"grad_and_value({_name(func)})")


def _grad_and_value(func: Callable, argnums: Argnums, has_aux: bool, *, op: str) -> Callable:

    @functools.wraps(func)
    def run(*args, **kwargs):
        nums = _normalize_argnums(argnums, len(args), op=op)

        def checked(*a, **k):
            out = func(*a, **k)
            if has_aux:
                if not isinstance(out, tuple) or len(out) != 2:
                    raise TypeError(f"{op}: with has_aux=True, f(*args) must return a tuple "
                                    f"(output, aux), got {type(out).__name__}")
                return _scalar_output(out[0], op=op), out[1]
            return _scalar_output(out, op=op)

        diff = [args[i] for i in (nums if isinstance(nums, tuple) else (nums,))]
        _check_floating(jax.tree_util.tree_leaves(diff), op=f"{op}: the arguments at argnums={argnums}")
        value, g = jax.value_and_grad(checked, nums, has_aux=has_aux)(*args, **kwargs)
        return g, value
    return run


def vjp(func: Callable, *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """``torch.func.vjp``: ``(output, vjp_fn)`` or ``(output, vjp_fn, aux)``.

    ``vjp_fn(cotangents)`` returns a tuple with one gradient per primal; the
    cotangents have the structure of ``output`` and are cast to its dtypes.
    torch's ``retain_graph`` / ``create_graph`` keywords of ``vjp_fn`` are
    accepted and have no effect (every JAX result is differentiable).
    """
    # jax.vjp's overloads take has_aux only as a literal True / False
    result = jax.vjp(func, *primals, has_aux=True) if has_aux else jax.vjp(func, *primals)
    out, pullback = result[0], result[1]
    out_tree = jax.tree_util.tree_structure(out)

    def vjp_fn(cotangents: Any, *, retain_graph: Optional[bool] = None,
               create_graph: Optional[bool] = None) -> tuple:
        del retain_graph, create_graph
        ct_tree = jax.tree_util.tree_structure(cotangents)
        if ct_tree != out_tree:  # type: ignore[operator]  # jaxlib has no PyTreeDef stub
            raise ValueError(f"vjp_fn: expected cotangents with the structure of the output "
                             f"{out_tree}, got {ct_tree}")
        def cast(o, c):
            if not is_inexact(o):
                return _float0_zeros(o)
            if np.shape(c) != o.shape:
                raise ValueError(f"vjp_fn: a cotangent has shape {tuple(np.shape(c))}, the output "
                                 f"it belongs to has shape {tuple(o.shape)}")
            return jnp.asarray(c, o.dtype)
        return pullback(jax.tree_util.tree_map(cast, out, cotangents))

    return (out, vjp_fn) + tuple(result[2:])


def jvp(func: Callable, primals: Any, tangents: Any, *, strict: bool = False,
        has_aux: bool = False) -> tuple[Any, ...]:
    """``torch.func.jvp``: ``(output, jvp_out)`` or ``(output, jvp_out, aux)``.

    ``primals`` and ``tangents`` are tuples of the same structure (as torch
    requires). ``strict=True`` raises when an output is independent of the
    inputs (torch returns zeros otherwise, and so do we).
    """
    for label, value in (("primals", primals), ("tangents", tangents)):
        if not isinstance(value, tuple):
            raise RuntimeError(f"jvp(f, primals, tangents): Expected {label} to be a tuple, got "
                               f"{type(value).__name__}. E.g. it should be valid to call "
                               f"f(*primals).")
    p_tree, t_tree = (jax.tree_util.tree_structure(v) for v in (primals, tangents))
    if p_tree != t_tree:  # type: ignore[operator]  # jaxlib has no PyTreeDef stub
        raise RuntimeError(f"jvp(f, primals, tangents): Expected primals and tangents to have the "
                           f"same structure, got {p_tree} and {t_tree}")
    p_leaves = jax.tree_util.tree_leaves(primals)
    tangents = jax.tree_util.tree_unflatten(t_tree, [
        jnp.asarray(t, p.dtype) if is_inexact(jnp.asarray(p)) else t
        for p, t in zip(p_leaves, jax.tree_util.tree_leaves(tangents))])
    if strict:
        def flat(*leaves):
            out = func(*jax.tree_util.tree_unflatten(p_tree, leaves))
            return jax.tree_util.tree_leaves(out[0] if has_aux else out)
        if any(not d for d in dependencies(flat, *p_leaves)):
            raise RuntimeError("jvp(f, primals, tangents, strict=True): The output of f is "
                               "independent of the inputs. This is not allowed with strict=True.")
    return jax.jvp(func, primals, tangents, has_aux=has_aux)


def linearize(func: Callable, *primals: Any) -> tuple[Any, Callable[..., Any]]:
    """``torch.func.linearize``: ``(output, jvp_fn)``, ``jvp_fn(*tangents)`` = J @ tangents.

    Linearizes once, so repeated ``jvp_fn`` calls do not re-run ``func``.
    """
    return jax.linearize(func, *primals)
