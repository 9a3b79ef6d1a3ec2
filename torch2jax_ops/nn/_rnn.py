"""torch.nn's recurrent layers: ``RNN``, ``LSTM``, ``GRU`` and ``RNNCell``, ``LSTMCell``, ``GRUCell``.

Each computes what torch's CPU implementation computes, with torch's gate
formulas and order (LSTM ``i, f, g, o``; GRU ``r, z, n``), one
``jax.lax.scan`` over time per layer and direction:

* RNN:  ``h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (``tanh`` or ``relu``);
* LSTM: ``c' = sig(f) c + sig(i) tanh(g)``, ``h' = sig(o) tanh(c')``
  (``h' @ W_hr^T`` with ``proj_size``);
* GRU:  ``n = tanh(W_in x + b_in + sig(r) (W_hn h + b_hn))``,
  ``h' = (1 - sig(z)) n + sig(z) h``.

The arrays keep torch's names (``weight_ih_l0``, ``bias_hh_l1_reverse``,
``weight_hr_l0`` ...), so a port's ``state_dict`` has the torch module's keys.
"""
from __future__ import annotations

from typing import Any, Optional, cast

import equinox as eqx
import jax
import jax.numpy as jnp

from ._layers import dropout

__all__ = ["RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell", "NamedArrays", "rnn_cell_step",
           "PACKED_SEQUENCE_HELP"]

#: what to do instead of a PackedSequence (the ports take padded batches)
PACKED_SEQUENCE_HELP = (
    "PackedSequence inputs are not ported: jax.jit needs static shapes, and a packed batch's "
    "layout depends on the lengths. Pass the padded batch [T, B, F] (or [B, T, F] with "
    "batch_first=True) instead; the outputs at t < length[b] are the same as torch's packed "
    "run. For the last valid state of each sequence take output[length[b] - 1, b] (a "
    "unidirectional layer); a bidirectional layer's reverse direction must start at each "
    "sequence's own end: flip each sequence within its length before the call (and the "
    "reverse half of the output back after it)")


def _refuse_packed(x: Any, op: str) -> None:
    if hasattr(x, "batch_sizes") and hasattr(x, "data"):
        raise TypeError(f"{op}: got a torch.nn.utils.rnn.PackedSequence as input. "
                        f"{PACKED_SEQUENCE_HELP}")


class NamedArrays:
    """A pytree of arrays with dynamic names (torch's ``weight_ih_l0`` ...) plus static options.

    Subclasses set ``_options`` (the static option names). The arrays are
    attributes (``m.weight_ih_l0``) and the pytree keys are their names, so
    :func:`torch2jax_ops.nn.named_arrays` gives torch's ``state_dict`` keys.
    """
    __slots__ = ("_arrays", "_config")
    _options: tuple = ()

    def __init__(self, arrays: dict, **config: Any):
        missing = [k for k in self._options if k not in config]
        if missing:
            raise TypeError(f"{type(self).__name__}: missing options {missing}")
        object.__setattr__(self, "_arrays", dict(arrays))
        object.__setattr__(self, "_config", tuple((k, config[k]) for k in self._options))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        arrays = object.__getattribute__(self, "_arrays")
        if name in arrays:
            return arrays[name]
        config = dict(object.__getattribute__(self, "_config"))
        if name in config:
            return config[name]
        raise AttributeError(f"{type(self).__name__} has no array or option {name!r}; its "
                             f"arrays: {sorted(arrays)}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable (a pytree): use "
                             f"equinox.tree_at")

    def __repr__(self) -> str:
        options = ", ".join(f"{k}={v!r}" for k, v in self._config)
        return f"{type(self).__name__}({options})"

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)

        def flatten_with_keys(m):
            return (tuple((jax.tree_util.GetAttrKey(k), v) for k, v in m._arrays.items()),
                    (tuple(m._arrays), m._config))

        def unflatten(aux, values):
            out = object.__new__(cls)
            object.__setattr__(out, "_arrays", dict(zip(aux[0], values)))
            object.__setattr__(out, "_config", aux[1])
            return out

        jax.tree_util.register_pytree_with_keys(
            cls, flatten_with_keys, unflatten,
            flatten_func=lambda m: (tuple(m._arrays.values()), (tuple(m._arrays), m._config)))


