"""PyG's ``Set2Set`` (Vinyals et al.), with the ``torch.nn.LSTM`` cell it runs."""
from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from ....nn import Converter, register_converter
from ..._edges import aggregate, gather
from ..._softmax import segment_softmax
from ._base import Aggregation

__all__ = ["Set2Set", "LSTMCells"]


class LSTMCells:
    """The stacked cells of a unidirectional ``torch.nn.LSTM``, one time step at a time.

    A pytree whose arrays carry torch's names: ``weight_ih_l{k}`` ``[4H, in]``,
    ``weight_hh_l{k}`` ``[4H, H]``, ``bias_ih_l{k}``, ``bias_hh_l{k}`` ``[4H]``
    (no biases with ``bias=False``). Gates in torch's order ``i, f, g, o``:
    ``c' = f * c + i * g``, ``h' = o * tanh(c')``, layer ``k + 1`` fed by
    layer ``k``'s new ``h``.
    """
    __slots__ = ("_arrays", "num_layers", "hidden_size")

    def __init__(self, arrays: dict, num_layers: int, hidden_size: int):
        object.__setattr__(self, "_arrays", dict(arrays))
        object.__setattr__(self, "num_layers", int(num_layers))
        object.__setattr__(self, "hidden_size", int(hidden_size))

    def __getattr__(self, name: str) -> Any:
        arrays = object.__getattribute__(self, "_arrays")
        if name in arrays:
            return arrays[name]
        raise AttributeError(f"LSTMCells has no array {name!r}; its arrays: {sorted(arrays)}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("LSTMCells is immutable (a pytree): use equinox.tree_at")

    def __repr__(self) -> str:
        return f"LSTMCells(num_layers={self.num_layers}, hidden_size={self.hidden_size})"

    def step(self, x: jax.Array, state: tuple) -> tuple:
        """One time step: ``x [B, in]``, ``(h, c)`` each ``[num_layers, B, H]`` ->
        ``(output [B, H], (h', c'))``."""
        h_all, c_all = state
        hs, cs = [], []
        inp = x
        for k in range(self.num_layers):
            a = self._arrays
            # torch's CPU LSTM: (x W_ih^T + b_ih) + (h W_hh^T + b_hh)
            gi = inp @ a[f"weight_ih_l{k}"].T
            gh = h_all[k] @ a[f"weight_hh_l{k}"].T
            if f"bias_ih_l{k}" in a:
                gi = gi + a[f"bias_ih_l{k}"]
                gh = gh + a[f"bias_hh_l{k}"]
            gates = gi + gh
            i, f, g, o = jnp.split(gates, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c_all[k] + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            hs.append(h)
            cs.append(c)
            inp = h
        return inp, (jnp.stack(hs), jnp.stack(cs))


jax.tree_util.register_pytree_with_keys(
    LSTMCells,
    lambda m: (tuple((jax.tree_util.GetAttrKey(k), v) for k, v in m._arrays.items()),
               (tuple(m._arrays), m.num_layers, m.hidden_size)),
    lambda aux, values: LSTMCells(dict(zip(aux[0], values)), aux[1], aux[2]),
    flatten_func=lambda m: (tuple(m._arrays.values()),
                            (tuple(m._arrays), m.num_layers, m.hidden_size)))


def lstm_cells(lstm: Any, ctx: Converter) -> LSTMCells:
    """A ``torch.nn.LSTM`` as :class:`LSTMCells` (refusing what a cell cannot run)."""
    if lstm.bidirectional:
        raise ctx.unsupported(lstm, "bidirectional=True; Set2Set's port runs a "
                                    "unidirectional LSTM")
    if getattr(lstm, "proj_size", 0):
        raise ctx.unsupported(lstm, f"proj_size={lstm.proj_size} is not ported")
    if lstm.batch_first:
        raise ctx.unsupported(lstm, "batch_first=True (Set2Set feeds [1, B, F]: PyG would read "
                                    "the batch as a sequence)")
    if lstm.dropout and lstm.training and lstm.num_layers > 1:
        raise ctx.unsupported(lstm, f"dropout={lstm.dropout} between LSTM layers in training "
                                    f"mode is not ported; convert after .eval()")
    arrays = {name: ctx.array(t) for name, t in lstm.named_parameters()}
    return LSTMCells(arrays, lstm.num_layers, lstm.hidden_size)


class Set2Set(Aggregation):
    """``torch_geometric.nn.aggr.Set2Set``: ``processing_steps`` rounds of LSTM-driven
    attention over each group; ``x [E, C], index [E] -> [dim_size, 2C]``.

    Each step: ``q, state = lstm(q_star, state)``; ``a = softmax(<x_i, q[index_i]>)``
    per group; ``r = sum_i a_i x_i``; ``q_star = [q, r]`` (``q_star``, ``state``
    start at 0). ``processing_steps`` is static (the loop is unrolled). The
    LSTM's arrays are ``lstm.weight_ih_l0`` ... as in PyG. Needs ``index``,
    2-D ``x`` and ``dim`` 0 / -2, as PyG.
    """
    lstm: LSTMCells
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
        layers, channels = self.lstm.num_layers, x.shape[-1]
        state = (jnp.zeros((layers, n, channels), x.dtype),
                 jnp.zeros((layers, n, channels), x.dtype))
        q_star = jnp.zeros((n, 2 * self.in_channels), x.dtype)
        for _ in range(self.processing_steps):
            q, state = self.lstm.step(q_star, state)
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
