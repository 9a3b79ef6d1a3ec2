"""PyG's ``JumpingKnowledge`` (Xu et al.): 'cat', 'max' and 'lstm' layer aggregation."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._checking import as_array
from ...._sharding import OutSharding, sharding_aware
from ....nn import Converter, Linear, register_converter

__all__ = ["JumpingKnowledge", "BiLSTM"]


class BiLSTM:
    """A one-layer bidirectional ``torch.nn.LSTM(batch_first=True)``, torch's array names.

    Arrays ``weight_ih_l0`` ``[4H, in]``, ``weight_hh_l0`` ``[4H, H]``,
    ``bias_ih_l0``, ``bias_hh_l0`` ``[4H]`` and the same with ``_reverse`` (no
    biases with ``bias=False``). ``x [B, T, in] -> [B, T, 2H]`` (forward
    states, then backward states), zero initial state; gates ``i, f, g, o``
    computed as torch's CPU kernel: ``(x W_ih^T + b_ih) + (h W_hh^T + b_hh)``.
    """
    __slots__ = ("_arrays", "hidden_size")

    def __init__(self, arrays: dict, hidden_size: int):
        object.__setattr__(self, "_arrays", dict(arrays))
        object.__setattr__(self, "hidden_size", int(hidden_size))

    def __getattr__(self, name: str) -> Any:
        arrays = object.__getattribute__(self, "_arrays")
        if name in arrays:
            return arrays[name]
        raise AttributeError(f"BiLSTM has no array {name!r}; its arrays: {sorted(arrays)}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("BiLSTM is immutable (a pytree): use equinox.tree_at")

    def __repr__(self) -> str:
        return f"BiLSTM(hidden_size={self.hidden_size})"

    def _direction(self, x: jax.Array, suffix: str, reverse: bool) -> jax.Array:
        a = self._arrays
        steps = range(x.shape[1] - 1, -1, -1) if reverse else range(x.shape[1])
        h = jnp.zeros((x.shape[0], self.hidden_size), x.dtype)
        c = h
        gi_all = x @ a[f"weight_ih_l0{suffix}"].T
        if f"bias_ih_l0{suffix}" in a:
            gi_all = gi_all + a[f"bias_ih_l0{suffix}"]
        outs: list = [None] * x.shape[1]
        for t in steps:
            gh = h @ a[f"weight_hh_l0{suffix}"].T
            if f"bias_hh_l0{suffix}" in a:
                gh = gh + a[f"bias_hh_l0{suffix}"]
            i, f, g, o = jnp.split(gi_all[:, t] + gh, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            outs[t] = h
        return jnp.stack(outs, axis=1)

    def __call__(self, x: jax.Array) -> jax.Array:
        return jnp.concatenate([self._direction(x, "", False),
                                self._direction(x, "_reverse", True)], axis=-1)


jax.tree_util.register_pytree_with_keys(
    BiLSTM,
    lambda m: (tuple((jax.tree_util.GetAttrKey(k), v) for k, v in m._arrays.items()),
               (tuple(m._arrays), m.hidden_size)),
    lambda aux, values: BiLSTM(dict(zip(aux[0], values)), aux[1]),
    flatten_func=lambda m: (tuple(m._arrays.values()), (tuple(m._arrays), m.hidden_size)))


class JumpingKnowledge(eqx.Module):
    """``torch_geometric.nn.JumpingKnowledge``: ``xs`` (T arrays ``[N, C_t]``) -> ``[N, *]``.

    * ``'cat'``: ``concatenate(xs, -1)`` ``[N, sum C_t]``;
    * ``'max'``: the elementwise maximum over the layers ``[N, C]`` (torch's
      ``max(dim=-1)``: on ties the gradient goes to the FIRST layer holding the
      maximum, not shared);
    * ``'lstm'``: ``alpha = softmax(att(BiLSTM(stack(xs, 1))))`` over the layers,
      ``sum_t alpha_t x_t`` ``[N, C]``; arrays ``lstm.weight_ih_l0`` ... (with
      ``_reverse``) and ``att.weight [1, 2H]``, ``att.bias``,
      ``H = (num_layers * channels) // 2``.
    """
    mode: str = eqx.field(static=True, default="cat")
    lstm: Optional[BiLSTM] = None
    att: Optional[Linear] = None
    channels: Optional[int] = eqx.field(static=True, default=None)
    num_layers: Optional[int] = eqx.field(static=True, default=None)

    def __check_init__(self):
        if self.mode not in ("cat", "max", "lstm"):
            raise ValueError(f"JumpingKnowledge: `mode` must be 'cat', 'max' or 'lstm', got "
                             f"{self.mode!r}")
        if self.mode == "lstm" and (self.lstm is None or self.att is None):
            raise ValueError("JumpingKnowledge: mode='lstm' needs `lstm` and `att`")

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, xs: Sequence[jax.Array], *, out_sharding: OutSharding = None) -> jax.Array:
        op = "JumpingKnowledge"
        if not isinstance(xs, (list, tuple)) or not xs:
            raise TypeError(f"{op}: `xs` must be a non-empty list of the layers' node features, "
                            f"got {type(xs).__name__}")
        xs = [as_array(x, f"xs[{i}]", op=op) for i, x in enumerate(xs)]
        if self.mode == "cat":
            return jnp.concatenate(xs, axis=-1)
        stacked = jnp.stack(xs, axis=-1 if self.mode == "max" else 1)
        if self.mode == "max":
            # torch's max(dim): the value and gradient of the first maximal entry (NaN wins)
            first = jnp.argmax(jax.lax.stop_gradient(stacked), axis=-1)
            return jnp.take_along_axis(stacked, first[..., None], axis=-1)[..., 0]
        assert self.lstm is not None and self.att is not None  # __check_init__
        alpha = self.att(self.lstm(stacked))[..., 0]          # [N, T]
        alpha = jax.nn.softmax(alpha, axis=-1)
        return jnp.sum(stacked * alpha[..., None], axis=1)


def _bilstm(lstm: Any, ctx: Converter) -> BiLSTM:
    if not lstm.bidirectional or lstm.num_layers != 1 or not lstm.batch_first \
            or getattr(lstm, "proj_size", 0):
        raise ctx.unsupported(lstm, "JumpingKnowledge's port runs PyG's one-layer bidirectional "
                                    "batch_first LSTM without proj_size; this one differs")
    return BiLSTM({name: ctx.array(t) for name, t in lstm.named_parameters()},
                  lstm.hidden_size)


@register_converter("torch_geometric.nn.models.jumping_knowledge.JumpingKnowledge")
def _jumping_knowledge(m, ctx: Converter) -> JumpingKnowledge:
    if m.mode == "lstm":
        if m.lstm is None or m.att is None:
            raise ctx.unsupported(m, "mode was lower-cased to 'lstm' but PyG built no LSTM "
                                     "(it checks the mode before lower-casing: pass "
                                     "mode='lstm'); its forward fails in torch too")
        return JumpingKnowledge("lstm", ctx.child(m.lstm, "lstm", _bilstm),
                                ctx.child(m.att, "att"), channels=int(m.channels),
                                num_layers=int(m.num_layers))
    return JumpingKnowledge(m.mode)
