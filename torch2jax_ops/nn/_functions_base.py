"""Shared helpers of the mapping table (:mod:`._functions`): registration, dtypes, promotion.

* :func:`function` / :func:`method` (the registry's ``register_function`` /
  ``register_method``) and :func:`op` register an implementation;
  :func:`function_keys` / :func:`method_keys` list the table's keys (what the
  parity tests check for coverage);
* :func:`dtype_arg` turns a dtype argument of any flavour into a JAX dtype;
* :func:`result_type` / :func:`promote` follow torch's type promotion
  (``torch.result_type``), not JAX's: dimensioned tensors outrank 0-d tensors,
  which outrank Python scalars, unless the lower group is of a higher
  category (bool < integer < floating < complex).
"""
from __future__ import annotations

import collections
from typing import Any, Callable, Iterable, Optional, Sequence, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from .. import _dtypes
from .._checking import is_array, is_traced
from ._registry import entries, register_function, register_method

F = TypeVar("F", bound=Callable[..., Any])

#: the mapping table's own registrations are these two (the registry's, under short names)
function = register_function
method = register_method


def function_keys() -> list[str]:
    """Every torch function path the mapping table (``nn/_functions_*``) registers."""
    return [e.key for e in entries("function") if e.registrant.startswith(_TABLE)]


def method_keys() -> list[str]:
    """Every ``torch.Tensor`` method name the mapping table registers."""
    return [e.key for e in entries("method") if e.registrant.startswith(_TABLE)]


_TABLE = "torch2jax_ops.nn._functions"


def op(name: str, *, functions: Sequence[str] = (), methods: Sequence[str] = (),
       torch: bool = True, tensor: bool = True, inplace: Any = False) -> Callable[[F], F]:
    """Register ``fn`` as ``torch.<name>`` and ``Tensor.<name>`` (and ``Tensor.<name>_``).

    ``functions`` / ``methods`` add aliases; ``torch=False`` / ``tensor=False``
    leave out the ``torch.`` function or the method. ``inplace=True`` adds the
    in-place methods through :func:`inplace_of` (dtype and shape kept);
    ``inplace="same"`` registers ``fn`` itself (in-place shape ops:
    ``unsqueeze_``, ``t_`` ...).
    """
    def add(fn: F) -> F:
        paths = ([f"torch.{name}"] if torch else []) + list(functions)
        names = ([name] if tensor else []) + list(methods)
        if paths:
            function(*paths)(fn)
        if names:
            method(*names)(fn)
        if inplace == "same":
            method(*[f"{n}_" for n in names])(fn)
        elif inplace:
            method(*[f"{n}_" for n in names])(inplace_of(fn, f"{name}_"))
        return fn
    return add


