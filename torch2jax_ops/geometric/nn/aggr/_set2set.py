"""PyG's ``Set2Set`` (Vinyals et al.), running its ``torch.nn.LSTM`` as :class:`torch2jax_ops.nn.LSTM`."""
from __future__ import annotations

from typing import Any

import equinox as eqx
import jax.numpy as jnp

from ....nn import LSTM, Converter, register_converter
from ..._core._edges import aggregate, gather
from ...utils._softmax import segment_softmax
from ._base import Aggregation

__all__ = ["Set2Set"]


def lstm_cells(lstm: Any, ctx: Converter) -> LSTM:
    """The ``torch.nn.LSTM`` of a Set2Set as :class:`torch2jax_ops.nn.LSTM` (refusing what
    PyG's call would misread)."""
    if lstm.batch_first:
        raise ctx.unsupported(lstm, "batch_first=True (Set2Set feeds [1, B, F]: PyG would read "
                                    "the batch as a sequence)")
    if lstm.bidirectional:
        raise ctx.unsupported(lstm, "bidirectional=True (PyG's Set2Set builds a "
                                    "unidirectional LSTM; its output would be twice as wide)")
    if getattr(lstm, "proj_size", 0):
        raise ctx.unsupported(lstm, f"proj_size={lstm.proj_size} (PyG's Set2Set builds an "
                                    f"LSTM without projections)")
    port = ctx.convert(lstm)
    assert isinstance(port, LSTM)
    return port


class Set2Set(Aggregation):
    """``torch_geometric.nn.aggr.Set2Set``: ``processing_steps`` rounds of LSTM-driven
    attention over each group; ``x [E, C], index [E] -> [dim_size, 2C]``.

    Each step: ``q, state = lstm(q_star, state)``; ``a = softmax(<x_i, q[index_i]>)``
    per group; ``r = sum_i a_i x_i``; ``q_star = [q, r]`` (``q_star``, ``state``
    start at 0). ``processing_steps`` is static (the loop is unrolled). The
    LSTM's arrays are ``lstm.weight_ih_l0`` ... as in PyG. Needs ``index``,
    2-D ``x`` and ``dim`` 0 / -2, as PyG.
    """
    lstm: LSTM
    in_channels: int = eqx.field(static=True, default=1)
    processing_steps: int = eqx.field(static=True, default=1)
    _needs_index = True

    def _aggregate(self, x, g):
        op = "Set2Set"
        if x.ndim != 2:
            raise ValueError(f"{op}: Aggregation requires two-dimensional inputs (got "
                             f"'{x.ndim}')")
        ids, n = g.ids, g.n
        if g.axis != 0:
            raise ValueError(f"{op}: Aggregation needs to perform aggregation in first "
                             f"dimension (dim=0 or -2)")
        layers, hidden = self.lstm.num_layers, self.lstm.hidden_size
        state = (jnp.zeros((layers, n, hidden), x.dtype),
                 jnp.zeros((layers, n, hidden), x.dtype))
        q_star = jnp.zeros((n, 2 * self.in_channels), x.dtype)
        for _ in range(self.processing_steps):
            out, state = self.lstm(q_star[None], state)  # one time step, as PyG's call
            q = out[0]
            e = jnp.sum(x * gather(q, ids), axis=-1, keepdims=True)
            a = segment_softmax(e, ids, n)
            r = aggregate(a * x, ids, n, "sum", op=op)
            q_star = jnp.concatenate([q, r], axis=-1)
        return q_star


@register_converter("torch_geometric.nn.aggr.set2set.Set2Set")
def _set2set(m, ctx: Converter):
    sub = type(ctx)(ctx.copy, f"{ctx.path}.lstm" if ctx.path else "lstm", ctx.device,
                    ctx.memo)
    return Set2Set(lstm_cells(m.lstm, sub), in_channels=int(m.in_channels),
                   processing_steps=int(m.processing_steps))
