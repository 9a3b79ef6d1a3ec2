"""A graph-id vector that carries its graph count as static data.

PyG infers the number of graphs of a mini-batch from the data
(``batch.max() + 1``): ``global_mean_pool(x, batch)``, ``to_dense_batch``,
``TopKPooling``, ``GraphNorm`` ... Under ``jax.jit`` that number must be a
Python int, so a model written the PyG way (no ``size=`` argument) cannot
compile with a plain ``batch`` array. A :class:`BatchVector` is the ``batch``
array of a :class:`~torch2jax_ops.geometric.PaddedGraph` (from ``JaxLoader``,
``pad_graph`` or ``from_pyg``) together with its graph count ``num_graphs``
(the padded count, padding graph included): a pytree whose child is the id
array and whose static data is the count, so it crosses ``jax.jit`` with the
count intact and every op that would infer the count reads it instead.

It is not an array: JAX functions do not take it (they raise), so nothing
silently drops the count. The package's ops unwrap it (``as_array``); array
methods and operators (``batch == 0``, ``batch[perm]``, ``batch.max()``)
act on the ids and return plain arrays.
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import numpy as np

__all__ = ["BatchVector", "graph_count", "dense_size", "ids_of", "plain_ids", "declared_max"]


def _on_host(ids: Any) -> bool:
    """Concrete ids readable without a device transfer (NumPy, or a JAX array on the CPU):
    the sortedness check must not sync an accelerator each time a batch is rebuilt."""
    if isinstance(ids, jax.core.Tracer):
        return False
    if isinstance(ids, jax.Array):
        return all(d.platform == "cpu" for d in ids.devices())
    return True


@jax.tree_util.register_pytree_node_class
class BatchVector:
    """``ids [N]`` (graph id per node, sorted) with ``num_graphs`` (a Python int, static).

    Ids lie in ``[0, num_graphs]``; id ``num_graphs`` marks a dropped row (as
    a pooled batch's dropped nodes carry). ``max_num_nodes`` (static, optional)
    is the node budget per graph that ``to_dense_batch`` / ``to_dense_adj``
    use when none is passed: ``from_pyg`` sets the largest graph's size (PyG's
    rule), padded batches leave it None, meaning ``N`` (every graph fits, and
    the shape is fixed per ladder level).

    ``padded`` (static): the batch of a :class:`~torch2jax_ops.geometric.PaddedGraph`,
    whose highest graph id with nodes (below ``num_graphs``) is the padding graph, not a
    real one. Ops whose result depends on the widest graph (``LCMAggregation``'s tree)
    leave it out, as PyG never sees it.
    """
    __slots__ = ("ids", "num_graphs", "max_num_nodes", "padded")
    __hash__ = None  # type: ignore[assignment]  # == is elementwise, as on arrays

    def __init__(self, ids: Any, num_graphs: int, max_num_nodes: Optional[int] = None,
                 padded: bool = False):
        if isinstance(ids, BatchVector):
            ids = ids.ids
        for name, value in (("num_graphs", num_graphs), ("max_num_nodes", max_num_nodes)):
            if value is None and name == "max_num_nodes":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"BatchVector: `{name}` must be a Python int, got "
                                f"{type(value).__name__}")
            if value < 0:
                raise ValueError(f"BatchVector: `{name}` must be >= 0, got {value}")
        if _on_host(ids) and np.ndim(ids) == 1 and np.size(ids) > 1 \
                and (np.diff(np.asarray(ids)) < 0).any():
            raise ValueError("BatchVector: `ids` must be sorted (non-decreasing), as in every "
                             "PyG mini-batch: each graph's nodes together, graph by graph "
                             "(the ops that read a BatchVector rely on it)")
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "num_graphs", int(num_graphs))
        object.__setattr__(self, "max_num_nodes",
                           None if max_num_nodes is None else int(max_num_nodes))
        if not isinstance(padded, bool):
            raise TypeError(f"BatchVector: `padded` must be a bool, got {type(padded).__name__}")
        object.__setattr__(self, "padded", padded)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("BatchVector is immutable")

    def tree_flatten(self):
        return (self.ids,), (self.num_graphs, self.max_num_nodes, self.padded)

    @classmethod
    def tree_unflatten(cls, static: tuple, children: tuple) -> BatchVector:
        obj = object.__new__(cls)
        object.__setattr__(obj, "ids", children[0])
        object.__setattr__(obj, "num_graphs", static[0])
        object.__setattr__(obj, "max_num_nodes", static[1])
        object.__setattr__(obj, "padded", static[2])
        return obj

    def __repr__(self) -> str:
        extra = "" if self.max_num_nodes is None else f", max_num_nodes={self.max_num_nodes}"
        extra += ", padded=True" if self.padded else ""
        return f"BatchVector({self.ids!r}, num_graphs={self.num_graphs}{extra})"

    # -- the ids' array interface (results are plain arrays) -------------------------------
    def __getattr__(self, name: str) -> Any:
        if name in BatchVector.__slots__:
            raise AttributeError(name)
        return getattr(self.ids, name)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = np.asarray(self.ids)
        return out if dtype is None else out.astype(dtype)

    def __len__(self) -> int:
        return len(self.ids)

    def __iter__(self):
        return iter(self.ids)

    def __getitem__(self, key: Any) -> Any:
        return self.ids[ids_of(key)]


def _binary(name: str):
    def method(self: BatchVector, other: Any) -> Any:
        return getattr(self.ids, name)(ids_of(other))
    method.__name__ = name
    return method


def _unary(name: str):
    def method(self: BatchVector) -> Any:
        return getattr(self.ids, name)()
    method.__name__ = name
    return method


for _name in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__add__",
              "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__floordiv__",
              "__rfloordiv__", "__mod__", "__and__", "__or__", "__xor__"):
    setattr(BatchVector, _name, _binary(_name))
for _name in ("__neg__", "__invert__"):
    setattr(BatchVector, _name, _unary(_name))
del _name


def ids_of(x: Any) -> Any:
    """The id array of a :class:`BatchVector`; anything else unchanged."""
    return x.ids if isinstance(x, BatchVector) else x


def graph_count(batch: Any, given: Optional[int] = None) -> Optional[int]:
    """``given`` if not None, else the static count a :class:`BatchVector` carries, else None.

    An explicit count always wins (it is what the caller asked for)."""
    if given is not None:
        return given
    return batch.num_graphs if isinstance(batch, BatchVector) else None


def dense_size(batch: Any, given: Optional[int] = None) -> Optional[int]:
    """The per-graph node budget of a dense batch: ``given`` if not None, else a
    :class:`BatchVector`'s ``max_num_nodes`` (its ``N`` when that is None), else None."""
    if given is not None or not isinstance(batch, BatchVector):
        return given
    return batch.ids.shape[0] if batch.max_num_nodes is None else batch.max_num_nodes


def plain_ids(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``(args, kwargs)`` with every :class:`BatchVector` replaced by its ids: for ops that
    read a batch as an ordinary tensor (torch's own functions and tensor methods)."""
    def plain(x: Any) -> Any:
        return x.ids if isinstance(x, BatchVector) else x

    def walk(tree: Any) -> Any:
        return jax.tree_util.tree_map(plain, tree,
                                      is_leaf=lambda x: isinstance(x, BatchVector))
    if not any(isinstance(x, BatchVector) for x in
               jax.tree_util.tree_leaves((args, kwargs),
                                         is_leaf=lambda x: isinstance(x, BatchVector))):
        return args, kwargs
    return walk(args), walk(kwargs)


def declared_max(name: str, args: tuple, kwargs: dict) -> Optional[np.generic]:
    """``batch.max()`` / ``torch.max(batch)`` of a :class:`BatchVector`: ``num_graphs - 1``,
    a concrete scalar; None for any other call.

    PyG reads the graph count as ``int(batch.max()) + 1`` in many places (aggregations'
    ``__call__``, utilities, user code). A BatchVector declares its ids to lie in
    ``[0, num_graphs)`` (dropped rows aside), so the largest id it declares is the one
    answer that is known while the program is built; for ``from_pyg`` batches it is the
    true maximum, for padded batches the last (padding) graph's id.
    """
    if name != "max" or kwargs or len(args) != 1 or not isinstance(args[0], BatchVector):
        return None
    v = args[0]
    if v.num_graphs == 0:
        raise ValueError("max(): a BatchVector of 0 graphs has no largest id (torch raises "
                         "on the max of an empty tensor)")
    return np.dtype(v.ids.dtype).type(v.num_graphs - 1)
