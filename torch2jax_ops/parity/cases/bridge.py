"""Parity cases for the function bridge: gradients through ``as_torch`` / ``as_jax``.

* ``as_torch(layer)``: torch autograd through ``as_torch(layer_jax)`` vs
  ``jax.vjp`` of ``layer_jax``.
* ``as_jax(layer)``: torch autograd of ``layer_torch`` vs ``jax.vjp`` through
  ``as_jax(layer_torch)``.
* ``as_jax(torch_scatter.scatter_mean)``: the real op called from JAX, with
  int32 and int64 indices.
"""
from __future__ import annotations

from typing import Iterable

import jax.numpy as jnp
import numpy as np

from torch2jax_ops import dtypes
from torch2jax_ops.parity._suite import Case, register

FLOATS = ("float16", "bfloat16", "float32", "float64")


def layer_jax(x, w, b):
    return jnp.tanh(x @ w + b) * x[:, :1]


def layer_torch(x, w, b):
    import torch

    return torch.tanh(x @ w + b) * x[:, :1]


def _inputs(dtype: str, seed: int):
    import torch

    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(shape, generator=gen, dtype=torch.float64)
                 .to(dtypes.torch_dtype(dtype)) for shape in ((6, 3), (3, 5), (5,)))


@register("bridge")
def layer_cases() -> Iterable[Case]:
    from torch2jax_ops.bridge import as_jax, as_torch

    for dtype in FLOATS:
        # half gradients are sums over rows of O(1) products: the two sides' rounding (XLA
        # fuses differently inside and outside the bridge; CPUs with AVX512-FP16 keep float16
        # intermediates) moves a cancelled entry by an ulp of its terms, so compare norm-wise
        options = {"normwise": True} if dtype in ("float16", "bfloat16") else {}

        def through_torch(dtype=dtype, options=options):
            return as_torch(layer_jax), layer_jax, _inputs(dtype, 0), {}, options

        def through_jax(dtype=dtype, options=options):
            return layer_torch, as_jax(layer_torch), _inputs(dtype, 1), {}, options

        yield Case("bridge", "as_torch(layer)", dtype, "tanh-linear", through_torch)
        yield Case("bridge", "as_jax(layer)", dtype, "tanh-linear", through_jax)


@register("bridge")
def torch_scatter_cases() -> Iterable[Case]:
    from torch2jax_ops.bridge import as_jax

    for index_dtype in ("int32", "int64"):
        for dtype in ("float32", "float64"):
            def build(dtype=dtype, index_dtype=index_dtype):
                import torch
                import torch_scatter

                rng = np.random.default_rng(7)
                src = torch.tensor(rng.normal(size=(12, 4))).to(dtypes.torch_dtype(dtype))
                index = torch.tensor(rng.integers(0, 5, 12)).to(dtypes.torch_dtype(index_dtype))

                def theirs(s, i):
                    return torch_scatter.scatter_mean(s, i.long(), dim=0, dim_size=5)

                return theirs, as_jax(theirs), (src, index), {}, {}

            label = f"index-{index_dtype}"
            yield Case("bridge", "as_jax(torch_scatter.scatter_mean)", dtype, label, build)
