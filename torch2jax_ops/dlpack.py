"""Tensors between torch and JAX over DLPack, zero-copy where the protocol allows.

``to_jax(tensor)`` and ``to_torch(array)`` share the buffer whenever they can
(check with :func:`shares_memory`). When sharing is impossible they copy, or,
with ``copy=False``, raise an error that says why:

* a tensor that requires grad is detached (never an error);
* non-compact strides (``t[:, ::2]``, ``expand``) need a compact copy;
* a CPU buffer not aligned to 64 bytes would be copied by JAX anyway;
* int64 / float64 / complex128 while JAX's 64-bit mode is off: JAX would
  silently downcast; here it is an error unless ``allow_downcast=True``, which
  still refuses integer values that do not fit in int32;
* conjugate / negative bit views are resolved (a copy).

A shared buffer is shared both ways: an in-place torch op on the tensor
changes the JAX array. Pass ``copy=True`` for an independent array.
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from . import dtypes

__all__ = ["to_jax", "to_torch", "shares_memory"]

def _is_compact(t) -> bool:
    """Strides are a permutation of a dense layout (transposes are fine)."""
    if t.numel() <= 1:
        return True
    dims = sorted((s, n) for s, n in zip(t.stride(), t.shape) if n != 1)
    expected = 1
    for stride, size in dims:
        if stride != expected:
            return False
        expected *= size
    return True


def to_jax(tensor: Any, *, copy: Optional[bool] = None, allow_downcast: bool = False) -> jax.Array:
    """A torch tensor as a JAX array, sharing its memory when possible.

    Args:
      tensor: any torch tensor (requires_grad is fine: it is detached).
      copy: None = share if possible, else copy; True = always an independent
        copy; False = share or raise ValueError saying why not.
      allow_downcast: with JAX's 64-bit mode off, convert int64/float64/
        complex128 to their 32-bit types (a copy); integers that do not fit
        raise OverflowError. Without it such tensors raise TypeError.
    """
    import torch

    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"to_jax: expected a torch.Tensor, got {type(tensor).__name__}")
    t = tensor.detach()
    if t.is_conj():
        if copy is False:
            raise ValueError("to_jax: a conjugate-bit tensor cannot be shared; "
                             "call tensor.resolve_conj() or pass copy=None")
        t = t.resolve_conj()
    if t.is_neg():
        if copy is False:
            raise ValueError("to_jax: a negative-bit tensor cannot be shared; "
                             "call tensor.resolve_neg() or pass copy=None")
        t = t.resolve_neg()
    name = dtypes.name_of(t.dtype)
    if dtypes.needs_x64(name) and not jax.config.jax_enable_x64:
        if not allow_downcast:
            raise TypeError(
                f"to_jax: a {name} tensor needs JAX's 64-bit mode, which is off; JAX would "
                f"silently downcast it. Enable it (jax.config.update('jax_enable_x64', True)) "
                f"or pass allow_downcast=True to convert to {dtypes.X64_DOWNCAST[name]}")
        if copy is False:
            raise ValueError(f"to_jax: downcasting {name} makes a copy, but copy=False")
        if name == "int64" and t.numel():
            lo, hi = int(t.min()), int(t.max())
            info = np.iinfo(np.int32)
            if lo < info.min or hi > info.max:
                raise OverflowError(
                    f"to_jax: int64 values in [{lo}, {hi}] do not fit in int32; "
                    f"enable jax_enable_x64 instead of allow_downcast")
        t = t.to(dtypes.torch_dtype(dtypes.X64_DOWNCAST[name]))
    if not _is_compact(t):
        if copy is False:
            raise ValueError(f"to_jax: strides {tuple(t.stride())} for shape {tuple(t.shape)} "
                             f"have gaps or repeats (a slice with a step, or expand); DLPack "
                             f"cannot share them. Pass copy=None to copy, or .contiguous() it")
        t = t.contiguous()
    if copy:
        t = t.clone(memory_format=torch.contiguous_format)
    if t.device.type == "cpu" and t.numel() and t.data_ptr() % 64:
        if copy is False:
            raise ValueError("to_jax: the CPU buffer is not 64-byte aligned, so JAX would copy "
                             "it; pass copy=None, or allocate the tensor with torch")
        t = t.clone(memory_format=torch.contiguous_format)
    return jax.dlpack.from_dlpack(t)


def to_torch(array: Any, *, copy: Optional[bool] = None):
    """A JAX array as a torch tensor, sharing its memory (``copy=True`` for a copy)."""
    import torch

    if isinstance(array, jax.core.Tracer):
        raise TypeError("to_torch: got a traced value (inside jax.jit / grad / vmap); torch can "
                        "only take concrete arrays. Convert outside the transformed function, "
                        "or use torch2jax_ops.bridge.as_jax to call torch from JAX")
    array = jnp.asarray(array)
    tensor = torch.from_dlpack(array)
    return tensor.clone() if copy else tensor


def shares_memory(tensor: Any, array: Any) -> bool:
    """True when the torch tensor and the JAX array use the same buffer."""
    if tensor.numel() == 0:
        return False
    return tensor.data_ptr() == array.unsafe_buffer_pointer()
