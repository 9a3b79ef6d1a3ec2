"""PyG's ``MLP`` and its ``BatchNorm`` wrapper, as equinox modules."""
from __future__ import annotations

from typing import Any

import equinox as eqx
import jax

from ...nn import BatchNorm1d, Converter, ModuleList, register_converter

__all__ = ["MLP", "BatchNorm"]

_PYG = "torch_geometric.nn"


class BatchNorm(eqx.Module):
    """``torch_geometric.nn.norm.BatchNorm`` (eval mode): a ``BatchNorm1d`` named ``module``."""
    module: BatchNorm1d

    def __call__(self, x: jax.Array, *args: Any, **kwargs: Any) -> jax.Array:
        return self.module(x)


class MLP(eqx.Module):
    """``torch_geometric.nn.MLP`` in eval mode: ``x [N, F_in] -> [N, F_out]``.

    For each layer but the last (all layers if not ``plain_last``):
    ``lin -> (act if act_first) -> norm -> (act if not act_first)``; then the
    last ``lin``. Dropout is off (eval). Arrays: ``lins.{i}.weight/bias``,
    ``norms.{i}.module.*`` as in PyG.
    """
    lins: ModuleList
    norms: ModuleList
    act: Any
    act_first: bool = eqx.field(static=True, default=False)
    plain_last: bool = eqx.field(static=True, default=True)

    def __call__(self, x: jax.Array) -> jax.Array:
        for lin, norm in zip(self.lins, self.norms):
            x = lin(x)
            if self.act is not None and self.act_first:
                x = self.act(x)
            x = norm(x)
            if self.act is not None and not self.act_first:
                x = self.act(x)
        if self.plain_last:
            x = self.lins[-1](x)
        return x


@register_converter(f"{_PYG}.norm.batch_norm.BatchNorm")
def _pyg_batch_norm(m, ctx: Converter):
    if getattr(m, "mode", "node") != "node":
        raise ctx.unsupported(m, f"mode={m.mode!r}; only mode='node' is ported")
    return BatchNorm(ctx.child(m.module, "module"))


@register_converter(f"{_PYG}.models.mlp.MLP")
def _mlp(m, ctx: Converter):
    if any(p > 0 for p in m.dropout):
        ctx.eval_only(m, f"dropout={m.dropout} zeroes activations at random")
    act = None if m.act is None else ctx.child(m.act, "act")
    if m.act is not None and not hasattr(m.act, "forward"):
        raise ctx.unsupported(m, "its activation is a plain function, not a module")
    return MLP(ctx.child(m.lins, "lins"), ctx.child(m.norms, "norms"), act,
               act_first=m.act_first, plain_last=m.plain_last)
