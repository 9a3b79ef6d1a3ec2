"""PyG's ``torch_geometric.EdgeIndex`` on JAX: an ``edge_index [2, E]`` that knows its sort order.

``EdgeIndex(index, sparse_size=(N_src, N_dst), sort_order="col")`` is a JAX
pytree (an equinox module): the ``[2, E]`` integer array is its one leaf, and
``sparse_size``, ``sort_order`` and ``is_undirected`` are static (they shape
the compiled program, as PyG's metadata shapes its dispatch). Row 0 holds the
sources, row 1 the targets, as for a plain ``edge_index``.

* every layer and utility that takes ``edge_index`` takes an ``EdgeIndex``;
* ``sort_order="col"`` (sorted by target, PyG's CSC order) lets the layers
  aggregate with a sorted segment reduction (``indices_are_sorted=True``),
  which XLA runs without the scatter's atomics; ``"row"`` (by source) and
  ``None`` aggregate as a plain array does. Results are equal either way;
* ``torch2jax_ops.to_jax(a torch_geometric.EdgeIndex)`` returns one, with the
  same metadata (the index goes over as any integer tensor: int64 needs JAX's
  64-bit mode or ``allow_downcast=True``).

A concrete index is checked when the object is built (shape, integer dtype,
ids below ``sparse_size``, the promised order); a traced one cannot be read,
so its order is taken on trust: promising an order the data does not have
gives undefined results under ``jax.jit`` (XLA's contract for sorted indices).
"""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..._checking import as_array, is_traced

__all__ = ["EdgeIndex", "SORT_ORDERS"]

#: PyG's sort orders: by row (``edge_index[0]``, the sources) or by column (the targets)
SORT_ORDERS = ("row", "col")


def _size(value: Any, name: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"EdgeIndex: `sparse_size` entries must be non-negative Python ints or "
                         f"None, got {name}={value!r}")
    return int(value)


class EdgeIndex(eqx.Module):
    """``torch_geometric.EdgeIndex``: ``index [2, E]`` with its static metadata.

    Args:
      index: ``[2, E]`` integer array (row 0 sources, row 1 targets).
      sparse_size: ``(num_rows, num_cols)`` = ``(N_src, N_dst)`` of the
        adjacency it stands for; ``None`` entries are unknown (PyG's default).
      sort_order: ``"row"`` (sorted by ``index[0]``), ``"col"`` (by
        ``index[1]``: what the layers' sorted aggregation needs) or ``None``.
      is_undirected: PyG's flag; metadata only here.
    """
    index: jax.Array
    sparse_size: tuple = eqx.field(static=True, default=(None, None))
    sort_order: Optional[str] = eqx.field(static=True, default=None)
    is_undirected: bool = eqx.field(static=True, default=False)

    def __init__(self, index: Any, sparse_size: Any = (None, None),
                 sort_order: Optional[str] = None, is_undirected: bool = False) -> None:
        if isinstance(index, EdgeIndex):
            index = index.index
        index = as_array(index, "index", op="EdgeIndex")
        if index.ndim != 2 or index.shape[0] != 2:
            raise ValueError(f"EdgeIndex: `index` must have shape [2, num_edges] (row 0: "
                             f"sources, row 1: targets), got {tuple(index.shape)}")
        if not jnp.issubdtype(index.dtype, jnp.integer):
            raise TypeError(f"EdgeIndex: `index` must hold integers, got {index.dtype}")
        if sparse_size is None:
            sparse_size = (None, None)
        if not isinstance(sparse_size, (tuple, list)) or len(sparse_size) != 2:
            raise ValueError(f"EdgeIndex: `sparse_size` must be a pair (num_rows, num_cols), "
                             f"got {sparse_size!r}")
        if sort_order is not None and sort_order not in SORT_ORDERS:
            raise ValueError(f"EdgeIndex: `sort_order` must be 'row', 'col' or None, got "
                             f"{sort_order!r}")
        self.index = index
        self.sparse_size = (_size(sparse_size[0], "num_rows"), _size(sparse_size[1], "num_cols"))
        self.sort_order = sort_order
        self.is_undirected = bool(is_undirected)
        if not is_traced(index):
            self._validate()

    def _validate(self) -> None:
        """The concrete index against the metadata (PyG's ``EdgeIndex.validate``)."""
        ids = np.asarray(self.index)
        if ids.size and ids.min() < 0:
            raise IndexError(f"EdgeIndex: `index` contains the negative id {int(ids.min())}")
        for axis, (size, name) in enumerate(zip(self.sparse_size, ("num_rows", "num_cols"))):
            if size is not None and ids.size and ids[axis].max() >= size:
                raise IndexError(f"EdgeIndex: `index[{axis}]` contains the id "
                                 f"{int(ids[axis].max())}, but sparse_size says {name}={size}")
        if self.sort_order is not None and ids.shape[1] > 1:
            axis = 0 if self.sort_order == "row" else 1
            if np.any(np.diff(ids[axis]) < 0):
                raise ValueError(f"EdgeIndex: sort_order={self.sort_order!r} but `index[{axis}]` "
                                 f"is not sorted; sort it (jnp.argsort) or pass sort_order=None")

    # -- PyG's accessors
    @property
    def num_rows(self) -> Optional[int]:
        """``sparse_size[0]``: the number of source nodes, when known."""
        return self.sparse_size[0]

    @property
    def num_cols(self) -> Optional[int]:
        """``sparse_size[1]``: the number of target nodes, when known."""
        return self.sparse_size[1]

    @property
    def is_sorted_by_row(self) -> bool:
        return self.sort_order == "row"

    @property
    def is_sorted_by_col(self) -> bool:
        return self.sort_order == "col"

    @property
    def is_sorted(self) -> bool:
        return self.sort_order is not None

    @property
    def shape(self) -> tuple:
        return tuple(self.index.shape)

    @property
    def dtype(self) -> Any:
        return self.index.dtype

    def as_array(self) -> jax.Array:
        """The plain ``[2, E]`` array (PyG's ``as_tensor``)."""
        return self.index

    def __getitem__(self, item: Any) -> jax.Array:
        return self.index[item]

    def __len__(self) -> int:
        return 2


def _from_torch(tensor: Any, convert: Any) -> EdgeIndex:
    """``to_jax``'s converter for ``torch_geometric.EdgeIndex``: the data, then the metadata."""
    return EdgeIndex(convert(tensor.as_tensor()), sparse_size=tensor.sparse_size(),
                     sort_order=tensor.sort_order, is_undirected=tensor.is_undirected)


def _register() -> None:
    from ...dlpack import register_tensor_type

    register_tensor_type("torch_geometric.edge_index.EdgeIndex", _from_torch)


_register()