def _linear(x: jax.Array, w: jax.Array, b: Optional[jax.Array]) -> jax.Array:
    y = x @ w.T
    return y if b is None else y + b


def rnn_cell_step(mode: str, x_proj: jax.Array, h: jax.Array, c: Optional[jax.Array],
                  w_hh: jax.Array, b_hh: Optional[jax.Array], w_hr: Optional[jax.Array] = None,
                  nonlinearity: str = "tanh") -> tuple:
    """One time step of one layer and direction, given the input's projection ``x W_ih^T + b_ih``.

    ``mode`` is ``"RNN"``, ``"LSTM"`` or ``"GRU"``; ``x_proj [B, G*H]``, ``h [B, H]``
    (``[B, proj_size]`` for a projected LSTM), ``c [B, H]`` (LSTM only). Returns
    ``(h', c')`` (``c'`` is None but for the LSTM).
    """
    hh = _linear(h, w_hh, b_hh)
    if mode == "RNN":
        pre = x_proj + hh
        return (jnp.tanh(pre) if nonlinearity == "tanh" else jax.nn.relu(pre)), None
    if mode == "LSTM":
        i, f, g, o = jnp.split(x_proj + hh, 4, axis=-1)
        assert c is not None  # an LSTM step carries its cell state
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        if w_hr is not None:
            h = h @ w_hr.T
        return h, c
    xr, xz, xn = jnp.split(x_proj, 3, axis=-1)
    hr, hz, hn = jnp.split(hh, 3, axis=-1)
    r = jax.nn.sigmoid(xr + hr)
    z = jax.nn.sigmoid(xz + hz)
    n = jnp.tanh(xn + r * hn)
    return (1 - z) * n + z * h, None


