"""The mapping table: ``torch.nn.functional`` -- activations, softmax, normalisation,
embedding / one_hot / pad, similarity, dropout and the random factories.

Activation gradients follow torch at the kinks (``relu``/``leaky_relu``: the
left side at 0; ``hardtanh``/``relu6``/``hardsigmoid``: 0 at the bounds;
``hardswish``: torch's piecewise derivative). Random ops draw a fresh key per
call from the port's ``key=`` (:func:`torch2jax_ops.nn._state.next_key`); without
one they raise, saying how to pass it.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .. import _dtypes
from .._checking import is_array, is_traced
from . import _cdist
from ._functions_base import (
    as_array,
    concrete,
    dim_arg,
    dtype_arg,
    float_dtype,
    function,
    is_integral,
    long_dtype,
    method,
    op,
    size_args,
    to_float,
)
from ._functions_math import clamp
from ._functions_reduce import vector_norm_impl
from ._layers import dropout as layer_dropout
from ._state import random_draw

__all__: list = []

F = "torch.nn.functional."


def _fn(*names: str, inplace: bool = False, torch_too: bool = False,
        method_too: bool = False):
    """Register ``F.<name>`` (and ``F.<name>_`` / ``torch.<name>`` / ``Tensor.<name>``)."""
    def add(impl):
        paths = [F + n for n in names]
        if inplace:
            paths += [F + n + "_" for n in names]
        if torch_too:
            paths += [f"torch.{n}" for n in names]
            if inplace:
                paths += [f"torch.{n}_" for n in names]
        function(*paths)(impl)
        if method_too:
            method(*names)(impl)
            if inplace:
                method(*[n + "_" for n in names])(impl)
        return impl
    return add


# ------------------------------------------------------------------------ activations

@_fn("relu", inplace=True, torch_too=True, method_too=True)
def relu(input: jax.Array, inplace: bool = False) -> jax.Array:
    """``F.relu``: ``max(x, 0)``; gradient 0 at 0 (as torch). ``inplace`` is ignored."""
    if is_integral(input):
        return jnp.maximum(input, 0).astype(input.dtype)
    return jnp.where(input > 0, input, jnp.zeros((), input.dtype))


@_fn("relu6")
def relu6(input: jax.Array, inplace: bool = False) -> jax.Array:
    """``F.relu6``: ``hardtanh(x, 0, 6)`` (gradient 0 at 0 and 6, as torch)."""
    return hardtanh(input, 0.0, 6.0)


@_fn("leaky_relu", inplace=True)
def leaky_relu(input: jax.Array, negative_slope: float = 0.01, inplace: bool = False) -> jax.Array:
    """``F.leaky_relu``: ``x if x > 0 else slope * x`` (slope gradient at 0, as torch)."""
    return jnp.where(input > 0, input, input * jnp.asarray(negative_slope, input.dtype))


@_fn("elu", inplace=True)
def elu(input: jax.Array, alpha: float = 1.0, inplace: bool = False) -> jax.Array:
    x = to_float(input)
    neg = jnp.asarray(alpha, x.dtype) * jnp.expm1(jnp.where(x > 0, 0, x))
    return jnp.where(x > 0, x, neg)


@_fn("selu", inplace=True, torch_too=True)
def selu(input: jax.Array, inplace: bool = False) -> jax.Array:
    """``F.selu``: ``scale * elu(x, alpha)`` with torch's constants."""
    x = to_float(input)
    return jnp.asarray(1.0507009873554804934193349852946, x.dtype) * elu(
        x, 1.6732632423543772848170429916717)


@_fn("celu", inplace=True, torch_too=True)
def celu(input: jax.Array, alpha: float = 1.0, inplace: bool = False) -> jax.Array:
    x = to_float(input)
    a = jnp.asarray(alpha, x.dtype)
    return jnp.where(x > 0, x, a * jnp.expm1(jnp.where(x > 0, 0, x) / a))


