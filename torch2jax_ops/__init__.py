"""torch2jax_ops: the PyTorch / torch_scatter / PyG APIs on JAX, at parity with the originals.

The torch_scatter mirror is importable from here or from
``torch2jax_ops.torch_scatter``. torch itself is never imported by this
package's ops; only ``torch2jax_ops.parity``, the DLPack helpers (``dlpack``)
and the function bridge (``bridge``) import it, when called.
``torch2jax_ops.tree`` holds pytree arithmetic (``tree.weighted_sum``).
The derivative APIs mirror torch's layout: ``torch2jax_ops.autograd``
(``functional.jacobian`` ..., ``Function``) and ``torch2jax_ops.func``
(``grad``, ``vmap``, ``jacrev`` ..., ``nth_grad``, ``jacobian_trace``);
``torch2jax_ops.nn`` names module arrays as torch's ``state_dict`` does.
"""
from importlib.metadata import PackageNotFoundError, version

from . import (
    autograd,
    bridge,
    distributed,
    dlpack,
    dtypes,
    func,
    geometric,
    nn,
    torch_scatter,
    tree,
)
from ._checking import checked
from .bridge import as_jax, as_torch
from .dlpack import shares_memory, to_jax, to_torch, tree_to_jax, tree_to_torch
from .torch_scatter import (
    gather_coo,
    gather_csr,
    scatter,
    scatter_add,
    scatter_log_softmax,
    scatter_logsumexp,
    scatter_max,
    scatter_mean,
    scatter_min,
    scatter_mul,
    scatter_softmax,
    scatter_std,
    scatter_sum,
    segment_add_coo,
    segment_add_csr,
    segment_coo,
    segment_csr,
    segment_max_coo,
    segment_max_csr,
    segment_mean_coo,
    segment_mean_csr,
    segment_min_coo,
    segment_min_csr,
    segment_sum_coo,
    segment_sum_csr,
)

try:
    __version__ = version("torch2jax_ops")
except PackageNotFoundError:  # a checkout on sys.path without an install
    __version__ = "0+unknown"

__all__ = [
    "autograd", "bridge", "distributed", "dlpack", "dtypes", "func", "geometric", "nn",
    "torch_scatter", "tree",
    "checked",
    "scatter", "scatter_sum", "scatter_add", "scatter_mul", "scatter_mean",
    "scatter_min", "scatter_max",
    "segment_csr", "segment_sum_csr", "segment_add_csr", "segment_mean_csr",
    "segment_min_csr", "segment_max_csr", "gather_csr",
    "segment_coo", "segment_sum_coo", "segment_add_coo", "segment_mean_coo",
    "segment_min_coo", "segment_max_coo", "gather_coo",
    "scatter_std", "scatter_logsumexp", "scatter_softmax", "scatter_log_softmax",
    "to_jax", "to_torch", "shares_memory", "tree_to_jax", "tree_to_torch",
    "as_torch", "as_jax",
]