def inplace_of(fn: Callable, name: str) -> Callable:
    """The in-place form ``x.<name>(...)``: ``fn``'s result cast back to ``x``'s dtype and shape.

    The fx interpreter rebinds the result to ``x``. As in torch, a result of a
    higher category than ``x`` (a float into an int tensor) or of another
    shape is an error.
    """
    def inplace(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = fn(self, *args, **kwargs)
        if _category(out.dtype) > _category(self.dtype):
            raise TypeError(f"{name}: result type {_dtypes.name_of(out.dtype)} can't be cast to "
                            f"the desired output type {_dtypes.name_of(self.dtype)} (the tensor "
                            f"updated in place keeps its dtype)")
        if tuple(out.shape) != tuple(self.shape):
            raise ValueError(f"{name}: output with shape {tuple(self.shape)} doesn't match the "
                             f"broadcast shape {tuple(out.shape)}")
        return out.astype(self.dtype)
    inplace.__name__ = inplace.__qualname__ = name
    inplace.__doc__ = f"``Tensor.{name}``: in place (a new array; the interpreter rebinds it)."
    return inplace


# ----------------------------------------------------------------------------- dtypes

FLOAT = "float32"  # torch.get_default_dtype()


def dtype_arg(dtype: Any, name: str = "dtype", *, op: str = "dtype") -> Optional[np.dtype]:
    """A dtype argument of any flavour -> the JAX dtype (``None`` stays ``None``).

    Takes torch dtypes (``torch.long``), NumPy/JAX dtypes and scalar types,
    names (``"float32"``) and Python's ``float`` / ``int`` / ``bool`` /
    ``complex`` (torch reads them as float64 / int64 / bool / complex128). 64-bit
    types become their 32-bit ones while JAX's 64-bit mode is off.
    """
    if dtype is None:
        return None
    python = {float: "float64", int: "int64", bool: "bool", complex: "complex128"}
    if isinstance(dtype, type) and dtype in python:
        dtype = python[dtype]
    try:
        return _dtypes.canonical_jax_dtype(dtype)
    except TypeError:
        raise TypeError(f"{op}: `{name}` must be a dtype (torch.float32, jnp.int32 ...), got "
                        f"{dtype!r}") from None


def canonical(name_or_dtype: Any) -> np.dtype:
    """A dtype name as the JAX dtype that holds it now (int64 -> int32 without x64)."""
    return _dtypes.canonical_jax_dtype(name_or_dtype)


def float_dtype() -> np.dtype:
    """torch's default floating dtype (float32)."""
    return jnp.dtype(FLOAT)


def long_dtype() -> np.dtype:
    """int64, or int32 while JAX's 64-bit mode is off."""
    return canonical("int64")


def _category(dtype: Any) -> int:
    """0 bool, 1 integer, 2 floating, 3 complex."""
    dtype = jnp.dtype(dtype)
    if dtype == jnp.bool_:
        return 0
    if jnp.issubdtype(dtype, jnp.integer):
        return 1
    if jnp.issubdtype(dtype, jnp.floating):
        return 2
    return 3


def is_float(x: Any) -> bool:
    """A floating (not complex) array or dtype."""
    return _category(getattr(x, "dtype", x)) == 2


def is_integral(x: Any, include_bool: bool = True) -> bool:
    c = _category(getattr(x, "dtype", x))
    return c == 1 or (include_bool and c == 0)


def is_tensor(x: Any) -> bool:
    """A value that stands for a torch tensor (a JAX or NumPy array)."""
    return is_array(x)


def is_scalar(x: Any) -> bool:
    """A Python (or NumPy) number: torch's "wrapped number"."""
    return isinstance(x, (bool, int, float, complex, np.generic))


def _scalar_dtype(x: Any) -> np.dtype:
    """The dtype torch gives a Python number when it takes part in an op."""
    if isinstance(x, (bool, np.bool_)):
        return jnp.dtype(bool)
    if isinstance(x, (int, np.integer)):
        return jnp.dtype("int64")
    if isinstance(x, (float, np.floating)):
        return jnp.dtype(FLOAT)
    return jnp.dtype("complex64")


def promote_types(a: Optional[np.dtype], b: Optional[np.dtype]) -> Optional[np.dtype]:
    """torch.promote_types (JAX's lattice agrees with torch's on the types both hold)."""
    if a is None:
        return b
    if b is None:
        return a
    return jnp.dtype(jnp.promote_types(a, b))


def _combine(higher: Optional[np.dtype], lower: Optional[np.dtype]) -> Optional[np.dtype]:
    """torch's combine_categories: the lower-priority group wins only with a higher category."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    ch, cl = _category(higher), _category(lower)
    if ch == 3:
        return higher
    if cl == 3:
        return jnp.dtype(jnp.complex128 if higher == jnp.float64 else jnp.complex64) \
            if ch == 2 else lower
    if ch == 2:
        return higher
    if ch == 0 or cl == 2:
        return promote_types(higher, lower)
    return higher


def result_type(*operands: Any) -> np.dtype:
    """``torch.result_type`` of tensors (JAX arrays) and Python numbers (``None`` skipped)."""
    dim = zero = wrapped = None
    for x in operands:
        if x is None:
            continue
        if is_array(x):
            if x.ndim:
                dim = promote_types(dim, jnp.dtype(x.dtype))
            else:
                zero = promote_types(zero, jnp.dtype(x.dtype))
        elif is_scalar(x):
            wrapped = promote_types(wrapped, _scalar_dtype(x))
        else:
            raise TypeError(f"expected a tensor or a number, got {type(x).__name__}")
    out = _combine(_combine(dim, zero), wrapped)
    if out is None:
        raise TypeError("result_type: no tensor or number given")
    return canonical(out.name)


def promote(*operands: Any, dtype: Any = None) -> list:
    """The operands as JAX arrays of their torch result type (or of ``dtype``)."""
    dt = result_type(*operands) if dtype is None else jnp.dtype(dtype)
    return [None if x is None else jnp.asarray(x, dtype=dt) for x in operands]


def safe_abs(x: jax.Array) -> jax.Array:
    """``|x|`` with torch's gradient ``sign(x)`` (0 at 0; JAX's ``abs`` gives 1 there)."""
    if _category(x.dtype) != 2:
        return jnp.abs(x)
    return x * jnp.sign(x)


def to_float(x: Any) -> jax.Array:
    """``x`` for a floating-only op: integers and bools become the default float (as torch)."""
    x = jnp.asarray(x) if not is_array(x) else x
    return x.astype(float_dtype()) if _category(x.dtype) < 2 else x


def as_array(x: Any, dtype: Any = None) -> jax.Array:
    """A tensor argument or a Python number as a JAX array (numbers take torch's dtype)."""
    if is_array(x):
        return x if dtype is None else x.astype(dtype)
    if dtype is None and is_scalar(x):
        dtype = canonical(_scalar_dtype(x).name)
    return jnp.asarray(x, dtype=dtype)


# ------------------------------------------------------------------------- dims, sizes

def dim_arg(dim: Any, ndim: int, name: str = "dim", *, op: str) -> int:
    """One dim in ``[-ndim, ndim)`` (0-d tensors take -1 and 0), normalised."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{op}: `{name}` must be an int, got {dim!r}")
    lo, hi = -max(ndim, 1), max(ndim, 1) - 1
    if not lo <= dim <= hi:
        raise IndexError(f"{op}: Dimension out of range (expected to be in range of "
                         f"[{lo}, {hi}], but got {dim})")
    return int(dim) % max(ndim, 1)


def dims_arg(dim: Any, ndim: int, *, op: str, name: str = "dim") -> Optional[tuple]:
    """``None`` (every dim), an int or a sequence of ints -> a sorted tuple of dims.

    An empty sequence means every dim, as torch's sum/mean/amax read it.
    """
    if dim is None:
        return None
    if isinstance(dim, (tuple, list)):
        if len(dim) == 0:
            return None
        dims = [dim_arg(d, ndim, name, op=op) for d in dim]
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"{op}: dim {dims} appears multiple times in the list of dims")
        return tuple(sorted(dims))
    return (dim_arg(dim, ndim, name, op=op),)


def size_args(size: tuple, *, op: str, name: str = "size") -> tuple:
    """``f(2, 3)`` / ``f((2, 3))`` / ``f([2, 3])`` / ``f(torch.Size)`` -> ``(2, 3)``."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    out = []
    for s in size:
        if is_traced(s):
            raise TypeError(f"{op}: `{name}` must be concrete ints: output shapes are static "
                            f"under jax.jit")
        if is_array(s):
            s = int(s)
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
            raise TypeError(f"{op}: `{name}` must be a sequence of ints, got {size!r}")
        out.append(int(s))
    return tuple(out)


def concrete(x: Any, name: str, *, op: str, fix: str) -> np.ndarray:
    """The values of ``x`` as NumPy, or a clear error when they are traced (data-dependent)."""
    if is_traced(x) or any(is_traced(leaf) for leaf in jax.tree_util.tree_leaves(x)):
        raise ValueError(f"{op}: `{name}` decides the output's shape, and its values are not "
                         f"known under jax.jit (one compiled program serves every input). {fix}")
    return np.asarray(x)


# ------------------------------------------------------------------------ return types

def _result_class(name: str, fields: Iterable[str] = ("values", "indices")) -> type:
    """A named tuple like ``torch.return_types.<name>`` (unpacks, ``.values`` / ``.indices``)."""
    # mypy types namedtuple() only with a literal name; these classes are built by name
    cls = collections.namedtuple(name, list(fields))  # type: ignore[misc]
    cls.__module__ = "torch2jax_ops.nn.return_types"
    return cls


RETURN_TYPES: dict[str, type] = {n: _result_class(n) for n in (
    "max", "min", "sort", "topk", "kthvalue", "mode", "median", "cummax", "cummin", "aminmax")}
RETURN_TYPES["aminmax"] = _result_class("aminmax", ("min", "max"))
