"""The torch_scatter API on JAX.

Port ``from torch_scatter import scatter`` as
``from torch2jax_ops.torch_scatter import scatter`` (or from ``torch2jax_ops``).
"""
from .scatter_reduce import (REDUCTIONS, scatter, scatter_add, scatter_max, scatter_mean,
                             scatter_min, scatter_mul, scatter_sum)

__all__ = ["scatter", "scatter_sum", "scatter_add", "scatter_mul", "scatter_mean",
           "scatter_min", "scatter_max", "REDUCTIONS"]
