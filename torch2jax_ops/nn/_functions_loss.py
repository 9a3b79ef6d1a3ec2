"""The mapping table: the losses of ``torch.nn.functional``.

Reductions as torch: ``'mean'`` / ``'sum'`` / ``'none'`` (and the legacy
``size_average`` / ``reduce`` flags). ``nll_loss`` / ``cross_entropy`` with
class weights average by the summed weight of the non-ignored targets.
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp

from .._checking import is_traced
from ._functions_base import as_array, function, is_integral, promote, safe_abs, to_float

__all__: list = []

F = "torch.nn.functional."
_REDUCTIONS = ("none", "mean", "sum")


def _reduction(size_average: Any, reduce: Any, reduction: str, name: str,
               allowed: tuple = _REDUCTIONS) -> str:
    """torch's legacy flags -> the reduction string; an unknown one raises."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        return "none" if not reduce else ("mean" if size_average else "sum")
    if reduction not in allowed:
        raise ValueError(f"{name}: {reduction!r} is not a valid value for reduction; expected "
                         f"one of {', '.join(map(repr, allowed))}")
    return reduction


def _reduce(loss: jax.Array, reduction: str) -> jax.Array:
    if reduction == "mean":
        return jnp.mean(loss)
    if reduction == "sum":
        return jnp.sum(loss)
    return loss


def _pointwise(input: jax.Array, target: jax.Array) -> list[jax.Array]:
    a, b = promote(input, target)
    return jnp.broadcast_arrays(a, b)


def _weighted(loss: jax.Array, weight: Optional[jax.Array], reduction: str,
              mean_by_weight: bool, name: str) -> jax.Array:
    if weight is None:
        return _reduce(loss, reduction)
    if weight.shape != loss.shape:
        raise ValueError(f"{name}: Weights and input must have the same size.")
    loss = loss * weight
    if reduction == "mean" and mean_by_weight:
        return jnp.sum(loss) / jnp.sum(weight)
    return _reduce(loss, reduction)


@function(F + "mse_loss")
def mse_loss(input: jax.Array, target: jax.Array, size_average: Any = None, reduce: Any = None,
             reduction: str = "mean", weight: Optional[jax.Array] = None) -> jax.Array:
    """``F.mse_loss``: ``(input - target)^2``, broadcast; with ``weight`` the mean is
    ``sum(w * e) / sum(w)`` (as torch)."""
    reduction = _reduction(size_average, reduce, reduction, "mse_loss")
    a, b = _pointwise(input, target)
    return _weighted(jnp.square(a - b), weight, reduction, True, "mse_loss")


@function(F + "l1_loss")
def l1_loss(input: jax.Array, target: jax.Array, size_average: Any = None, reduce: Any = None,
            reduction: str = "mean", weight: Optional[jax.Array] = None) -> jax.Array:
    """``F.l1_loss``: ``|input - target|``."""
    reduction = _reduction(size_average, reduce, reduction, "l1_loss")
    a, b = _pointwise(input, target)
    return _weighted(safe_abs(a - b), weight, reduction, True, "l1_loss")


@function(F + "smooth_l1_loss")
def smooth_l1_loss(input: jax.Array, target: jax.Array, size_average: Any = None,
                   reduce: Any = None, reduction: str = "mean", beta: float = 1.0) -> jax.Array:
    """``F.smooth_l1_loss``: ``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - beta/2``."""
    reduction = _reduction(size_average, reduce, reduction, "smooth_l1_loss")
    a, b = _pointwise(input, target)
    d = safe_abs(a - b)
    if beta == 0:
        return _reduce(d, reduction)
    return _reduce(jnp.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta), reduction)


@function(F + "huber_loss")
def huber_loss(input: jax.Array, target: jax.Array, reduction: str = "mean", delta: float = 1.0,
               weight: Optional[jax.Array] = None) -> jax.Array:
    """``F.huber_loss``: ``0.5 d^2`` where ``|d| < delta``, else ``delta (|d| - delta/2)``."""
    reduction = _reduction(None, None, reduction, "huber_loss")
    a, b = _pointwise(input, target)
    d = safe_abs(a - b)
    loss = jnp.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta))
    return _weighted(loss, weight, reduction, False, "huber_loss")


