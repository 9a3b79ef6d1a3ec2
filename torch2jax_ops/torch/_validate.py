"""torch's argument rules for its native scatter / gather / index ops (torch 2.x).

Mirrored from ATen's ``scatter_shape_check``, ``gather_shape_check`` and
``index_func_meta_impl``, with one difference everywhere: a bad argument
raises a Python exception that names it, the valid range and the fix.

* A 0-d tensor counts as 1-d of size 1 in the scatter/gather shape rules
  (torch's ``ensure_nonempty_dim``); the index ops compare exact shapes.
* An empty index skips the scatter/gather shape rules (torch returns
  ``input`` unchanged, or an empty gather).
* Any integer index dtype is accepted (torch takes int32/int64; JAX's 32-bit
  mode has no int64).
* Index values outside ``[0, size)`` raise :class:`IndexError` when the index
  is concrete; a traced index (under ``jax.jit``/``jax.vmap``) gets the
  package's checked-mode behaviour: the bad elements reach nothing (scatter)
  or read 0 (gather), and :func:`torch2jax_ops.checked` raises instead.
"""
from __future__ import annotations

import operator
from typing import Any, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._checking import as_array, check_index, is_traced, normalize_dim
from ..torch_scatter._validate import check_bounds

__all__ = ["operand", "index_operand", "same_dtype", "scatter_shapes", "gather_shapes",
           "index_shapes", "index_vector", "bounds", "reduce_name", "flag", "alpha_value",
           "is_number", "normalize_dim", "SCATTER_REDUCES", "INDEX_REDUCES"]

# normalize_dim (torch's dim rule, a 0-d tensor taking -1 and 0) is re-exported for the ops.

#: ``scatter_reduce``'s reductions; torch also takes "max"/"min" (values only, its backward
#: raises): they are aliases of "amax"/"amin" here.
SCATTER_REDUCES = ("sum", "prod", "mean", "amax", "amin")
INDEX_REDUCES = ("prod", "mean", "amax", "amin")
_ALIASES = {"max": "amax", "min": "amin"}


def operand(x: Any, name: str, *, op: str) -> jax.Array:
    """A tensor argument as a JAX array (torch tensors get the conversion hint)."""
    return as_array(x, name, op=op)


def index_operand(index: Any, name: str = "index", *, op: str) -> jax.Array:
    """An index argument: an integer JAX array."""
    index = as_array(index, name, op=op)
    check_index(index, name, op=op)
    return index


def same_dtype(a: jax.Array, b: jax.Array, a_name: str, b_name: str, *, op: str) -> None:
    """torch never promotes here: ``b`` must have ``a``'s dtype."""
    if a.dtype != b.dtype:
        raise TypeError(f"{op}: `{b_name}` has dtype {b.dtype} but `{a_name}` has {a.dtype}; "
                        f"they must match (torch does not promote here): cast with "
                        f"{b_name}.astype({a_name}.dtype)")


