"""``torch_geometric.nn.norm`` on JAX: PyG's normalisation layers.

Each takes PyG's call (``x``, and ``batch`` / ``batch_size`` for the graph-wise
norms: under ``jax.jit`` pass ``batch_size`` with a ``batch``, and graph id
``batch_size`` marks padding nodes) and has PyG's parameter and buffer names.
"""
from ._batch_norm import BatchNorm
from ._diff_group_norm import DiffGroupNorm
from ._graph_norm import GraphNorm, GraphSizeNorm, MeanSubtractionNorm
from ._hetero_batch_norm import HeteroBatchNorm
from ._instance_norm import InstanceNorm
from ._layer_norm import LayerNorm
from ._message_norm import MessageNorm
from ._pair_norm import PairNorm

__all__ = ["BatchNorm", "InstanceNorm", "LayerNorm", "GraphNorm", "GraphSizeNorm", "PairNorm",
           "MeanSubtractionNorm", "MessageNorm", "DiffGroupNorm", "HeteroBatchNorm"]