@function(F + "binary_cross_entropy")
def binary_cross_entropy(input: jax.Array, target: jax.Array,
                         weight: Optional[jax.Array] = None, size_average: Any = None,
                         reduce: Any = None, reduction: str = "mean") -> jax.Array:
    """``F.binary_cross_entropy``: ``-w (t log x + (1 - t) log(1 - x))``, each log clamped at
    -100 (as torch)."""
    reduction = _reduction(size_average, reduce, reduction, "binary_cross_entropy")
    if target.shape != input.shape:
        raise ValueError(f"binary_cross_entropy: Using a target size ({list(target.shape)}) "
                         f"that is different to the input size ({list(input.shape)}) is not "
                         f"allowed")
    x, t = promote(input, target)
    if not is_traced(x) and x.size and (float(jnp.min(x)) < 0 or float(jnp.max(x)) > 1):
        raise ValueError("binary_cross_entropy: all elements of input should be between 0 "
                         "and 1")
    log_x = jnp.maximum(jnp.log(x), -100)
    log_1mx = jnp.maximum(jnp.log1p(-x), -100)
    loss = -(t * log_x + (1 - t) * log_1mx)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@function(F + "binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(input: jax.Array, target: jax.Array,
                                     weight: Optional[jax.Array] = None,
                                     size_average: Any = None, reduce: Any = None,
                                     reduction: str = "mean",
                                     pos_weight: Optional[jax.Array] = None) -> jax.Array:
    """``F.binary_cross_entropy_with_logits``: the stable form
    ``(1 - t) x + (1 + (pw - 1) t) (log1p(exp(-|x|)) + max(-x, 0))``."""
    reduction = _reduction(size_average, reduce, reduction, "binary_cross_entropy_with_logits")
    if target.shape != input.shape:
        raise ValueError(f"binary_cross_entropy_with_logits: Target size "
                         f"({list(target.shape)}) must be the same as input size "
                         f"({list(input.shape)})")
    x, t = promote(input, target)
    soft = jnp.log1p(jnp.exp(-safe_abs(x))) + jnp.maximum(-x, 0)
    if pos_weight is not None:
        loss = (1 - t) * x + (1 + (pos_weight - 1) * t) * soft
    else:
        loss = (1 - t) * x + soft
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def _class_dim(input: jax.Array) -> int:
    return 1 if input.ndim >= 2 else 0


def _nll(logp: jax.Array, target: jax.Array, weight: Optional[jax.Array], ignore_index: int,
         name: str) -> tuple:
    """Per-element ``-w[t] logp[t]`` and ``w[t]`` (both 0 where ``t == ignore_index``)."""
    target = as_array(target)
    if not jnp.issubdtype(target.dtype, jnp.integer):
        raise TypeError(f"{name}: expected an integer (class index) target, got {target.dtype}")
    cdim = _class_dim(logp)
    c = logp.shape[cdim]
    expected = logp.shape[:cdim] + logp.shape[cdim + 1:]
    if tuple(target.shape) != tuple(expected):
        raise ValueError(f"{name}: expected target of shape {list(expected)} for input of "
                         f"shape {list(logp.shape)}, got {list(target.shape)}")
    ignored = target == ignore_index
    if not is_traced(target) and target.size:
        bad = (~ignored) & ((target < 0) | (target >= c))
        if bool(jnp.any(bad)):
            raise IndexError(f"{name}: Target {int(target[bad].reshape(-1)[0])} is out of "
                             f"bounds (there are {c} classes)")
    safe = jnp.where(ignored, 0, target)
    picked = jnp.squeeze(jnp.take_along_axis(logp, jnp.expand_dims(safe, cdim), axis=cdim), cdim)
    w = jnp.ones((), logp.dtype) if weight is None else jnp.take(weight, safe)
    w = jnp.where(ignored, jnp.zeros((), logp.dtype), jnp.broadcast_to(w, safe.shape))
    # a where, not a product with w = 0: with every target ignored torch's gradient is 0, and
    # the mean's 1 / sum(w) = inf times 0 would be NaN
    return jnp.where(ignored, jnp.zeros((), logp.dtype), -picked * w), w


