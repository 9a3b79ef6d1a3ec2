"""``torch.autograd.functional`` on JAX: jacobian, hessian, vjp, jvp, hvp, vhp.

Same argument names, defaults and return structures as torch:

* ``inputs`` is an array or a tuple of arrays; ``func(*inputs)`` returns an
  array or a tuple of arrays (a list is refused, as in torch).
* ``jacobian`` returns a single array, a tuple (tuple inputs *or* tuple
  outputs) or a tuple of tuples (``jac[i][j]``: output ``i``, input ``j``, of
  shape ``out_i.shape + in_j.shape``).
* ``vjp``/``jvp``/``hvp``/``vhp`` return ``(func_output, product)``;
  ``v=None`` is allowed only when that side has a single one-element array.
* ``strict=True`` raises ``RuntimeError`` where torch's does: an output that
  does not depend on any input, an input that no output depends on, a pair
  (output, input) with no connection (``jacobian``/``hessian``), a linear
  function's constant Jacobian in ``hessian``/``hvp``/``vhp``. Dependence is
  read from the function's jaxpr (:mod:`torch2jax_ops.dependence`):
  structural, like torch's graph.

``create_graph`` and ``vectorize`` have no meaning in JAX and are accepted:
results are always differentiable (apply ``jax.grad`` to a function that
calls ``jacobian``), and computations are always vectorised. With
``strict=True, create_graph=True`` torch's extra check (a Jacobian that does
not depend on the inputs raises) is made too. ``strategy="forward-mode"``
does not need ``vectorize=True`` here, and works with ``strict=True``.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .._checking import is_array
from .._dependence import dependencies
from ..func._common import _check_floating, _float0_zeros
from ..func._jacobian import jacobian_blocks

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]

_STRATEGIES = ("forward-mode", "reverse-mode")



def _as_tuple(value: Any, arg_name: str, *, op: str) -> tuple[bool, tuple]:
    """(was it a tuple, the tuple of arrays); torch's TypeError for anything else."""
    is_tuple = isinstance(value, tuple)
    items = value if is_tuple else (value,)
    for i, item in enumerate(items):
        if not is_array(item):
            which = f"the value at index {i}" if is_tuple else f"the given {arg_name}"
            hint = (" (a torch tensor: convert it with torch2jax_ops.to_jax)"
                    if type(item).__module__.startswith("torch") else "")
            raise TypeError(f"The {arg_name} given to {op} must be either an array or a "
                            f"tuple of arrays but {which} has type {type(item).__name__}{hint}.")
    return is_tuple, tuple(jnp.asarray(x) for x in items)


def _unpack(res: tuple, to_unpack: Any) -> Any:
    """torch's ``_tuple_postprocess``: undo the tuple wrapping of one or two levels."""
    if isinstance(to_unpack, tuple):
        if not to_unpack[1]:
            res = tuple(el[0] for el in res)
        if not to_unpack[0]:
            res = res[0]
        return res
    return res if to_unpack else res[0]


def _inputs(inputs: Any, *, op: str) -> tuple[bool, tuple]:
    is_tuple, xs = _as_tuple(inputs, "inputs", op=op)
    _check_floating(xs, op=f"{op}: inputs")
    return is_tuple, xs


def _tupled(func: Callable, record: dict, *, op: str) -> Callable:
    """``func`` returning a tuple of arrays always; records whether it returned a tuple."""
    def run(*xs):
        is_tuple, outs = _as_tuple(func(*xs), "outputs of the user-provided function", op=op)
        record["is_tuple"] = is_tuple
        return outs
    return run


def _squeezed(out: Any, *, op: str) -> Any:
    """``out`` checked to be one one-element array, squeezed to a scalar (torch's hessian)."""
    if isinstance(out, tuple) or not is_array(out):
        raise RuntimeError(f"The function given to {op} should return a single array")
    if np.size(out) != 1:
        raise RuntimeError(f"The array returned by the function given to {op} should "
                           f"contain a single element (got shape {tuple(np.shape(out))})")
    return jnp.reshape(out, ())


def _single_output(func: Callable, *, op: str) -> Callable:
    """``func`` returning its one-element output squeezed to a scalar."""
    return lambda *xs: _squeezed(func(*xs), op=op)


def _check_v(v: Optional[Any], refs: tuple, refs_are_tuple: bool, side: str, *, op: str) -> tuple:
    """torch's ``_validate_v`` (and the v=None rule), with ``v`` cast to ``refs``' dtypes."""
    if v is None:
        if len(refs) != 1 or refs[0].size != 1:
            raise RuntimeError(f"The vector v can only be None if the {side} is a single array "
                               f"with a single element ({op}).")
        return (jnp.ones_like(refs[0]),)
    _, v = _as_tuple(v, "v", op=op)
    if len(v) != len(refs):
        if refs_are_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(refs)} but got "
                               f"{len(v)}.")
        raise RuntimeError("The given v should contain a single array.")
    for i, (el, ref) in enumerate(zip(v, refs)):
        if el.shape != ref.shape:
            prefix = f"Entry {i} in " if refs_are_tuple else ""
            raise RuntimeError(f"{prefix}v has invalid size: should be {tuple(ref.shape)} but got "
                               f"{tuple(el.shape)}.")
    return tuple(el.astype(ref.dtype) if jnp.issubdtype(ref.dtype, jnp.inexact) else el
                 for el, ref in zip(v, refs))


