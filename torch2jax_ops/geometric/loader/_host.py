"""One batch on the host: read a PyG ``Data`` / ``Batch`` (or a dict of arrays) into NumPy,
decide what every attribute is (node-, edge-, graph-level or other), and pad it.

Everything here runs in the loader's background thread, on NumPy (the padding
would otherwise compile a small XLA program per shape); the result goes to the
device in one call (``_loader._place``).
"""
from __future__ import annotations

import dataclasses
import numbers
from typing import Any, Optional

import numpy as np

from ..data._padding import PaddedGraph, label_level
from ..data._rules import (
    BOOKKEEPING,
    cat_axis,
    check_fits,
    check_item,
    check_torch_device,
    is_graph_reference,
    is_node_reference,
    target_dtype,
)

__all__ = ["HostGraph", "read_item", "Kinds", "pad_host", "mask_name", "sizes_of"]

_FIELDS = ("x", "edge_index", "edge_attr", "y", "batch")


@dataclasses.dataclass
class HostGraph:
    """A batch as NumPy arrays, with its real sizes."""
    nodes: int
    edges: int
    graphs: int
    fields: dict            # x, edge_index, edge_attr, y, batch (None where absent)
    attrs: dict             # name -> (array, concat axis or None for fixed-shape values)
    batch_size: Optional[int]


def _numpy_of_tensor(t: Any, key: str, op: str) -> np.ndarray:
    import torch

    if t.layout != torch.strided:
        raise TypeError(f"{op}: `{key}` is a {t.layout} tensor; only dense tensors can be padded "
                        f"(data.{key} = data.{key}.to_dense(), or exclude=('{key}',))")
    check_torch_device(t.device, key, op=op)
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype == torch.bfloat16:
        import ml_dtypes
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.resolve_conj().resolve_neg().numpy()


def _convert(a: np.ndarray, key: str, *, x64: bool, allow_downcast: bool, op: str) -> np.ndarray:
    """The dtype rules of :func:`~torch2jax_ops.geometric.data._rules.target_dtype`, on NumPy."""
    target = target_dtype(a.dtype.name, key, x64=x64, allow_downcast=allow_downcast, op=op)
    if target is None:
        return a
    if a.dtype.kind in "iu" and a.size:
        check_fits(int(a.min()), int(a.max()), target, key, x64=x64, op=op)
    return a.astype(target)


def _python_value(value: Any, key: str, op: str) -> np.ndarray:
    """A Python number or a rectangular list of numbers as an array; anything else: TypeError."""
    if isinstance(value, (bool, numbers.Number, np.generic)) and not isinstance(value, complex):
        return np.asarray(value)
    if isinstance(value, (list, tuple)):
        try:
            array = np.asarray(value)
        except ValueError:
            array = None
        if array is not None and array.dtype.kind in "biuf":
            return array
    what = (f"a ragged or non-numeric {type(value).__name__}" if isinstance(value, (list, tuple))
            else f"a {type(value).__name__}")
    raise TypeError(f"{op}: attribute `{key}` is {what}, which cannot be padded into an array "
                    f"(a jitted step takes arrays only). Leave it out with "
                    f"JaxLoader(..., exclude=('{key}',)), or drop it in a transform; "
                    f"from_pyg keeps such attributes untouched in `extras`")


def _array(value: Any, key: str, op: str) -> np.ndarray:
    if type(value).__module__.startswith("torch"):
        return _numpy_of_tensor(value, key, op)
    if isinstance(value, np.ndarray) or (hasattr(value, "__array__") and hasattr(value, "dtype")):
        array = np.asarray(value)
        if array.dtype.kind in "OUSM":
            raise TypeError(f"{op}: attribute `{key}` is an array of {array.dtype}, which JAX "
                            f"cannot hold; leave it out with JaxLoader(..., exclude=('{key}',))")
        return array
    return _python_value(value, key, op)


