"""What a PyG attribute becomes on the JAX side: the accepted inputs, the dtype rules, the devices.

Shared by :func:`~torch2jax_ops.geometric.data.from_pyg` (torch tensors over
DLPack) and the loaders (NumPy on the host). No torch import at module level:
the torch-free parts of the package import this too.
"""
from __future__ import annotations

import sys
from typing import Any, Optional

import jax
import numpy as np

__all__ = ["ACCEPTED", "is_pyg_data", "check_item", "is_node_reference", "is_graph_reference",
           "cat_axis", "target_dtype", "check_fits", "check_torch_device", "check_placement"]

#: What the loaders and from_pyg take, for error messages.
ACCEPTED = ("a torch_geometric.data.Data or Batch (what DataLoader, NeighborLoader, "
            "LinkNeighborLoader and ClusterLoader yield)")

#: Keys PyG keeps for its own bookkeeping that the converters consume.
BOOKKEEPING = ("num_nodes", "batch_size")

_INT64 = ("int64", "uint64")
_WIDE = {"float64": "float32", "complex128": "complex64"}


def is_pyg_data(obj: Any) -> bool:
    """A ``torch_geometric.data.Data`` / ``Batch`` (never imports torch_geometric itself)."""
    pyg = sys.modules.get("torch_geometric.data")
    return pyg is not None and isinstance(obj, pyg.Data)


def check_item(obj: Any, *, op: str, mappings: bool = False, where: str = "") -> str:
    """``"pyg"`` or ``"mapping"``; anything else: a TypeError naming its type and what is taken."""
    if is_pyg_data(obj):
        return "pyg"
    pyg = sys.modules.get("torch_geometric.data")
    if pyg is not None and isinstance(obj, getattr(pyg, "HeteroData", ())):
        raise TypeError(f"{op}: {where}got a HeteroData among homogeneous batches; a loader "
                        f"yields one kind: all HeteroData (padded per type as HeteroGraphs) "
                        f"or all Data/Batch")
    if mappings and isinstance(obj, dict) and "edge_index" in obj and (
            "x" in obj or "num_nodes" in obj):
        return "mapping"
    accepted = ACCEPTED + (" or a dict of NumPy/JAX arrays with 'edge_index' and 'x' (or "
                           "'num_nodes')" if mappings else "")
    hint = ""
    if isinstance(obj, (list, tuple)) and obj and is_pyg_data(obj[0]):
        hint = (" (a list of graphs: collate it with torch_geometric.data.Batch.from_data_list, "
                "or iterate a DataLoader)")
    raise TypeError(f"{op}: {where}expected {accepted}, got {type(obj).__module__}."
                    f"{type(obj).__qualname__}{hint}")


def is_node_reference(key: str) -> bool:
    """PyG increments these by the number of nodes when batching: their values are node ids."""
    return "index" in key or key == "face"


def is_graph_reference(key: str) -> bool:
    """Values that are graph ids (``batch``, ``x_batch``)."""
    return "batch" in key


def cat_axis(data: Any, key: str, value: Any) -> Optional[int]:
    """The axis PyG concatenates ``key`` along (its ``__cat_dim__``; -1 for ``*index*``)."""
    if hasattr(data, "__cat_dim__"):
        try:
            dim = data.__cat_dim__(key, value)
        except Exception:  # a custom __cat_dim__ that needs more context
            dim = None
    else:
        dim = -1 if is_node_reference(key) else 0
    if not isinstance(dim, int) or getattr(value, "ndim", 0) == 0:
        return None
    return dim % value.ndim


def target_dtype(dtype_name: str, key: str, *, x64: bool, allow_downcast: bool,
                 op: str) -> Optional[str]:
    """The dtype ``key`` becomes (None: kept), or a TypeError naming the attribute.

    * int64 / uint64: node and graph ids (``edge_index``, ``batch``, ``ptr``,
      ``*index*``, ``*batch*``) become int32 always; other integers become
      int32 / uint32 when JAX's 64-bit mode is off (checked: values that do not
      fit raise OverflowError) and stay 64-bit when it is on;
    * float64 / complex128 with the 64-bit mode off: TypeError, or float32 /
      complex64 with ``allow_downcast=True``;
    * everything else is kept.
    """
    if dtype_name in _INT64:
        if is_node_reference(key) or is_graph_reference(key) or key == "ptr":
            return "int32"
        if x64:
            return None
        return "int32" if dtype_name == "int64" else "uint32"
    if dtype_name in _WIDE and not x64:
        if allow_downcast:
            return _WIDE[dtype_name]
        raise TypeError(
            f"{op}: `{key}` is {dtype_name} and JAX's 64-bit mode is off (JAX would silently "
            f"round it to {_WIDE[dtype_name]}). Convert it in torch (data.{key} = "
            f"data.{key}.float(), or a dataset transform), pass allow_downcast=True to cast it "
            f"to {_WIDE[dtype_name]}, or enable jax.config.update('jax_enable_x64', True)")
    return None


def check_fits(lo: int, hi: int, target: str, key: str, *, x64: bool, op: str) -> None:
    """OverflowError naming ``key`` when values in ``[lo, hi]`` do not fit ``target``."""
    info = np.iinfo(target)
    if lo < info.min or hi > info.max:
        fix = ("node and graph ids must fit int32: split the batch" if
               (is_node_reference(key) or is_graph_reference(key) or key == "ptr") else
               "enable jax.config.update('jax_enable_x64', True) to keep it 64-bit" if not x64
               else "")
        raise OverflowError(f"{op}: `{key}` holds values in [{lo}, {hi}], which do not fit "
                            f"{target}; {fix}")


def _jax_has_gpu() -> bool:
    return any(d.platform in ("gpu", "cuda", "rocm") for d in jax.devices())


def check_torch_device(device: Any, key: str, *, op: str) -> None:
    """A CUDA tensor needs a JAX with GPU support; the error says how to move it."""
    kind = getattr(device, "type", str(device))
    if kind in ("cpu",):
        return
    if kind == "cuda" and _jax_has_gpu():
        return
    if kind == "meta":
        raise ValueError(f"{op}: `{key}` is on the 'meta' device and has no data")
    raise ValueError(
        f"{op}: `{key}` is on {device}, but this JAX has only {jax.default_backend()} devices "
        f"({', '.join(map(str, jax.devices()))}); move the batch to the CPU first "
        f"(data = data.cpu()), or install a JAX with GPU support (pip install 'jax[cuda12]')")


def check_placement(device: Any, *, op: str) -> None:
    """``device`` is None, a ``jax.Device`` or a ``jax.sharding.Sharding``."""
    if device is not None and not isinstance(device, (jax.Device, jax.sharding.Sharding)):
        raise TypeError(f"{op}: `device` must be a jax.Device or a jax.sharding.Sharding (or None "
                        f"for JAX's default device), got {device!r} (torch devices are not JAX "
                        f"devices: use jax.devices()[i])")