def _nonempty(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(shape) if len(shape) else (1,)


def scatter_shapes(input_shape: Sequence[int], index_shape: Sequence[int],
                   src_shape: Optional[Sequence[int]], dim: int, src_name: str = "src", *,
                   op: str) -> None:
    """torch's ``scatter_shape_check`` (``src_shape=None``: the scalar ``value`` overload).

    ``index`` has as many dims as ``input`` (and ``src``); ``index.size(d) <=
    input.size(d)`` for every ``d != dim``, and ``index.size(d) <= src.size(d)``
    for every ``d``: only the index-shaped leading block of ``src`` is read.
    """
    if not int(np.prod(index_shape, dtype=np.int64)):
        return
    x, i = _nonempty(input_shape), _nonempty(index_shape)
    if len(i) != len(x):
        raise ValueError(f"{op}: `index` has {len(index_shape)} dims but `input` has "
                         f"{len(input_shape)}; they must have the same number of dims (torch "
                         f"does not broadcast the index: expand it, e.g. "
                         f"jnp.broadcast_to(index[:, None], ...))")
    if src_shape is not None and len(_nonempty(src_shape)) != len(i):
        raise ValueError(f"{op}: `index` has {len(index_shape)} dims but `{src_name}` has "
                         f"{len(src_shape)}; they must have the same number of dims")
    for d, (n_i, n_x) in enumerate(zip(i, x)):
        if d != dim and n_i > n_x:
            raise ValueError(
                f"{op}: `index` of shape {tuple(index_shape)} is larger than `input` of shape "
                f"{tuple(input_shape)} at dim {d}; index.size(d) <= input.size(d) must hold "
                f"for every d != dim={dim}")
    if src_shape is not None:
        s = _nonempty(src_shape)
        for d, (n_i, n_s) in enumerate(zip(i, s)):
            if n_i > n_s:
                raise ValueError(
                    f"{op}: `index` of shape {tuple(index_shape)} is larger than `{src_name}` "
                    f"of shape {tuple(src_shape)} at dim {d}; index.size(d) <= "
                    f"{src_name}.size(d) must hold for every d (only the index-shaped "
                    f"leading block of {src_name} is used)")


def gather_shapes(input_shape: Sequence[int], index_shape: Sequence[int], dim: int, *,
                  op: str) -> None:
    """torch's ``gather_shape_check``: same number of dims, ``index.size(d) <= input.size(d)``
    for ``d != dim`` (any size along ``dim``); skipped for an empty index."""
    scatter_shapes(input_shape, index_shape, None, dim, op=op)


def index_vector(index: jax.Array, *, op: str) -> None:
    """The index ops take a 0-d or 1-d index."""
    if index.ndim > 1:
        raise ValueError(f"{op}: `index` must be a vector (0-d or 1-d), got shape "
                         f"{tuple(index.shape)}; flatten it with index.reshape(-1)")


def index_shapes(input_shape: Sequence[int], index: jax.Array, source_shape: Sequence[int],
                 dim: int, source_name: str = "source", *, op: str) -> None:
    """torch's ``index_func_meta_impl``: a vector index with one entry per ``source`` slice
    along ``dim``; ``source`` has ``input``'s shape except at ``dim`` (both 0-d, or neither)."""
    index_vector(index, op=op)
    if len(source_shape) and dim >= len(source_shape):
        raise ValueError(f"{op}: `dim`={dim} is out of range for `{source_name}` with "
                         f"{len(source_shape)} dims")
    along = source_shape[dim] if len(source_shape) else 1
    if index.size != along:
        raise ValueError(f"{op}: `index` has {index.size} entries but `{source_name}` has "
                         f"{along} along dim={dim}; they must be equal (one index per "
                         f"{source_name} slice)")
    x, s = list(input_shape), list(source_shape)
    if x and s:
        del x[dim], s[dim]
    if x != s:
        raise ValueError(f"{op}: `{source_name}` of shape {tuple(source_shape)} must match "
                         f"`input` of shape {tuple(input_shape)} in every dim but dim={dim}")


def bounds(index: jax.Array, size: int, dim: int, *, op: str) -> None:
    """Index values must lie in ``[0, size)``, ``size`` = ``input.size(dim)``."""
    check_bounds(index, size, "index", target=f"`input` along dim={dim}",
                 fix="torch raises here too: fix the index", op=op)


def reduce_name(reduce: Any, allowed: Sequence[str], *, op: str,
                aliases: bool = False) -> str:
    """A reduction name from ``allowed`` (with ``aliases``: "max"/"min" -> "amax"/"amin")."""
    if aliases and isinstance(reduce, str) and reduce in _ALIASES:
        return _ALIASES[reduce]
    if not isinstance(reduce, str) or reduce not in allowed:
        hint = ""
        if reduce in ("add", "sum") and "sum" not in allowed:
            hint = " (for a sum use index_add)"
        elif reduce == "add" or reduce == "multiply":
            hint = " (torch spells them 'sum' and 'prod' here)"
        raise ValueError(f"{op}: `reduce` must be one of {', '.join(map(repr, allowed))}, got "
                         f"{reduce!r}{hint}")
    return reduce


def flag(value: Any, name: str, *, op: str) -> bool:
    """A static Python bool (``include_self``): it selects the computation."""
    if is_traced(value):
        raise TypeError(f"{op}: `{name}` must be a Python bool, but it is traced; it selects "
                        f"the computation, so pass it as a constant (or mark it static in "
                        f"jax.jit)")
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{op}: `{name}` must be a bool, got {value!r}")
    return bool(value)


def is_number(x: Any) -> bool:
    """A Python or NumPy scalar (torch's ``Scalar``); 0-d arrays are tensors."""
    return isinstance(x, (bool, int, float, complex, np.number, np.bool_))


def alpha_value(alpha: Any, dtype: Any, *, op: str) -> Any:
    """``index_add``'s ``alpha`` as the Python number torch uses for ``dtype``.

    Integer tensors truncate a float ``alpha`` toward zero (1.5 -> 1, -1.5 -> -1),
    as torch does; bool tensors take its truth value.
    """
    if is_traced(alpha):
        raise TypeError(f"{op}: `alpha` must be a Python number, but it is traced; it is a "
                        f"scalar of the op in torch: pass a constant, or multiply `source` "
                        f"by the traced value instead")
    if isinstance(alpha, (jax.Array, np.ndarray)):
        if alpha.ndim:
            raise TypeError(f"{op}: `alpha` must be a number, got an array of shape "
                            f"{tuple(alpha.shape)}")
        alpha = alpha.item()
    if not is_number(alpha):
        raise TypeError(f"{op}: `alpha` must be a number, got {type(alpha).__name__}")
    if jnp.dtype(dtype) == jnp.bool_:
        return bool(alpha)
    if isinstance(alpha, (bool, np.bool_)):
        return int(alpha)
    if jnp.issubdtype(dtype, jnp.integer):
        if isinstance(alpha, complex):
            raise TypeError(f"{op}: a complex `alpha` cannot scale an integer `source`")
        return int(alpha)  # truncation toward zero, as torch's Scalar.to<int64_t>()
    if isinstance(alpha, complex) and not jnp.issubdtype(dtype, jnp.complexfloating):
        raise TypeError(f"{op}: a complex `alpha` needs a complex `source`, got {dtype}")
    return operator.index(alpha) if isinstance(alpha, (int, np.integer)) else alpha
