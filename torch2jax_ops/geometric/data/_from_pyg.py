"""A PyG ``Data`` / ``Batch`` as a :class:`~torch2jax_ops.geometric.PaddedGraph`, zero-copy."""
from __future__ import annotations

from typing import Any, Optional, Union

import jax
import numpy as np

from ... import _dtypes
from ..._batch_vector import BatchVector
from ...dlpack import Placement, default_device
from ._hetero import HeteroGraph, hetero_from_pyg, is_hetero
from ._padding import PaddedGraph
from ._rules import BOOKKEEPING, check_item, check_placement
from ._tensor import convert_tensor

__all__ = ["from_pyg", "num_graphs_of"]

_FIELDS = ("x", "edge_index", "edge_attr", "y", "batch")


def num_graphs_of(data: Any) -> int:
    """Graphs in a ``Batch`` (its ``num_graphs``), else ``batch.max() + 1``, else 1."""
    count = getattr(data, "num_graphs", None) if hasattr(type(data), "num_graphs") else None
    if isinstance(count, int):
        return count
    batch = data["batch"] if "batch" in data else None
    if batch is not None and batch.numel():
        return int(batch.max()) + 1
    return 1


def _host(array: np.ndarray, device: Placement) -> jax.Array:
    return jax.device_put(array, device)


def from_pyg(data: Any, *, device: Placement = None, copy: Optional[bool] = None,
             allow_downcast: bool = False) -> Union[PaddedGraph, HeteroGraph]:
    """A PyG ``Data`` or ``Batch`` as a :class:`~torch2jax_ops.geometric.PaddedGraph` of JAX arrays.

    Nothing is padded (every mask is all True, there is no padding graph) and
    nothing is truncated: the tensors are shared with torch over DLPack
    wherever the dtype stays (check with ``torch2jax_ops.shares_memory``).
    For fixed shapes under ``jax.jit``, iterate a
    :class:`~torch2jax_ops.geometric.loader.JaxLoader` instead.

    Fields: ``x [n, F]`` (None without features), ``edge_index [2, e]``
    (int32), ``edge_attr [e, D]`` or None, ``batch [n]`` (int32; zeros for a
    single graph), ``y`` as PyG has it (or None), ``node_mask [n]``,
    ``edge_mask [e]``, ``graph_mask [g]``, ``seed_mask [n]`` when the data
    has a ``batch_size`` (a ``NeighborLoader`` batch: its first ``batch_size``
    nodes are the seeds), else None; ``extras``: every other attribute by
    name -- tensors converted by the same rules (``train_mask``, ``n_id``,
    ``ptr``, ``edge_label_index`` ...), anything else (Python numbers, lists,
    strings) untouched.

    Dtypes: node and graph ids (``edge_index``, ``batch``, ``ptr``,
    ``*index*``, ``*batch*``) become int32 (a checked copy: an OverflowError
    names the attribute whose values do not fit); other int64 tensors become
    int32 too while JAX's 64-bit mode is off (checked), and stay int64 (shared)
    when it is on; float64 needs the 64-bit mode or ``allow_downcast=True``
    (float32), else a TypeError names the attribute.

    A ``HeteroData`` gives a :class:`~torch2jax_ops.geometric.data.HeteroGraph`
    by the same rules, per type: ``x_dict``, ``edge_index_dict`` (int32),
    ``edge_attr_dict``, ``y_dict``, masks per type, ``seed_mask_dict``, and the
    other attributes in ``extras[type][name]``; call a ported hetero model as
    ``port(g.x_dict, g.edge_index_dict)``.

    Args:
      data: a ``torch_geometric.data.Data``, ``Batch`` or ``HeteroData``.
      device: where the arrays go: JAX's default device (``None``), or a
        ``jax.Device`` / ``jax.sharding.Sharding``. Zero-copy where the
        tensors already are there.
      copy: ``None`` shares where possible; ``True`` copies every tensor;
        ``False`` raises (ValueError naming the attribute) where a tensor
        cannot be shared (a dtype conversion, an unaligned view).
      allow_downcast: cast float64 / complex128 to 32 bits when JAX's 64-bit
        mode is off.

    Raises:
      TypeError: ``data`` is not a Data/Batch (naming its type and what is
        accepted); a float64 attribute without the 64-bit mode; a sparse tensor.
      OverflowError: ids that do not fit int32 (naming the attribute).
      ValueError: a CUDA tensor while JAX has no GPU (saying how to move it).
    """
    import torch

    op = "from_pyg"
    if is_hetero(data):
        return hetero_from_pyg(data, device=device, copy=copy, allow_downcast=allow_downcast,
                               op=op)
    check_item(data, op=op)
    check_placement(device, op=op)
    target = default_device() if device is None else device
    x64 = bool(_dtypes.x64_enabled())

    def convert(key: str, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return convert_tensor(value, key, device=target, copy=copy, allow_downcast=allow_downcast,
                           x64=x64, op=op)
        return value

    n = int(data.num_nodes or 0)
    values = {key: data[key] for key in data.keys()}
    fields = {k: convert(k, values.pop(k, None)) for k in _FIELDS}
    if fields["edge_index"] is None:
        fields["edge_index"] = _host(np.zeros((2, 0), np.int32), target)
    e = int(fields["edge_index"].shape[1])
    g = num_graphs_of(data)
    if fields["batch"] is None:
        fields["batch"] = _host(np.zeros((n,), np.int32), target)
        largest = n
    else:  # PyG's to_dense_batch default: the largest graph
        largest = int(np.bincount(np.asarray(fields["batch"])).max()) if n else 0
    batch_size = values.get("batch_size")
    seed_mask = None
    if isinstance(batch_size, int):
        seed_mask = _host(np.arange(n) < batch_size, target)
    extras = {key: convert(key, value) for key, value in values.items()
              if key not in BOOKKEEPING}
    return PaddedGraph(
        x=fields["x"], edge_index=fields["edge_index"], edge_attr=fields["edge_attr"],
        batch=BatchVector(fields["batch"], g, max_num_nodes=largest),
        node_mask=_host(np.ones((n,), bool), target),
        edge_mask=_host(np.ones((e,), bool), target),
        graph_mask=_host(np.ones((g,), bool), target),
        y=fields["y"], seed_mask=seed_mask, extras=extras)