def _cotangents(v: tuple, outs: tuple) -> tuple:
    return tuple(c if jnp.issubdtype(o.dtype, jnp.inexact) else _float0_zeros(o)
                 for c, o in zip(v, outs))


# ---------------------------------------------------------------- strict-mode checks

def _strict_outputs(deps: list) -> None:
    for i, d in enumerate(deps):
        if not d:
            raise RuntimeError(f"Output {i} of the user-provided function does not require "
                               f"gradients. The outputs must be computed in a differentiable "
                               f"manner from the input when running in strict mode.")


def _strict_inputs(deps: list, n_inputs: int, what: str = "output") -> None:
    used = frozenset().union(*deps) if deps else frozenset()
    for j in range(n_inputs):
        if j not in used:
            raise RuntimeError(f"The {what} of the user-provided function is independent of "
                               f"input {j}. This is not allowed in strict mode.")


def _strict_pairs(deps: list, n_inputs: int) -> None:
    for i, d in enumerate(deps):
        for j in range(n_inputs):
            if j not in d:
                raise RuntimeError(f"Output {i} of the user-provided function is independent of "
                                   f"input {j}. This is not allowed in strict mode.")


def _strict_jacobian_depends(grad_fn: Callable, xs: tuple) -> list:
    """torch's "jacobian is independent of the input" check (linear functions) for hessians."""
    deps = dependencies(grad_fn, *xs)
    for i, d in enumerate(deps):
        if not d:
            raise RuntimeError(
                f"While computing the hessian, found that the jacobian of the user-provided "
                f"function with respect to input {i} is independent of the input. This is not "
                f"allowed in strict mode. You should ensure that your function is twice "
                f"differentiable and that the jacobian depends on the inputs (this would be "
                f"violated by a linear function for example).")
    return deps


def _strict_create_graph(product_fn: Callable, xs: tuple, what: str = "jacobian") -> None:
    for i, d in enumerate(dependencies(product_fn, *xs)):
        if not d:
            raise RuntimeError(f"The {what} of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode when "
                               f"create_graph=True.")


# -------------------------------------------------------------------------- the API

def vjp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False):
    """``v^T J`` at ``inputs``: returns ``(func_output, vjp)``; ``vjp`` has the inputs' structure."""
    is_in_tuple, xs = _inputs(inputs, op="vjp")
    record: dict = {}
    f = _tupled(func, record, op="vjp")
    outs, pullback = jax.vjp(f, *xs)
    v = _check_v(v, outs, record["is_tuple"], "output of the user-provided function", op="vjp")
    if strict:
        deps = dependencies(f, *xs)
        _strict_outputs(deps)
        _strict_inputs(deps, len(xs))
        if create_graph:
            _strict_create_graph(lambda *a: jax.vjp(f, *a)[1](_cotangents(v, outs)), xs)
    grads = pullback(_cotangents(v, outs))
    return _unpack(outs, record["is_tuple"]), _unpack(tuple(grads), is_in_tuple)


def jvp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False):
    """``J v`` at ``inputs``: returns ``(func_output, jvp)``; ``jvp`` has the outputs' structure.

    torch computes it with the double-backward trick; JAX has forward mode,
    which is exact and cheaper. Not available for functions with a custom VJP.
    """
    is_in_tuple, xs = _inputs(inputs, op="jvp")
    v = _check_v(v, xs, is_in_tuple, "input to the user-provided function", op="jvp")
    record: dict = {}
    f = _tupled(func, record, op="jvp")
    outs, tangents = jax.jvp(f, xs, v)
    if strict:
        deps = dependencies(f, *xs)
        _strict_outputs(deps)
        _strict_inputs(deps, len(xs))
        if create_graph:
            _strict_create_graph(lambda *a: jax.jvp(f, a, v)[1], xs)
    tangents = tuple(t if jnp.issubdtype(o.dtype, jnp.inexact) else jnp.zeros_like(o)
                     for t, o in zip(tangents, outs))
    return _unpack(outs, record["is_tuple"]), _unpack(tangents, record["is_tuple"])


