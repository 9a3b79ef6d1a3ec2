"""Tensors and whole trees of them between torch and JAX over DLPack, zero-copy.

``to_jax(tensor)`` and ``to_torch(array)`` share the buffer whenever DLPack
allows it (check with :func:`shares_memory`). When sharing is impossible they
copy, or, with ``copy=False``, raise an error that says why. The traps:

* a tensor that requires grad is detached (never an error);
* non-compact strides (``t[:, ::2]``, ``expand``) need a compact copy
  (transposed and channels-last tensors are compact and are shared);
* a CPU buffer not aligned to 64 bytes (``t[1:]``, ``torch.from_numpy``) would
  be copied by JAX anyway;
* int64 / uint64 / float64 / complex128 while JAX's 64-bit mode is off: JAX
  would silently downcast (``2**40`` becomes ``0``), even with copy=False.
  Here that is a TypeError unless ``allow_downcast=True``, which converts to
  the 32-bit type and still refuses integers that do not fit;
* conjugate- and negative-bit views are resolved (a copy);
* meta tensors and traced JAX values are refused with the fix.

Sparse tensors go over as their parts: a torch sparse COO tensor becomes a
``jax.experimental.sparse.BCOO``, CSR a ``BCSR``, CSC a ``BCOO`` (JAX has no
CSC; the entries keep torch's column-major order); the values are shared as
any dense tensor is, the indices are int32 copies (shared int64 with JAX's
64-bit mode on). ``to_torch`` takes a ``BCOO`` or ``BCSR`` back (COO indices
become int64 copies, as torch requires; CSR keeps int32, shared).

Tensor subclasses with a JAX counterpart (:func:`register_tensor_type`) become
it: PyG's ``torch_geometric.EdgeIndex`` becomes
``torch2jax_ops.geometric.EdgeIndex`` (its index converted as above, its sort
order and sizes kept) once ``torch2jax_ops.geometric`` is loaded.

Placement: ``to_jax`` keeps a tensor on its own device (zero-copy) unless
``device=`` (a ``jax.Device`` or a ``jax.sharding.Sharding``) asks for
another, which costs one explicit transfer (refused with ``copy=False``).
Without ``device=`` the array of a contiguous tensor is *uncommitted*, as
``jnp.asarray``'s are: ``jax.jit`` (and eager ops) move it to where the
committed operands are, so ``jax.jit(lambda m, x: m(x))(port, to_jax(x))``
runs where the port's weights are (the GPU) instead of failing with
"incompatible devices". A transposed or channels-last tensor is shared in its
own layout, which JAX honours for committed arrays only: it stays committed
(``.contiguous()`` it, or pass ``device=``, to mix it with a GPU port). With
``device=`` the array is committed there.
Whatever builds a model or a batch -- :func:`tree_to_jax`,
``nn.from_torch``, state-dict imports, the loaders -- places on JAX's default
device (``jax.default_device``) or on ``device=``, so a checkpoint loaded on
the CPU lands where the user computes (the GPU, when there is one).

A shared buffer is shared both ways: an in-place torch op on the tensor
changes the JAX array (JAX assumes its arrays never change: a jitted function
may see either value). Pass ``copy=True`` for an independent result.

:func:`tree_to_jax` / :func:`tree_to_torch` do the same per leaf for nested
dicts, lists and tuples (a ``state_dict``, an optimizer state); errors name
the leaf's path.
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Optional, Union

import jax
import numpy as np

from . import _dtypes

__all__ = ["to_jax", "to_torch", "shares_memory", "tree_to_jax", "tree_to_torch",
           "default_device", "place", "register_tensor_type"]

#: Where an array goes: a device, a sharding (several devices), or None.
Placement = Union[jax.Device, jax.sharding.Sharding, None]

#: XLA:CPU shares a host buffer only when it is aligned to this many bytes.
CPU_ALIGNMENT = 64

#: torch.Tensor subclasses with a JAX counterpart of their own, by dotted class path
#: (``"torch_geometric.edge_index.EdgeIndex"``): a leaf registry the higher layers fill in
#: (loading ``torch2jax_ops.geometric`` registers PyG's ``EdgeIndex``), so this module
#: imports none of them.
_TENSOR_TYPES: dict[str, Callable[[Any, Callable[[Any], Any]], Any]] = {}


def register_tensor_type(path: str,
                         convert: Callable[[Any, Callable[[Any], Any]], Any]) -> None:
    """Make :func:`to_jax` convert the torch.Tensor subclass at ``path`` with ``convert``.

    Args:
      path: the class's ``module.qualname`` (``"torch_geometric.edge_index.EdgeIndex"``);
        subclasses of it convert the same way unless registered themselves.
      convert: ``convert(tensor, to_jax_plain)``; ``to_jax_plain(t)`` is :func:`to_jax`
        on a plain tensor with the caller's ``copy`` / ``allow_downcast`` / ``device``
        (pass it the subclass's data as a plain ``torch.Tensor``).
    """
    if not isinstance(path, str) or "." not in path:
        raise ValueError(f"register_tensor_type: `path` must be a dotted class path "
                         f"('package.module.Class'), got {path!r}")
    if not callable(convert):
        raise TypeError(f"register_tensor_type: `convert` must be callable, got "
                        f"{type(convert).__name__}")
    _TENSOR_TYPES[path] = convert


def _tensor_type_converter(tensor: Any) -> Optional[Callable[[Any, Callable[[Any], Any]], Any]]:
    """The registered converter of ``tensor``'s class (or of its nearest registered base)."""
    if not _TENSOR_TYPES:
        return None
    for cls in type(tensor).__mro__:
        found = _TENSOR_TYPES.get(f"{cls.__module__}.{cls.__qualname__}")
        if found is not None:
            return found
    return None


def _is_compact(t) -> bool:
    """Strides are a permutation of a dense layout (transposes are fine)."""
    if t.numel() <= 1:
        return True
    dims = sorted((s, n) for s, n in zip(t.stride(), t.shape) if n != 1)
    expected = 1
    for stride, size in dims:
        if stride != expected:
            return False
        expected *= size
    return True


def _refuse_copy(copy: Optional[bool], why: str, fix: str) -> None:
    if copy is False:
        raise ValueError(f"to_jax: {why}, so the tensor cannot be shared with copy=False. {fix}")


def _downcast(t, name: str, copy: Optional[bool], allow_downcast: bool):
    """int64/uint64/float64/complex128 with JAX's 64-bit mode off."""
    import torch

    target = _dtypes.X64_DOWNCAST[name]
    if not allow_downcast:
        raise TypeError(
            f"to_jax: a {name} tensor needs JAX's 64-bit mode, which is off; JAX would silently "
            f"convert it to {target} (int64 2**40 becomes 0). Enable the mode before using JAX "
            f"(jax.config.update('jax_enable_x64', True)), or pass allow_downcast=True to "
            f"convert to {target} (a copy)")
    _refuse_copy(copy, f"converting {name} to {target} makes a new buffer",
                 "Enable jax_enable_x64 to share it, or pass copy=None")
    if name in ("int64", "uint64") and t.numel():
        signed = t if name == "int64" else t.view(torch.int64)  # uint64 >= 2**63 reads < 0
        lo, hi = int(signed.min()), int(signed.max())
        info = np.iinfo(target)
        if lo < info.min or hi > info.max:
            shown = f"[{lo}, {hi}]" if name == "int64" else "above 2**32 - 1"
            raise OverflowError(f"to_jax: {name} values {shown} do not fit in {target}; enable "
                                f"jax_enable_x64 instead of passing allow_downcast=True")
    return t.to(_dtypes.torch_dtype(target))


def default_device() -> jax.Device:
    """JAX's default device now: ``jax.default_device``'s (context or config), else the first
    device of the default backend."""
    # a dynamic attribute: jax's Config class declares none of its options
    chosen = jax.config.jax_default_device  # type: ignore[attr-defined]
    if chosen is None:
        return jax.devices()[0]
    if isinstance(chosen, str):  # a platform name
        return jax.devices(chosen)[0]
    return chosen


def place(array: jax.Array, device: Placement, *, copy: Optional[bool] = None,
          op: str = "place") -> jax.Array:
    """``array`` on ``device`` (a ``jax.Device`` or a ``Sharding``); the same array when it is there.

    A move is one explicit ``jax.device_put``; ``copy=False`` refuses it with
    a ValueError that says where the array is and where it was asked to go.
    """
    if device is None:
        return array
    if isinstance(device, jax.sharding.Sharding):
        if array.sharding == device or (
                isinstance(array.sharding, jax.sharding.SingleDeviceSharding)
                and device.is_fully_replicated and len(device.device_set) == 1
                and device.device_set == array.sharding.device_set):
            return array
        target = device
    elif isinstance(device, jax.Device):
        if array.devices() == {device}:
            return array
        target = device
    else:
        raise TypeError(f"{op}: `device` must be a jax.Device or a jax.sharding.Sharding, got "
                        f"{type(device).__name__} (torch devices are not JAX devices: use "
                        f"jax.devices()[i])")
    if copy is False:
        raise ValueError(f"{op}: the array is on {sorted(map(str, array.devices()))} and "
                         f"device={device} needs a transfer (a copy), but copy=False")
    return jax.device_put(array, target)


def to_jax(tensor: Any, *, copy: Optional[bool] = None, allow_downcast: bool = False,
           device: Placement = None) -> Any:  # a jax.Array (BCOO / BCSR for sparse tensors)
    """A torch tensor as a JAX array of the same shape and dtype, sharing its memory.

    Args:
      tensor: a strided torch tensor of any shape (0-d and empty too) on the
        CPU, or on a GPU that JAX also sees. ``requires_grad`` is fine: the
        tensor is detached. A sparse COO / CSR / CSC tensor (CSR and CSC
        2-D, with dense dims) gives a ``jax.experimental.sparse`` ``BCOO`` /
        ``BCSR`` / ``BCOO``: values shared as a dense tensor's are, indices
        int32 copies (int64, shared, in 64-bit mode). A
        ``torch_sparse.SparseTensor`` gives a
        :class:`torch2jax_ops.geometric.SparseTensor` (row, col, value or
        None, sparse_sizes; the layers read it with PyG's SparseTensor rules).
      copy: ``None`` shares when possible and copies otherwise; ``True`` always
        returns an independent copy; ``False`` shares or raises ValueError
        saying why it cannot.
      allow_downcast: with JAX's 64-bit mode off, convert int64/uint64/float64/
        complex128 to their 32-bit types (a copy); integers that do not fit
        raise OverflowError. Without it such tensors raise TypeError.
      device: ``None`` keeps the tensor's own device (zero-copy), uncommitted
        for a contiguous tensor: ``jax.jit`` moves it to where its committed
        operands (a port's weights) are, as it does ``jnp.asarray``'s arrays
        (a transposed tensor keeps its layout and stays committed). A ``jax.Device`` or
        ``Sharding`` commits the result there: zero-copy when the tensor is
        already there, one explicit transfer otherwise (``copy=False`` then
        raises).

    Returns:
      A ``jax.Array`` on the tensor's device (or ``device``). When shared,
      in-place torch writes to the tensor show in it.
    """
    import torch

    if not isinstance(tensor, torch.Tensor):
        registered = _tensor_type_converter(tensor)
        if registered is not None:  # a tensor-like type (torch_sparse.SparseTensor): its
            # index tensors are ids (downcast checked), its values follow the caller's rules
            return registered(tensor, lambda t: to_jax(
                t if t.is_floating_point() else t.contiguous(), copy=copy,
                allow_downcast=allow_downcast or not t.is_floating_point(), device=device))
        hint = (" (it is already a JAX array)" if isinstance(tensor, jax.Array) else
                "; for NumPy arrays and Python numbers use jnp.asarray")
        raise TypeError(f"to_jax: expected a torch.Tensor, got {type(tensor).__name__}{hint}")
    if type(tensor) is not torch.Tensor and not isinstance(tensor, torch.nn.Parameter):
        subclass = _tensor_type_converter(tensor)
        if subclass is not None:
            return subclass(tensor, lambda t: to_jax(t, copy=copy, allow_downcast=allow_downcast,
                                                     device=device))
    if tensor.device.type == "meta":
        raise ValueError("to_jax: a tensor on the 'meta' device has no data to share")
    if tensor.layout != torch.strided:
        return _sparse_to_jax(tensor, copy, allow_downcast, device)
    t = tensor.detach()
    if t.is_conj():
        _refuse_copy(copy, "it has the conjugate bit set (a lazy .conj())",
                     "Call tensor.resolve_conj() first, or pass copy=None")
        t = t.resolve_conj()
    if t.is_neg():
        _refuse_copy(copy, "it has the negative bit set (a lazy negation)",
                     "Call tensor.resolve_neg() first, or pass copy=None")
        t = t.resolve_neg()
    name = _dtypes.name_of(t.dtype)
    if name in _dtypes.X64_NAMES and not _dtypes.x64_enabled():
        t = _downcast(t, name, copy, allow_downcast)
    if not _is_compact(t):
        _refuse_copy(copy, f"its strides {tuple(t.stride())} for shape {tuple(t.shape)} have gaps "
                     f"or repeats (a slice with a step, or expand) that DLPack cannot describe",
                     "Pass copy=None to copy, or call .contiguous() first")
        t = t.contiguous()
    if copy:
        # jax.dlpack.from_dlpack(copy=True) still shares on CPU; copy here instead.
        t = t.clone(memory_format=torch.contiguous_format)
    if t.device.type == "cpu" and t.numel() and t.data_ptr() % CPU_ALIGNMENT:
        _refuse_copy(copy, f"its CPU buffer is not {CPU_ALIGNMENT}-byte aligned (address % "
                     f"{CPU_ALIGNMENT} = {t.data_ptr() % CPU_ALIGNMENT}; e.g. t[1:] or "
                     f"torch.from_numpy), and JAX would copy it",
                     "Pass copy=None, or .clone() it into a fresh torch allocation")
        t = t.clone(memory_format=torch.contiguous_format)
    try:
        array = jax.dlpack.from_dlpack(t)
    except (BufferError, ValueError, RuntimeError) as exc:
        raise ValueError(f"to_jax: JAX cannot import a tensor on {t.device} ({exc}); JAX's "
                         f"devices are {jax.devices()}. Move it with tensor.to(...) first") from exc
    if copy is False and t.numel() and array.unsafe_buffer_pointer() != t.data_ptr():
        raise ValueError(f"to_jax: JAX copied the {t.device} tensor while importing it, but "
                         f"copy=False; pass copy=None to allow the copy")
    if device is None:
        # JAX takes an uncommitted argument to have its default (row-major) layout: a
        # transposed or channels-last tensor, shared as it is, stays committed
        return _uncommitted(array) if t.is_contiguous() else array
    return place(array, device, copy=copy, op="to_jax")


def _sparse_to_jax(tensor: Any, copy: Optional[bool], allow_downcast: bool,
                   device: Placement) -> Any:
    """A torch sparse COO / CSR / CSC tensor as a ``BCOO`` / ``BCSR`` / ``BCOO``."""
    import torch
    from jax.experimental import sparse as jsparse

    t = tensor.detach()
    shape = tuple(t.shape)
    if t.layout not in (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc):
        raise TypeError(f"to_jax: a {t.layout} tensor has no JAX counterpart; convert it with "
                        f".to_sparse_csr() or .to_sparse_coo() (or .to_dense()) first")

    def values(v):
        return to_jax(v, copy=copy, allow_downcast=allow_downcast, device=device)

    def ids(i):
        # shape dims fit in int32 unless an axis has 2**31 or more entries
        if _dtypes.x64_enabled():
            return to_jax(i.contiguous(), copy=copy, device=device)
        if max(shape, default=0) > np.iinfo(np.int32).max or i.numel() > np.iinfo(np.int32).max:
            raise OverflowError(f"to_jax: the sparse tensor of shape {shape} has indices that do "
                                f"not fit in int32; enable jax_enable_x64")
        return to_jax(i.to(torch.int32).contiguous(), device=device)

    if t.layout == torch.sparse_coo:
        coalesced = t.is_coalesced()
        if t.sparse_dim() == 0:
            raise ValueError("to_jax: a sparse COO tensor with no sparse dimension; use "
                             "tensor.to_dense()")
        # [n_sparse, nnz] -> BCOO's [nnz, n_sparse]; values [nnz, *dense] as they are
        return jsparse.BCOO((values(t._values()), ids(t._indices().T)), shape=shape,
                            indices_sorted=coalesced, unique_indices=coalesced)
    if t.dim() - t.dense_dim() != 2:
        raise ValueError(f"to_jax: a batched {t.layout} tensor (shape {shape}, "
                         f"{t.dim() - t.dense_dim() - 2} batch dims) is not supported; "
                         f"convert each matrix, or .to_sparse_coo() it")
    if t.layout == torch.sparse_csr:
        return jsparse.BCSR((values(t.values()), ids(t.col_indices()), ids(t.crow_indices())),
                            shape=shape)
    # CSC: rows from row_indices, each entry's column from the pointers; torch's
    # column-major entry order, so neither sorted (row-major) nor known unique
    pointers = t.ccol_indices()
    cols = torch.repeat_interleave(torch.arange(shape[1], device=pointers.device),
                                   pointers[1:] - pointers[:-1])
    return jsparse.BCOO((values(t.values()), ids(torch.stack([t.row_indices(), cols], dim=1))),
                        shape=shape)


def _sparse_to_torch(array: Any, copy: Optional[bool]) -> Any:
    """A ``BCOO`` / ``BCSR`` as a torch sparse COO / CSR tensor."""
    import torch
    from jax.experimental import sparse as jsparse

    if array.n_batch:
        raise ValueError(f"to_torch: a {type(array).__name__} with {array.n_batch} batch "
                         f"dimension(s) has no torch counterpart; "
                         f"jax.experimental.sparse.bcoo_update_layout(x, n_batch=0) first")
    data = to_torch(array.data, copy=copy)
    if isinstance(array, jsparse.BCOO):
        indices = to_torch(array.indices).T.to(torch.int64)  # torch's COO takes int64 only
        return torch.sparse_coo_tensor(indices, data, size=array.shape,
                                       is_coalesced=bool(array.indices_sorted
                                                         and array.unique_indices))
    return torch.sparse_csr_tensor(to_torch(array.indptr, copy=copy),
                                   to_torch(array.indices, copy=copy), data, size=array.shape)


def _uncommitted(array: jax.Array) -> jax.Array:
    """The same buffer, uncommitted (what ``jnp.asarray`` gives): jit follows the committed
    operands and moves it there. JAX has no public call for it; where its constructor is
    not the one this uses, the array stays committed (the test of the rule says so)."""
    try:
        from jax._src.array import ArrayImpl
        return ArrayImpl(array.aval, array.sharding, list(array._arrays),  # type: ignore[attr-defined]
                         committed=False)
    except (ImportError, AttributeError, TypeError):  # pragma: no cover -- another JAX
        return array


def to_torch(array: Any, *, copy: Optional[bool] = None) -> Any:  # a torch.Tensor
    """A JAX array as a torch tensor of the same shape and dtype, sharing its memory.

    Args:
      array: a concrete ``jax.Array`` on one device (not a tracer from inside
        ``jax.jit`` / ``grad`` / ``vmap``), or a ``BCOO`` / ``BCSR`` without
        batch dimensions (a sparse COO tensor with int64 indices, copied / a
        sparse CSR tensor with the indices shared).
      copy: ``None`` or ``False`` share the buffer (always possible for a
        single-device array); ``True`` returns an independent copy.

    Returns:
      A contiguous torch tensor on the array's device. When shared, in-place
      torch writes to it change the JAX array too: keep it read-only, or copy.
    """
    import torch

    if isinstance(array, jax.core.Tracer):
        raise TypeError("to_torch: got a traced value (inside jax.jit / grad / vmap); torch can "
                        "only take concrete arrays. Convert outside the transformed function, "
                        "or call torch from JAX with torch2jax_ops.bridge.as_jax")
    if isinstance(array, torch.Tensor):
        raise TypeError("to_torch: got a torch.Tensor (it is already a torch tensor)")
    from jax.experimental import sparse as jsparse
    if isinstance(array, (jsparse.BCOO, jsparse.BCSR)):
        return _sparse_to_torch(array, copy)
    if not isinstance(array, jax.Array):
        hint = "torch.from_numpy" if isinstance(array, np.ndarray) else "torch.as_tensor"
        raise TypeError(f"to_torch: expected a jax.Array, got {type(array).__name__}; use {hint}")
    if len(array.devices()) != 1:
        raise ValueError(f"to_torch: the array is sharded over {len(array.devices())} devices; "
                         f"DLPack takes one buffer. Gather it first, e.g. "
                         f"jax.device_put(array, jax.devices()[0])")
    tensor = torch.from_dlpack(array)
    return tensor.clone() if copy else tensor


def _extent(tensor) -> tuple[int, int]:
    """The byte range [start, stop) a strided torch tensor touches."""
    size = tensor.element_size()
    low = sum(s * (n - 1) for s, n in zip(tensor.stride(), tensor.shape) if s < 0)
    high = sum(s * (n - 1) for s, n in zip(tensor.stride(), tensor.shape) if s > 0)
    return tensor.data_ptr() + low * size, tensor.data_ptr() + (high + 1) * size


def shares_memory(tensor: Any, array: Any) -> bool:
    """True when a torch tensor and a JAX array overlap in memory (either order).

    A torch view into part of the array's buffer counts. Empty tensors and
    arrays hold no bytes and share nothing.
    """
    import torch

    if isinstance(array, torch.Tensor) and isinstance(tensor, jax.Array):
        tensor, array = array, tensor
    if not (isinstance(tensor, torch.Tensor) and isinstance(array, jax.Array)):
        raise TypeError(f"shares_memory: expected a torch.Tensor and a jax.Array, got "
                        f"{type(tensor).__name__} and {type(array).__name__}")
    if tensor.numel() == 0 or array.size == 0:
        return False
    start, stop = _extent(tensor)
    base = array.unsafe_buffer_pointer()
    return start < base + array.nbytes and base < stop


def _map_leaves(fn, tree: Any, name: str, leaf_type: type) -> Any:
    """Apply ``fn`` to every ``leaf_type`` leaf; errors name the leaf's path."""
    def convert(path, leaf):
        if not isinstance(leaf, leaf_type):
            return leaf
        try:
            return fn(leaf)
        except (TypeError, ValueError, OverflowError) as exc:
            where = jax.tree_util.keystr(path) or "<root>"
            raise type(exc)(f"{name}: at {where}: {exc}") from exc

    out = jax.tree_util.tree_map_with_path(convert, tree)
    if hasattr(tree, "_metadata"):  # a torch state_dict keeps its version metadata
        out._metadata = tree._metadata
    return out


def tree_to_jax(tree: Any, *, copy: Optional[bool] = None, allow_downcast: bool = False,
                device: Placement = None) -> Any:
    """:func:`to_jax` on every torch tensor in a nested dict/list/tuple, placed where JAX computes.

    Other leaves (numbers, strings, None, NumPy arrays) pass through unchanged,
    and the containers keep their types (a ``state_dict`` stays an
    ``OrderedDict``). ``copy`` and ``allow_downcast`` apply to every tensor;
    an error names the leaf's path, e.g. ``['bn.num_batches_tracked']``.

    Unlike :func:`to_jax`, a tree (a checkpoint, a batch) goes to JAX's
    default device (:func:`default_device`) unless ``device=`` names another:
    zero-copy where the tensors already are there, one transfer each otherwise.
    A tree with no torch tensors (NumPy arrays only) needs no torch installed.
    """
    torch = sys.modules.get("torch")
    if torch is None:  # torch never imported: no leaf can be a torch tensor
        return tree
    target = default_device() if device is None else device
    return _map_leaves(lambda t: to_jax(t, copy=copy, allow_downcast=allow_downcast,
                                        device=target), tree, "tree_to_jax", torch.Tensor)


def tree_to_torch(tree: Any, *, copy: Optional[bool] = None) -> Any:
    """:func:`to_torch` on every JAX array in a nested dict/list/tuple.

    Other leaves pass through unchanged; the result can go straight into
    ``module.load_state_dict``.
    """
    return _map_leaves(lambda a: to_torch(a, copy=copy), tree, "tree_to_torch", jax.Array)
