"""Which outputs of a function depend on which inputs: torch's ``requires_grad`` graph, read from a jaxpr.

torch decides ``strict=True`` questions ("is output i independent of input
j?") from its recorded graph: an output depends on an input when a chain of
differentiable operations connects them. JAX records no graph, but the jaxpr
of the function is the same information. :func:`dependencies` walks it:

* a variable depends on the union of its operation's inputs;
* integer and boolean results depend on nothing (torch: integer tensors
  cannot require grad, so ``(x > 0).float()`` is a constant);
* ``lax.stop_gradient`` (torch's ``detach``) cuts the chain;
* calls with a sub-jaxpr (``jax.jit``, ``custom_jvp``/``custom_vjp``
  functions, ``checkpoint``, ``cond`` branches) are followed inside, so an
  unused argument of a jitted helper is not counted; loops (``while``,
  ``scan``) are taken as a whole: every output depends on every input.

The answer is structural, like torch's: ``x * 0`` depends on ``x``.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import numpy as np

__all__ = ["dependencies"]

_EMPTY: frozenset = frozenset()


def _differentiable(aval: Any) -> bool:
    dtype = getattr(aval, "dtype", None)
    return dtype is not None and np.issubdtype(dtype, np.inexact)


def _sub_jaxpr(eqn: Any):
    """The one sub-jaxpr whose inputs and outputs line up with ``eqn``'s, if any."""
    for value in eqn.params.values():
        jaxpr = getattr(value, "jaxpr", value)
        if (hasattr(jaxpr, "eqns") and len(jaxpr.invars) == len(eqn.invars)
                and len(jaxpr.outvars) == len(eqn.outvars)):
            return jaxpr
    return None


def _walk(jaxpr: Any, in_deps: Sequence[frozenset]) -> list:
    """Dependencies (frozensets of input positions) of ``jaxpr``'s outputs."""
    deps: dict = dict(zip(jaxpr.invars, in_deps))
    for var in jaxpr.constvars:
        deps[var] = _EMPTY

    def of(atom: Any) -> frozenset:
        return deps.get(atom, _EMPTY) if not hasattr(atom, "val") else _EMPTY

    for eqn in jaxpr.eqns:
        ins = [of(v) for v in eqn.invars]
        name = eqn.primitive.name
        if name == "stop_gradient":
            outs = [_EMPTY] * len(eqn.outvars)
        elif name == "cond":  # operand 0 is the branch index; union over branches
            outs = [_EMPTY] * len(eqn.outvars)
            for branch in eqn.params["branches"]:
                for k, d in enumerate(_walk(branch.jaxpr, ins[1:])):
                    outs[k] = outs[k] | d
        elif (sub := _sub_jaxpr(eqn)) is not None:
            outs = _walk(sub, ins)
        else:
            union = frozenset().union(*ins) if ins else _EMPTY
            outs = [union] * len(eqn.outvars)
        for var, d in zip(eqn.outvars, outs):
            deps[var] = d if _differentiable(var.aval) else _EMPTY
    return [of(v) if _differentiable(getattr(v, "aval", None)) else _EMPTY
            for v in jaxpr.outvars]


def dependencies(fn: Callable, *args: Any) -> list[frozenset]:
    """For each output leaf of ``fn(*args)``, the positions of the ``args`` it depends on.

    ``args`` are arrays (one leaf each). Traces ``fn`` once (abstractly; it
    works under ``jax.jit`` too) and never runs it.

    >>> dependencies(lambda x, y: (x * 2, (x > 0).astype(float), y), a, b)
    [frozenset({0}), frozenset(), frozenset({1})]
    """
    closed = jax.make_jaxpr(fn)(*args)
    return _walk(closed.jaxpr, [frozenset({i}) for i in range(len(args))])
