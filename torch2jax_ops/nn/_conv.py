"""torch.nn's convolutions ``Conv1d/2d/3d``, ``ConvTranspose1d/2d/3d`` and ``PReLU`` as
equinox modules.

Layout as torch: channels first, ``x [N, C_in, *spatial]`` (or unbatched
``[C_in, *spatial]``) -> ``[N, C_out, *spatial_out]``; ``weight [C_out,
C_in / groups, *kernel]``. A ``padding_mode`` other than ``"zeros"`` pads
the input first (``reflect``, ``replicate`` = edge, ``circular`` = wrap) and
convolves without padding, as torch.
"""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvNd", "ConvTranspose1d", "ConvTranspose2d",
           "ConvTranspose3d", "ConvTransposeNd", "PReLU"]

_PAD_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}



def batch_axis(input: Any, dims: int, *, op: str) -> tuple[jax.Array, bool]:
    """``input`` ``[N, C, *spatial]`` (batched) or ``[C, *spatial]`` as a batched array, and
    whether it was batched (``dims`` spatial axes)."""
    x = jnp.asarray(input)
    if x.ndim not in (dims + 1, dims + 2):
        raise ValueError(f"{op}: expected {dims + 1}-D (unbatched) or {dims + 2}-D (batched) "
                         f"input, got shape {tuple(x.shape)}")
    batched = x.ndim == dims + 2
    return (x if batched else x[None]), batched

class ConvNd(eqx.Module):
    """``torch.nn.Conv{1,2,3}d`` (``dims`` spatial axes); ``padding`` is per-axis ``(lo, hi)``."""
    weight: jax.Array
    bias: Optional[jax.Array] = None
    stride: tuple = eqx.field(static=True, default=(1,))
    padding: tuple = eqx.field(static=True, default=((0, 0),))
    dilation: tuple = eqx.field(static=True, default=(1,))
    groups: int = eqx.field(static=True, default=1)
    padding_mode: str = eqx.field(static=True, default="zeros")

    def __call__(self, input: jax.Array) -> jax.Array:
        dims = self.weight.ndim - 2
        op = f"Conv{dims}d"
        x, batched = batch_axis(input, dims, op=op)
        c_in = self.weight.shape[1] * self.groups
        if x.shape[1] != c_in:
            raise ValueError(f"{op}: expected input with {c_in} channels (axis 1 of a batched "
                             f"input), got shape {tuple(input.shape)}")
        padding = self.padding
        if self.padding_mode != "zeros":
            x = jnp.pad(x, [(0, 0), (0, 0)] + [tuple(p) for p in padding],
                        mode=_PAD_MODES[self.padding_mode])
            padding = ((0, 0),) * dims
        y = jax.lax.conv_general_dilated(
            x, self.weight.astype(x.dtype), window_strides=self.stride,
            padding=[tuple(p) for p in padding], rhs_dilation=self.dilation,
            feature_group_count=self.groups)
        if self.bias is not None:
            y = y + self.bias.reshape((1, -1) + (1,) * dims)
        return y if batched else y[0]


class Conv1d(ConvNd):
    """``torch.nn.Conv1d``: ``x [N, C_in, L]`` -> ``[N, C_out, L_out]``."""


class Conv2d(ConvNd):
    """``torch.nn.Conv2d``: ``x [N, C_in, H, W]`` -> ``[N, C_out, H_out, W_out]``."""


class Conv3d(ConvNd):
    """``torch.nn.Conv3d``: ``x [N, C_in, D, H, W]`` -> ``[N, C_out, D_out, H_out, W_out]``."""


