"""The matmul precision both libraries run at while a torch function and its port compare."""
from __future__ import annotations

import contextlib
from typing import Iterator

import jax

from ._arrays import ParityError

__all__ = ["PRECISIONS", "matmul_precision"]


#: matmul precisions ``compare`` accepts: ``"highest"`` (the default: full float32 on both
#: sides, no TF32), or ``"default"`` (each library's own default: JAX uses TF32 on NVIDIA
#: GPUs, torch does not unless ``torch.backends.cuda.matmul.allow_tf32`` is set).
PRECISIONS = ("highest", "default")


@contextlib.contextmanager
def matmul_precision(precision: str) -> Iterator[None]:
    """Both libraries at ``precision`` for the block (see :data:`PRECISIONS`)."""
    if precision not in PRECISIONS:
        raise ParityError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision == "default":
        yield
        return
    import torch

    cuda = torch.backends.cuda.matmul
    saved = (cuda.allow_tf32, torch.backends.cudnn.allow_tf32)
    cuda.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        with jax.default_matmul_precision("highest"):
            yield
    finally:
        cuda.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
