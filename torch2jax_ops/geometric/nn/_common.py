"""What the PyG layer ports share: node-feature pairs, per-edge inputs, converter checks.

Shapes: ``x [N, F_in]`` or a bipartite ``(x_src [N_src, F], x_dst [N_dst, F])``
pair, ``edge_index [2, E]`` whose ids may use the dropped slot ``N`` (see
:mod:`torch2jax_ops.geometric`), per-edge values with one row per edge.

The graph argument of a layer is an ``edge_index [2, E]``, an
:class:`~torch2jax_ops.geometric.EdgeIndex`, or a sparse ``adj_t [N_dst, N_src]``
(``BCOO`` / ``BCSR``, :mod:`torch2jax_ops.geometric._core._adjacency`): :func:`graph_input`
reads all three into one :class:`Graph`; each layer then applies PyG's rules for
its sparse branch (values, self-loops) and passes ``Graph.sorted`` to
:func:`~torch2jax_ops.geometric._core._edges.aggregate` where it aggregates over the
unchanged targets.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Union

import jax

from ..._checking import REDUCTIONS, as_array, check_bounds, check_index
from ...nn import Converter
from .._core._adjacency import Adjacency, adjacency
from .._core._edge_index import EdgeIndex
from .._core._edges import aggregate, edge_array, gather, is_sparse_matrix, targets_sorted
from .._core._sparse_tensor import SparseTensor, layer_matrix
from ._message_passing import FUSE_AGGRS, EdgeListAggr, effective_aggr

__all__ = ["NodeFeatures", "typed_rows", "pair", "checked_edges", "edge_values", "weighted", "check_flow",
           "check_aggr", "Graph", "graph_input", "FUSED_AGGRS", "spmm_adjacency",
           "refuse_sparse", "sparse_tensor_input", "SPARSE_TENSOR_LAYERS"]

#: the layer ports that take a :class:`~torch2jax_ops.geometric.SparseTensor` ``adj_t``
SPARSE_TENSOR_LAYERS = ("GCNConv", "GCN2Conv", "GINConv", "SAGEConv", "GraphConv")


def sparse_tensor_input(edge_index: Any, rule: str, dtype: Any, *, op: str) -> Any:
    """A SparseTensor ``adj_t`` as the BCSR the layer's PyG SparseTensor branch reads
    (:func:`~torch2jax_ops.geometric._core._sparse_tensor.layer_matrix`'s ``rule``); any other
    graph argument as it is."""
    if isinstance(edge_index, SparseTensor):
        return layer_matrix(edge_index, rule, dtype=dtype, op=op)
    return edge_index

#: PyG's ``FUSE_AGGRS``: the reductions its ``message_and_aggregate`` (``spmm``) serves
FUSED_AGGRS = FUSE_AGGRS


class Graph(NamedTuple):
    """A layer's graph argument, read once (:func:`graph_input`)."""
    #: ``[2, E]``: row 0 sources, row 1 targets (a sparse ``adj_t``'s entries, storage order)
    edge_index: jax.Array
    #: the sparse ``adj_t`` it came from (values, sizes, the matrix), or None
    adj: Optional[Adjacency]
    #: ``edge_index[1]`` never decreases: ``aggregate(..., indices_sorted=sorted)`` may use it
    sorted: bool

NodeFeatures = Union[jax.Array, tuple]


def pair(x: NodeFeatures, *, op: str) -> tuple[jax.Array, Optional[jax.Array]]:
    """``x`` or ``(x_src, x_dst)`` as the pair PyG's layers work on."""
    if isinstance(x, (tuple, list)):
        if len(x) != 2:
            raise ValueError(f"{op}: a tuple `x` must be (x_src, x_dst), got {len(x)} entries")
        src = as_array(x[0], "x[0]", op=op)
        return src, None if x[1] is None else as_array(x[1], "x[1]", op=op)
    x = as_array(x, "x", op=op)
    return x, x


def checked_edges(edge_index: Any, x_src: jax.Array, x_dst: Optional[jax.Array], *, op: str) -> jax.Array:
    """``edge_index`` checked against the larger side of a (possibly bipartite) graph."""
    n = max(x_src.shape[0], x_src.shape[0] if x_dst is None else x_dst.shape[0])
    return edge_array(edge_index, n, op=op)


def _rows(name: str, x: jax.Array, count: int, what: str, arg: str, shape: tuple, *,
          op: str) -> None:
    if x.shape[0] != count:
        raise ValueError(f"{op}: `{arg}` is a sparse adj_t of shape {shape} ([N_dst, N_src]: "
                         f"adj_t[i, j] != 0 is an edge j -> i), so `{name}` ({what}) must have "
                         f"{count} rows, got {x.shape[0]}")


def graph_input(edge_index: Any, x_src: jax.Array, x_dst: Optional[jax.Array], *, op: str,
                name: str = "edge_index", coalesce: bool = False, square: bool = False,
                names: Optional[tuple[str, str]] = None) -> Graph:
    """A layer's graph: ``edge_index [2, E]``, an ``EdgeIndex`` or a sparse ``adj_t``.

    Args:
      edge_index: the graph argument.
      x_src: the source features ``[N_src, ...]``.
      x_dst: the target features ``[N_dst, ...]``, or None (then only the
        sparse ``adj_t``'s shape gives ``N_dst``).
      coalesce: for a sparse ``adj_t``: sum repeated entries first (where PyG
        coalesces: ``add_self_loops``, ``spmm`` with a mean / min / max).
      square: a sparse ``adj_t`` must be ``[N, N]`` (PyG's ``gcn_norm`` asserts it).
      names: the arguments ``x_src`` / ``x_dst`` come from, for errors (default
        ``x`` for one node set, ``x[0]`` / ``x[1]`` for a pair).

    Returns:
      :class:`Graph`: the checked ``[2, E]`` ids (ids in ``[0, max(N_src, N_dst)]``),
      the :class:`Adjacency` of a sparse input, and whether the targets are sorted
      (an ``EdgeIndex`` with ``sort_order="col"``, a CSR or sorted COO ``adj_t``).
    """
    if isinstance(edge_index, SparseTensor):
        raise TypeError(
            f"{op}: `{name}` is a SparseTensor (torch_sparse's, from to_jax); this port takes "
            f"it in {', '.join(SPARSE_TENSOR_LAYERS)} only, whose PyG rules for its values are "
            f"known here. Pass adj_t.to_bcsr() (a torch sparse CSR's rules: values used) if "
            f"PyG's layer treats a SparseTensor and a torch sparse tensor alike, or the edge list")
    one = x_dst is x_src
    src_name, dst_name = names or (("x", "x") if one else ("x[0]", "x[1]"))
    if is_sparse_matrix(edge_index):
        adj = adjacency(edge_index, name=name, op=op, coalesce=coalesce)
        shape = (adj.num_dst, adj.num_src)
        if square and adj.num_src != adj.num_dst:
            raise ValueError(f"{op}: `{name}` must be a square adj_t [N, N] (PyG's sparse "
                             f"branch asserts adj_t.size(0) == adj_t.size(1)), got shape {shape}")
        _rows(src_name, x_src, adj.num_src, "the sources", name, shape, op=op)
        if x_dst is not None and not one:
            _rows(dst_name, x_dst, adj.num_dst, "the targets", name, shape, op=op)
        elif x_dst is not None and adj.num_src != adj.num_dst:
            raise ValueError(f"{op}: `{name}` is a non-square adj_t of shape {shape} "
                             f"([N_dst, N_src]) but `{src_name}` is one node set; pass a pair "
                             f"(sources [{adj.num_src}, F], targets [{adj.num_dst}, F])")
        return Graph(adj.edge_index, adj, adj.targets_sorted)
    if isinstance(edge_index, EdgeIndex):
        sides = ((0, "num_rows (sources)", x_src, src_name),
                 (1, "num_cols (targets)", x_dst, dst_name))
        for axis, what, x, arg in sides:
            size = edge_index.sparse_size[axis]
            if size is not None and x is not None and x.shape[0] != size:
                raise ValueError(f"{op}: `{name}` is an EdgeIndex with sparse_size "
                                 f"{edge_index.sparse_size}, whose {what} = {size} does not "
                                 f"match `{arg}` with {x.shape[0]} rows")
        return Graph(checked_edges(edge_index, x_src, x_dst, op=op), None,
                     targets_sorted(edge_index))
    return Graph(checked_edges(edge_index, x_src, x_dst, op=op), None, False)


def spmm_adjacency(adj: Adjacency, x: jax.Array, reduce: str, *, op: str) -> jax.Array:
    """PyG's fused ``message_and_aggregate``: ``spmm(adj_t, x, reduce)``, values included.

    ``x [N_src, F]`` -> ``[N_dst, F]``. A sum runs on the edge list (sorted
    targets for a CSR ``adj_t``); mean / min / max are
    :func:`torch2jax_ops.geometric.utils.spmm`'s (torch's rules: repeated
    entries summed first, the gradient of a tied max to the first entry).
    """
    from ..utils._spmm import spmm

    if isinstance(reduce, EdgeListAggr):
        raise ValueError(
            f"{op}: this layer's `.aggr` was set to {reduce.assigned!r} after construction; "
            f"PyG aggregates an edge list with the module it built ({reduce!r}) but a sparse "
            f"adj_t with `.aggr`, and the port follows the edge list: pass edge_index, or "
            f"build the layer with aggr={reduce.assigned!r}")
    if reduce in ("add", "sum"):
        src, dst = adj.edge_index[0], adj.edge_index[1]
        messages = weighted(gather(x, src), adj.values.astype(x.dtype))
        return aggregate(messages, dst, adj.num_dst, "sum", op=op,
                         indices_sorted=adj.targets_sorted)
    return spmm(adj.matrix, x, reduce)


def refuse_sparse(edge_index: Any, *, op: str, why: str, name: str = "edge_index") -> None:
    """A clear error where a layer (or one of its settings) has no sparse ``adj_t`` form."""
    if is_sparse_matrix(edge_index):
        raise ValueError(f"{op}: `{name}` is a sparse adj_t ({type(edge_index).__name__}), "
                         f"which {why}; pass the edge list instead (torch2jax_ops.geometric."
                         f"utils.to_edge_index(adj_t)[0][::-1]: sources first)")


def edge_values(values: Any, edge_index: jax.Array, name: str, *, op: str,
                vector: bool = False) -> Optional[jax.Array]:
    """Per-edge weights or features: one row per edge, or None; ``vector=True``: one
    weight per edge ``[E]``."""
    if values is None:
        return None
    values = as_array(values, name, op=op)
    if values.ndim == 0 or values.shape[0] != edge_index.shape[1]:
        raise ValueError(f"{op}: `{name}` must have one row per edge ({edge_index.shape[1]}), "
                         f"got shape {tuple(values.shape)}")
    if vector and values.ndim != 1:
        raise ValueError(f"{op}: `{name}` must be one weight per edge [E], got shape "
                         f"{tuple(values.shape)}")
    return values


def weighted(messages: jax.Array, weight: Optional[jax.Array]) -> jax.Array:
    """``weight [E] * messages [E, *F]``; no weight: the messages."""
    return messages if weight is None else weight.reshape((-1,) + (1,) * (messages.ndim - 1)) \
        * messages


def check_flow(m: Any, ctx: Converter) -> None:
    """A converter's check: PyG's default flow, no explain mode."""
    if getattr(m, "flow", "source_to_target") != "source_to_target":
        raise ctx.unsupported(m, f"flow={m.flow!r}; only 'source_to_target' (PyG's default) "
                                 f"is ported")
    if getattr(m, "explain", False):
        raise ctx.unsupported(m, "explain mode is on")


def check_aggr(m: Any, ctx: Converter, allowed: tuple = REDUCTIONS, *,
               modules: bool = False) -> Any:
    """A converter's check: ``m.aggr`` is a reduction name the port implements.

    ``modules=True`` (layers that take an aggregation module): any other
    aggregation -- a module (``aggr=SoftmaxAggregation(learn=True)``), a name
    PyG resolves to one (``"std"``, ``"softmax"``), a list of names -- whose
    class has a converter (:mod:`torch2jax_ops.geometric.nn.aggr`) is returned
    converted, as the layer's ``aggr_module`` (its arrays keep PyG's
    ``aggr_module.*`` names); the port calls it as
    ``aggr_module(messages, index, dim_size=N, dim=node_dim)``. The aggregation is
    PyG's effective one (:func:`effective_aggr`: the module built in ``__init__``).
    """
    aggr = effective_aggr(m)
    if isinstance(aggr, str) and aggr in allowed:
        return aggr
    aggr = m.aggr if aggr is None else aggr
    module = getattr(m, "aggr_module", None)
    if modules and module is not None:
        from ...nn._registry import converter_for

        if converter_for(type(module)) is not None:
            return ctx.child(module, "aggr_module")
    hint = (" or an aggregation module with a converter (torch2jax_ops.geometric.nn.aggr)"
            if modules else "")
    raise ctx.unsupported(m, f"aggr={aggr!r}; ported: {allowed}{hint}")


def typed_rows(x: Any, type_vec: Any, num_types: int, *, op: str, what: str,
               in_channels: Optional[int] = None) -> tuple[jax.Array, jax.Array]:
    """``x [N, C]`` and ``type_vec [N]`` of a layer with one ``what`` per type (HeteroLinear's
    weight matrices, HeteroBatchNorm's statistics), checked: ``C == in_channels`` when
    given, one type per row, ids in ``[0, num_types)`` (an error on concrete input)."""
    x = as_array(x, "x", op=op)
    type_vec = as_array(type_vec, "type_vec", op=op)
    if x.ndim != 2 or (in_channels is not None and x.shape[1] != in_channels):
        width = "in_channels" if in_channels is None else f"in_channels={in_channels}"
        raise ValueError(f"{op}: `x` must be [num_rows, {width}], got shape {tuple(x.shape)}")
    check_index(type_vec, "type_vec", op=op)
    if type_vec.shape != (x.shape[0],):
        raise ValueError(f"{op}: `type_vec` must be 1-D with one type per row of `x` "
                         f"({x.shape[0]}), got shape {tuple(type_vec.shape)}")
    check_bounds(type_vec, num_types, "type_vec", target=f"the types (num_types={num_types})",
                 fix=f"each row's type must name one of the layer's {what}", op=op)
    return x, type_vec
