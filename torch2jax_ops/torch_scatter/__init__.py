"""The torch_scatter API on JAX.

Port ``from torch_scatter import scatter`` as
``from torch2jax_ops.torch_scatter import scatter`` (or from ``torch2jax_ops``).
One private module per op family, as in torch_scatter: ``_scatter`` (scatter,
scatter_*), ``_segment_csr``, ``_segment_coo`` and ``_composite`` (std,
logsumexp, softmax, log_softmax), all on the shared planner ``_groups`` with
its argument checks (``_validate``) and gathers (``_gather``).
"""
from ._composite import scatter_log_softmax, scatter_logsumexp, scatter_softmax, scatter_std
from ._scatter import (scatter, scatter_add, scatter_max, scatter_mean, scatter_min, scatter_mul,
                       scatter_sum)
from ._segment_coo import (gather_coo, segment_add_coo, segment_coo, segment_max_coo,
                           segment_mean_coo, segment_min_coo, segment_sum_coo)
from ._segment_csr import (gather_csr, segment_add_csr, segment_csr, segment_max_csr,
                           segment_mean_csr, segment_min_csr, segment_sum_csr)

__all__ = [
    "scatter", "scatter_sum", "scatter_add", "scatter_mul", "scatter_mean",
    "scatter_min", "scatter_max",
    "segment_csr", "segment_sum_csr", "segment_add_csr", "segment_mean_csr",
    "segment_min_csr", "segment_max_csr", "gather_csr",
    "segment_coo", "segment_sum_coo", "segment_add_coo", "segment_mean_coo",
    "segment_min_coo", "segment_max_coo", "gather_coo",
    "scatter_std", "scatter_logsumexp", "scatter_softmax", "scatter_log_softmax",
]