class _RNNBase(NamedArrays):
    """The shared forward of ``RNN`` / ``LSTM`` / ``GRU`` (see the module docstring)."""
    _options = ("mode", "input_size", "hidden_size", "num_layers", "bias", "batch_first",
                "dropout", "bidirectional", "proj_size", "nonlinearity", "training")

    def _layer_arrays(self, layer: int, direction: int) -> tuple:
        s = f"_l{layer}" + ("_reverse" if direction else "")
        a = self._arrays
        return (a[f"weight_ih{s}"], a[f"weight_hh{s}"], a.get(f"bias_ih{s}"),
                a.get(f"bias_hh{s}"), a.get(f"weight_hr{s}"))

    def __call__(self, input: jax.Array, hx: Any = None, *, key: Any = None) -> tuple:
        """``input [T, B, in]`` (``[B, T, in]`` with batch_first, ``[T, in]`` unbatched),
        ``hx``: ``h0 [L*D, B, H_out]`` (LSTM: ``(h0, c0)``, ``c0 [L*D, B, H]``) or None ->
        ``(output [T, B, D*H_out], h_n)`` (LSTM: ``(output, (h_n, c_n))``), as torch."""
        mode = self.mode
        op = mode
        _refuse_packed(input, op)
        x = jnp.asarray(input)
        if x.ndim not in (2, 3):
            raise ValueError(f"{op}: Expected input to be 2D or 3D, got {x.ndim}D instead")
        if x.shape[-1] != self.input_size:
            raise ValueError(f"{op}: input.size(-1) must be equal to input_size. Expected "
                             f"{self.input_size}, got {x.shape[-1]}")
        batched = x.ndim == 3
        if not batched:
            x = x[:, None]
        elif self.batch_first:
            x = jnp.swapaxes(x, 0, 1)
        B = x.shape[1]
        D = 2 if self.bidirectional else 1
        H = self.hidden_size
        H_out = self.proj_size if self.proj_size > 0 else H
        h0, c0 = self._initial(hx, batched, B, D, H, H_out, x.dtype, op)
        drop = self.dropout if self.training else 0.0
        hs, cs = [], []
        out = x
        for layer in range(self.num_layers):
            if layer > 0 and drop > 0:
                out = dropout(out, drop, True, key if key is None else
                              jax.random.fold_in(key, layer), op=op)
            outs = []
            for d in range(D):
                idx = layer * D + d
                w_ih, w_hh, b_ih, b_hh, w_hr = self._layer_arrays(layer, d)
                # torch's CPU path: every step's input projection in one matmul up front
                proj = _linear(out, w_ih, b_ih)
                if d == 1:
                    proj = proj[::-1]

                def step(carry, xp, w_hh=w_hh, b_hh=b_hh, w_hr=w_hr):
                    h, c = carry
                    h, c = rnn_cell_step(mode, xp, h, c, w_hh, b_hh, w_hr, self.nonlinearity)
                    return (h, c), h

                c_init = c0[idx] if c0 is not None else None
                (h_last, c_last), ys = jax.lax.scan(step, (h0[idx], c_init), proj)
                if d == 1:
                    ys = ys[::-1]
                outs.append(ys)
                hs.append(h_last)
                cs.append(c_last)
            out = outs[0] if D == 1 else jnp.concatenate(outs, axis=-1)
        h_n = jnp.stack(hs)
        c_n = jnp.stack(cast(list, cs)) if mode == "LSTM" else None
        if not batched:
            out, h_n = out[:, 0], h_n[:, 0]
            c_n = c_n[:, 0] if c_n is not None else None
        elif self.batch_first:
            out = jnp.swapaxes(out, 0, 1)
        return (out, (h_n, c_n)) if mode == "LSTM" else (out, h_n)

    def _initial(self, hx, batched, B, D, H, H_out, dtype, op) -> tuple:
        L = self.num_layers * D
        if hx is None:
            h0 = jnp.zeros((L, B, H_out), dtype)
            c0 = jnp.zeros((L, B, H), dtype) if self.mode == "LSTM" else None
            return h0, c0
        if self.mode == "LSTM":
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError(f"{op}: hx must be a pair (h_0, c_0), got "
                                f"{type(hx).__name__}")
            h0, c0 = jnp.asarray(hx[0]), jnp.asarray(hx[1])
        else:
            if isinstance(hx, (tuple, list)):
                raise TypeError(f"{op}: hx must be a tensor h_0 (a pair is the LSTM's)")
            h0, c0 = jnp.asarray(hx), None
        want = 3 if batched else 2
        for name, t, width in (("h_0", h0, H_out), ("c_0", c0, H)):
            if t is None:
                continue
            if t.ndim != want:
                raise ValueError(f"{op}: For {'batched' if batched else 'unbatched'} "
                                 f"{want}-D input, {name} should also be {want}-D but got "
                                 f"{t.ndim}-D tensor")
            expected = (L, B, width) if batched else (L, width)
            if tuple(t.shape) != expected:
                raise ValueError(f"{op}: Expected hidden size {expected}, got {tuple(t.shape)} "
                                 f"for {name}")
        if not batched:
            h0 = h0[:, None]
            c0 = c0[:, None] if c0 is not None else None
        return h0, c0


class RNN(_RNNBase):
    """``torch.nn.RNN`` (``nonlinearity`` ``"tanh"`` or ``"relu"``): see :class:`_RNNBase`."""


class LSTM(_RNNBase):
    """``torch.nn.LSTM`` (with ``proj_size``): ``(output, (h_n, c_n))``."""


class GRU(_RNNBase):
    """``torch.nn.GRU``: ``(output, h_n)``."""


class _Cell(eqx.Module):
    weight_ih: jax.Array
    weight_hh: jax.Array
    bias_ih: Optional[jax.Array] = None
    bias_hh: Optional[jax.Array] = None
    mode: str = eqx.field(static=True, default="RNN")
    nonlinearity: str = eqx.field(static=True, default="tanh")

    def _run(self, input: jax.Array, hx: Any) -> tuple:
        op = f"{self.mode}Cell"
        _refuse_packed(input, op)
        x = jnp.asarray(input)
        if x.ndim not in (1, 2):
            raise ValueError(f"{op}: Expected input to be 1D or 2D, got {x.ndim}D instead")
        if x.shape[-1] != self.weight_ih.shape[1]:
            raise ValueError(f"{op}: input has inconsistent input_size: got {x.shape[-1]} "
                             f"expected {self.weight_ih.shape[1]}")
        batched = x.ndim == 2
        if not batched:
            x = x[None]
        H = self.weight_hh.shape[1]
        if hx is None:
            h = jnp.zeros((x.shape[0], H), x.dtype)
            c = h if self.mode == "LSTM" else None
        else:
            if self.mode == "LSTM":
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise TypeError(f"{op}: hx must be a pair (h_0, c_0)")
                h, c = jnp.asarray(hx[0]), jnp.asarray(hx[1])
            else:
                h, c = jnp.asarray(hx), None
            expected = (x.shape[0], H) if batched else (H,)
            for name, t in (("hx", h), ("cx", c)):
                if t is not None and tuple(t.shape) != expected:
                    raise ValueError(f"{op}: {name} has shape {tuple(t.shape)}, expected "
                                     f"{expected}")
            if not batched:
                h = h[None]
                c = c[None] if c is not None else None
        proj = _linear(x, self.weight_ih, self.bias_ih)
        h, c = rnn_cell_step(self.mode, proj, h, c, self.weight_hh, self.bias_hh,
                             nonlinearity=self.nonlinearity)
        if not batched:
            h = h[0]
            c = c[0] if c is not None else None
        return h, c