@function(F + "nll_loss")
def nll_loss(input: jax.Array, target: jax.Array, weight: Optional[jax.Array] = None,
             size_average: Any = None, ignore_index: int = -100, reduce: Any = None,
             reduction: str = "mean") -> jax.Array:
    """``F.nll_loss``: input [N, C, *] (or [C]) of log-probabilities, target [N, *] class
    indices; ``'mean'`` divides by the summed weight of the non-ignored targets."""
    reduction = _reduction(size_average, reduce, reduction, "nll_loss")
    loss, w = _nll(input, target, weight, ignore_index, "nll_loss")
    if reduction == "mean":
        return jnp.sum(loss) / jnp.sum(w)
    return _reduce(loss, reduction)


@function(F + "cross_entropy")
def cross_entropy(input: jax.Array, target: jax.Array, weight: Optional[jax.Array] = None,
                  size_average: Any = None, ignore_index: int = -100, reduce: Any = None,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> jax.Array:
    """``F.cross_entropy``: ``log_softmax`` over dim 1 (dim 0 for [C]) then :func:`nll_loss`
    for class-index targets, or ``-sum(target * logp)`` for probability targets;
    ``label_smoothing`` as torch."""
    reduction = _reduction(size_average, reduce, reduction, "cross_entropy")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got "
                         f"{label_smoothing}")
    x = to_float(input)
    cdim = _class_dim(x)
    c = x.shape[cdim]
    logp = jax.nn.log_softmax(x, axis=cdim)
    wshape = [1] * x.ndim
    wshape[cdim] = c
    target = as_array(target)
    if not is_integral(target):  # class probabilities
        if target.shape != x.shape:
            raise ValueError(f"cross_entropy: probability targets must have the input's shape "
                             f"{list(x.shape)}, got {list(target.shape)}")
        t = target.astype(x.dtype)
        if label_smoothing > 0:
            t = t * (1 - label_smoothing) + label_smoothing / c
        prod = logp * t
        if weight is not None:
            prod = prod * weight.reshape(wshape)
        loss = -jnp.sum(prod, axis=cdim)
        if reduction == "mean":
            return jnp.sum(loss) / (x.size // c if c else 1)
        return _reduce(loss, reduction)
    nll, w = _nll(logp, target, weight, ignore_index, "cross_entropy")
    if reduction == "mean":
        main = jnp.sum(nll) / jnp.sum(w)
    else:
        main = _reduce(nll, reduction)
    if label_smoothing <= 0:
        return main
    ignored = target == ignore_index
    scaled = logp if weight is None else logp * weight.reshape(wshape)
    smooth = jnp.where(ignored, 0, -jnp.sum(scaled, axis=cdim))
    if reduction == "mean":
        denom = jnp.sum(w) if weight is not None else jnp.sum(~ignored).astype(x.dtype)
        smooth = jnp.sum(smooth) / denom
    else:
        smooth = _reduce(smooth, reduction)
    return (1 - label_smoothing) * main + smooth * (label_smoothing / c)


@function(F + "kl_div")
def kl_div(input: jax.Array, target: jax.Array, size_average: Any = None, reduce: Any = None,
           reduction: str = "mean", log_target: bool = False) -> jax.Array:
    """``F.kl_div(input, target)``: input holds log-probabilities; ``target * (log target -
    input)`` (0 where target is 0); ``'batchmean'`` divides the sum by the batch size."""
    reduction = _reduction(size_average, reduce, reduction, "kl_div",
                           _REDUCTIONS + ("batchmean",))
    x, t = promote(input, target)
    if log_target:
        loss = jnp.exp(t) * (t - x)
    else:
        loss = jax.scipy.special.xlogy(t, t) - t * x
    if reduction == "batchmean":
        total = jnp.sum(loss)
        return total / x.shape[0] if x.ndim else total
    return _reduce(loss, reduction)
