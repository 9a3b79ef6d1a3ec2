"""Side-by-side parity tooling: compare a torch function with its JAX port.

Needs torch installed (``pip install torch2jax_ops[parity]``)::

    from torch2jax_ops.parity import compare, assert_parity
    result = compare(torch_scatter.scatter_max, torch2jax_ops.scatter_max, src, index)
    print(result)            # a table: every output and gradient, errors vs tolerance
"""
from ._arrays import LeafResult, ParityError, ParityResult, compare_arrays
from ._compare import assert_parity, compare
from ._deviations import DEVIATIONS, Deviation, deviations_of
from ._modules import assert_modules_parity, compare_modules, compare_weights

__all__ = ["compare", "assert_parity", "compare_modules", "assert_modules_parity", "compare_weights",
           "compare_arrays", "ParityResult", "LeafResult",
           "ParityError", "DEVIATIONS", "Deviation", "deviations_of"]
