"""The graph layer's entries of the fx mapping table: PyG's functions and torch_scatter's ops.

A forward that calls ``torch_geometric.nn.global_mean_pool``,
``torch_geometric.utils.softmax`` or ``torch_scatter.scatter`` is replayed with
the ports here (registered under every path PyG exposes them by). The PyG
utilities whose output size depends on the data (``remove_self_loops``,
``add_remaining_self_loops``, ``gcn_norm``) give PyG's exact result on
concrete arrays; under ``jax.jit`` they give their static forms, whose
deleted edges sit in the dropped slot that every op here ignores.
"""
from __future__ import annotations

from typing import Any, Optional

from .. import torch_scatter as _torch_scatter
from .._checking import is_traced
from .._dtypes import canonical_jax_dtype
from ..nn import register_function
from ._dense import to_dense_batch
from ._loops import (add_remaining_self_loops, add_remaining_self_loops_static, add_self_loops,
                     remove_self_loops)
from ._norm import degree, gcn_norm, gcn_norm_static
from ._pool import global_add_pool, global_max_pool, global_mean_pool
from ._scatter import scatter
from ._softmax import softmax

__all__: list = []

for _name in _torch_scatter.__all__:
    register_function(f"torch_scatter.{_name}")(getattr(_torch_scatter, _name))

for _fn in (global_add_pool, global_mean_pool, global_max_pool):
    register_function(*(f"torch_geometric.nn.{where}{_fn.__name__}"
                        for where in ("", "pool.", "pool.glob.")))(_fn)

register_function("torch_geometric.utils.scatter", "torch_geometric.utils._scatter.scatter",
                  "torch_geometric.nn.aggr.base.scatter")(scatter)
register_function("torch_geometric.utils.softmax", "torch_geometric.utils._softmax.softmax")(
    softmax)
register_function("torch_geometric.utils.to_dense_batch",
                  "torch_geometric.utils._to_dense_batch.to_dense_batch")(to_dense_batch)
register_function("torch_geometric.utils.add_self_loops",
                  "torch_geometric.utils.loop.add_self_loops")(add_self_loops)


@register_function("torch_geometric.utils.degree", "torch_geometric.utils._degree.degree")
def _degree(index: Any, num_nodes: Optional[int] = None, dtype: Any = None) -> Any:
    return degree(index, num_nodes, None if dtype is None else canonical_jax_dtype(dtype))


@register_function("torch_geometric.utils.remove_self_loops",
                   "torch_geometric.utils.loop.remove_self_loops")
def _remove_self_loops(edge_index: Any, edge_attr: Any = None) -> Any:
    # under jit this raises and names remove_self_loops_static (PyG's call has no
    # num_nodes, so the dropped slot is unknown here)
    return remove_self_loops(edge_index, edge_attr)


@register_function("torch_geometric.utils.add_remaining_self_loops",
                   "torch_geometric.utils.loop.add_remaining_self_loops")
def _add_remaining_self_loops(edge_index: Any, edge_attr: Any = None, fill_value: Any = None,
                              num_nodes: Optional[int] = None) -> Any:
    if is_traced(edge_index) and num_nodes is not None:
        return add_remaining_self_loops_static(edge_index, edge_attr, fill_value,
                                               num_nodes=num_nodes)
    return add_remaining_self_loops(edge_index, edge_attr, fill_value, num_nodes)


@register_function("torch_geometric.nn.conv.gcn_conv.gcn_norm")
def _gcn_norm(edge_index: Any, edge_weight: Any = None, num_nodes: Optional[int] = None,
              improved: bool = False, add_self_loops: bool = True,
              flow: str = "source_to_target", dtype: Any = None) -> Any:
    dtype = None if dtype is None else canonical_jax_dtype(dtype)
    if is_traced(edge_index) and num_nodes is not None:
        return gcn_norm_static(edge_index, edge_weight, num_nodes=num_nodes, improved=improved,
                               add_self_loops=add_self_loops, flow=flow, dtype=dtype)
    return gcn_norm(edge_index, edge_weight, num_nodes, improved, add_self_loops, flow, dtype)


del _name, _fn
