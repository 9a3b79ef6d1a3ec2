"""PyG's ``MLP`` and its ``BatchNorm`` wrapper, as equinox modules."""
from __future__ import annotations

from typing import Any

import equinox as eqx
import jax

from ...nn import BatchNorm1d, Converter, ModuleList, register_converter
from ...nn._layers import dropout

__all__ = ["MLP", "BatchNorm"]

_PYG = "torch_geometric.nn"


class BatchNorm(eqx.Module):
    """``torch_geometric.nn.norm.BatchNorm``: a ``BatchNorm1d`` named ``module``.

    With ``allow_single_element`` a single row is normalised with the running
    statistics even in training mode (PyG's rule).
    """
    module: BatchNorm1d
    allow_single_element: bool = eqx.field(static=True, default=False)

    def __call__(self, x: jax.Array, *args: Any, **kwargs: Any) -> jax.Array:
        if self.allow_single_element and x.shape[0] <= 1 and self.module.training:
            return eqx.tree_at(lambda b: b.training, self.module, False)(x)
        return self.module(x)


class MLP(eqx.Module):
    """``torch_geometric.nn.MLP``: ``x [N, F_in] -> [N, F_out]``.

    For each layer but the last (all layers if not ``plain_last``):
    ``lin -> (act if act_first) -> norm -> (act if not act_first) -> dropout``;
    then the last ``lin`` and its dropout. Dropout acts in training mode only
    (a key then: ``port(x, key=key)``). Arrays: ``lins.{i}.weight/bias``,
    ``norms.{i}.module.*`` as in PyG.
    """
    lins: ModuleList
    norms: ModuleList
    act: Any
    act_first: bool = eqx.field(static=True, default=False)
    plain_last: bool = eqx.field(static=True, default=True)
    dropout: tuple = eqx.field(static=True, default=())
    training: bool = eqx.field(static=True, default=False)

    def __call__(self, x: jax.Array, batch: Any = None, batch_size: Any = None) -> jax.Array:
        rates = self.dropout or (0.0,) * len(self.lins)
        for i, (lin, norm) in enumerate(zip(self.lins, self.norms)):
            x = lin(x)
            if self.act is not None and self.act_first:
                x = self.act(x)
            x = norm(x)
            if self.act is not None and not self.act_first:
                x = self.act(x)
            x = dropout(x, rates[i], self.training, op="MLP")
        if self.plain_last:
            x = self.lins[-1](x)
            x = dropout(x, rates[-1], self.training, op="MLP")
        return x


@register_converter(f"{_PYG}.norm.batch_norm.BatchNorm")
def _pyg_batch_norm(m, ctx: Converter):
    if getattr(m, "mode", "node") != "node":
        raise ctx.unsupported(m, f"mode={m.mode!r}; only mode='node' is ported")
    return BatchNorm(ctx.child(m.module, "module"),
                     allow_single_element=bool(getattr(m, "allow_single_element", False)))


@register_converter(f"{_PYG}.models.mlp.MLP")
def _mlp(m, ctx: Converter):
    act = None if m.act is None else ctx.child(m.act, "act")
    if m.act is not None and not hasattr(m.act, "forward"):
        raise ctx.unsupported(m, "its activation is a plain function, not a module")
    return MLP(ctx.child(m.lins, "lins"), ctx.child(m.norms, "norms"), act,
               act_first=m.act_first, plain_last=m.plain_last,
               dropout=tuple(float(p) for p in m.dropout), training=m.training)
