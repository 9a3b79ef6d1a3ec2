"""Edge ordering and merging: ``sort_edge_index``, ``coalesce``, ``to_undirected``.

PyG sorts edges by the key ``row * N + col`` (``sort_by_row=True``; by
``col * N + row`` otherwise) with torch's sort, which is stable on the CPU.
Here the sort is one ``lax.sort`` on the two ids and the edge position (stable
by construction, no ``N * N`` overflow in int32).

``sort_edge_index`` keeps the number of edges, so it works under ``jax.jit``
as it is. ``coalesce`` and ``to_undirected`` merge repeated edges, so PyG's
output size depends on the data: they reproduce PyG exactly on concrete
arrays, and their ``*_static`` versions keep every edge slot: the distinct
edges first (sorted, as PyG returns them), then the merged-away slots as the
dropped edge ``(N, N)`` with the reduction's empty value (0; 1 for ``mul``) as
attribute. ``count = int((edge_index[0] < N).sum())`` outside jit, and
``edge_index[:, :count]`` / ``edge_attr[:count]`` is PyG's result.
"""
from __future__ import annotations

import functools
from typing import Any, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.typing import ArrayLike

from ..._checking import as_array, check_reduce, is_traced
from ..._sharding import OutSharding, sharding_aware
from .._core._edges import edge_array, node_count
from ._scatter import PYG_REDUCTIONS, pyg_scatter

__all__ = ["sort_edge_index", "coalesce", "coalesce_static", "to_undirected",
           "to_undirected_static", "MISSING", "require_concrete"]


