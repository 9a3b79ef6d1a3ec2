"""PyG's ``MLP`` as an equinox module (PyG's ``BatchNorm`` lives in :mod:`.norm`)."""
from __future__ import annotations

from typing import Any

import equinox as eqx
import jax

from ...nn import Converter, ModuleList, register_converter
from ...nn._layers import dropout
from .norm._batch_norm import BatchNorm  # noqa: F401  (moved; `from ._models import BatchNorm` works)

__all__ = ["MLP", "BatchNorm"]

_PYG = "torch_geometric.nn"


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


@register_converter(f"{_PYG}.models.mlp.MLP")
def _mlp(m, ctx: Converter):
    act = None if m.act is None else ctx.child(m.act, "act")
    if m.act is not None and not hasattr(m.act, "forward"):
        raise ctx.unsupported(m, "its activation is a plain function, not a module")
    return MLP(ctx.child(m.lins, "lins"), ctx.child(m.norms, "norms"), act,
               act_first=m.act_first, plain_last=m.plain_last,
               dropout=tuple(float(p) for p in m.dropout), training=m.training)
