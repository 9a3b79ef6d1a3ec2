"""PyG data on the JAX side: :func:`from_pyg` turns a ``Data`` / ``Batch`` into a
:class:`~torch2jax_ops.geometric.PaddedGraph` of JAX arrays, sharing the tensors
with torch over DLPack (ids become int32, checked; every other attribute lands
in ``extras``); a ``HeteroData`` becomes a :class:`HeteroGraph` (per-type dicts,
padded per type by :func:`pad_hetero` to a :class:`HeteroLadder`). For fixed shapes over a whole loader, see
:class:`torch2jax_ops.geometric.loader.JaxLoader`.
"""
from ._from_pyg import from_pyg
from ._hetero import HeteroGraph, HeteroLadder, pad_hetero

__all__ = ["from_pyg", "HeteroGraph", "HeteroLadder", "pad_hetero"]
