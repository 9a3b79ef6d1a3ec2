"""The matmul precision both libraries run at while a torch function and its port compare.

``"highest"`` pins full float32 on both sides for the block and then gives the user's
settings back. On JAX's side that is ``jax.default_matmul_precision("highest")``. On torch's
it is every switch that lets float32 matmuls and convolutions run in TF32 (or bfloat16):
the legacy ones (``torch.backends.cuda.matmul.allow_tf32``,
``torch.backends.cudnn.allow_tf32``, ``torch.set_float32_matmul_precision``) and, where
torch has them (2.9 on), the per-backend ``fp32_precision`` settings that those legacy
switches now write through (``torch.backends.cuda.matmul.fp32_precision``,
``torch.backends.cudnn.conv`` / ``.rnn``, ``torch.backends.mkldnn.*``). Both kinds are set,
so torch's checks that the two agree pass inside the block, and both are given back after
it, in that order (a legacy setter writes some per-backend values, which are then put back
exactly). A user's TF32 setting therefore holds again after the comparison, and the
comparison itself never runs in TF32.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Iterator, Optional

import jax

from ._arrays import ParityError

__all__ = ["PRECISIONS", "matmul_precision"]


#: matmul precisions ``compare`` accepts: ``"highest"`` (the default: full float32 on both
#: sides, no TF32), or ``"default"`` (each library's own default: JAX uses TF32 on NVIDIA
#: GPUs, torch does not unless ``torch.backends.cuda.matmul.allow_tf32`` is set).
PRECISIONS = ("highest", "default")

#: torch's per-backend float32 precision settings (torch >= 2.9), parents before children:
#: ``"none"`` in a child means "as the parent" (``(backend, "all")``, then ``generic``).
_FP32_KEYS = (("generic", "all"), ("cuda", "all"), ("mkldnn", "all"),
              ("cuda", "matmul"), ("cuda", "conv"), ("cuda", "rnn"),
              ("mkldnn", "matmul"), ("mkldnn", "conv"), ("mkldnn", "rnn"))


@dataclasses.dataclass
class TorchPrecision:
    """torch's float32 precision switches as read before a comparison (to give back)."""
    #: ``torch.get_float32_matmul_precision()``: "highest", "high" or "medium"; None when
    #: torch refuses to read it (the user mixed the legacy and the per-backend settings)
    matmul: Optional[str]
    #: ``torch.backends.cudnn.allow_tf32``; None when torch refuses to read it (as above)
    cudnn_tf32: Optional[bool]
    #: ``(backend, op) -> fp32_precision`` for the keys this torch has (as torch reads them:
    #: a child that is "none" reads as the parent it follows)
    fp32: dict


def read_torch_precision(torch: Any) -> TorchPrecision:
    """torch's float32 precision switches now (never raising for a state torch allows)."""
    matmul = _try(torch.get_float32_matmul_precision)
    cudnn = _try(lambda: bool(torch.backends.cudnn.allow_tf32))
    fp32 = {}
    getter = getattr(torch._C, "_get_fp32_precision_getter", None)
    if getter is not None:
        for key in _FP32_KEYS:
            value = _try(lambda key=key: getter(*key))
            if value is not None:
                fp32[key] = value
    return TorchPrecision(matmul, cudnn, fp32)


def set_torch_highest(torch: Any) -> None:
    """Full float32 in every torch matmul and convolution: no TF32, no bfloat16 passes."""
    torch.set_float32_matmul_precision("highest")  # also cuda.matmul.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    setter = getattr(torch._C, "_set_fp32_precision_setter", None)
    if setter is not None:
        for backend, op in _FP32_KEYS:
            if op != "all":  # every leaf explicitly: a user's "tf32" parent is not inherited
                _try(lambda b=backend, o=op: setter(b, o, "ieee"))


def restore_torch_precision(torch: Any, saved: TorchPrecision) -> None:
    """Give back what :func:`read_torch_precision` read: the legacy switches first (their
    setters write some per-backend values), then every per-backend value as it was.

    A value torch refused to read (mixed legacy and new settings) goes back to torch's own
    default ("highest"; cuDNN TF32 on); the per-backend values that follow then restore
    what that user actually set. A child whose value equals its parent's goes back to
    "none" (following the parent), as a child nobody set reads.
    """
    torch.set_float32_matmul_precision(saved.matmul or "highest")
    torch.backends.cudnn.allow_tf32 = True if saved.cudnn_tf32 is None else saved.cudnn_tf32
    setter = getattr(torch._C, "_set_fp32_precision_setter", None)
    if setter is None:
        return
    for (backend, op), value in saved.fp32.items():
        parent = (backend, "all") if op != "all" else ("generic", "all")
        inherited = saved.fp32.get(parent) if backend != "generic" else None
        _try(lambda b=backend, o=op, v=("none" if value == inherited else value): setter(b, o, v))


def _try(read: Any) -> Any:
    """``read()``, or None where torch refuses (an unknown key, mixed legacy/new settings)."""
    try:
        return read()
    except (RuntimeError, ValueError, TypeError):
        return None


@contextlib.contextmanager
def matmul_precision(precision: str) -> Iterator[None]:
    """Both libraries at ``precision`` for the block (see :data:`PRECISIONS`)."""
    if precision not in PRECISIONS:
        raise ParityError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision == "default":
        yield
        return
    import torch

    saved = read_torch_precision(torch)
    try:
        set_torch_highest(torch)
        with jax.default_matmul_precision("highest"):
            yield
    finally:
        restore_torch_precision(torch, saved)
