"""PyG's ``DegreeScalerAggregation``: PNA's degree scalers around an aggregation."""
from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from ....nn import Converter, register_converter
from ._base import Aggregation, counts_along

__all__ = ["DegreeScalerAggregation", "SCALERS", "scale"]

SCALERS = ("identity", "amplification", "attenuation", "linear", "inverse_linear")


def scale(out: jax.Array, deg: jax.Array, scalers: tuple, avg_deg_lin: jax.Array,
          avg_deg_log: jax.Array) -> jax.Array:
    """PyG's scalers of ``out`` by the degree ``deg`` (broadcast to ``out``), concatenated
    along the last axis in the order of ``scalers`` (one scaler: no concatenation)."""
    outs = []
    for scaler in scalers:
        if scaler == "identity":
            outs.append(out)
        elif scaler == "amplification":
            outs.append(out * (jnp.log(deg + 1) / avg_deg_log))
        elif scaler == "attenuation":  # the degree clamped to 1 (no division by 0)
            outs.append(out * (avg_deg_log / jnp.log(jnp.maximum(deg, 1) + 1)))
        elif scaler == "linear":
            outs.append(out * (deg / avg_deg_lin))
        elif scaler == "inverse_linear":
            outs.append(out * (avg_deg_lin / jnp.maximum(deg, 1)))
        else:
            raise ValueError(f"DegreeScalerAggregation: Unknown scaler '{scaler}' (PyG's "
                             f"scalers: {SCALERS})")
    return jnp.concatenate(outs, axis=-1) if len(outs) > 1 else outs[0]


class DegreeScalerAggregation(Aggregation):
    """``torch_geometric.nn.aggr.DegreeScalerAggregation`` (PNA): ``aggr``'s output times
    each scaler of the group size ``deg`` (``identity``, ``amplification`` =
    ``log(deg + 1) / avg_deg_log``, ``attenuation`` = its inverse with ``deg``
    clamped to 1, ``linear`` = ``deg / avg_deg_lin``, ``inverse_linear``),
    concatenated along the last axis.

    ``avg_deg_lin`` / ``avg_deg_log`` ``[1]``: PyG's buffers (no gradient
    reaches them) or, with ``train_norm``, parameters. Needs ``index``.
    """
    aggr: Any
    avg_deg_lin: jax.Array
    avg_deg_log: jax.Array
    scaler: tuple = eqx.field(static=True, default=("identity",))
    train_norm: bool = eqx.field(static=True, default=False)
    _needs_index = True

    def norms(self) -> tuple:
        """(avg_deg_lin, avg_deg_log), without gradient unless ``train_norm``."""
        if self.train_norm:
            return self.avg_deg_lin, self.avg_deg_log
        return jax.lax.stop_gradient(self.avg_deg_lin), jax.lax.stop_gradient(self.avg_deg_log)

    def _aggregate(self, x, g):
        out = self.aggr._aggregate(x, g)
        deg = counts_along(g, out.ndim, out.dtype)
        lin, log = self.norms()
        return scale(out, deg, self.scaler, lin, log)


@register_converter("torch_geometric.nn.aggr.scaler.DegreeScalerAggregation")
def _degree_scaler(m, ctx: Converter):
    import torch

    scalers = m.scaler
    if isinstance(scalers, str) or not all(isinstance(s, str) for s in scalers):
        # PyG wraps a lone scaler name only when `aggr` is a string too; otherwise its
        # forward iterates the characters of the name and raises
        raise ctx.unsupported(m, f"scaler={scalers!r}: pass a list of scaler names")
    unknown = [s for s in scalers if s not in SCALERS]
    if unknown:
        raise ctx.unsupported(m, f"unknown scalers {unknown}; PyG's: {SCALERS}")
    return DegreeScalerAggregation(ctx.child(m.aggr, "aggr"), ctx.array(m.avg_deg_lin),
                                   ctx.array(m.avg_deg_log), scaler=tuple(scalers),
                                   train_norm=isinstance(m.avg_deg_lin, torch.nn.Parameter))
