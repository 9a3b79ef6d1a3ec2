"""PyG's ``MLP`` and its ``BatchNorm`` wrapper, as equinox modules."""
from __future__ import annotations

from typing import Any

import equinox as eqx
import jax

from ...nn.layers import BatchNorm1d, ModuleList

__all__ = ["MLP", "BatchNorm"]


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