@_fn("gelu")
def gelu(input: jax.Array, approximate: str = "none") -> jax.Array:
    """``F.gelu(input, approximate='none')``: the erf form, or ``'tanh'``."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    x = to_float(input)
    if approximate == "tanh":
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1 + jnp.tanh(inner))
    return x * 0.5 * (1 + jax.scipy.special.erf(x * (1 / math.sqrt(2))))


@_fn("silu")
def silu(input: jax.Array, inplace: bool = False) -> jax.Array:
    x = to_float(input)
    return x * jax.nn.sigmoid(x)


@_fn("mish")
def mish(input: jax.Array, inplace: bool = False) -> jax.Array:
    """``F.mish``: ``x * tanh(softplus(x))``."""
    x = to_float(input)
    return x * jnp.tanh(jax.nn.softplus(x))


@_fn("softplus")
def softplus(input: jax.Array, beta: float = 1.0, threshold: float = 20.0) -> jax.Array:
    """``F.softplus``: ``log(1 + exp(beta x)) / beta``, linear where ``beta x > threshold``."""
    x = to_float(input)
    bx = x * jnp.asarray(beta, x.dtype)
    return jnp.where(bx > threshold, x, jax.nn.softplus(bx) / jnp.asarray(beta, x.dtype))


@_fn("softsign")
def softsign(input: jax.Array) -> jax.Array:
    x = to_float(input)
    return x / (1 + jnp.abs(x))


@_fn("tanhshrink")
def tanhshrink(input: jax.Array) -> jax.Array:
    x = to_float(input)
    return x - jnp.tanh(x)


@_fn("softshrink")
def softshrink(input: jax.Array, lambd: float = 0.5) -> jax.Array:
    lam = jnp.asarray(lambd, input.dtype)
    return jnp.where(input > lam, input - lam, jnp.where(input < -lam, input + lam, 0))


@_fn("hardshrink", torch_too=True, method_too=True)
def hardshrink(input: jax.Array, lambd: float = 0.5) -> jax.Array:
    return jnp.where((input > lambd) | (input < -lambd), input, 0).astype(input.dtype)


@_fn("threshold", inplace=True, torch_too=True)
def threshold(input: jax.Array, threshold: float, value: float,
              inplace: bool = False) -> jax.Array:
    """``F.threshold``: ``x if x > threshold else value``."""
    return jnp.where(input > threshold, input, jnp.asarray(value, input.dtype))


@_fn("hardtanh", inplace=True)
def hardtanh(input: jax.Array, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> jax.Array:
    """``F.hardtanh``: clamp to ``[min_val, max_val]``; the gradient is 0 at the bounds."""
    lo, hi = jnp.asarray(min_val, input.dtype), jnp.asarray(max_val, input.dtype)
    return jnp.where(input <= lo, lo, jnp.where(input >= hi, hi, input))


@_fn("hardsigmoid")
def hardsigmoid(input: jax.Array, inplace: bool = False) -> jax.Array:
    """``F.hardsigmoid``: ``relu6(x + 3) / 6``; gradient 1/6 strictly inside (-3, 3)."""
    x = to_float(input)
    return jnp.where(x <= -3, 0, jnp.where(x >= 3, 1, x / 6 + 0.5)).astype(x.dtype)


@_fn("hardswish")
def hardswish(input: jax.Array, inplace: bool = False) -> jax.Array:
    """``F.hardswish``: ``x * relu6(x + 3) / 6`` with torch's derivative (0 up to -3,
    ``x/3 + 1/2`` on (-3, 3), 1 from 3)."""
    x = to_float(input)
    return jnp.where(x <= -3, 0, jnp.where(x < 3, x * (x + 3) / 6, x)).astype(x.dtype)


@_fn("logsigmoid")
def logsigmoid(input: jax.Array) -> jax.Array:
    """``F.logsigmoid``: ``-softplus(-x)``."""
    return jax.nn.log_sigmoid(to_float(input))


@_fn("prelu", torch_too=True, method_too=True)
def prelu(input: jax.Array, weight: jax.Array) -> jax.Array:
    """``F.prelu(input, weight)``: ``x if x > 0 else weight * x``; weight [C] along dim 1
    (or one weight)."""
    w = weight.reshape(-1)
    if w.size != 1:
        channels = input.shape[1] if input.ndim >= 2 else (input.shape[0] if input.ndim else 1)
        if w.size != channels:
            raise ValueError(f"prelu: mismatch of parameter numbers and input channel size: "
                             f"the weight has {w.size} elements, the input {channels} channels")
        w = w.reshape((-1,) + (1,) * (input.ndim - 2)) if input.ndim >= 2 else w
    else:
        w = w.reshape(())
    return jnp.where(input > 0, input, w * input)


@_fn("rrelu", inplace=True, torch_too=True)
def rrelu(input: jax.Array, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
          training: bool = False, inplace: bool = False) -> jax.Array:
    """``F.rrelu``: eval mode uses the slope ``(lower + upper) / 2``; training draws a slope
    per element in ``[lower, upper)`` (needs the port's ``key=``)."""
    if training:
        u = random_draw("rrelu", "uniform", input.shape, input.dtype,
                        lambda k: jax.random.uniform(k, input.shape, input.dtype))
        slope = lower + (upper - lower) * u
    else:
        slope = jnp.asarray((lower + upper) / 2, input.dtype)
    return jnp.where(input > 0, input, input * slope)


@_fn("glu")
def glu(input: jax.Array, dim: int = -1) -> jax.Array:
    """``F.glu``: ``a * sigmoid(b)`` for the two halves of ``dim``."""
    axis = dim_arg(dim, input.ndim, op="glu")
    n = input.shape[axis]
    if n % 2:
        raise ValueError(f"glu: Halving dimension must be even, but dimension {axis} is size {n}")
    a, b = jnp.split(input, 2, axis=axis)
    return a * jax.nn.sigmoid(b)


# ---------------------------------------------------------------------------- softmax

def _softmax_dim(ndim: int) -> int:
    """torch's implicit softmax dim (deprecated): 0 for 0-, 1- and 3-d inputs, else 1."""
    return 0 if ndim in (0, 1, 3) else 1


def _wide(x: jax.Array) -> jax.Array:
    """float16/bfloat16 compute in float32, as torch's CPU kernels do (cast back after)."""
    return x.astype(_dtypes.accumulation_dtype(x.dtype))


def _softmax_input(input: jax.Array, dim: Optional[int], dtype: Any, name: str) -> tuple:
    x = input.astype(dtype_arg(dtype, op=name)) if dtype is not None else input
    if is_integral(x):
        raise TypeError(f"{name}: not implemented for integer tensors ({x.dtype}); pass "
                        f"dtype=torch.float32")
    if dim is None:
        dim = _softmax_dim(x.ndim)
    if x.ndim == 0:
        dim_arg(dim, 0, op=name)
        return x, None
    return x, dim_arg(dim, x.ndim, op=name)


@function(F + "softmax")
def softmax(input: jax.Array, dim: Optional[int] = None, _stacklevel: int = 3,
            dtype: Any = None) -> jax.Array:
    """``F.softmax(input, dim=None, dtype=None)``: ``exp(x - max) / sum``; ``dtype`` casts
    first."""
    x, axis = _softmax_input(input, dim, dtype, "softmax")
    return jnp.ones_like(x) if axis is None else jax.nn.softmax(_wide(x), axis=axis).astype(
        x.dtype)


@function(F + "log_softmax")
def log_softmax(input: jax.Array, dim: Optional[int] = None, _stacklevel: int = 3,
                dtype: Any = None) -> jax.Array:
    """``F.log_softmax``: ``x - max - log(sum(exp(x - max)))``."""
    x, axis = _softmax_input(input, dim, dtype, "log_softmax")
    return jnp.zeros_like(x) if axis is None else jax.nn.log_softmax(_wide(x), axis=axis).astype(
        x.dtype)


@function(F + "softmin")
def softmin(input: jax.Array, dim: Optional[int] = None, _stacklevel: int = 3,
            dtype: Any = None) -> jax.Array:
    x, axis = _softmax_input(input, dim, dtype, "softmin")
    return jnp.ones_like(x) if axis is None else jax.nn.softmax(-_wide(x), axis=axis).astype(
        x.dtype)


@op("softmax", functions=("torch.special.softmax",))
def softmax_(input: jax.Array, dim: int, dtype: Any = None) -> jax.Array:
    """``torch.softmax(input, dim, dtype=None)`` / ``Tensor.softmax(dim)``."""
    return softmax(input, dim, dtype=dtype)


@op("log_softmax", functions=("torch.special.log_softmax",))
def log_softmax_(input: jax.Array, dim: int, dtype: Any = None) -> jax.Array:
    """``torch.log_softmax(input, dim, dtype=None)`` / ``Tensor.log_softmax(dim)``."""
    return log_softmax(input, dim, dtype=dtype)


# ---------------------------------------------------------------------- normalisation

def _affine(y: jax.Array, weight: Optional[jax.Array], bias: Optional[jax.Array],
            shape: tuple) -> jax.Array:
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


@function(F + "layer_norm", "torch.layer_norm")
def layer_norm(input: jax.Array, normalized_shape: Sequence[int],
               weight: Optional[jax.Array] = None, bias: Optional[jax.Array] = None,
               eps: float = 1e-05, *args: Any) -> jax.Array:
    """``F.layer_norm``: normalise the last ``len(normalized_shape)`` dims with the biased
    variance: ``(x - mean) / sqrt(var + eps) * weight + bias``."""
    shape = tuple(size_args((normalized_shape,), op="layer_norm", name="normalized_shape"))
    if tuple(input.shape[input.ndim - len(shape):]) != shape:
        raise ValueError(f"layer_norm: given normalized_shape={list(shape)}, expected input "
                         f"with shape [*, {', '.join(map(str, shape))}], but got input of size "
                         f"{list(input.shape)}")
    axes = tuple(range(input.ndim - len(shape), input.ndim))
    x = _wide(input)
    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
    y = (x - mean) * jax.lax.rsqrt(var + eps)
    return _affine(y, weight, bias, shape).astype(input.dtype)


@function(F + "rms_norm", "torch.rms_norm")
def rms_norm(input: jax.Array, normalized_shape: Sequence[int],
             weight: Optional[jax.Array] = None, eps: Optional[float] = None) -> jax.Array:
    """``F.rms_norm``: ``x / sqrt(mean(x^2) + eps) * weight``; ``eps=None`` is the dtype's
    machine epsilon."""
    shape = tuple(size_args((normalized_shape,), op="rms_norm", name="normalized_shape"))
    axes = tuple(range(input.ndim - len(shape), input.ndim))
    if eps is None:
        eps = float(jnp.finfo(input.dtype).eps)
    y = input * jax.lax.rsqrt(jnp.mean(jnp.square(input), axis=axes, keepdims=True) + eps)
    return y if weight is None else y * weight


@function(F + "group_norm", "torch.group_norm")
def group_norm(input: jax.Array, num_groups: int, weight: Optional[jax.Array] = None,
               bias: Optional[jax.Array] = None, eps: float = 1e-05, *args: Any) -> jax.Array:
    """``F.group_norm``: input [N, C, *]; statistics per sample over each group of
    ``C / num_groups`` channels."""
    if input.ndim < 2 or input.shape[1] % num_groups:
        raise ValueError(f"group_norm: expected the number of channels ({input.shape[1:2]}) to "
                         f"be divisible by num_groups ({num_groups})")
    n, c = input.shape[:2]
    x = input.reshape(n, num_groups, -1)
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    y = ((x - mean) * jax.lax.rsqrt(var + eps)).reshape(input.shape)
    return _affine(y, weight, bias, (c,) + (1,) * (input.ndim - 2))


@function(F + "batch_norm")
def batch_norm(input: jax.Array, running_mean: Optional[jax.Array],
               running_var: Optional[jax.Array], weight: Optional[jax.Array] = None,
               bias: Optional[jax.Array] = None, training: bool = False, momentum: float = 0.1,
               eps: float = 1e-05, *args: Any) -> jax.Array:
    """``F.batch_norm``: channels on dim 1. Eval: the running statistics. Training: the
    batch's statistics (biased variance); torch's in-place update of the running
    statistics is not reproduced (JAX arrays are immutable)."""
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected at least 2-D input [N, C, *], got "
                         f"{list(input.shape)}")
    shape = (input.shape[1],) + (1,) * (input.ndim - 2)
    if training or running_mean is None or running_var is None:
        axes = (0,) + tuple(range(2, input.ndim))
        count = input.size // input.shape[1]
        if training and count <= 1:
            raise ValueError(f"batch_norm: expected more than 1 value per channel when "
                             f"training, got input size {list(input.shape)}")
        mean = jnp.mean(input, axis=axes, keepdims=True)
        var = jnp.mean(jnp.square(input - mean), axis=axes, keepdims=True)
    else:  # buffers: no gradient (as torch)
        mean = jax.lax.stop_gradient(running_mean.reshape(shape))
        var = jax.lax.stop_gradient(running_var.reshape(shape))
    y = (input - mean) * jax.lax.rsqrt(var + eps)
    return _affine(y, weight, bias, shape)