def read_item(item: Any, *, x64: bool, allow_downcast: bool, exclude: tuple = (),
              op: str = "JaxLoader", where: str = "") -> HostGraph:
    """A PyG ``Data``/``Batch`` or a dict of arrays as a :class:`HostGraph` (dtypes converted)."""
    kind = check_item(item, op=op, mappings=True, where=where)
    keys = list(item.keys())
    fields: dict = dict.fromkeys(_FIELDS)
    attrs: dict = {}
    batch_size = None
    num_nodes = None
    for key in keys:
        if key in exclude:
            continue
        value = item[key]
        if value is None:
            continue
        if key == "batch_size":
            batch_size = int(value)
            continue
        if key == "num_nodes":
            num_nodes = int(value)
            continue
        if key == "num_graphs" and kind == "mapping":
            continue
        array = _convert(_array(value, key, op), key, x64=x64, allow_downcast=allow_downcast,
                         op=op)
        if key in _FIELDS:
            fields[key] = array
        else:
            tensor_like = not isinstance(value, (list, tuple, bool, numbers.Number))
            axis = cat_axis(item if kind == "pyg" else None, key, value if kind == "pyg"
                            else array) if tensor_like else None
            attrs[key] = (array, axis)
    edge_index = fields["edge_index"]
    if edge_index is None:
        edge_index = fields["edge_index"] = np.zeros((2, 0), np.int32)
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"{op}: `edge_index` must have shape [2, num_edges], got "
                         f"{tuple(edge_index.shape)}")
    if kind == "pyg":
        nodes = int(item.num_nodes or 0)
    elif fields["x"] is not None:
        nodes = int(fields["x"].shape[0])
    else:
        nodes = int(num_nodes or 0)
    batch = fields["batch"]
    if kind == "pyg" and hasattr(type(item), "num_graphs") and isinstance(item.num_graphs, int):
        graphs = item.num_graphs
    elif kind == "mapping" and "num_graphs" in item:
        graphs = int(item["num_graphs"])
    else:
        graphs = int(batch.max()) + 1 if batch is not None and batch.size else 1
    if batch_size is not None and batch_size > nodes:
        raise ValueError(f"{op}: `batch_size`={batch_size} seeds, but the batch has {nodes} nodes")
    return HostGraph(nodes, int(edge_index.shape[1]), graphs, fields, attrs, batch_size)


def sizes_of(item: Any, *, op: str = "JaxLoader", where: str = "") -> tuple:
    """``(nodes, edges, graphs, {key: (axis size, axis)})`` of an item, without converting it."""
    kind = check_item(item, op=op, mappings=True, where=where)
    if kind == "pyg":
        from ..data._from_pyg import num_graphs_of
        nodes, graphs = int(item.num_nodes or 0), num_graphs_of(item)
        edge_index = item["edge_index"] if "edge_index" in item else None
    else:
        x = item.get("x")
        nodes = int(x.shape[0]) if x is not None else int(item.get("num_nodes", 0))
        batch = item.get("batch")
        graphs = int(item.get("num_graphs", int(np.max(batch)) + 1 if batch is not None
                                  and np.size(batch) else 1))
        edge_index = item.get("edge_index")
    edges = int(edge_index.shape[1]) if edge_index is not None else 0
    shapes = {}
    for key in (item.keys() if kind == "pyg" else item):
        if key in _FIELDS or key in BOOKKEEPING or key == "num_graphs":
            if key != "y":
                continue
        value = item[key]
        if getattr(value, "ndim", None) is None:
            continue
        axis = cat_axis(item if kind == "pyg" else None, key, value)
        if axis is not None:
            shapes[key] = (int(value.shape[axis]), axis)
    return nodes, edges, graphs, shapes


#: Kinds in the order a tie is broken (an attribute named ``*edge*`` prefers "edge").
_ORDER = ("node", "edge", "graph", "other")


def _candidates(key: str, size: Optional[int], nodes: int, edges: int, graphs: int) -> list:
    fits = {"node": size == nodes, "edge": size == edges, "graph": size == graphs,
            "other": True}
    order = ("edge", "node", "graph", "other") if "edge" in key else _ORDER
    return [k for k in order if fits[k]]


class Kinds:
    """What each attribute is, kept consistent over a loader's batches.

    Each batch narrows an attribute's possible kinds to those its size allows
    (an ``n``-row ``train_mask`` is node-level; ``edge_label`` with its own
    count is "other"); the first remaining one (by :data:`_ORDER`) is used.
    ``y`` may be node- or graph-level only.
    """

    def __init__(self) -> None:
        self.memo: dict = {}

    def observe(self, key: str, size: Optional[int], nodes: int, edges: int, graphs: int, *,
                op: str) -> str:
        if key == "ptr":
            return "ptr"
        if key == "y":
            options = [] if size is None else [
                k for k in ("node", "graph") if size == (nodes if k == "node" else graphs)]
            if size is None and graphs == 1:
                options = ["graph"]
            remaining = [k for k in self.memo.get(key, options) if k in options]
            if not remaining:
                if size is not None and options:  # it changed level between batches
                    raise ValueError(f"{op}: `y` was {self.memo[key][0]}-level in earlier "
                                     f"batches but has {size} rows here ({nodes} nodes, "
                                     f"{graphs} graphs)")
                label_level(size, nodes, graphs, op=op)  # raises with the shapes
            self.memo[key] = remaining
            return remaining[0]
        options = _candidates(key, size, nodes, edges, graphs)
        remaining = [k for k in self.memo.get(key, options) if k in options]
        self.memo[key] = remaining
        return remaining[0]


