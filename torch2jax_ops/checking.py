"""Opt-in checked mode: raise on bad indices even under jax.jit.

Under ``jax.jit`` an index is traced, so its values cannot be inspected while
the function is built; the ops then drop out-of-range elements. They also
record a ``checkify`` debug check, which costs nothing normally and becomes a
real error when the function runs through :func:`checked`.
"""
from __future__ import annotations

import functools
from typing import Callable

from jax.experimental import checkify

__all__ = ["checked"]


def checked(fn: Callable) -> Callable:
    """Wrap ``fn`` (jitted or not) so that failed index checks raise.

    >>> f = checked(jax.jit(lambda x, i: scatter_sum(x, i, dim_size=3)))
    >>> f(x, jnp.array([0, 5]))   # raises JaxRuntimeError naming `index`
    """
    checkified = checkify.checkify(fn, errors=checkify.user_checks)

    @functools.wraps(fn)
    def run(*args, **kwargs):
        error, result = checkified(*args, **kwargs)
        error.throw()
        return result

    return run