@function(F + "instance_norm")
def instance_norm(input: jax.Array, running_mean: Optional[jax.Array] = None,
                  running_var: Optional[jax.Array] = None, weight: Optional[jax.Array] = None,
                  bias: Optional[jax.Array] = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-05, *args: Any) -> jax.Array:
    """``F.instance_norm``: statistics per sample and channel over the spatial dims."""
    shape = (input.shape[1],) + (1,) * (input.ndim - 2)
    if use_input_stats or running_mean is None:
        axes = tuple(range(2, input.ndim))
        mean = jnp.mean(input, axis=axes, keepdims=True)
        var = jnp.mean(jnp.square(input - mean), axis=axes, keepdims=True)
    else:
        assert running_var is not None, "instance_norm: running_mean given without running_var"
        mean = jax.lax.stop_gradient(running_mean.reshape(shape))
        var = jax.lax.stop_gradient(running_var.reshape(shape))
    return _affine((input - mean) * jax.lax.rsqrt(var + eps), weight, bias, shape)


@function("torch.batch_norm")
def torch_batch_norm(input: jax.Array, weight: Optional[jax.Array], bias: Optional[jax.Array],
                     running_mean: Optional[jax.Array], running_var: Optional[jax.Array],
                     training: bool, momentum: float, eps: float,
                     cudnn_enabled: bool = True) -> jax.Array:
    """``torch.batch_norm`` (ATen's argument order: weight and bias first)."""
    return batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


