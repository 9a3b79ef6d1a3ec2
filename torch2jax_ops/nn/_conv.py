"""torch.nn's convolutions ``Conv1d/2d/3d`` and ``PReLU`` as equinox modules.

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

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvNd", "PReLU"]

_PAD_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


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
        x = jnp.asarray(input)
        if x.ndim not in (dims + 1, dims + 2):
            raise ValueError(f"{op}: expected {dims + 1}-D (unbatched) or {dims + 2}-D (batched) "
                             f"input, got shape {tuple(x.shape)}")
        batched = x.ndim == dims + 2
        if not batched:
            x = x[None]
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


def _register() -> None:
    from ._registry import register_converter
    for d in (1, 2, 3):
        register_converter(f"torch.nn.modules.conv.Conv{d}d")(_conv_converter)
    register_converter("torch.nn.modules.activation.PReLU")(
        lambda m, ctx: PReLU(ctx.array(m.weight)))


_register()
