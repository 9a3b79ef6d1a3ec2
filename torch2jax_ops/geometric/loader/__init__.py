"""PyG loaders to jitted JAX training: :class:`JaxLoader` wraps any loader of ``Data`` /
``Batch`` (``DataLoader``, ``NeighborLoader``, ``LinkNeighborLoader``, ``ClusterLoader``,
a list) and yields :class:`~torch2jax_ops.geometric.PaddedGraph`\\ s padded to a
:class:`~torch2jax_ops.geometric.BucketLadder` (one compilation per level), prepared
and placed on the device by a background thread while the step runs.
"""
from ._loader import EpochStats, JaxLoader, LadderWarning

__all__ = ["JaxLoader", "EpochStats", "LadderWarning"]