@function("torch.instance_norm")
def torch_instance_norm(input: jax.Array, weight: Optional[jax.Array],
                        bias: Optional[jax.Array], running_mean: Optional[jax.Array],
                        running_var: Optional[jax.Array], use_input_stats: bool,
                        momentum: float, eps: float, cudnn_enabled: bool = True) -> jax.Array:
    """``torch.instance_norm`` (ATen's argument order)."""
    return instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                         momentum, eps)


@function(F + "normalize")
def normalize(input: jax.Array, p: float = 2.0, dim: Any = 1, eps: float = 1e-12,
              out: Any = None) -> jax.Array:
    """``F.normalize``: ``x / max(norm_p(x, dim), eps)`` (no gradient through the clamp
    when the norm is below ``eps``, as torch)."""
    denom = vector_norm_impl(input, p, dim, True, None, "normalize")
    return input / clamp(denom, min=eps)


@function(F + "cosine_similarity", "torch.cosine_similarity")
def cosine_similarity(x1: jax.Array, x2: jax.Array, dim: int = 1,
                      eps: float = 1e-8) -> jax.Array:
    """``F.cosine_similarity``: ``sum(x1/|x1| * x2/|x2|, dim)``, each norm clamped to
    ``eps`` outside autograd (torch's formula)."""
    a, b = jnp.broadcast_arrays(to_float(x1), to_float(x2))
    axis = dim_arg(dim, a.ndim, op="cosine_similarity")

    def unit(x: jax.Array) -> jax.Array:
        n = vector_norm_impl(x, 2, axis, True, None, "cosine_similarity")
        return x / (n + jax.lax.stop_gradient(jnp.maximum(n, eps) - n))
    return jnp.sum(unit(a) * unit(b), axis=axis)


