"""torch.nn's padding layers (``ZeroPad``, ``ConstantPad``, ``ReflectionPad``,
``ReplicationPad``, ``CircularPad``, 1d/2d/3d) as one equinox module, :class:`Pad`."""
from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

__all__ = ["Pad", "ConstantPad"]

_MODES = {"Zero": "constant", "Constant": "constant", "Reflection": "reflect",
          "Replication": "edge", "Circular": "wrap"}


class Pad(eqx.Module):
    """A torch padding layer: ``padding`` in torch's order (last axis first, ``(left, right,
    top, bottom, ...)``), ``mode`` numpy's (``constant``, ``reflect``, ``edge``, ``wrap``).

    The input is ``[N, C, *spatial]`` or ``[C, *spatial]``; the last
    ``len(padding) / 2`` axes are padded. Negative padding crops, as torch.
    """
    padding: tuple = eqx.field(static=True)
    mode: str = eqx.field(static=True, default="constant")
    value: float = eqx.field(static=True, default=0.0)

    def __call__(self, input: jax.Array) -> jax.Array:
        x = jnp.asarray(input)
        n = len(self.padding) // 2
        if x.ndim < n + 1:
            raise ValueError(f"Pad: padding {self.padding} pads {n} axes; expected an input of "
                             f"at least {n + 1} axes, got shape {tuple(x.shape)}")
        pairs = [(0, 0)] * (x.ndim - n) + [
            (self.padding[2 * i], self.padding[2 * i + 1]) for i in reversed(range(n))]
        crop = tuple(slice(max(-lo, 0), s - max(-hi, 0)) for (lo, hi), s in zip(pairs, x.shape))
        x = x[crop]
        grow = [(max(lo, 0), max(hi, 0)) for lo, hi in pairs]
        if self.mode == "constant":
            return jnp.pad(x, grow, constant_values=jnp.asarray(self.value, x.dtype))
        return jnp.pad(x, grow, mode=self.mode)


class ConstantPad(Pad):
    """``torch.nn.ConstantPad{1,2,3}d`` / ``ZeroPad{1,2,3}d``: :class:`Pad` with ``value``."""


def _pad(m: Any, ctx: Any) -> Pad:
    kind = type(m).__name__[:-len("Pad1d")]
    mode = _MODES[kind]
    padding = tuple(int(p) for p in m.padding)
    if mode == "constant":
        return ConstantPad(padding, mode, float(getattr(m, "value", 0.0)))
    return Pad(padding, mode)


def _register() -> None:
    from ._registry import register_converter
    for kind in _MODES:
        for d in (1, 2, 3):
            register_converter(f"torch.nn.modules.padding.{kind}Pad{d}d")(_pad)


_register()
