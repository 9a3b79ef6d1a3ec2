"""torch.nn's pools over 1-3 spatial axes: ``MaxPool``, ``AvgPool``, ``AdaptiveAvgPool``,
``AdaptiveMaxPool`` (1d/2d/3d), channels first as torch: ``[N, C, *spatial]`` or ``[C, *spatial]``.

Every pool is one gather: the windows are computed with numpy from the static
shapes (``floor`` / ``ceil_mode`` output sizes, padding, dilation, torch's
adaptive bins ``[floor(i L / out), ceil((i + 1) L / out))``), the input
entries of each window are gathered (``-inf`` / 0 outside the input) and
reduced. Max pools take the first maximum (NaN wins, as torch), so
``return_indices`` gives torch's indices (flat over the spatial axes of one
channel) and the gradient goes where torch sends it.
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._conv import batch_axis

__all__ = ["MaxPoolNd", "AvgPoolNd", "AdaptivePoolNd", "MaxPool1d", "MaxPool2d", "MaxPool3d",
           "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
           "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
           "pool_windows"]


def _out_size(n: int, k: int, s: int, p: int, d: int, ceil: bool, op: str) -> int:
    span = n + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= n + p:
        out -= 1
    if out < 1:
        raise ValueError(f"{op}: output size is too small (input size {n}, kernel_size {k}, "
                         f"stride {s}, padding {p}, dilation {d})")
    return out


def _axis_windows(n: int, k: int, s: int, p: int, d: int, ceil: bool, op: str) -> tuple:
    """Per output position of one axis: input ids ``[out, k]`` (-1 outside), the window's size
    counting padding (torch's count_include_pad divisor) and counting the input only."""
    out = _out_size(n, k, s, p, d, ceil, op)
    start = np.arange(out) * s - p
    ids = start[:, None] + np.arange(k)[None] * d
    valid = (ids >= 0) & (ids < n)
    with_pad = np.minimum(start + k, n + p) - start
    inside = np.minimum(start + k, n) - np.maximum(start, 0)
    return np.where(valid, ids, -1), with_pad, inside


def _adaptive_windows(n: int, out: int) -> tuple:
    start = (np.arange(out) * n) // out
    end = -((-(np.arange(1, out + 1) * n)) // out)
    k = int((end - start).max())
    ids = start[:, None] + np.arange(k)[None]
    valid = ids < end[:, None]
    size = end - start
    return np.where(valid, ids, -1), size, size


def pool_windows(axes: list) -> tuple:
    """Combine per-axis windows into flat ones: (ids ``[out_flat, K]`` into the flattened
    spatial axes, -1 outside; divisor with padding ``[out_flat]``; divisor inside)."""
    shape = [len(a[0]) for a in axes]
    sizes = [a[0].shape[1] for a in axes]
    flat_ids, pad_div, in_div = [], [], []
    strides = np.cumprod([1] + [a[3] for a in axes][::-1])[:-1][::-1]
    for pos in itertools.product(*(range(s) for s in shape)):
        ids = np.zeros(sizes, np.int64)
        ok = np.ones(sizes, bool)
        for ax, (a, i) in enumerate(zip(axes, pos)):
            row = a[0][i].reshape([-1 if j == ax else 1 for j in range(len(axes))])
            ids = ids + row * strides[ax]
            ok = ok & (row >= 0)
        flat_ids.append(np.where(ok, ids, -1).reshape(-1))
        pad_div.append(math.prod(int(a[1][i]) for a, i in zip(axes, pos)))
        in_div.append(math.prod(int(a[2][i]) for a, i in zip(axes, pos)))
    return np.stack(flat_ids), np.asarray(pad_div), np.asarray(in_div), tuple(shape)


def _gather(x: jax.Array, dims: int, ids: np.ndarray, fill: Any) -> jax.Array:
    """``x [N, C, *spatial]`` -> ``[N, C, out_flat, K]`` (``fill`` where ids are -1)."""
    flat = x.reshape(x.shape[:2] + (-1,))
    safe = np.where(ids < 0, 0, ids)
    g = flat[..., safe]
    return jnp.where(jnp.asarray(ids >= 0), g, jnp.asarray(fill, x.dtype))


def _prepare(input: Any, dims: int, op: str) -> tuple:
    return batch_axis(input, dims, op=op)


def _max_reduce(x: jax.Array, dims: int, ids: np.ndarray, shape: tuple, batched: bool,
                return_indices: bool) -> Any:
    g = _gather(x, dims, ids, -jnp.inf)
    # the first maximum, NaN first (torch's `val > max || isnan(val)`)
    key = jnp.where(jnp.isnan(g), jnp.inf, g)
    best = jnp.argmax(jax.lax.stop_gradient(key), axis=-1)
    out = jnp.take_along_axis(g, best[..., None], axis=-1)[..., 0]
    out = out.reshape(out.shape[:2] + shape)
    if not batched:
        out = out[0]
    if not return_indices:
        return out
    index = jnp.asarray(ids)[jnp.arange(ids.shape[0])[None, None], best]
    index = index.reshape(index.shape[:2] + shape)
    return out, (index if batched else index[0])


def _tuple(v: Any, dims: int) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * dims


class MaxPoolNd(eqx.Module):
    """``torch.nn.MaxPool{1,2}d``: ``kernel_size``, ``stride``, ``padding`` (-inf),
    ``dilation``, ``ceil_mode``, ``return_indices`` (then ``(out, indices)``)."""
    kernel_size: tuple = eqx.field(static=True)
    stride: tuple = eqx.field(static=True)
    padding: tuple = eqx.field(static=True)
    dilation: tuple = eqx.field(static=True)
    ceil_mode: bool = eqx.field(static=True, default=False)
    return_indices: bool = eqx.field(static=True, default=False)

    def __call__(self, input: jax.Array) -> Any:
        dims = len(self.kernel_size)
        op = f"MaxPool{dims}d"
        x, batched = _prepare(input, dims, op)
        for k, p in zip(self.kernel_size, self.padding):
            if p > k // 2:
                raise ValueError(f"{op}: pad should be at most half of effective kernel size, "
                                 f"but got pad={p} and kernel_size={k}")
        axes = [(*_axis_windows(n, k, s, p, d, self.ceil_mode, op), n)
                for n, k, s, p, d in zip(x.shape[2:], self.kernel_size, self.stride,
                                         self.padding, self.dilation)]
        ids, _, _, shape = pool_windows(axes)
        return _max_reduce(x, dims, ids, shape, batched, self.return_indices)


class AvgPoolNd(eqx.Module):
    """``torch.nn.AvgPool{1,2}d``: ``ceil_mode``, ``count_include_pad`` (the divisor counts
    the zero padding, never the ceil-mode overhang), ``divisor_override``."""
    kernel_size: tuple = eqx.field(static=True)
    stride: tuple = eqx.field(static=True)
    padding: tuple = eqx.field(static=True)
    ceil_mode: bool = eqx.field(static=True, default=False)
    count_include_pad: bool = eqx.field(static=True, default=True)
    divisor_override: Optional[int] = eqx.field(static=True, default=None)

    def __call__(self, input: jax.Array) -> jax.Array:
        dims = len(self.kernel_size)
        op = f"AvgPool{dims}d"
        x, batched = _prepare(input, dims, op)
        for k, p in zip(self.kernel_size, self.padding):
            if p > k // 2:
                raise ValueError(f"{op}: pad should be at most half of kernel size, but got "
                                 f"pad={p} and kernel_size={k}")
        axes = [(*_axis_windows(n, k, s, p, 1, self.ceil_mode, op), n)
                for n, k, s, p in zip(x.shape[2:], self.kernel_size, self.stride, self.padding)]
        ids, with_pad, inside, shape = pool_windows(axes)
        total = jnp.sum(_gather(x, dims, ids, 0), axis=-1)
        if self.divisor_override:
            div = np.full(with_pad.shape, self.divisor_override)
        else:
            div = with_pad if self.count_include_pad else inside
        out = (total / jnp.asarray(div, x.dtype)).reshape(x.shape[:2] + shape)
        return out if batched else out[0]


class AdaptivePoolNd(eqx.Module):
    """``torch.nn.Adaptive{Avg,Max}Pool{1,2}d``: ``output_size`` bins per axis (None keeps the
    input's size), bin ``i`` covering ``[floor(i L / out), ceil((i + 1) L / out))``."""
    output_size: tuple = eqx.field(static=True)
    mode: str = eqx.field(static=True, default="avg")
    return_indices: bool = eqx.field(static=True, default=False)

    def __call__(self, input: jax.Array) -> Any:
        dims = len(self.output_size)
        op = f"Adaptive{self.mode.capitalize()}Pool{dims}d"
        x, batched = _prepare(input, dims, op)
        sizes = [n if o is None else int(o) for n, o in zip(x.shape[2:], self.output_size)]
        for n, o in zip(x.shape[2:], sizes):
            if n == 0 or o <= 0:
                raise ValueError(f"{op}: input spatial sizes {tuple(x.shape[2:])} and "
                                 f"output_size {self.output_size} must be positive")
        axes = [(*_adaptive_windows(n, o), n) for n, o in zip(x.shape[2:], sizes)]
        ids, size, _, shape = pool_windows(axes)
        if self.mode == "max":
            return _max_reduce(x, dims, ids, shape, batched, self.return_indices)
        total = jnp.sum(_gather(x, dims, ids, 0), axis=-1)
        out = (total / jnp.asarray(size, x.dtype)).reshape(x.shape[:2] + shape)
        return out if batched else out[0]


class MaxPool1d(MaxPoolNd):
    """``torch.nn.MaxPool1d``: ``[N, C, L]`` -> ``[N, C, L_out]``."""


class MaxPool2d(MaxPoolNd):
    """``torch.nn.MaxPool2d``: ``[N, C, H, W]`` -> ``[N, C, H_out, W_out]``."""


class MaxPool3d(MaxPoolNd):
    """``torch.nn.MaxPool3d``: ``[N, C, D, H, W]`` -> ``[N, C, D_out, H_out, W_out]``."""


class AvgPool1d(AvgPoolNd):
    """``torch.nn.AvgPool1d``."""


class AvgPool2d(AvgPoolNd):
    """``torch.nn.AvgPool2d``."""


class AvgPool3d(AvgPoolNd):
    """``torch.nn.AvgPool3d``."""


class AdaptiveAvgPool1d(AdaptivePoolNd):
    """``torch.nn.AdaptiveAvgPool1d``."""


class AdaptiveAvgPool2d(AdaptivePoolNd):
    """``torch.nn.AdaptiveAvgPool2d``."""


class AdaptiveMaxPool1d(AdaptivePoolNd):
    """``torch.nn.AdaptiveMaxPool1d``."""


class AdaptiveMaxPool2d(AdaptivePoolNd):
    """``torch.nn.AdaptiveMaxPool2d``."""


class AdaptiveAvgPool3d(AdaptivePoolNd):
    """``torch.nn.AdaptiveAvgPool3d``."""


class AdaptiveMaxPool3d(AdaptivePoolNd):
    """``torch.nn.AdaptiveMaxPool3d``."""


def _dims(m: Any) -> int:
    return int(type(m).__name__[-2])


def _max_pool(m: Any, ctx: Any) -> MaxPoolNd:
    dims = _dims(m)
    cls = {1: MaxPool1d, 2: MaxPool2d, 3: MaxPool3d}[dims]
    stride = m.stride if m.stride is not None else m.kernel_size
    return cls(_tuple(m.kernel_size, dims), _tuple(stride, dims), _tuple(m.padding, dims),
               _tuple(m.dilation, dims), bool(m.ceil_mode), bool(m.return_indices))


def _avg_pool(m: Any, ctx: Any) -> AvgPoolNd:
    dims = _dims(m)
    cls = {1: AvgPool1d, 2: AvgPool2d, 3: AvgPool3d}[dims]
    stride = m.stride if m.stride is not None else m.kernel_size
    return cls(_tuple(m.kernel_size, dims), _tuple(stride, dims), _tuple(m.padding, dims),
               bool(m.ceil_mode), bool(m.count_include_pad),
               getattr(m, "divisor_override", None))


def _adaptive(m: Any, ctx: Any) -> AdaptivePoolNd:
    name = type(m).__name__
    dims = _dims(m)
    mode = "max" if "Max" in name else "avg"
    cls = {("avg", 1): AdaptiveAvgPool1d, ("avg", 2): AdaptiveAvgPool2d,
           ("avg", 3): AdaptiveAvgPool3d, ("max", 1): AdaptiveMaxPool1d,
           ("max", 2): AdaptiveMaxPool2d, ("max", 3): AdaptiveMaxPool3d}[(mode, dims)]
    return cls(_tuple(m.output_size, dims), mode, bool(getattr(m, "return_indices", False)))


def _register() -> None:
    from ._registry import register_converter
    for d in (1, 2, 3):
        register_converter(f"torch.nn.modules.pooling.MaxPool{d}d")(_max_pool)
        register_converter(f"torch.nn.modules.pooling.AvgPool{d}d")(_avg_pool)
        register_converter(f"torch.nn.modules.pooling.AdaptiveAvgPool{d}d")(_adaptive)
        register_converter(f"torch.nn.modules.pooling.AdaptiveMaxPool{d}d")(_adaptive)


_register()
