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
from ..nn._functions_sparse import eager_indices as _eager_indices
from .utils._dense import to_dense_batch
from .utils._loops import (add_remaining_self_loops, add_remaining_self_loops_static, add_self_loops,
                     remove_self_loops)
from .utils._norm import degree, gcn_norm, gcn_norm_static
from .nn.pool._global import global_add_pool, global_max_pool, global_mean_pool
from .utils._scatter import scatter
from .utils._softmax import softmax
from .nn.pool._sort import global_sort_pool

__all__: list = []

for _name in _torch_scatter.__all__:
    register_function(f"torch_scatter.{_name}")(getattr(_torch_scatter, _name))

for _fn in (global_add_pool, global_mean_pool, global_max_pool):
    register_function(*(f"torch_geometric.nn.{where}{_fn.__name__}"
                        for where in ("", "pool.", "pool.glob.")))(_fn)

register_function("torch_geometric.nn.global_sort_pool",
                  "torch_geometric.nn.glob.global_sort_pool")(global_sort_pool)
register_function("torch_geometric.utils.scatter", "torch_geometric.utils._scatter.scatter",
                  "torch_geometric.nn.aggr.base.scatter")(scatter)
register_function("torch_geometric.utils.softmax", "torch_geometric.utils._softmax.softmax")(
    softmax)
register_function("torch_geometric.utils.to_dense_batch",
                  "torch_geometric.utils._to_dense_batch.to_dense_batch")(to_dense_batch)


@register_function("torch_geometric.utils.add_self_loops",
                   "torch_geometric.utils.loop.add_self_loops")
def _add_self_loops(edge_index: Any, edge_attr: Any = None, fill_value: Any = None,
                    num_nodes: Optional[int] = None) -> Any:
    with _eager_indices(edge_index):  # concrete ids stay concrete (augment_adj's chain)
        return add_self_loops(edge_index, edge_attr, fill_value, num_nodes)


@register_function("torch_geometric.utils.degree", "torch_geometric.utils._degree.degree")
def _degree(index: Any, num_nodes: Optional[int] = None, dtype: Any = None) -> Any:
    return degree(index, num_nodes, None if dtype is None else canonical_jax_dtype(dtype))


@register_function("torch_geometric.utils.remove_self_loops",
                   "torch_geometric.utils.loop.remove_self_loops")
def _remove_self_loops(edge_index: Any, edge_attr: Any = None) -> Any:
    # under jit this raises and names remove_self_loops_static (PyG's call has no
    # num_nodes, so the dropped slot is unknown here)
    with _eager_indices(edge_index):  # concrete ids stay concrete, attributes traced
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


# ---- edge utilities family (issue 16: utils): data-dependent sizes give PyG's exact result
# on concrete arrays and the *_static forms under jit where PyG's call names num_nodes; random
# ones draw their key from the port call's key= (nn._state.next_key)
from .utils._coalesce import (MISSING as _MISSING, coalesce as _coalesce,  # noqa: E402
                        coalesce_static as _coalesce_static, sort_edge_index as _sort_edge_index,
                        to_undirected as _to_undirected,
                        to_undirected_static as _to_undirected_static)
from .utils._dropout import (dropout_edge as _dropout_edge, dropout_node as _dropout_node,  # noqa: E402
                       dropout_node_static as _dropout_node_static)
from .utils._negative_sampling import (negative_sampling as _negative_sampling,  # noqa: E402
                                 negative_sampling_static as _negative_sampling_static)
from .utils._segment import segment as _segment  # noqa: E402
from .utils._subgraph import (k_hop_subgraph as _k_hop_subgraph, subgraph as _subgraph,  # noqa: E402
                        subgraph_static as _subgraph_static)
from .utils._to_dense_adj import to_dense_adj as _to_dense_adj  # noqa: E402
from .utils._spmm import spmm as _spmm, to_edge_index as _to_edge_index  # noqa: E402
from ..nn._state import next_key as _next_key  # noqa: E402

register_function("torch_geometric.utils.segment", "torch_geometric.utils._segment.segment")(
    _segment)
register_function("torch_geometric.utils.sort_edge_index",
                  "torch_geometric.utils._sort_edge_index.sort_edge_index")(_sort_edge_index)
register_function("torch_geometric.utils.to_dense_adj",
                  "torch_geometric.utils._to_dense_adj.to_dense_adj")(_to_dense_adj)
register_function("torch_geometric.utils.spmm", "torch_geometric.utils._spmm.spmm")(_spmm)