def jacobian(func: Callable, inputs: Any, create_graph: bool = False, strict: bool = False,
             vectorize: bool = False, strategy: str = "reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``.

    Returns an array (one input, one output), a tuple (one side a tuple) or
    a tuple of tuples ``jac[i][j]`` = d out_i / d in_j, of shape
    ``out_i.shape + in_j.shape``. dtype: the input's (reverse mode) or the
    output's (forward mode), as in torch. ``strategy`` picks ``jax.vjp``
    rows or ``jax.jvp`` columns.
    """
    del vectorize
    if strategy not in _STRATEGIES:
        raise ValueError(f'jacobian: strategy must be "forward-mode" or "reverse-mode", got '
                         f'{strategy!r}. "forward-mode" is faster when the function has more '
                         f'outputs than inputs.')
    is_in_tuple, xs = _inputs(inputs, op="jacobian")
    record: dict = {}
    f = _tupled(func, record, op="jacobian")
    mode = "reverse" if strategy == "reverse-mode" else "forward"
    outs, blocks, _ = jacobian_blocks(f, xs, mode=mode)
    if strict:
        deps = dependencies(f, *xs)
        _strict_outputs(deps)
        _strict_pairs(deps, len(xs))
        if create_graph:
            _strict_create_graph(lambda *a: [b for row in jacobian_blocks(f, a, mode=mode)[1]
                                             for b in row], xs)
    return _unpack(blocks, (record["is_tuple"], is_in_tuple))


def hessian(func: Callable, inputs: Any, create_graph: bool = False, strict: bool = False,
            vectorize: bool = False, outer_jacobian_strategy: str = "reverse-mode"):
    """The Hessian of a scalar ``func`` at ``inputs``.

    ``func`` returns one array with one element (any shape, squeezed). The
    result is an array of shape ``in.shape + in.shape``, or a tuple of tuples
    ``hess[i][j]`` of shape ``in_i.shape + in_j.shape``. The inner Jacobian is
    reverse mode; ``outer_jacobian_strategy`` picks the outer one.
    """
    del vectorize
    if outer_jacobian_strategy not in _STRATEGIES:
        raise ValueError(f'hessian: outer_jacobian_strategy must be "forward-mode" or '
                         f'"reverse-mode", got {outer_jacobian_strategy!r}')
    is_in_tuple, xs = _inputs(inputs, op="hessian")
    scalar = _single_output(func, op="hessian")
    argnums = tuple(range(len(xs)))
    grad_fn = jax.grad(scalar, argnums)
    if strict:
        _strict_outputs(dependencies(lambda *a: (scalar(*a),), *xs))
        _strict_pairs(_strict_jacobian_depends(grad_fn, xs), len(xs))
    mode = "reverse" if outer_jacobian_strategy == "reverse-mode" else "forward"
    _, blocks, _ = jacobian_blocks(lambda *a: tuple(grad_fn(*a)), xs, mode=mode)
    if strict and create_graph:
        _strict_create_graph(lambda *a: [b for row in jacobian_blocks(
            lambda *c: tuple(grad_fn(*c)), a, mode=mode)[1] for b in row], xs, "hessian")
    return _unpack(blocks, (is_in_tuple, is_in_tuple))


def _second_order(func: Callable, inputs: Any, v: Any, strict: bool, create_graph: bool,
                  product: Callable, *, op: str):
    is_in_tuple, xs = _inputs(inputs, op=op)
    v = _check_v(v, xs, is_in_tuple, "input to the user-provided function", op=op)

    def scalar_and_out(*a):  # func's own output rides along as aux: func runs once
        out = func(*a)
        return _squeezed(out, op=op), out

    grad_and_out = jax.grad(scalar_and_out, tuple(range(len(xs))), has_aux=True)
    if strict:
        grad_fn = lambda *a: grad_and_out(*a)[0]  # noqa: E731
        _strict_outputs(dependencies(lambda *a: (func(*a),), *xs))
        _strict_inputs(_strict_jacobian_depends(grad_fn, xs), len(xs), "jacobian")
        if create_graph:
            _strict_create_graph(lambda *a: product(grad_and_out, a, v)[0], xs, "hessian")
    result, out = product(grad_and_out, xs, v)
    return out, _unpack(tuple(result), is_in_tuple)


def _vjp_with_aux(g: Callable, xs: tuple, v: tuple) -> tuple:
    _, pullback, aux = jax.vjp(g, *xs, has_aux=True)
    return pullback(v), aux


def vhp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False):
    """``v^T H`` of a scalar ``func``: ``(func_output, vhp)`` (reverse over reverse)."""
    return _second_order(func, inputs, v, strict, create_graph, lambda g, xs, v: _vjp_with_aux(g, xs, v), op="vhp")


def hvp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False):
    """``H v`` of a scalar ``func``: ``(func_output, hvp)`` (forward over reverse).

    Equal to :func:`vhp` for twice continuously differentiable functions;
    unlike torch's (double-backward), it costs about what ``vhp`` costs.
    """
    return _second_order(func, inputs, v, strict, create_graph, lambda g, xs, v: jax.jvp(g, xs, v, has_aux=True)[1:], op="hvp")