def mask_name(key: str) -> str:
    """The extras mask of an "other"-kind attribute: ``edge_label_index`` and ``edge_label``
    share ``edge_label_mask``."""
    stem = key[: -len("_index")] if key.endswith("_index") else key
    return stem + "_mask"


def _pad(a: np.ndarray, axis: int, total: int, value: Any = 0) -> np.ndarray:
    size = a.shape[axis]
    if size == total:
        return np.array(a)  # a fresh buffer: never alias the loader's memory
    if size > total:
        raise AssertionError(f"internal: padding {size} rows down to {total}")
    shape = list(a.shape)
    shape[axis] = total
    out = np.full(shape, value, a.dtype) if value else np.zeros(shape, a.dtype)
    index = [slice(None)] * a.ndim
    index[axis] = slice(0, size)
    out[tuple(index)] = a
    return out


def pad_host(host: HostGraph, num_nodes: int, num_edges: int, num_graphs: int, kinds: Kinds,
             other_sizes: dict, *, op: str) -> PaddedGraph:
    """Pad a :class:`HostGraph` to one ladder level (NumPy in, a NumPy PaddedGraph out).

    Node-level values get ``num_nodes`` rows, edge-level ``num_edges``, graph-level
    ``num_graphs``; "other" attributes get ``other_sizes[mask_name(key)]`` slots and
    a mask in ``extras``. Padding is 0 / False, except node ids (``*index*``),
    which point at the first padding node, graph ids (``*batch*``) at the
    padding graph, and ``ptr``, which ends every padding graph at ``num_nodes``.
    """
    n, e, g = host.nodes, host.edges, host.graphs
    f = host.fields
    edge_index = _pad(f["edge_index"].astype(np.int32, copy=False), 1, num_edges, n)
    batch = f["batch"]
    batch = (np.zeros((num_nodes,), np.int32) if batch is None else
             _pad(batch.astype(np.int32, copy=False), 0, num_nodes, g))
    if f["batch"] is None:
        batch[n:] = g
    x = None if f["x"] is None else _pad(f["x"], 0, num_nodes)
    edge_attr = None if f["edge_attr"] is None else _pad(f["edge_attr"], 0, num_edges)
    y = f["y"]
    if y is not None:
        level = kinds.observe("y", y.shape[0] if y.ndim else None, n, e, g, op=op)
        y = _pad(y.reshape(1) if y.ndim == 0 else y, 0,
                 num_nodes if level == "node" else num_graphs)
    seed_mask = None if host.batch_size is None else np.arange(num_nodes) < host.batch_size
    extras: dict = {}
    masks: dict = {}
    totals = {"node": num_nodes, "edge": num_edges, "graph": num_graphs}
    for key, (a, axis) in host.attrs.items():
        if axis is None:
            extras[key] = np.array(a)
            continue
        kind = kinds.observe(key, a.shape[axis], n, e, g, op=op)
        value = n if is_node_reference(key) else g if is_graph_reference(key) else 0
        if kind == "ptr":
            extras[key] = _pad(a, axis, num_graphs + 1, num_nodes)
        elif kind in totals:
            extras[key] = _pad(a, axis, totals[kind], value)
        else:
            name = mask_name(key)
            if name in host.attrs or (name in masks and masks[name][0] != a.shape[axis]):
                name = key + "_mask"
            if name in host.attrs:
                raise ValueError(f"{op}: attribute `{key}` needs a padding mask, but the batch "
                                 f"already has attributes named `{mask_name(key)}` and "
                                 f"`{name}`; rename one of them")
            total = other_sizes[name]
            extras[key] = _pad(a, axis, total, value)
            masks[name] = (a.shape[axis], total)
    for name, (count, total) in masks.items():
        extras[name] = np.arange(total) < count
    return PaddedGraph(
        x=x, edge_index=edge_index, edge_attr=edge_attr, batch=batch,
        node_mask=np.arange(num_nodes) < n, edge_mask=np.arange(num_edges) < e,
        graph_mask=np.arange(num_graphs) < g, y=y, seed_mask=seed_mask, extras=extras)


def other_counts(host: HostGraph, kinds: Kinds, *, op: str) -> dict:
    """``{mask name: count}`` of the batch's "other"-kind attributes (what must have room)."""
    counts: dict = {}
    for key, (a, axis) in host.attrs.items():
        if axis is None:
            continue
        kind = kinds.observe(key, a.shape[axis], host.nodes, host.edges, host.graphs, op=op)
        if kind == "other":
            name = mask_name(key)
            if name in host.attrs or (name in counts and counts[name] != a.shape[axis]):
                name = key + "_mask"
            counts[name] = max(counts.get(name, 0), a.shape[axis])
    return counts