@register_function("torch_geometric.utils.to_edge_index",
                   "torch_geometric.utils.sparse.to_edge_index")
def _to_edge_index_entry(adj: Any) -> Any:
    with _eager_indices(adj):
        return _to_edge_index(adj)


register_function("torch_geometric.utils.k_hop_subgraph",
                  "torch_geometric.utils._subgraph.k_hop_subgraph")(_k_hop_subgraph)


@register_function("torch_geometric.utils.coalesce", "torch_geometric.utils._coalesce.coalesce")
def _coalesce_entry(edge_index: Any, edge_attr: Any = _MISSING, num_nodes: Optional[int] = None,
                    reduce: str = "sum", is_sorted: bool = False,
                    sort_by_row: bool = True) -> Any:
    fn = _coalesce_static if is_traced(edge_index) and num_nodes is not None else _coalesce
    with _eager_indices(edge_index):
        return fn(edge_index, edge_attr, num_nodes, reduce, is_sorted, sort_by_row)


@register_function("torch_geometric.utils.to_undirected",
                   "torch_geometric.utils.undirected.to_undirected")
def _to_undirected_entry(edge_index: Any, edge_attr: Any = _MISSING,
                         num_nodes: Optional[int] = None, reduce: str = "add") -> Any:
    static = is_traced(edge_index) and (num_nodes is not None or isinstance(edge_attr, int))
    return (_to_undirected_static if static else _to_undirected)(edge_index, edge_attr,
                                                                 num_nodes, reduce)


@register_function("torch_geometric.utils.subgraph", "torch_geometric.utils._subgraph.subgraph")
def _subgraph_entry(subset: Any, edge_index: Any, edge_attr: Any = None,
                    relabel_nodes: bool = False, num_nodes: Optional[int] = None, *,
                    return_edge_mask: bool = False) -> Any:
    fn = _subgraph_static if is_traced(edge_index) else _subgraph
    return fn(subset, edge_index, edge_attr, relabel_nodes, num_nodes,
              return_edge_mask=return_edge_mask)


def _random(training: bool, p: float, op: str) -> Any:
    return _next_key(op) if training and p > 0 else None


@register_function("torch_geometric.utils.dropout_edge",
                   "torch_geometric.utils.dropout.dropout_edge")
def _dropout_edge_entry(edge_index: Any, p: float = 0.5, force_undirected: bool = False,
                        training: bool = True) -> Any:
    # under jit this raises and names dropout_edge_static (PyG's call has no num_nodes)
    return _dropout_edge(edge_index, p, force_undirected, training,
                         key=_random(training, p, "dropout_edge"))


@register_function("torch_geometric.utils.dropout_node",
                   "torch_geometric.utils.dropout.dropout_node")
def _dropout_node_entry(edge_index: Any, p: float = 0.5, num_nodes: Optional[int] = None,
                        training: bool = True, relabel_nodes: bool = False) -> Any:
    fn = (_dropout_node_static if is_traced(edge_index) and num_nodes is not None
          else _dropout_node)
    return fn(edge_index, p, num_nodes, training, relabel_nodes,
              key=_random(training, p, "dropout_node"))


@register_function("torch_geometric.utils.negative_sampling",
                   "torch_geometric.utils._negative_sampling.negative_sampling")
def _negative_sampling_entry(edge_index: Any, num_nodes: Any = None, num_neg_samples: Any = None,
                             method: str = "sparse", force_undirected: bool = False) -> Any:
    fn = (_negative_sampling_static if is_traced(edge_index) and num_nodes is not None
          else _negative_sampling)
    return fn(edge_index, num_nodes, num_neg_samples, method, force_undirected,
              key=_next_key("negative_sampling"))


del _name, _fn


@register_function("torch_geometric.explain.algorithm.utils.set_masks")
def _set_masks_entry(model: Any, mask: Any, edge_index: Any, apply_sigmoid: bool = True) -> Any:
    # PyG's explain mode in a forward (to_captum_model(..., mask_type='edge' or
    # 'node_and_edge'), a user's own wrapper): every MessagePassing layer then multiplies
    # its messages by the mask, which the ported layers do not compute
    from ..nn import UnsupportedModuleError

    raise UnsupportedModuleError(
        "torch_geometric.explain set_masks in a forward (to_captum_model(..., mask_type="
        "'edge' or 'node_and_edge') calls it): PyG then multiplies every message of each "
        "MessagePassing layer by the edge mask, which a port does not compute. Attribute "
        "over node features (mask_type='node') in JAX, or run the edge explanation in torch")
