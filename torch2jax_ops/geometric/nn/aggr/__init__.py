"""``torch_geometric.nn.aggr`` on JAX: aggregations usable as ``aggr=`` of the MessagePassing base.

An aggregation is called as PyG's: ``aggr(x, index=None, ptr=None, dim_size=None, dim=-2)``
(``x`` ``[..., E, ...]`` with the elements along ``dim``, ``index`` ``[E]`` their
group ids, or ``ptr`` CSR offsets) -> ``[..., dim_size, ...]``. Each has PyG's
numerics and parameter names (``t``, ``p``, ``aggrs.0...``, ``lstm.weight_ih_l0``
...) and a ``from_torch`` converter; a PyG layer built with ``aggr=<module>``
(or a name such as ``"softmax"``, ``"std"``, a list of names) converts with its
aggregation as ``aggr_module``. Under ``jax.jit`` pass ``dim_size`` with ``index``.
"""
from ._attention import AttentionalAggregation
from ._base import Aggregation
from ._lcm import LCMAggregation
from ._basic import (
                     MaxAggregation,
                     MeanAggregation,
                     MinAggregation,
                     MulAggregation,
                     PowerMeanAggregation,
                     SoftmaxAggregation,
                     StdAggregation,
                     SumAggregation,
                     VarAggregation,
)
from ._multi import MultiAggregation
from ._scaler import DegreeScalerAggregation
from ._set2set import Set2Set

__all__ = ["Aggregation", "LCMAggregation", "SumAggregation", "MeanAggregation", "MaxAggregation",
           "MinAggregation", "MulAggregation", "VarAggregation", "StdAggregation",
           "SoftmaxAggregation", "PowerMeanAggregation", "MultiAggregation",
           "DegreeScalerAggregation", "AttentionalAggregation", "Set2Set"]
