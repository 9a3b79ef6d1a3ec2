"""Argument checks shared by the ``torch.func`` mirror: argnums, floating inputs, scalar outputs."""
from __future__ import annotations

from typing import Any, Callable, Sequence, Union, overload

import jax
import jax.numpy as jnp
import numpy as np

from .._checking import is_array

Argnums = Union[int, tuple]


def _name(func: Callable) -> str:
    return getattr(func, "__name__", type(func).__name__)


@overload
def _normalize_argnums(argnums: int, nargs: int, *, op: str) -> int: ...
@overload
def _normalize_argnums(argnums: tuple, nargs: int, *, op: str) -> tuple: ...
@overload
def _normalize_argnums(argnums: Any, nargs: int, *, op: str) -> Argnums: ...
def _normalize_argnums(argnums: Any, nargs: int, *, op: str) -> Argnums:
    """argnums as torch accepts it (int or tuple of ints, negatives allowed), in range."""
    def one(a):
        if isinstance(a, bool) or not isinstance(a, int):
            raise TypeError(f"{op}: argnums must be an int or a tuple of ints, got {a!r}")
        if not -nargs <= a < nargs:
            raise ValueError(f"{op}: argnums={a} is out of range for a function called with "
                             f"{nargs} positional argument(s); valid: {-nargs}..{nargs - 1}")
        return a % nargs
    if isinstance(argnums, tuple):
        if not argnums:
            raise ValueError(f"{op}: argnums must be non-empty")
        return tuple(one(a) for a in argnums)
    return one(argnums)


def _check_floating(leaves: Sequence[Any], *, op: str) -> None:
    for i, leaf in enumerate(leaves):
        dtype = getattr(leaf, "dtype", None)
        if dtype is None or not jnp.issubdtype(dtype, jnp.inexact):
            kind = type(leaf).__name__ if dtype is None else str(dtype)
            raise TypeError(f"{op}: leaf {i} is {kind}; derivatives are taken with respect to "
                            f"floating-point arrays only (torch: only floating point tensors can "
                            f"require gradients). Pass it through a position not in argnums.")


def _float0_zeros(x: Any) -> np.ndarray:
    return np.zeros(np.shape(x), dtype=jax.dtypes.float0)


def _scalar_output(out: Any, *, op: str) -> Any:
    if not is_array(out) and not isinstance(out, (int, float)):
        raise RuntimeError(f"{op}: expected f(*args) to return a scalar array, got "
                        f"{type(out).__name__}. Maybe you wanted to use the vjp or jacrev APIs?")
    if np.ndim(out) != 0:
        raise RuntimeError(f"{op}: expected f(*args) to return a scalar array, got an array of "
                         f"shape {tuple(np.shape(out))}. Reduce it (e.g. .sum()) or use vjp / "
                         f"jacrev.")
    return out


_RANDOMNESS = ("error", "different", "same")


def _check_randomness(randomness: str) -> None:
    if randomness not in _RANDOMNESS:
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or "
                         f"'same'. Got {randomness!r}")
