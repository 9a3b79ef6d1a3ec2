"""Where the torch tensors the parity tools make go: to the device of the tensor each is for.

The tools make a few torch tensors of their own: the cotangent (gradient seed) of every
differentiable output, a zero gradient for an input the outputs do not reach, the index
arrays that read a sparse input's gradient at its entries, and the draws
:func:`~torch2jax_ops.parity._random.torch_draws` replays and the keep masks of its
dropout. Each is made on the device :func:`device_of` gives for the tensor it belongs to:
the output's for its cotangent, the input's (or parameter's) for its gradient, the drawing
tensor's for a draw. So a model on a GPU is compared on the GPU, and inputs on mixed devices
(a CPU index next to CUDA features) each keep theirs; autograd refuses a cotangent on
another device than its output ("invalid gradient at index 0 - expected device cuda:0 but
got cpu"). Values go to JAX through :func:`torch2jax_ops.to_jax` (DLPack, on the tensor's
own device) and to the host only to be compared (``_arrays._to_numpy``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["device_of", "tensor_like"]


def device_of(tensor: Any) -> Any:
    """The torch device of what the tools make for ``tensor``: ``tensor``'s own device."""
    return tensor.device


def tensor_like(values: np.ndarray, like: Any) -> Any:
    """``values`` as a torch tensor of ``like``'s dtype on :func:`device_of` ``like``.

    The cast happens on the host, before the move: the rounding is the one the JAX side's
    copy of the same NumPy values gets, whatever the device.
    """
    import torch

    return torch.as_tensor(values).to(dtype=like.dtype).to(device=device_of(like))
