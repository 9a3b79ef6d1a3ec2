"""PyG's ``MultiAggregation``: several aggregations of the same groups, combined."""
from __future__ import annotations

from typing import Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from ....nn import Converter, Linear, ModuleList, register_converter
from ._base import Aggregation
from ._basic import (
    MaxAggregation,
    MeanAggregation,
    MinAggregation,
    MulAggregation,
    StdAggregation,
    SumAggregation,
    VarAggregation,
    _std_from_var,
    _variance,
)

__all__ = ["MultiAggregation"]

#: PyG's FusedAggregation.FUSABLE_AGGRS
_FUSABLE = (SumAggregation, MeanAggregation, MinAggregation, MaxAggregation, MulAggregation,
            VarAggregation, StdAggregation)
#: combine modes that reduce the stacked outputs with the torch function of that name
DENSE_MODES = ("sum", "mean", "max", "min", "logsumexp", "std", "var")
MODES = ("cat", "proj") + DENSE_MODES


def _first_extremum(stack: jax.Array, kind: str) -> jax.Array:
    """``torch.max(stack, dim=0)[0]`` (or min): the gradient goes to the first extremum only
    (torch's index-based backward), not split among ties as ``jnp.max`` would."""
    pick = jnp.argmax(stack, axis=0) if kind == "max" else jnp.argmin(stack, axis=0)
    return jnp.take_along_axis(stack, pick[None], axis=0)[0]


def _variance0(stack: jax.Array) -> jax.Array:
    """``torch.var(stack, dim=0)`` (unbiased)."""
    return jnp.var(stack, axis=0, ddof=1)


def _std0(stack: jax.Array) -> jax.Array:
    """``torch.std(stack, dim=0)`` (unbiased); torch's backward masks the gradient where the
    result is 0 (``jnp.std`` would give NaN there)."""
    var = _variance0(stack)
    zero = var == 0
    return jnp.where(zero, jnp.zeros((), var.dtype), jnp.sqrt(jnp.where(zero, 1, var)))


def combine(outs: list, mode: str, lin: Optional[Linear] = None) -> jax.Array:
    """PyG's ``MultiAggregation.combine``."""
    if len(outs) == 1:
        return outs[0]
    if mode == "cat":
        return jnp.concatenate(outs, axis=-1)
    if mode == "proj":
        assert lin is not None  # "proj" comes with its Linear
        return lin(jnp.concatenate(outs, axis=-1))
    stack = jnp.stack(outs, axis=0)
    if mode == "sum":
        return jnp.sum(stack, axis=0)
    if mode == "mean":
        return jnp.mean(stack, axis=0)
    if mode in ("max", "min"):
        return _first_extremum(stack, mode)
    if mode == "logsumexp":
        return jax.nn.logsumexp(stack, axis=0)
    if mode == "std":
        return _std0(stack)
    if mode == "var":
        return _variance0(stack)
    raise ValueError(f"MultiAggregation: Combine mode '{mode}' is not supported (ported: "
                     f"{MODES})")


class MultiAggregation(Aggregation):
    """``torch_geometric.nn.aggr.MultiAggregation``: ``combine([aggr(x, ...) for aggr in aggrs])``.

    ``mode``: ``"cat"`` (concatenate the feature axes), ``"proj"`` (``lin`` of
    the concatenation), or a dense reduction of the stacked outputs: ``"sum"``,
    ``"mean"``, ``"max"``/``"min"`` (the gradient to the first extremum, as
    ``torch.max(dim=0)``), ``"logsumexp"``, ``"std"``/``"var"`` (unbiased).

    PyG's fused path is mirrored: for 2-D ``x`` with ``index``, its basic
    aggregations run fused, and there the ``semi_grad`` of any
    ``VarAggregation`` (``fused_semi_grad``) applies to every Var/Std member,
    while a ``StdAggregation``'s own ``semi_grad`` is ignored (PyG's quirk);
    the fused path aggregates along dim 0 only (other dims raise, as PyG).
    """
    aggrs: ModuleList
    lin: Optional[Linear] = None
    mode: str = eqx.field(static=True, default="cat")
    fused_semi_grad: bool = eqx.field(static=True, default=False)

    def _aggregate(self, x, g):
        op = "MultiAggregation"
        fused = g.indexed and x.ndim == 2 and any(isinstance(a, _FUSABLE) for a in self.aggrs)
        if fused and g.axis != 0:
            raise ValueError(f"{op}: Aggregation needs to perform aggregation in first "
                             f"dimension (got dim={g.axis}); PyG's fused aggregation of 2-D "
                             f"inputs takes dim=0 or -2")
        outs = []
        for aggr in self.aggrs:
            if not g.indexed and aggr._needs_index:
                raise NotImplementedError(f"{op}: {type(aggr).__name__} requires 'index' to "
                                          f"be specified (as in PyG)")
            if fused and isinstance(aggr, (VarAggregation, StdAggregation)):
                var = _variance(x, g, self.fused_semi_grad, op)
                outs.append(var if isinstance(aggr, VarAggregation) else _std_from_var(var))
            else:
                outs.append(aggr._aggregate(x, g))
        return combine(outs, self.mode, self.lin)

    def get_out_channels(self, in_channels: int) -> int:
        """PyG's ``get_out_channels`` for the default ``out_channels=None``."""
        if self.lin is not None:
            return self.lin.weight.shape[0]
        return in_channels * len(self.aggrs) if self.mode == "cat" else in_channels


@register_converter("torch_geometric.nn.aggr.multi.MultiAggregation")
def _multi(m, ctx: Converter):
    mode = m.mode
    if len(m.aggrs) > 1 and mode not in MODES:
        why = ("mode='attn' (HeteroDictLinear + MultiheadAttention) is not ported"
               if mode == "attn" else f"combine mode {mode!r} is not supported by PyG either")
        raise ctx.unsupported(m, f"{why}; ported modes: {MODES}")
    fused = getattr(m, "fused_aggr", None)
    return MultiAggregation(ctx.child(m.aggrs, "aggrs"),
                            ctx.child(m.lin, "lin") if getattr(m, "lin", None) is not None
                            else None,
                            mode=str(mode), fused_semi_grad=bool(getattr(fused, "semi_grad",
                                                                         False)))