class _Missing:
    """The default of ``edge_attr`` when it is not passed (PyG's ``MISSING``): the call then
    returns ``edge_index`` alone instead of a pair."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()

EdgeAttr = Union[None, ArrayLike, Sequence[ArrayLike], _Missing]


def require_concrete(edge_index: jax.Array, static: str, how: str, *, op: str) -> None:
    """Raise (naming the static form) when ``edge_index`` is traced: PyG's shape is data's."""
    if is_traced(edge_index):
        raise TypeError(
            f"{op}: the number of edges (or nodes) it returns depends on the data, which "
            f"jax.jit cannot compile. Use {static}(..., num_nodes=N) instead: {how}")


# ----------------------------------------------------------------------------- helpers

def _attrs(edge_attr: Any, num_edges: int, *, op: str) -> tuple[str, list]:
    """(form, arrays): form is "missing", "none", "one" or "list" (PyG's return shapes)."""
    if edge_attr is MISSING:
        return "missing", []
    if edge_attr is None:
        return "none", []
    if isinstance(edge_attr, (list, tuple)) and all(hasattr(a, "shape") for a in edge_attr):
        arrays = [as_array(a, f"edge_attr[{i}]", op=op) for i, a in enumerate(edge_attr)]
        form = "list"
    else:
        arrays = [as_array(edge_attr, "edge_attr", op=op)]
        form = "one"
    for i, a in enumerate(arrays):
        if a.ndim == 0 or a.shape[0] != num_edges:
            name = "edge_attr" if form == "one" else f"edge_attr[{i}]"
            raise ValueError(f"{op}: `{name}` must have one row per edge ({num_edges}), got "
                             f"shape {tuple(a.shape)}")
    return form, arrays


def _pack(form: str, edge_index: jax.Array, arrays: list) -> Any:
    if form == "missing":
        return edge_index
    if form == "none":
        return edge_index, None
    if form == "one":
        return edge_index, arrays[0]
    return edge_index, list(arrays)


def _order(edge_index: jax.Array, sort_by_row: bool) -> jax.Array:
    """The stable permutation sorting edges by (row, col) (``sort_by_row``) or (col, row)."""
    major, minor = (edge_index[0], edge_index[1]) if sort_by_row else (edge_index[1],
                                                                       edge_index[0])
    iota = lax.broadcasted_iota(jnp.int32, major.shape, 0)
    return lax.sort((major, minor, iota), num_keys=3)[2]


def _bool_arg(value: Any, name: str, *, op: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{op}: `{name}` must be a Python bool, got {value!r}")
    return bool(value)


# ---------------------------------------------------------------------- sort_edge_index

@sharding_aware
def sort_edge_index(edge_index: ArrayLike, edge_attr: EdgeAttr = MISSING,
                    num_nodes: Optional[int] = None, sort_by_row: bool = True,
                    *, out_sharding: OutSharding = None) -> Any:
    """``torch_geometric.utils.sort_edge_index``: edges sorted by (row, col), stably.

    Args:
      edge_index: ``[2, E]`` integer array.
      edge_attr: omitted (returns ``edge_index`` alone), ``None``, an ``[E, *F]``
        array or a list of them, permuted with the edges.
      num_nodes: ``N`` (only checked: the sort needs no ``N * N`` key here, so
        it works under ``jax.jit`` without it).
      sort_by_row: sort by (row, col); ``False``: by (col, row).

    Returns:
      ``edge_index [2, E]``, or ``(edge_index, edge_attr)`` as PyG. Repeated edges
      keep their order (torch's CPU sort is stable; PyG on GPU does not promise
      it). Dropped edges ``(N, N)`` sort last.
    """
    op = "sort_edge_index"
    edge_index = edge_array(edge_index, op=op)
    sort_by_row = _bool_arg(sort_by_row, "sort_by_row", op=op)
    if num_nodes is not None:
        edge_array(edge_index, node_count(num_nodes, edge_index, op=op), op=op)
    form, arrays = _attrs(edge_attr, edge_index.shape[1], op=op)
    perm = _order(edge_index, sort_by_row)
    return _pack(form, edge_index[:, perm], [a[perm] for a in arrays])


# ----------------------------------------------------------------------------- coalesce

@functools.partial(jax.jit, static_argnames=("n", "reduce", "is_sorted", "sort_by_row", "op"))
def _coalesce(edge_index: jax.Array, arrays: list, n: int, reduce: str, is_sorted: bool,
              sort_by_row: bool, *, op: str) -> tuple[jax.Array, list, jax.Array]:
    """The static form and, per slot of the sorted input, whether it opens a new edge."""
    num_edges = edge_index.shape[1]
    fill = jnp.asarray(n, edge_index.dtype)
    valid = (edge_index[0] < n) & (edge_index[1] < n)
    edge_index = jnp.where(valid[None, :], edge_index, fill)  # half-dropped -> dropped
    if not is_sorted:
        perm = _order(edge_index, sort_by_row)
        edge_index, arrays = edge_index[:, perm], [a[perm] for a in arrays]
        valid = valid[perm]
    major, minor = (edge_index[0], edge_index[1]) if sort_by_row else (edge_index[1],
                                                                       edge_index[0])
    # PyG: mask = key[1:] > key[:-1] with key[-1] = -1 (with is_sorted=True on unsorted
    # edges an edge smaller than its predecessor is merged into the group before it)
    prev_major = jnp.concatenate([jnp.full((1,), -1, major.dtype), major[:-1]])
    prev_minor = jnp.concatenate([jnp.full((1,), -1, minor.dtype), minor[:-1]])
    opens = ((major > prev_major) | ((major == prev_major) & (minor > prev_minor))) & valid
    group = jnp.cumsum(opens.astype(jnp.int32)) - 1
    slot = jnp.where(valid, group, num_edges)
    out_index = jnp.full((2, num_edges), fill).at[:, jnp.where(opens, group, num_edges)].set(
        edge_index, mode="drop")
    out = [pyg_scatter(a, slot, num_edges, reduce, op=op) for a in arrays]
    return out_index, out, opens


@sharding_aware
def coalesce_static(edge_index: ArrayLike, edge_attr: EdgeAttr = MISSING,
                    num_nodes: Optional[int] = None, reduce: str = "sum",
                    is_sorted: bool = False, sort_by_row: bool = True,
                    *, out_sharding: OutSharding = None) -> Any:
    """:func:`coalesce` with a static shape: ``E`` slots, the merged-away ones dropped at the end.

    Args:
      edge_index: ``[2, E]`` integer array; ids in ``[0, N]`` (``N``: a dropped
        edge, which stays dropped).
      edge_attr: omitted, ``None``, an ``[E, *F]`` array or a list of them.
      num_nodes: ``N``; required under ``jax.jit`` (PyG reads ``edge_index.max() + 1``).
      reduce: how the attributes of repeated edges merge: ``"sum"``/``"add"``,
        ``"mean"``, ``"mul"``, ``"min"``/``"amin"``, ``"max"``/``"amax"``
        (PyG's ``utils.scatter``; gradients flow through it).
      is_sorted: the edges are sorted already (PyG's flag: nothing is sorted,
        and an edge smaller than its predecessor merges into the group before it).
      sort_by_row: sort by (row, col); ``False``: by (col, row).

    Returns:
      ``edge_index [2, E]`` (or ``(edge_index, edge_attr [E, *F] / list)``): the
      ``count`` distinct edges sorted, then ``(N, N)`` slots whose attribute is
      the reduction's empty value (0, 1 for ``mul``). Outside jit,
      ``count = int((edge_index[0] < N).sum())`` and the first ``count`` slots are
      PyG's result. An integer attribute with ``reduce="mean"`` comes back as
      float32 (PyG's true division; PyG itself keeps the integer dtype when no
      edge repeats).
    """
    op = "coalesce_static"
    edge_index = edge_array(edge_index, op=op)
    n = node_count(num_nodes, edge_index, op=op)
    edge_array(edge_index, n, op=op)
    is_sorted = _bool_arg(is_sorted, "is_sorted", op=op)
    sort_by_row = _bool_arg(sort_by_row, "sort_by_row", op=op)
    check_reduce(reduce, PYG_REDUCTIONS, op=op)
    form, arrays = _attrs(edge_attr, edge_index.shape[1], op=op)
    out_index, out, _ = _coalesce(edge_index, arrays, n, reduce, is_sorted, sort_by_row, op=op)
    return _pack(form, out_index, out)


@sharding_aware
def coalesce(edge_index: ArrayLike, edge_attr: EdgeAttr = MISSING,
             num_nodes: Optional[int] = None, reduce: str = "sum", is_sorted: bool = False,
             sort_by_row: bool = True, *, out_sharding: OutSharding = None) -> Any:
    """``torch_geometric.utils.coalesce``: sort the edges, merge repeats, reduce their attributes.

    Args:
      edge_index: ``[2, E]`` integer array (concrete: the output size depends on it).
      edge_attr: omitted (returns ``edge_index`` alone), ``None``, an ``[E, *F]``
        array or a list of them.
      num_nodes: ``N`` (default ``edge_index.max() + 1``).
      reduce: ``"sum"`` (default), ``"add"``, ``"mean"``, ``"mul"``, ``"min"``,
        ``"max"``, ``"amin"``, ``"amax"``.
      is_sorted, sort_by_row: as PyG (see :func:`coalesce_static`).

    Returns:
      ``edge_index [2, E']`` (or with ``edge_attr [E', *F]``), ``E'`` the number of
      distinct edges, sorted by (row, col). When no edge repeats, the sorted
      input comes back untouched (PyG's shortcut). Under ``jax.jit`` use
      :func:`coalesce_static`.
    """
    op = "coalesce"
    edge_index = edge_array(edge_index, op=op)
    require_concrete(edge_index, "coalesce_static",
                     "the distinct edges first, the merged-away slots as the dropped edge "
                     "(N, N) at the end", op=op)
    n = node_count(num_nodes, edge_index, op=op)
    edge_array(edge_index, n, op=op)
    is_sorted = _bool_arg(is_sorted, "is_sorted", op=op)
    sort_by_row = _bool_arg(sort_by_row, "sort_by_row", op=op)
    check_reduce(reduce, PYG_REDUCTIONS, op=op,
                 hints={"any": "not ported: its winner is write-order dependent"})
    form, arrays = _attrs(edge_attr, edge_index.shape[1], op=op)
    # the index part on its own: concrete ids give concrete outputs even when the attributes
    # are traced (under jax.ensure_compile_time_eval, as the fx table runs it)
    out_index, _, opens = _coalesce(edge_index, [], n, reduce, is_sorted, sort_by_row, op=op)
    out = _coalesce(edge_index, arrays, n, reduce, is_sorted, sort_by_row, op=op)[1] \
        if arrays else []
    count = int(np.asarray(opens).sum())
    if count == edge_index.shape[1]:  # nothing merged: PyG returns the sorted input as it is
        perm = (_order(edge_index, sort_by_row) if not is_sorted
                else jnp.arange(edge_index.shape[1]))
        return _pack(form, edge_index[:, perm], [a[perm] for a in arrays])
    return _pack(form, out_index[:, :count], [a[:count] for a in out])


# ------------------------------------------------------------------------ to_undirected

def _both_ways(edge_index: Any, edge_attr: Any, num_nodes: Any, *, op: str):
    if isinstance(edge_attr, (int, np.integer)) and not isinstance(edge_attr, bool):
        num_nodes, edge_attr = int(edge_attr), MISSING  # PyG: an int edge_attr is num_nodes
    edge_index = edge_array(edge_index, op=op)
    form, arrays = _attrs(edge_attr, edge_index.shape[1], op=op)
    both = jnp.concatenate([edge_index, edge_index[::-1]], axis=1)
    arrays = [jnp.concatenate([a, a], axis=0) for a in arrays]
    attr = {"missing": MISSING, "none": None, "one": arrays[0] if arrays else None,
            "list": arrays}[form]
    return both, attr, num_nodes


@sharding_aware
def to_undirected_static(edge_index: ArrayLike, edge_attr: EdgeAttr = MISSING,
                         num_nodes: Optional[int] = None, reduce: str = "add",
                         *, out_sharding: OutSharding = None) -> Any:
    """:func:`to_undirected` with a static shape: ``2E`` slots (see :func:`coalesce_static`).

    Every edge ``(i, j)`` and its reverse ``(j, i)``, coalesced: the distinct
    edges sorted first, then the merged-away slots as ``(N, N)``.
    ``num_nodes`` is required under ``jax.jit``.
    """
    op = "to_undirected_static"
    both, attr, num_nodes = _both_ways(edge_index, edge_attr, num_nodes, op=op)
    return coalesce_static(both, attr, num_nodes, reduce)


@sharding_aware
def to_undirected(edge_index: ArrayLike, edge_attr: EdgeAttr = MISSING,
                  num_nodes: Optional[int] = None, reduce: str = "add",
                  *, out_sharding: OutSharding = None) -> Any:
    """``torch_geometric.utils.to_undirected``: add every reverse edge, then :func:`coalesce`.

    Args:
      edge_index: ``[2, E]`` integer array (concrete).
      edge_attr: omitted, ``None``, ``[E, *F]`` or a list; an ``int`` here is taken as
        ``num_nodes`` (PyG's quirk, mirrored).
      num_nodes: ``N`` (default ``edge_index.max() + 1``).
      reduce: how the attributes of an edge and its reverse merge (``"add"`` default).

    Returns:
      ``edge_index [2, E']`` (or with ``edge_attr``), sorted by (row, col).
      Under ``jax.jit`` use :func:`to_undirected_static` (``2E`` slots).
    """
    op = "to_undirected"
    both, attr, num_nodes = _both_ways(edge_index, edge_attr, num_nodes, op=op)
    require_concrete(both, "to_undirected_static",
                     "2E slots, the distinct edges first, the merged-away ones as the dropped "
                     "edge (N, N)", op=op)
    return coalesce(both, attr, num_nodes, reduce)
