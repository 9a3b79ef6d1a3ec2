"""PyG's basic aggregations (``torch_geometric.nn.aggr.basic``) as equinox modules.

Sum, Mean, Max, Min, Mul, Var, Std, Softmax and PowerMean, each with PyG's
numerics: empty groups give 0 (Mul: 1), min/max follow torch's
``scatter_reduce`` (tied extrema share the gradient), Var is
``mean(x * x) - mean(x) ** 2``, Std clamps and masks as PyG.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from ....nn import Converter, register_converter
from ...utils._softmax import segment_softmax
from ._base import Aggregation, clamp, reduce_along

__all__ = ["SumAggregation", "MeanAggregation", "MaxAggregation", "MinAggregation",
           "MulAggregation", "VarAggregation", "StdAggregation", "SoftmaxAggregation",
           "PowerMeanAggregation"]

_PYG = "torch_geometric.nn.aggr.basic"


class SumAggregation(Aggregation):
    """``torch_geometric.nn.aggr.SumAggregation``: the sum of each group (0 when empty).

    ``x [..., E, ...] (E along dim), index [E] -> [..., dim_size, ...]``.
    """

    def _aggregate(self, x, g):
        return reduce_along(x, g, "sum", op="SumAggregation")


class MeanAggregation(Aggregation):
    """``torch_geometric.nn.aggr.MeanAggregation``: ``sum / max(count, 1)`` per group."""

    def _aggregate(self, x, g):
        return reduce_along(x, g, "mean", op="MeanAggregation")


class MaxAggregation(Aggregation):
    """``torch_geometric.nn.aggr.MaxAggregation``: feature-wise maximum (0 for empty groups;
    tied maxima share the gradient evenly, torch's ``scatter_reduce`` rule)."""

    def _aggregate(self, x, g):
        return reduce_along(x, g, "max", op="MaxAggregation")


class MinAggregation(Aggregation):
    """``torch_geometric.nn.aggr.MinAggregation``: feature-wise minimum (0 for empty groups)."""

    def _aggregate(self, x, g):
        return reduce_along(x, g, "min", op="MinAggregation")


class MulAggregation(Aggregation):
    """``torch_geometric.nn.aggr.MulAggregation``: the product of each group (1 when empty).

    Needs ``index`` (PyG raises ``NotImplementedError`` for ``ptr`` alone).
    """
    _needs_index = True

    def _aggregate(self, x, g):
        return reduce_along(x, g, "mul", op="MulAggregation")


def _variance(x, g, semi_grad: bool, op: str) -> jax.Array:
    mean = reduce_along(x, g, "mean", op=op)
    sq = jax.lax.stop_gradient(x) if semi_grad else x
    mean2 = reduce_along(sq * sq, g, "mean", op=op)
    return mean2 - mean * mean


def _std_from_var(var: jax.Array) -> jax.Array:
    # PyG: var.clamp(min=1e-5).sqrt(), then masked_fill(out <= sqrt(1e-5), 0): values at
    # or below the threshold (zero variance, rounding noise) give 0 and no gradient
    out = jnp.sqrt(clamp(var, 1e-5))
    return jnp.where(out <= math.sqrt(1e-5), jnp.zeros((), out.dtype), out)


class VarAggregation(Aggregation):
    """``torch_geometric.nn.aggr.VarAggregation``: ``mean(x * x) - mean(x) ** 2`` per group.

    PyG's formula (not the two-pass variance): its rounding, and slightly
    negative values where the variance is ~0. ``semi_grad``: no gradient
    through ``mean(x * x)``.
    """
    semi_grad: bool = eqx.field(static=True, default=False)

    def _aggregate(self, x, g):
        return _variance(x, g, self.semi_grad, "VarAggregation")


class StdAggregation(Aggregation):
    """``torch_geometric.nn.aggr.StdAggregation``: ``sqrt(clamp(var, min=1e-5))``, and 0
    (without gradient) wherever that is ``<= sqrt(1e-5)`` -- PyG's masking, so a group
    with one element, or a variance below ``1e-5``, gives exactly 0.

    Holds its ``var_aggr`` (a :class:`VarAggregation`) as PyG does.
    """
    var_aggr: VarAggregation = eqx.field(default_factory=VarAggregation)

    def _aggregate(self, x, g):
        return _std_from_var(self.var_aggr._aggregate(x, g))


def _channel_param(value: jax.Array, channels: int, x: jax.Array, g, op: str) -> jax.Array:
    """A learnable ``[channels]`` parameter as PyG uses it: ``view(-1, channels)`` for
    ``channels > 1`` (2-D input, aggregation along dim 0 only), else as it is."""
    if channels == 1:
        return value
    if x.ndim != 2:
        raise ValueError(f"{op}: Aggregation requires two-dimensional inputs (got "
                         f"'{x.ndim}') when channels > 1 (as PyG)")
    if g.axis != 0:
        raise ValueError(f"{op}: Aggregation needs to perform aggregation in first dimension "
                         f"(dim=0 or -2) when channels > 1 (as PyG)")
    return value.reshape(-1, channels)


class SoftmaxAggregation(Aggregation):
    """``torch_geometric.nn.aggr.SoftmaxAggregation`` (DeeperGCN): ``sum_i softmax(t x)_i x_i``.

    The softmax runs per feature over each group along ``dim`` (PyG's
    ``utils.softmax``: group max without gradient, ``+ 1e-16`` in the
    denominator). ``t``: a learnable ``[channels]`` array when ``learn``
    (the state_dict key ``t``), else the constant ``t_value`` (``x`` is
    multiplied only when it is not 1, as PyG). ``semi_grad`` (only without
    ``learn``): no gradient through the softmax weights.
    """
    t: Optional[jax.Array] = None
    t_value: float = eqx.field(static=True, default=1.0)
    learn: bool = eqx.field(static=True, default=False)
    semi_grad: bool = eqx.field(static=True, default=False)
    channels: int = eqx.field(static=True, default=1)

    def _aggregate(self, x, g):
        op = "SoftmaxAggregation"
        if self.learn:
            t = _channel_param(self.t, self.channels, x, g, op)
            alpha = x * t
        else:
            alpha = x if self.t_value == 1 else x * self.t_value
        moved = jnp.moveaxis(alpha, g.axis, 0)
        weights = jnp.moveaxis(segment_softmax(moved, g.ids, g.n), 0, g.axis)
        if not self.learn and self.semi_grad:
            weights = jax.lax.stop_gradient(weights)
        return reduce_along(x * weights, g, "sum", op=op)


class PowerMeanAggregation(Aggregation):
    """``torch_geometric.nn.aggr.PowerMeanAggregation`` (DeeperGCN):
    ``clamp(mean(clamp(x) ** p)) ** (1 / p)``.

    Clamping to ``[clamp_min, clamp_max]`` (either may be None) happens only
    when ``p`` is learnable or not 1, as in PyG -- so an empty group gives
    ``clamp_min ** (1 / p)``, not 0 (PyG's quirk). ``p``: a learnable
    ``[channels]`` array when ``learn``, else the constant ``p_value``.
    """
    p: Optional[jax.Array] = None
    p_value: float = eqx.field(static=True, default=1.0)
    learn: bool = eqx.field(static=True, default=False)
    channels: int = eqx.field(static=True, default=1)
    clamp_min: Optional[float] = eqx.field(static=True, default=1e-4)
    clamp_max: Optional[float] = eqx.field(static=True, default=100.0)

    def _aggregate(self, x, g):
        op = "PowerMeanAggregation"
        if self.learn:
            p = _channel_param(self.p, self.channels, x, g, op)
        else:
            p = self.p_value
        powered = self.learn or p != 1
        if powered:
            if self.clamp_min is None and self.clamp_max is None:
                raise ValueError(f"{op}: clamp: at least one of 'min' or 'max' must not be "
                                 f"None (torch's error for clamp_min=clamp_max=None)")
            x = jnp.power(clamp(x, self.clamp_min, self.clamp_max), p)
        out = reduce_along(x, g, "mean", op=op)
        if powered:
            out = jnp.power(clamp(out, self.clamp_min, self.clamp_max), 1.0 / p)
        return out


# ------------------------------------------------------------------------ converters

def _simple(cls):
    def convert(m, ctx: Converter):
        return cls()
    return convert


for _cls in (SumAggregation, MeanAggregation, MaxAggregation, MinAggregation, MulAggregation):
    register_converter(f"{_PYG}.{_cls.__name__}")(_simple(_cls))


@register_converter(f"{_PYG}.VarAggregation")
def _var(m, ctx: Converter):
    return VarAggregation(semi_grad=bool(m.semi_grad))


@register_converter(f"{_PYG}.StdAggregation")
def _std(m, ctx: Converter):
    return StdAggregation(VarAggregation(semi_grad=bool(m.var_aggr.semi_grad)))


def _number(value: Any, name: str, m: Any, ctx: Converter) -> float:
    if hasattr(value, "numel"):
        if value.numel() != 1:
            raise ctx.unsupported(m, f"`{name}` is a tensor with {value.numel()} entries but "
                                     f"not a learnable parameter")
        value = value.item()
    return float(value)


@register_converter(f"{_PYG}.SoftmaxAggregation")
def _softmax(m, ctx: Converter):
    learn = bool(m.learn)
    return SoftmaxAggregation(t=ctx.array(m.t) if learn else None,
                              t_value=1.0 if learn else _number(m.t, "t", m, ctx),
                              learn=learn, semi_grad=bool(m.semi_grad),
                              channels=int(m.channels))


@register_converter(f"{_PYG}.PowerMeanAggregation")
def _power_mean(m, ctx: Converter):
    learn = bool(m.learn)
    return PowerMeanAggregation(p=ctx.array(m.p) if learn else None,
                                p_value=1.0 if learn else _number(m.p, "p", m, ctx),
                                learn=learn, channels=int(m.channels),
                                clamp_min=None if m.min_value is None else float(m.min_value),
                                clamp_max=None if m.max_value is None else float(m.max_value))