class ConvTransposeNd(eqx.Module):
    """``torch.nn.ConvTranspose{1,2,3}d``: the gradient of a convolution w.r.t. its input.

    ``weight [C_in, C_out / groups, *kernel]``; output size per axis
    ``(L - 1) stride - 2 padding + dilation (k - 1) + output_padding + 1``
    (``output_size=`` in the call picks ``output_padding`` as torch does).
    Computed as a convolution of the ``stride``-dilated input with the
    flipped kernel.
    """
    weight: jax.Array
    bias: Optional[jax.Array] = None
    stride: tuple = eqx.field(static=True, default=(1,))
    padding: tuple = eqx.field(static=True, default=(0,))
    output_padding: tuple = eqx.field(static=True, default=(0,))
    dilation: tuple = eqx.field(static=True, default=(1,))
    groups: int = eqx.field(static=True, default=1)

    def __call__(self, input: jax.Array, output_size: Optional[Any] = None) -> jax.Array:
        dims = self.weight.ndim - 2
        op = f"ConvTranspose{dims}d"
        x, batched = batch_axis(input, dims, op=op)
        c_in, k = self.weight.shape[0], self.weight.shape[2:]
        if x.shape[1] != c_in:
            raise ValueError(f"{op}: expected input with {c_in} channels, got shape "
                             f"{tuple(input.shape)}")
        extra = self._output_padding(x.shape[2:], output_size, k, op)
        g = self.groups
        w = self.weight.reshape((g, c_in // g) + self.weight.shape[1:])
        w = jnp.swapaxes(w, 1, 2).reshape((-1, c_in // g) + tuple(k))
        w = jnp.flip(w, axis=tuple(range(2, 2 + dims)))
        pads = [(d * (kk - 1) - p, d * (kk - 1) - p + e)
                for kk, p, d, e in zip(k, self.padding, self.dilation, extra)]
        y = jax.lax.conv_general_dilated(x, w.astype(x.dtype), window_strides=(1,) * dims,
                                         padding=pads, lhs_dilation=self.stride,
                                         rhs_dilation=self.dilation, feature_group_count=g)
        if self.bias is not None:
            y = y + self.bias.reshape((1, -1) + (1,) * dims)
        return y if batched else y[0]

    def _output_padding(self, sizes, output_size, k, op) -> tuple:
        if output_size is None:
            return tuple(self.output_padding)
        wanted = [int(v) for v in output_size][-len(sizes):]
        out = []
        for n, want, kk, s, p, d in zip(sizes, wanted, k, self.stride, self.padding,
                                        self.dilation):
            base = (n - 1) * s - 2 * p + d * (kk - 1) + 1
            if not base <= want < base + max(s, d):
                raise ValueError(f"{op}: requested an output size of {wanted}, but valid sizes "
                                 f"range from {base} to {base + max(s, d) - 1} (for an input "
                                 f"of {tuple(sizes)})")
            out.append(want - base)
        return tuple(out)


class ConvTranspose1d(ConvTransposeNd):
    """``torch.nn.ConvTranspose1d``: ``[N, C_in, L]`` -> ``[N, C_out, L_out]``."""


class ConvTranspose2d(ConvTransposeNd):
    """``torch.nn.ConvTranspose2d``: ``[N, C_in, H, W]`` -> ``[N, C_out, H_out, W_out]``."""


class ConvTranspose3d(ConvTransposeNd):
    """``torch.nn.ConvTranspose3d``."""


class PReLU(eqx.Module):
    """``torch.nn.PReLU``: ``x if x > 0 else weight * x``; ``weight [num_parameters]``.

    With ``num_parameters > 1`` the weight is per channel, axis 1 of the input;
    an input of fewer than 2 axes has one channel (an error then, as torch).
    """
    weight: jax.Array

    def __call__(self, input: jax.Array) -> jax.Array:
        x = jnp.asarray(input)
        w = self.weight.astype(x.dtype)
        n = w.shape[0]
        if n > 1:
            channels = x.shape[1] if x.ndim >= 2 else 1
            if channels != n:
                raise ValueError(f"PReLU: num_parameters={n} must match the channel size (axis "
                                 f"1 of the input; 1 for an input of fewer than 2 axes), got "
                                 f"shape {tuple(x.shape)}")
            w = w.reshape((n,) + (1,) * (x.ndim - 2))
        else:
            w = w.reshape(())
        return jnp.where(x > 0, x, w * x)


def _conv_padding(m: Any, ctx: Any) -> tuple:
    dims = len(m.kernel_size)
    if isinstance(m.padding, str):
        if m.padding == "valid":
            return ((0, 0),) * dims
        total = [d * (k - 1) for d, k in zip(m.dilation, m.kernel_size)]
        return tuple((t // 2, t - t // 2) for t in total)
    return tuple((int(p), int(p)) for p in m.padding)


def _conv_converter(m: Any, ctx: Any) -> ConvNd:
    cls = {1: Conv1d, 2: Conv2d, 3: Conv3d}[len(m.kernel_size)]
    if m.padding_mode not in ("zeros",) + tuple(_PAD_MODES):
        raise ctx.unsupported(m, f"padding_mode={m.padding_mode!r}")
    return cls(ctx.array(m.weight), ctx.array(m.bias), stride=tuple(m.stride),
               padding=_conv_padding(m, ctx), dilation=tuple(m.dilation), groups=int(m.groups),
               padding_mode=m.padding_mode)


def _conv_transpose_converter(m: Any, ctx: Any) -> ConvTransposeNd:
    cls = {1: ConvTranspose1d, 2: ConvTranspose2d, 3: ConvTranspose3d}[len(m.kernel_size)]
    if m.padding_mode != "zeros":
        raise ctx.unsupported(m, f"padding_mode={m.padding_mode!r} (torch supports only "
                                 f"'zeros' for transposed convolutions)")
    return cls(ctx.array(m.weight), ctx.array(m.bias), stride=tuple(m.stride),
               padding=tuple(int(p) for p in m.padding),
               output_padding=tuple(int(p) for p in m.output_padding),
               dilation=tuple(m.dilation), groups=int(m.groups))


def _register() -> None:
    from ._registry import register_converter
    for d in (1, 2, 3):
        register_converter(f"torch.nn.modules.conv.Conv{d}d")(_conv_converter)
        register_converter(f"torch.nn.modules.conv.ConvTranspose{d}d")(
            _conv_transpose_converter)
    register_converter("torch.nn.modules.activation.PReLU")(
        lambda m, ctx: PReLU(ctx.array(m.weight)))


_register()