@function(F + "pairwise_distance", "torch.pairwise_distance")
def pairwise_distance(x1: jax.Array, x2: jax.Array, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> jax.Array:
    """``F.pairwise_distance``: ``norm_p(x1 - x2 + eps, dim=-1)``."""
    diff = x1 - x2 + eps
    return vector_norm_impl(diff, p, -1 if diff.ndim else None, keepdim, None,
                            "pairwise_distance")


@function("torch.cdist", "torch.functional.cdist")
def cdist(x1: jax.Array, x2: jax.Array, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> jax.Array:
    """``torch.cdist``: ``[*B, P, M] x [*B, R, M] -> [*B, P, R]`` p-norm distances, with
    torch's choice of the direct or the matmul formula (see :mod:`._cdist`)."""
    return _cdist.cdist(x1, x2, p, compute_mode)


# ------------------------------------------------------------------ embedding, one-hot

@function(F + "embedding")
def embedding(input: jax.Array, weight: jax.Array, padding_idx: Optional[int] = None,
              max_norm: Optional[float] = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> jax.Array:
    """``F.embedding(input, weight, padding_idx=None)``: ``weight[input]``; the row
    ``padding_idx`` gets no gradient (as torch). ``max_norm`` (an in-place renormalisation
    of ``weight``) and ``scale_grad_by_freq`` are not mapped."""
    if max_norm is not None or scale_grad_by_freq:
        raise ValueError("embedding: max_norm / scale_grad_by_freq rewrite the weight or the "
                         "gradient in place and are not mapped; port this layer by hand")
    index = as_array(input)
    if not jnp.issubdtype(index.dtype, jnp.integer):
        raise TypeError(f"embedding: Expected tensor for argument #1 'indices' to have an "
                        f"integer type, got {index.dtype}")
    if not is_traced(index) and index.size:
        lo, hi = int(index.min()), int(index.max())
        if lo < 0 or hi >= weight.shape[0]:
            raise IndexError(f"embedding: index out of range in self: indices must be in "
                             f"[0, {weight.shape[0] - 1}], got {lo if lo < 0 else hi}")
    out = jnp.take(weight, index, axis=0)
    if padding_idx is not None:
        pad = padding_idx + weight.shape[0] if padding_idx < 0 else padding_idx
        out = jnp.where((index == pad)[..., None], jax.lax.stop_gradient(out), out)
    return out


@function(F + "one_hot")
def one_hot(tensor: jax.Array, num_classes: int = -1) -> jax.Array:
    """``F.one_hot(tensor, num_classes=-1)``: int64. ``num_classes=-1`` means ``max + 1``:
    data-dependent, so eager only (under ``jax.jit`` pass ``num_classes``). Out-of-range
    classes raise when the values are known (eagerly)."""
    index = as_array(tensor)
    if not jnp.issubdtype(index.dtype, jnp.integer):
        raise TypeError(f"one_hot: is only applicable to index tensor, got {index.dtype}")
    if num_classes == -1:
        values = concrete(index, "num_classes", op="one_hot",
                          fix="Pass num_classes=<the number of classes> (a Python int).")
        num_classes = int(values.max()) + 1 if values.size else 0
    elif not is_traced(index) and index.size:
        if int(index.max()) >= num_classes:
            raise ValueError(f"one_hot: Class values must be smaller than num_classes "
                             f"({num_classes})")
    if not is_traced(index) and index.size and int(index.min()) < 0:
        raise ValueError("one_hot: Class values must be non-negative")
    return (index[..., None] == jnp.arange(num_classes, dtype=index.dtype)).astype(long_dtype())


@function(F + "pad", "torch._C._nn.pad")
def pad(input: jax.Array, pad: Sequence[int], mode: str = "constant",
        value: Optional[float] = None) -> jax.Array:
    """``F.pad(input, pad, mode='constant', value=None)``: ``pad`` pairs from the last dim
    backwards; negative constant pads crop. Modes reflect / replicate / circular too."""
    pad = size_args((tuple(pad),), op="pad", name="pad")
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ValueError(f"pad: Padding length must be divisible by 2 and at most twice the "
                         f"number of dims ({input.ndim}), got {len(pad)}")
    pairs = [(0, 0)] * input.ndim
    for i in range(len(pad) // 2):
        pairs[input.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    if mode == "constant":
        fill = jnp.asarray(0 if value is None else value, input.dtype)
        return jax.lax.pad(input, fill, [(lo, hi, 0) for lo, hi in pairs])
    modes = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}
    if mode not in modes:
        raise ValueError(f"pad: mode must be one of 'constant', 'reflect', 'replicate', "
                         f"'circular', got {mode!r}")
    if any(lo < 0 or hi < 0 for lo, hi in pairs):
        raise ValueError("pad: negative padding is only supported in constant mode")
    return jnp.pad(input, pairs, mode=modes[mode])


# ---------------------------------------------------------------------------- dropout

def _check_p(p: float, name: str) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{name}: dropout probability has to be between 0 and 1, but got {p}")


def _dropout(input: jax.Array, p: float, training: bool, mask_shape: tuple,
             name: str) -> jax.Array:
    _check_p(p, name)
    return layer_dropout(input, p, training, op=name, mask_shape=mask_shape)


@function(F + "dropout")
def dropout(input: jax.Array, p: float = 0.5, training: bool = True,
            inplace: bool = False) -> jax.Array:
    """``F.dropout``: the identity unless ``training`` (note torch's default is True); then
    each element is kept with probability ``1 - p`` and scaled by ``1 / (1 - p)``, with a
    key from the port's ``key=``."""
    return _dropout(input, p, training, input.shape, "dropout")


@function("torch.dropout", "torch.dropout_")
def torch_dropout(input: jax.Array, p: float, train: bool) -> jax.Array:
    """``torch.dropout(input, p, train)``."""
    return _dropout(input, p, train, input.shape, "dropout")


def _feature_dropout(input: jax.Array, p: float, training: bool, name: str) -> jax.Array:
    """torch's feature dropout: one draw per (batch, channel) of [N, C, *]."""
    if input.ndim < 2:
        raise ValueError(f"{name}: expected an input of at least 2 dims [N, C, *], got "
                         f"{input.ndim}D")
    return _dropout(input, p, training, input.shape[:2] + (1,) * (input.ndim - 2), name)


@function(F + "dropout1d")
def dropout1d(input: jax.Array, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> jax.Array:
    """``F.dropout1d``: zeroes whole channels of [N, C, L] (or [C, L])."""
    if input.ndim not in (2, 3):
        raise ValueError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D "
                         f"input")
    if input.ndim == 2:
        return _feature_dropout(input[None], p, training, "dropout1d")[0]
    return _feature_dropout(input, p, training, "dropout1d")


@function(F + "dropout2d")
def dropout2d(input: jax.Array, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> jax.Array:
    """``F.dropout2d``: zeroes whole channels of [N, C, H, W]; as torch, a 3-d input is read
    as [N, C, L] (torch's deprecated behaviour), not as an unbatched [C, H, W]."""
    return _feature_dropout(input, p, training, "dropout2d")


@function(F + "dropout3d")
def dropout3d(input: jax.Array, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> jax.Array:
    """``F.dropout3d``: zeroes whole channels of [N, C, D, H, W]."""
    return _feature_dropout(input, p, training, "dropout3d")


# --------------------------------------------------------------------------- random

def _uniform(op: str, shape: tuple, dtype: Any) -> jax.Array:
    return random_draw(op, "uniform", shape, dtype,
                       lambda k: jax.random.uniform(k, shape, dtype))


def _normal(op: str, shape: tuple, dtype: Any) -> jax.Array:
    return random_draw(op, "normal", shape, dtype, lambda k: jax.random.normal(k, shape, dtype))


def _randint(op: str, shape: tuple, low: int, high: int, dtype: Any) -> jax.Array:
    drawn = long_dtype()
    return random_draw(op, "randint", shape, drawn,
                       lambda k: jax.random.randint(k, shape, low, high, dtype=drawn)
                       ).astype(dtype)


def _random_dtype(dtype: Any, name: str) -> np.dtype:
    dt = dtype_arg(dtype, op=name) or float_dtype()
    if not jnp.issubdtype(dt, jnp.floating):
        raise TypeError(f"{name}: expected a floating dtype, got {dt}")
    return dt


@function("torch.rand")
def rand(*size: Any, generator: Any = None, out: Any = None, dtype: Any = None,
         layout: Any = None, device: Any = None, requires_grad: bool = False,
         pin_memory: bool = False) -> jax.Array:
    """``torch.rand(*size)``: uniform on [0, 1) (a key from the port's ``key=``; the stream
    differs from torch's)."""
    return _uniform("rand", size_args(size, op="rand"), _random_dtype(dtype, "rand"))


@function("torch.randn")
def randn(*size: Any, generator: Any = None, out: Any = None, dtype: Any = None,
          layout: Any = None, device: Any = None, requires_grad: bool = False,
          pin_memory: bool = False) -> jax.Array:
    """``torch.randn(*size)``: standard normal."""
    return _normal("randn", size_args(size, op="randn"), _random_dtype(dtype, "randn"))


@function("torch.rand_like")
def rand_like(input: jax.Array, *, dtype: Any = None, layout: Any = None, device: Any = None,
              requires_grad: bool = False, memory_format: Any = None) -> jax.Array:
    return _uniform("rand_like", input.shape, _random_dtype(dtype or input.dtype, "rand_like"))


@function("torch.randn_like")
def randn_like(input: jax.Array, *, dtype: Any = None, layout: Any = None, device: Any = None,
               requires_grad: bool = False, memory_format: Any = None) -> jax.Array:
    return _normal("randn_like", input.shape, _random_dtype(dtype or input.dtype, "randn_like"))


@function("torch.randint")
def randint(*args: Any, generator: Any = None, out: Any = None, dtype: Any = None,
            layout: Any = None, device: Any = None, requires_grad: bool = False,
            pin_memory: bool = False, size: Any = None) -> jax.Array:
    """``torch.randint(high, size)`` / ``(low, high, size)``: int64 in ``[low, high)``."""
    if size is not None:
        args = args + (size,)
    if len(args) == 2:
        low, (high, shape) = 0, args
    elif len(args) == 3:
        low, high, shape = args
    else:
        raise TypeError("randint: expected (high, size) or (low, high, size)")
    dt = dtype_arg(dtype, op="randint") or long_dtype()
    return _randint("randint", size_args((shape,), op="randint"), low, high, dt)


@function("torch.randint_like")
def randint_like(input: jax.Array, low: int = 0, high: Optional[int] = None, *,
                 dtype: Any = None, layout: Any = None, device: Any = None,
                 requires_grad: bool = False, memory_format: Any = None) -> jax.Array:
    if high is None:
        low, high = 0, low
    dt = dtype_arg(dtype, op="randint_like") or input.dtype
    return _randint("randint_like", input.shape, low, high, dt)


@function("torch.randperm")
def randperm(n: int, *, generator: Any = None, out: Any = None, dtype: Any = None,
             layout: Any = None, device: Any = None, requires_grad: bool = False,
             pin_memory: bool = False) -> jax.Array:
    """``torch.randperm(n)``: a random permutation of ``0 .. n-1`` (int64)."""
    dt = dtype_arg(dtype, op="randperm") or long_dtype()
    return random_draw("randperm", "randperm", (n,), dt,
                       lambda k: jax.random.permutation(k, jnp.arange(n, dtype=dt)))


@op("bernoulli")
def bernoulli(input: jax.Array, p: Optional[float] = None, *, generator: Any = None,
              out: Any = None) -> jax.Array:
    """``torch.bernoulli(input)``: 1 with probability ``input`` (or ``p``), input's dtype."""
    prob = input if p is None else jnp.full(input.shape, p, to_float(input).dtype)
    return random_draw("bernoulli", "bernoulli", input.shape, input.dtype,
                       lambda k: jax.random.bernoulli(k, prob, input.shape).astype(input.dtype))


@method("bernoulli_")
def bernoulli_(self: jax.Array, p: Any = 0.5, *, generator: Any = None) -> jax.Array:
    """``Tensor.bernoulli_(p=0.5)``: self's shape and dtype filled with draws."""
    prob = as_array(p, to_float(self).dtype)
    return random_draw("bernoulli_", "bernoulli", self.shape, self.dtype,
                       lambda k: jax.random.bernoulli(k, prob, self.shape).astype(self.dtype))


@method("uniform_")
def uniform_(self: jax.Array, *args: Any, generator: Any = None, **kwargs: Any) -> jax.Array:
    """``Tensor.uniform_(from=0, to=1)``."""
    lo = kwargs.get("from", args[0] if args else 0.0)
    hi = kwargs.get("to", args[1] if len(args) > 1 else 1.0)
    return lo + (hi - lo) * _uniform("uniform_", self.shape, self.dtype)


@method("normal_")
def normal_(self: jax.Array, mean: float = 0.0, std: float = 1.0, *,
            generator: Any = None) -> jax.Array:
    """``Tensor.normal_(mean=0, std=1)``."""
    return mean + std * _normal("normal_", self.shape, self.dtype)


@function("torch.normal")
def normal(mean: Any, std: Any = 1.0, size: Any = None, *, generator: Any = None,
           out: Any = None, dtype: Any = None, layout: Any = None, device: Any = None,
           requires_grad: bool = False, pin_memory: bool = False) -> jax.Array:
    """``torch.normal(mean, std)`` with tensor means/stds, or ``(mean, std, size)``."""
    if size is not None:
        shape, dt = size_args((size,), op="normal"), _random_dtype(dtype, "normal")
    else:
        m, s = as_array(mean), as_array(std)
        dt = m.dtype if is_array(mean) else s.dtype
        shape = jnp.broadcast_shapes(m.shape, s.shape)
    mean, std = jax.lax.stop_gradient(mean), jax.lax.stop_gradient(std)  # torch: no gradient
    return mean + std * _normal("normal", shape, dt)
