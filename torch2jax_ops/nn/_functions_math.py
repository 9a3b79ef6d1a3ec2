"""The mapping table: arithmetic (``operator.*``, ``torch.add`` ...), elementwise math,
comparisons, logic, clamping and the matmul family.

Binary ops promote their operands with torch's rules (:func:`result_type`):
``int_tensor + 0.5`` is float32, ``int32 / int32`` is float32, a Python number
never widens a tensor of its own category. Pure-Python operands (``x.size(0) *
2``, ``shape[:-1] + (4,)``) stay Python values, so shapes stay concrete.
"""
from __future__ import annotations

import builtins
import functools
import operator
from typing import Any, Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np

from .._checking import is_array
from ._functions_base import (
    _category,
    as_array,
    dtype_arg,
    float_dtype,
    function,
    is_integral,
    op,
    promote,
    result_type,
    safe_abs,
    to_float,
)
from ._functions_sparse import is_sparse, sparse_matmul

__all__: list = []

#: full float32 precision for matmuls (torch's default; XLA on GPUs would use TF32)
HIGHEST = jax.lax.Precision.HIGHEST


def _python(fn: Callable) -> Callable:
    """Operands that are not tensors (ints from ``x.size(0)``, shape tuples) use Python's op."""
    def decorate(impl: Callable) -> Callable:
        @functools.wraps(impl)
        def run(a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
            if not is_array(a) and not is_array(b):
                return fn(a, b)
            return impl(a, b, *args, **kwargs)
        return run
    return decorate


def _no_bool(name: str, *xs: Any) -> None:
    for x in xs:
        if is_array(x) and x.dtype == jnp.bool_:
            raise TypeError(f"{name}: not supported for bool tensors")


# ------------------------------------------------------------------------- arithmetic

@op("add", functions=("operator.add",),
    inplace=True)
@_python(operator.add)
def add(input: Any, other: Any, *, alpha: Any = 1, out: Any = None) -> jax.Array:
    """``torch.add(input, other, alpha=1)``: ``input + alpha * other``, torch's promotion."""
    a, b = promote(input, other)
    if alpha != 1:
        if is_integral(a) and isinstance(alpha, float):
            raise TypeError("add: for integral input tensors, argument alpha must not be a "
                            "floating point number")
        b = b * jnp.asarray(alpha, a.dtype)
    return a + b


@op("sub", functions=("operator.sub", "torch.subtract"),
    methods=("subtract",), inplace=True)
@_python(operator.sub)
def sub(input: Any, other: Any, *, alpha: Any = 1, out: Any = None) -> jax.Array:
    """``torch.sub(input, other, alpha=1)``: ``input - alpha * other``."""
    a, b = promote(input, other)
    if a.dtype == jnp.bool_:
        raise TypeError("sub: subtraction, the `-` operator, with two bool tensors is not "
                        "supported; use the `^` or logical_xor() operator instead")
    if alpha != 1:
        b = b * jnp.asarray(alpha, a.dtype)
    return a - b


@op("rsub", tensor=False)
def rsub(input: Any, other: Any, *, alpha: Any = 1) -> jax.Array:
    """``torch.rsub(input, other, alpha=1)``: ``other - alpha * input``."""
    return sub(other, input, alpha=alpha)


@op("mul", functions=("operator.mul", "torch.multiply"),
    methods=("multiply",), inplace=True)
@_python(operator.mul)
def mul(input: Any, other: Any, *, out: Any = None) -> jax.Array:
    """``torch.mul``; bool * bool is logical and, as in torch."""
    a, b = promote(input, other)
    return a & b if a.dtype == jnp.bool_ else a * b


def _floor_divide(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.floor_divide(a, b)


@op("div", functions=("operator.truediv", "torch.divide"),
    methods=("divide",), inplace=True)
@_python(operator.truediv)
def div(input: Any, other: Any, *, rounding_mode: Optional[str] = None,
        out: Any = None) -> jax.Array:
    """``torch.div(input, other, rounding_mode=None)``: true division (integers -> float32),
    ``"trunc"`` (C-style) or ``"floor"`` (Python-style), the latter two keep integer types."""
    if rounding_mode is None:
        dt = result_type(input, other)
        if _category(dt) < 2:
            dt = float_dtype()
        a, b = promote(input, other, dtype=dt)
        return a / b
    a, b = promote(input, other)
    if rounding_mode == "trunc":
        if is_integral(a):
            return jax.lax.div(a, b)  # rounds toward zero
        return jnp.trunc(a / b)
    if rounding_mode == "floor":
        return _floor_divide(a, b)
    raise ValueError(f"div: expected rounding_mode to be one of None, 'trunc', or 'floor' but "
                     f"found {rounding_mode!r}")


@op("true_divide", inplace=True)
def true_divide(input: Any, other: Any, *, out: Any = None) -> jax.Array:
    return div(input, other)


@op("floor_divide", functions=("operator.floordiv",),
    inplace=True)
@_python(operator.floordiv)
def floor_divide(input: Any, other: Any, *, out: Any = None) -> jax.Array:
    """``torch.floor_divide`` / ``//``: rounds toward negative infinity (Python's rule)."""
    a, b = promote(input, other)
    _no_bool("floor_divide", a)
    return _floor_divide(a, b)


@op("remainder", functions=("operator.mod",),
    inplace=True)
@_python(operator.mod)
def remainder(input: Any, other: Any, *, out: Any = None) -> jax.Array:
    """``torch.remainder`` / ``%``: the sign of the divisor (Python's rule)."""
    a, b = promote(input, other)
    return jnp.remainder(a, b)


@op("fmod", inplace=True)
def fmod(input: Any, other: Any, *, out: Any = None) -> jax.Array:
    """``torch.fmod``: the sign of the dividend (C's rule)."""
    a, b = promote(input, other)
    return jnp.fmod(a, b)


@op("pow", functions=("operator.pow",),
    inplace=True)
@_python(operator.pow)
def pow(input: Any, exponent: Any, *, out: Any = None) -> jax.Array:  # noqa: A001 - torch's name
    """``torch.pow(input, exponent)``: a Python int exponent multiplies (exact, as torch);
    integer tensors to negative integer powers raise as in torch."""
    dt = result_type(input, exponent)
    if is_array(input) and isinstance(exponent, (int, float)) and not isinstance(exponent, bool):
        x = input.astype(dt)
        if float(exponent).is_integer() and builtins.abs(exponent) <= 64:
            n = int(exponent)
            if n < 0 and is_integral(x):
                raise ValueError("pow: integers to negative integer powers are not allowed")
            if n == 0:
                return jnp.ones_like(x)
            return jax.lax.integer_pow(x, n)
        if exponent == 0.5:
            return jnp.sqrt(x)
        return jnp.power(x, jnp.asarray(exponent, dt))
    a, b = promote(input, exponent)
    if is_integral(a) and a.dtype != jnp.bool_:
        # torch: x ** -n is 1 for x == 1, +-1 for x == -1, else 0 (integer division)
        pos = jnp.power(a, jnp.maximum(b, 0))
        odd = jnp.remainder(b, 2) == 1
        neg = jnp.where(a == 1, 1, jnp.where(a == -1, jnp.where(odd, -1, 1), 0)).astype(a.dtype)
        return jnp.where(b < 0, neg, pos)
    return jnp.power(a, b)


@op("neg", functions=("operator.neg", "torch.negative"), methods=("negative",),
    inplace=True)
def neg(input: Any) -> Any:
    """``torch.neg`` / ``-x`` (not for bool tensors, as in torch)."""
    if not is_array(input):
        return -input
    _no_bool("neg", input)
    return -input


@op("positive", functions=("operator.pos",))
def pos(input: Any) -> Any:
    return +input if not is_array(input) else input


@op("abs", functions=("operator.abs", "torch.absolute"), methods=("absolute",),
    inplace=True)
def abs(input: Any) -> Any:  # noqa: A001 - torch's name
    """``torch.abs`` (integers stay integers)."""
    if not is_array(input):
        return operator.abs(input)
    return input if input.dtype == jnp.bool_ else safe_abs(input)


@op("maximum")
def maximum(input: jax.Array, other: jax.Array, *, out: Any = None) -> jax.Array:
    """``torch.maximum``: NaN propagates; ties split the gradient in half (as torch)."""
    a, b = promote(input, other)
    return jnp.maximum(a, b)


@op("minimum")
def minimum(input: jax.Array, other: jax.Array, *, out: Any = None) -> jax.Array:
    a, b = promote(input, other)
    return jnp.minimum(a, b)


@op("fmax")
def fmax(input: jax.Array, other: jax.Array, *, out: Any = None) -> jax.Array:
    """``torch.fmax``: NaN is ignored when the other value is a number."""
    a, b = promote(input, other)
    return jnp.where((a >= b) | jnp.isnan(b), a, b)  # ties: the gradient goes to input


@op("fmin")
def fmin(input: jax.Array, other: jax.Array, *, out: Any = None) -> jax.Array:
    a, b = promote(input, other)
    return jnp.where((a <= b) | jnp.isnan(b), a, b)


@op("atan2", functions=("torch.arctan2",), methods=("arctan2",), inplace=True)
def atan2(input: jax.Array, other: jax.Array, *, out: Any = None) -> jax.Array:
    a, b = promote(to_float(as_array(input)), other)
    return jnp.arctan2(a, b)


@op("logaddexp")
def logaddexp(input: jax.Array, other: jax.Array, *, out: Any = None) -> jax.Array:
    a, b = promote(to_float(input), other)
    return jnp.logaddexp(a, b)


@op("lerp", inplace=True)
def lerp(input: jax.Array, end: jax.Array, weight: Any, *, out: Any = None) -> jax.Array:
    """``torch.lerp``: torch's two-sided formula (``start + w (end - start)`` for ``|w| < 0.5``,
    ``end - (end - start)(1 - w)`` otherwise)."""
    a, b = promote(input, end)
    w = as_array(weight, a.dtype)
    diff = b - a
    return jnp.where(jnp.abs(w) < 0.5, a + w * diff, b - diff * (1 - w))


@op("addcmul", inplace=True)
def addcmul(input: jax.Array, tensor1: jax.Array, tensor2: jax.Array, *, value: Any = 1,
            out: Any = None) -> jax.Array:
    """``torch.addcmul``: ``input + value * tensor1 * tensor2``."""
    a, b, c = promote(input, tensor1, tensor2)
    return a + jnp.asarray(value, a.dtype) * b * c


@op("addcdiv", inplace=True)
def addcdiv(input: jax.Array, tensor1: jax.Array, tensor2: jax.Array, *, value: Any = 1,
            out: Any = None) -> jax.Array:
    """``torch.addcdiv``: ``input + value * tensor1 / tensor2``."""
    a, b, c = promote(input, tensor1, tensor2)
    return a + jnp.asarray(value, a.dtype) * (b / c)


# ----------------------------------------------------------------------- elementwise

def _unary(name: str, fn: Callable, *, keep_int: bool = False, int_identity: bool = False,
           functions: Sequence[str] = (), methods: Sequence[str] = (), doc: str = "") -> Callable:
    """Register ``torch.<name>`` / ``Tensor.<name>`` / ``Tensor.<name>_`` for an elementwise op.

    Floating ops take integer/bool tensors as float32 (torch's rule);
    ``keep_int`` ops keep integer types; ``int_identity`` ops return integers
    unchanged (floor, round ...).
    """
    def impl(input: jax.Array, *, out: Any = None) -> jax.Array:
        x = as_array(input)
        if is_integral(x):
            if int_identity:
                return x
            if not keep_int:
                x = to_float(x)
        return fn(x)
    impl.__name__ = impl.__qualname__ = name
    impl.__doc__ = doc or f"``torch.{name}`` (integer tensors compute in float32, as torch)."
    op(name, functions=functions, methods=methods, inplace=True)(impl)
    return impl


exp = _unary("exp", jnp.exp)
exp2 = _unary("exp2", jnp.exp2)
expm1 = _unary("expm1", jnp.expm1, functions=("torch.special.expm1",))
log = _unary("log", jnp.log)
log2 = _unary("log2", jnp.log2)
log10 = _unary("log10", jnp.log10)
log1p = _unary("log1p", jnp.log1p, functions=("torch.special.log1p",))
sqrt = _unary("sqrt", jnp.sqrt)
rsqrt = _unary("rsqrt", jax.lax.rsqrt)
sin = _unary("sin", jnp.sin)
cos = _unary("cos", jnp.cos)
tan = _unary("tan", jnp.tan)
asin = _unary("asin", jnp.arcsin, functions=("torch.arcsin",), methods=("arcsin",))
acos = _unary("acos", jnp.arccos, functions=("torch.arccos",), methods=("arccos",))
atan = _unary("atan", jnp.arctan, functions=("torch.arctan",), methods=("arctan",))
sinh = _unary("sinh", jnp.sinh)
cosh = _unary("cosh", jnp.cosh)
asinh = _unary("asinh", jnp.arcsinh, functions=("torch.arcsinh",), methods=("arcsinh",))
atanh = _unary("atanh", jnp.arctanh, functions=("torch.arctanh",), methods=("arctanh",))
tanh = _unary("tanh", jnp.tanh, functions=("torch.nn.functional.tanh",))
sigmoid = _unary("sigmoid", jax.nn.sigmoid,
                 functions=("torch.nn.functional.sigmoid", "torch.special.expit"))
erf = _unary("erf", jsp.erf, functions=("torch.special.erf",))
erfc = _unary("erfc", jsp.erfc, functions=("torch.special.erfc",))
erfinv = _unary("erfinv", jsp.erfinv, functions=("torch.special.erfinv",))
lgamma = _unary("lgamma", jsp.gammaln)
digamma = _unary("digamma", jsp.digamma, functions=("torch.special.digamma",))
reciprocal = _unary("reciprocal", lambda x: 1 / x)
floor = _unary("floor", jnp.floor, int_identity=True)
ceil = _unary("ceil", jnp.ceil, int_identity=True)
trunc = _unary("trunc", jnp.trunc, int_identity=True, functions=("torch.fix",), methods=("fix",))
frac = _unary("frac", lambda x: x - jnp.trunc(x))
sign = _unary("sign", jnp.sign, keep_int=True, functions=("torch.sgn",), methods=("sgn",))
square = _unary("square", lambda x: x * x, keep_int=True)


@op("round", inplace=True)
def round(input: jax.Array, *, decimals: int = 0, out: Any = None) -> jax.Array:  # noqa: A001
    """``torch.round(input, decimals=0)``: half to even (integers unchanged)."""
    if is_integral(input):
        return input
    if decimals == 0:
        return jnp.round(input)
    scale = jnp.asarray(10.0 ** decimals, input.dtype)
    return jnp.round(input * scale) / scale


@op("logit", inplace=True)
def logit(input: jax.Array, eps: Optional[float] = None) -> jax.Array:
    """``torch.logit(input, eps=None)``: ``log(x / (1 - x))``, x clamped to [eps, 1 - eps]."""
    x = to_float(input)
    if eps is not None:
        x = jnp.clip(x, eps, 1 - eps)
    return jnp.log(x / (1 - x))


@op("nan_to_num", inplace=True)
def nan_to_num(input: jax.Array, nan: float = 0.0, posinf: Optional[float] = None,
               neginf: Optional[float] = None, *, out: Any = None) -> jax.Array:
    """``torch.nan_to_num``: NaN -> ``nan``, +-inf -> ``posinf``/``neginf`` (default: the
    dtype's largest / lowest finite value)."""
    if is_integral(input):
        return input
    return jnp.nan_to_num(input, nan=nan, posinf=posinf, neginf=neginf)


@op("isnan")
def isnan(input: jax.Array) -> jax.Array:
    return jnp.isnan(input) if not is_integral(input) else jnp.zeros(input.shape, bool)


@op("isinf")
def isinf(input: jax.Array) -> jax.Array:
    return jnp.isinf(input) if not is_integral(input) else jnp.zeros(input.shape, bool)


@op("isposinf")
def isposinf(input: jax.Array) -> jax.Array:
    return jnp.isposinf(input) if not is_integral(input) else jnp.zeros(input.shape, bool)


@op("isneginf")
def isneginf(input: jax.Array) -> jax.Array:
    return jnp.isneginf(input) if not is_integral(input) else jnp.zeros(input.shape, bool)


@op("isfinite")
def isfinite(input: jax.Array) -> jax.Array:
    return jnp.isfinite(input) if not is_integral(input) else jnp.ones(input.shape, bool)


@op("clamp", functions=("torch.clip",), methods=("clip",), inplace=True)
def clamp(input: jax.Array, min: Any = None, max: Any = None, *,  # noqa: A002 - torch's names
          out: Any = None) -> jax.Array:
    """``torch.clamp(input, min=None, max=None)``: ``min(max(x, lo), hi)`` (``hi`` wins when
    ``lo > hi``); NaN stays NaN. Gradients as torch: ``input`` where ``lo <= x <= hi`` (bounds
    included; none at NaN), a tensor ``min`` where ``x < min``, ``max`` where it binds."""
    if min is None and max is None:
        raise ValueError("clamp: at least one of 'min' or 'max' must not be None")
    x, lo, hi = promote(input, min, max)
    r = x
    if lo is not None:
        r = jnp.where(x < lo, lo, r)
    if hi is not None:
        r = jnp.where(r > hi, hi, r)
    if _category(x.dtype) >= 2:
        r = jnp.where(jnp.isnan(x), jax.lax.stop_gradient(x), r)
    return r


@op("clamp_min", inplace=True)
def clamp_min(input: jax.Array, min: Any) -> jax.Array:  # noqa: A002
    return clamp(input, min=min)


@op("clamp_max", inplace=True)
def clamp_max(input: jax.Array, max: Any) -> jax.Array:  # noqa: A002
    return clamp(input, max=max)


# ----------------------------------------------------------------- comparisons, logic

def _is_dtype(x: Any) -> bool:
    return type(x).__name__ == "dtype" or (isinstance(x, type) and issubclass(x, np.generic))


def _dtype_equal(a: Any, b: Any) -> bool:
    try:
        return dtype_arg(a) == dtype_arg(b)
    except TypeError:
        return False


def _compare(name: str, fn: Callable, pyfn: Callable, aliases: Sequence[str] = (),
             methods: Sequence[str] = ()) -> Callable:
    def impl(input: Any, other: Any, *, out: Any = None) -> Any:
        if not is_array(input) and not is_array(other):
            if name in ("eq", "ne") and (_is_dtype(input) or _is_dtype(other)):
                same = _dtype_equal(input, other)  # x.dtype == torch.long
                return same if name == "eq" else not same
            return pyfn(input, other)
        a, b = promote(input, other)
        return fn(a, b)
    impl.__name__ = impl.__qualname__ = name
    impl.__doc__ = f"``torch.{name}``: compared in the promoted dtype, a bool tensor."
    op(name, functions=(f"operator.{name}",) + tuple(aliases), methods=tuple(methods))(impl)
    return impl


eq = _compare("eq", jnp.equal, operator.eq)
ne = _compare("ne", jnp.not_equal, operator.ne, ("torch.not_equal",), ("not_equal",))
lt = _compare("lt", jnp.less, operator.lt, ("torch.less",), ("less",))
le = _compare("le", jnp.less_equal, operator.le, ("torch.less_equal",), ("less_equal",))
gt = _compare("gt", jnp.greater, operator.gt, ("torch.greater",), ("greater",))
ge = _compare("ge", jnp.greater_equal, operator.ge, ("torch.greater_equal",),
              ("greater_equal",))


@op("isclose")
def isclose(input: jax.Array, other: jax.Array, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> jax.Array:
    """``torch.isclose``: ``|a - b| <= atol + rtol |b|``."""
    a, b = promote(input, other)
    return jnp.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def _logical(name: str, fn: Callable) -> Callable:
    def impl(input: Any, other: Any, *, out: Any = None) -> jax.Array:
        return fn(as_array(input) != 0, as_array(other) != 0)
    impl.__name__ = impl.__qualname__ = name
    impl.__doc__ = f"``torch.{name}``: nonzero is true; a bool tensor."
    op(name, inplace=True)(impl)
    return impl


logical_and = _logical("logical_and", jnp.logical_and)
logical_or = _logical("logical_or", jnp.logical_or)
logical_xor = _logical("logical_xor", jnp.logical_xor)


@op("logical_not", inplace=True)
def logical_not(input: jax.Array, *, out: Any = None) -> jax.Array:
    return jnp.logical_not(as_array(input) != 0)


def _bitwise(name: str, fn: Callable, pyfn: Callable, operators: Sequence[str]) -> Callable:
    def impl(input: Any, other: Any, *, out: Any = None) -> Any:
        if not is_array(input) and not is_array(other):
            return pyfn(input, other)
        a, b = promote(input, other)
        if not is_integral(a):
            raise TypeError(f"{name}: not implemented for {a.dtype} tensors (integer and bool "
                            f"tensors only)")
        return fn(a, b)
    impl.__name__ = impl.__qualname__ = name
    impl.__doc__ = f"``torch.{name}`` (integer and bool tensors)."
    op(name, functions=tuple(operators), inplace=True)(impl)
    return impl


bitwise_and = _bitwise("bitwise_and", jnp.bitwise_and, operator.and_,
                       ("operator.and_",))
bitwise_or = _bitwise("bitwise_or", jnp.bitwise_or, operator.or_,
                      ("operator.or_",))
bitwise_xor = _bitwise("bitwise_xor", jnp.bitwise_xor, operator.xor,
                       ("operator.xor",))
bitwise_left_shift = _bitwise("bitwise_left_shift", jnp.left_shift, operator.lshift,
                              ("operator.lshift",))
bitwise_right_shift = _bitwise("bitwise_right_shift", jnp.right_shift, operator.rshift,
                               ("operator.rshift",))


@op("bitwise_not", functions=("operator.invert",), inplace=True)
def bitwise_not(input: Any, *, out: Any = None) -> Any:
    """``torch.bitwise_not`` / ``~x``: logical not for bool tensors."""
    if not is_array(input):
        return operator.invert(input)
    if not is_integral(input):
        raise TypeError(f"bitwise_not: not implemented for {input.dtype} tensors")
    return jnp.logical_not(input) if input.dtype == jnp.bool_ else jnp.invert(input)


# ---------------------------------------------------------------------------- matmul

def _same_dtype(name: str, *xs: jax.Array) -> None:
    dts = {jnp.dtype(x.dtype) for x in xs}
    if len(dts) > 1:
        raise TypeError(f"{name}: expected both operands to have the same dtype, but got: "
                        f"{' != '.join(sorted(d.name for d in dts))}")


@op("matmul", functions=("operator.matmul",))
def matmul(input: jax.Array, other: jax.Array, *, out: Any = None) -> jax.Array:
    """``torch.matmul`` / ``@``: NumPy's rules (1-d operands, batch broadcasting); same dtypes
    (as torch); full float32 precision. A sparse operand (``BCOO`` / ``BCSR``): see
    :func:`._functions_sparse.sparse_matmul`."""
    if is_sparse(input) or is_sparse(other):
        return sparse_matmul(input, other)
    _same_dtype("matmul", input, other)
    if input.ndim == 0 or other.ndim == 0:
        raise ValueError("matmul: both arguments to matmul need to be at least 1D")
    return jnp.matmul(input, other, precision=HIGHEST)


@op("mm")
def mm(input: jax.Array, mat2: jax.Array, *, out: Any = None) -> jax.Array:
    """``torch.mm``: 2-d @ 2-d."""
    if input.ndim != 2 or mat2.ndim != 2:
        raise ValueError(f"mm: both arguments must be 2D, got {input.ndim}D and {mat2.ndim}D")
    return matmul(input, mat2)


@op("bmm")
def bmm(input: jax.Array, mat2: jax.Array, *, out: Any = None) -> jax.Array:
    """``torch.bmm``: [b, n, m] @ [b, m, p] (no broadcasting)."""
    if input.ndim != 3 or mat2.ndim != 3 or input.shape[0] != mat2.shape[0]:
        raise ValueError(f"bmm: expected two 3D tensors with the same batch size, got "
                         f"{list(input.shape)} and {list(mat2.shape)}")
    return matmul(input, mat2)


@op("mv")
def mv(input: jax.Array, vec: jax.Array, *, out: Any = None) -> jax.Array:
    if input.ndim != 2 or vec.ndim != 1:
        raise ValueError(f"mv: expected a 2D matrix and a 1D vector, got {input.ndim}D and "
                         f"{vec.ndim}D")
    return matmul(input, vec)


@op("dot", functions=("torch.inner",), methods=("inner",))
def dot(input: jax.Array, other: jax.Array, *, out: Any = None) -> jax.Array:
    """``torch.dot``: two 1-d tensors (``torch.inner`` takes any shapes: last dims)."""
    _same_dtype("dot", input, other)
    if input.ndim <= 1 and other.ndim <= 1:
        return jnp.dot(input, other, precision=HIGHEST)
    return jnp.inner(input, other, precision=HIGHEST)


@op("outer", functions=("torch.ger",), methods=("ger",))
def outer(input: jax.Array, vec2: jax.Array, *, out: Any = None) -> jax.Array:
    """``torch.outer``: ``input[:, None] * vec2[None, :]``."""
    return mul(input.reshape(-1, 1), vec2.reshape(1, -1))


@function("torch.einsum")
def einsum(equation: str, *operands: Any) -> jax.Array:
    """``torch.einsum(equation, *operands)`` (or one list of operands); full precision."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return jnp.einsum(equation, *operands, precision=HIGHEST)


@op("tensordot", tensor=False)
def tensordot(a: jax.Array, b: jax.Array, dims: Any = 2, out: Any = None) -> jax.Array:
    if is_array(dims):
        dims = np.asarray(dims).tolist()
    return jnp.tensordot(a, b, axes=dims, precision=HIGHEST)


@op("addmm", inplace=True)
def addmm(input: jax.Array, mat1: jax.Array, mat2: jax.Array, *, beta: Any = 1, alpha: Any = 1,
          out: Any = None) -> jax.Array:
    """``torch.addmm``: ``beta * input + alpha * (mat1 @ mat2)``; ``beta=0`` ignores input
    (NaN in it does not propagate, as torch)."""
    prod = mm(mat1, mat2)
    if alpha != 1:
        prod = prod * jnp.asarray(alpha, prod.dtype)
    if beta == 0:
        return jnp.broadcast_to(prod, jnp.broadcast_shapes(input.shape, prod.shape))
    base = input if beta == 1 else input * jnp.asarray(beta, input.dtype)
    return base + prod


@op("baddbmm", inplace=True)
def baddbmm(input: jax.Array, batch1: jax.Array, batch2: jax.Array, *, beta: Any = 1,
            alpha: Any = 1, out: Any = None) -> jax.Array:
    """``torch.baddbmm``: ``beta * input + alpha * (batch1 @ batch2)`` (batched)."""
    prod = bmm(batch1, batch2)
    if alpha != 1:
        prod = prod * jnp.asarray(alpha, prod.dtype)
    if beta == 0:
        return jnp.broadcast_to(prod, jnp.broadcast_shapes(input.shape, prod.shape))
    base = input if beta == 1 else input * jnp.asarray(beta, input.dtype)
    return base + prod


@function("torch.nn.functional.linear", "torch._C._nn.linear")
def linear(input: jax.Array, weight: jax.Array, bias: Optional[jax.Array] = None) -> jax.Array:
    """``F.linear(input, weight, bias=None)``: ``input @ weight.T + bias``; weight [out, in]."""
    _same_dtype("linear", input, weight)
    y = jnp.matmul(input, weight.T, precision=HIGHEST) if weight.ndim == 2 else \
        jnp.matmul(input, weight, precision=HIGHEST)
    return y if bias is None else y + bias