class RNNCell(_Cell):
    """``torch.nn.RNNCell``: ``input [B, in]`` (or ``[in]``), ``hx [B, H]`` -> ``h' [B, H]``."""

    def __call__(self, input: jax.Array, hx: Any = None) -> jax.Array:
        return self._run(input, hx)[0]


class GRUCell(_Cell):
    """``torch.nn.GRUCell``: ``input [B, in]`` (or ``[in]``), ``hx [B, H]`` -> ``h' [B, H]``."""

    def __call__(self, input: jax.Array, hx: Any = None) -> jax.Array:
        return self._run(input, hx)[0]


class LSTMCell(_Cell):
    """``torch.nn.LSTMCell``: ``input [B, in]``, ``(h, c)`` each ``[B, H]`` -> ``(h', c')``."""

    def __call__(self, input: jax.Array, hx: Any = None) -> tuple:
        return self._run(input, hx)


_RNN_CLASSES = {"RNN_TANH": RNN, "RNN_RELU": RNN, "LSTM": LSTM, "GRU": GRU}


def _rnn_converter(m: Any, ctx: Any) -> _RNNBase:
    cls = _RNN_CLASSES.get(m.mode)
    if cls is None:
        raise ctx.unsupported(m, f"mode={m.mode!r} is not one of {sorted(_RNN_CLASSES)}")
    arrays = {name: ctx.array(t) for name, t in m.named_parameters()}
    mode = "RNN" if m.mode.startswith("RNN") else m.mode
    return cls(arrays, mode=mode, input_size=int(m.input_size), hidden_size=int(m.hidden_size),
               num_layers=int(m.num_layers), bias=bool(m.bias), batch_first=bool(m.batch_first),
               dropout=float(m.dropout), bidirectional=bool(m.bidirectional),
               proj_size=int(getattr(m, "proj_size", 0) or 0),
               nonlinearity="relu" if m.mode == "RNN_RELU" else "tanh",
               training=bool(m.training))


def _cell_converter(m: Any, ctx: Any) -> _Cell:
    name = type(m).__name__
    cls = {"RNNCell": RNNCell, "LSTMCell": LSTMCell, "GRUCell": GRUCell}[name]
    return cls(ctx.array(m.weight_ih), ctx.array(m.weight_hh), ctx.array(m.bias_ih),
               ctx.array(m.bias_hh), mode=name[:-4],
               nonlinearity=getattr(m, "nonlinearity", "tanh"))


def _register() -> None:
    from ._registry import register_converter
    for name in ("RNN", "LSTM", "GRU"):
        register_converter(f"torch.nn.modules.rnn.{name}")(_rnn_converter)
    for name in ("RNNCell", "LSTMCell", "GRUCell"):
        register_converter(f"torch.nn.modules.rnn.{name}")(_cell_converter)


_register()


def _refuse_packing(*args: Any, **kwargs: Any) -> Any:
    raise TypeError(f"torch.nn.utils.rnn.pack_padded_sequence / pack_sequence: "
                    f"{PACKED_SEQUENCE_HELP}")


def _register_packed() -> None:
    from ._registry import register_function
    # pack_padded_sequence and pack_sequence both reach this op of torch's (what a traced
    # forward records: torch's Python wrappers dispatch to it)
    register_function("torch._C._VariableFunctions._pack_padded_sequence")(_refuse_packing)


_register_packed()
