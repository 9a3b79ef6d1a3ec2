"""torch2jax_ops: the PyTorch / torch_scatter / PyG APIs on JAX, at parity with the originals.

The torch_scatter mirror is importable from here or from
``torch2jax_ops.torch_scatter``. torch itself is never imported by this
package's ops; only ``torch2jax_ops.parity`` (and the DLPack helpers) need it.
"""
from .checking import checked
from .torch_scatter import (scatter, scatter_add, scatter_max, scatter_mean, scatter_min,
                            scatter_mul, scatter_sum)

__version__ = "0.1.0"

__all__ = [
    "checked",
    "scatter", "scatter_sum", "scatter_add", "scatter_mul", "scatter_mean",
    "scatter_min", "scatter_max",
]
