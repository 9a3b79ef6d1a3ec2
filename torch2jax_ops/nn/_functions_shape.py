"""The mapping table: shapes (view, reshape, cat, split ...) and indexing (x[i], gather ...)."""
from __future__ import annotations

import builtins
import math
import operator
from typing import Any, Iterable, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._batch_vector import BatchVector
from .._checking import is_array, is_traced
from . import _masked
from ._functions_base import (
    as_array,
    concrete,
    dim_arg,
    dims_arg,
    dtype_arg,
    function,
    is_scalar,
    long_dtype,
    method,
    op,
    promote,
    promote_types,
    size_args,
)

__all__: list = []


def _varargs(args: tuple) -> tuple:
    """``f(1, 2)`` / ``f((1, 2))`` / ``f([1, 2])`` -> ``(1, 2)`` (the dims of permute, flip ...)."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)


# ------------------------------------------------------------------------ view, reshape

@method("view")
def view(self: jax.Array, *shape: Any) -> jax.Array:
    """``Tensor.view(*shape)`` (one -1 is inferred), or ``view(dtype)``: a same-width bitcast."""
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, int, np.integer)):
        dt = dtype_arg(shape[0], op="view")
        if jnp.dtype(dt).itemsize != jnp.dtype(self.dtype).itemsize:
            raise ValueError(f"view: viewing {self.dtype} as {dt} changes the element size; "
                             f"only same-width dtypes are supported")
        if dt is None:  # view(None): jax.lax.bitcast_convert_type raises this too
            raise ValueError("dtype must be specified.")
        return jax.lax.bitcast_convert_type(self, dt)
    return _reshape(self, size_args(shape, op="view", name="shape"), "view")


def _reshape(x: jax.Array, shape: tuple, name: str) -> jax.Array:
    if sum(1 for s in shape if s == -1) > 1:
        raise ValueError(f"{name}: only one dimension can be inferred (-1), got {shape}")
    known = math.prod(s for s in shape if s != -1)
    if (-1 not in shape and known != x.size) or (-1 in shape and (known == 0 or x.size % known)):
        raise ValueError(f"{name}: shape {list(shape)} is invalid for input of size {x.size}")
    return jnp.reshape(x, shape)


@op("reshape")
def reshape(input: jax.Array, *shape: Any) -> jax.Array:
    """``torch.reshape(input, shape)`` / ``Tensor.reshape(*shape)``."""
    return _reshape(input, size_args(shape, op="reshape", name="shape"), "reshape")


@method("view_as", "reshape_as")
def view_as(self: jax.Array, other: jax.Array) -> jax.Array:
    return _reshape(self, tuple(other.shape), "view_as")


@op("flatten")
def flatten(input: jax.Array, start_dim: int = 0, end_dim: int = -1) -> jax.Array:
    """``torch.flatten``: dims ``start_dim..end_dim`` into one (a 0-d tensor becomes 1-d)."""
    if input.ndim == 0:
        return input.reshape(1)
    s = dim_arg(start_dim, input.ndim, "start_dim", op="flatten")
    e = dim_arg(end_dim, input.ndim, "end_dim", op="flatten")
    if s > e:
        raise ValueError(f"flatten: start_dim ({start_dim}) cannot come after end_dim ({end_dim})")
    shape = input.shape[:s] + (math.prod(input.shape[s:e + 1]),) + input.shape[e + 1:]
    return input.reshape(shape)


@op("unflatten")
def unflatten(input: jax.Array, dim: int, sizes: Sequence[int]) -> jax.Array:
    """``torch.unflatten(input, dim, sizes)``: one dim into ``sizes`` (one -1 inferred)."""
    d = dim_arg(dim, input.ndim, op="unflatten")
    sizes = size_args((sizes,), op="unflatten", name="sizes")
    if -1 in sizes:
        known = math.prod(s for s in sizes if s != -1)
        sizes = tuple(input.shape[d] // known if s == -1 else s for s in sizes)
    if math.prod(sizes) != input.shape[d]:
        raise ValueError(f"unflatten: provided sizes {list(sizes)} don't multiply up to the size "
                         f"of dim {dim} ({input.shape[d]}) in the input tensor")
    return input.reshape(input.shape[:d] + tuple(sizes) + input.shape[d + 1:])


@op("squeeze", inplace="same")
def squeeze(input: jax.Array, dim: Any = None) -> jax.Array:
    """``torch.squeeze(input, dim=None)``: drops the given (or all) dims of size 1; dims of
    another size are left as they are (no error, as in torch)."""
    dims: Iterable[int]
    if dim is None:
        dims = range(input.ndim)
    else:
        dims = dims_arg(dim, input.ndim, op="squeeze") or ()
    drop = tuple(d for d in dims if input.ndim and input.shape[d] == 1)
    return jnp.squeeze(input, drop) if drop else input


@op("unsqueeze", inplace="same")
def unsqueeze(input: jax.Array, dim: int) -> jax.Array:
    """``torch.unsqueeze(input, dim)``: ``dim`` in ``[-ndim-1, ndim]``."""
    return jnp.expand_dims(input, dim_arg(dim, input.ndim + 1, op="unsqueeze"))


@op("transpose", functions=("torch.swapaxes", "torch.swapdims"),
    methods=("swapaxes", "swapdims"), inplace="same")
def transpose(input: jax.Array, dim0: int, dim1: int) -> jax.Array:
    """``torch.transpose(input, dim0, dim1)``."""
    if input.ndim == 0:
        dim_arg(dim0, 0, "dim0", op="transpose")
        dim_arg(dim1, 0, "dim1", op="transpose")
        return input
    return jnp.swapaxes(input, dim_arg(dim0, input.ndim, "dim0", op="transpose"),
                        dim_arg(dim1, input.ndim, "dim1", op="transpose"))


@op("t", inplace="same")
def t(input: jax.Array) -> jax.Array:
    """``torch.t``: transposes a 2-D tensor; 0-D and 1-D tensors are returned as they are."""
    if input.ndim > 2:
        raise ValueError(f"t: expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return input.T


@op("permute")
def permute(input: jax.Array, *dims: Any) -> jax.Array:
    """``torch.permute(input, dims)`` / ``Tensor.permute(*dims)``."""
    dims = _varargs(dims)
    if len(dims) != input.ndim:
        raise ValueError(f"permute: number of dims don't match in permute: the input has "
                         f"{input.ndim} dims, got {len(dims)}")
    dims = tuple(dim_arg(d, input.ndim, op="permute") for d in dims)
    if len(set(dims)) != len(dims):
        raise ValueError(f"permute: repeated dim in {dims}")
    return jnp.transpose(input, dims)


@op("movedim", functions=("torch.moveaxis",), methods=("moveaxis",))
def movedim(input: jax.Array, source: Any, destination: Any) -> jax.Array:
    """``torch.movedim(input, source, destination)`` (ints or sequences)."""
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        raise ValueError(f"movedim: Invalid source or destination dims: source ({list(src)} "
                         f"dims) should contain the same number of dims as destination "
                         f"({list(dst)} dims)")
    return jnp.moveaxis(input, [dim_arg(d, input.ndim, "source", op="movedim") for d in src],
                        [dim_arg(d, input.ndim, "destination", op="movedim") for d in dst])


@method("expand")
def expand(self: jax.Array, *sizes: Any) -> jax.Array:
    """``Tensor.expand(*sizes)``: -1 keeps a dim; new dims are added in front."""
    sizes = size_args(sizes, op="expand", name="sizes")
    if len(sizes) < self.ndim:
        raise ValueError(f"expand: the number of sizes provided ({len(sizes)}) must be greater "
                         f"or equal to the number of dimensions in the tensor ({self.ndim})")
    lead = len(sizes) - self.ndim
    shape = []
    for i, s in enumerate(sizes):
        if i < lead:
            if s < 0:
                raise ValueError(f"expand: -1 is not allowed in a leading, non-existing "
                                 f"dimension {i}")
            shape.append(s)
            continue
        own = self.shape[i - lead]
        if s == -1:
            s = own
        if own != s and own != 1:
            raise ValueError(f"expand: the expanded size of the tensor ({s}) must match the "
                             f"existing size ({own}) at non-singleton dimension {i}. Target "
                             f"sizes: {list(sizes)}. Tensor sizes: {list(self.shape)}")
        shape.append(s)
    return jnp.broadcast_to(self, tuple(shape))


@method("expand_as")
def expand_as(self: jax.Array, other: jax.Array) -> jax.Array:
    return expand(self, tuple(other.shape))


@op("broadcast_to")
def broadcast_to(input: jax.Array, size: Sequence[int]) -> jax.Array:
    """``torch.broadcast_to(input, size)`` (-1 keeps a dim)."""
    return expand(input, tuple(size))


@function("torch.broadcast_tensors")
def broadcast_tensors(*tensors: jax.Array) -> tuple:
    shape = jnp.broadcast_shapes(*(t.shape for t in tensors))
    return tuple(jnp.broadcast_to(t, shape) for t in tensors)


@method("repeat")
def repeat(self: jax.Array, *sizes: Any) -> jax.Array:
    """``Tensor.repeat(*sizes)``: tile; ``len(sizes) >= dim()`` (new dims in front)."""
    sizes = size_args(sizes, op="repeat", name="sizes")
    if len(sizes) < self.ndim:
        raise ValueError(f"repeat: number of dimensions of repeat dims ({len(sizes)}) can not be "
                         f"smaller than number of dimensions of tensor ({self.ndim})")
    x = self.reshape((1,) * (len(sizes) - self.ndim) + self.shape)
    return jnp.tile(x, sizes)


@op("tile")
def tile(input: jax.Array, *dims: Any) -> jax.Array:
    """``torch.tile(input, dims)``: like repeat, fewer dims than the tensor are padded with 1s."""
    return jnp.tile(input, size_args(dims, op="tile", name="dims"))


@op("repeat_interleave")
def repeat_interleave(input: jax.Array, repeats: Any = None, dim: Optional[int] = None, *,
                      output_size: Optional[int] = None) -> jax.Array:
    """``torch.repeat_interleave(input, repeats, dim=None, output_size=None)``.

    ``repeats`` is an int or a tensor; a tensor's values decide the output's
    length, so under ``jax.jit`` pass ``output_size`` (their sum). The
    one-argument form ``repeat_interleave(repeats)`` repeats ``arange(len)``.
    """
    if repeats is None:  # torch.repeat_interleave(repeats)
        repeats, input, dim = input, jnp.arange(input.shape[0], dtype=input.dtype), 0
    x = input.reshape(-1) if dim is None else input
    axis = 0 if dim is None else dim_arg(dim, input.ndim, op="repeat_interleave")
    if is_array(repeats):
        if repeats.ndim > 1:
            raise ValueError(f"repeat_interleave: `repeats` must be 0-d or 1-d, got "
                             f"{repeats.ndim}-d")
        if repeats.ndim == 1 and repeats.shape[0] not in (1, x.shape[axis]):
            raise ValueError(f"repeat_interleave: `repeats` must have the same size as input "
                             f"along dim {axis} ({x.shape[axis]}), got {repeats.shape[0]}")
        if repeats.ndim == 0 or repeats.shape[0] == 1:
            repeats = repeats.reshape(())
        if output_size is None:
            repeats = concrete(repeats, "repeats", op="repeat_interleave",
                               fix="Pass output_size=<the sum of repeats> (a Python int).")
            if np.any(repeats < 0):
                raise ValueError("repeat_interleave: `repeats` can not be negative")
    elif isinstance(repeats, (int, np.integer)) and repeats < 0:
        raise ValueError(f"repeat_interleave: `repeats` can not be negative, got {repeats}")
    if np.ndim(repeats) == 0 and not is_traced(repeats):
        return jnp.repeat(x, int(repeats), axis=axis)
    return jnp.repeat(x, repeats, axis=axis, total_repeat_length=output_size)


def _sizes(n: int, split: Any, name: str) -> list:
    """Section lengths of ``split(split_size_or_sections)`` for a dim of length n."""
    if isinstance(split, (list, tuple)):
        sizes = [int(s) for s in split]
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise ValueError(f"{name}: split_with_sizes expects split_sizes to sum exactly to "
                             f"{n} (input tensor's size at the dimension), but got split_sizes="
                             f"{sizes}")
        return sizes
    split = int(split)
    if split < 0 or (split == 0 and n != 0):
        raise ValueError(f"{name}: split_size can only be 0 if dimension size is 0, but got "
                         f"dimension size of {n}")
    if n == 0:
        return [0]
    return [split] * (n // split) + ([n % split] if n % split else [])


def _split_at(x: jax.Array, sizes: list, axis: int) -> tuple:
    edges = np.cumsum(sizes)[:-1].tolist()
    return tuple(jnp.split(x, edges, axis=axis))


@op("split")
def split(tensor: jax.Array, split_size_or_sections: Any, dim: int = 0) -> tuple:
    """``torch.split(tensor, split_size_or_sections, dim=0)``: chunks of that size (the last
    smaller), or of the given sizes."""
    axis = dim_arg(dim, tensor.ndim, op="split")
    return _split_at(tensor, _sizes(tensor.shape[axis], split_size_or_sections, "split"), axis)


@op("split_with_sizes")
def split_with_sizes(input: jax.Array, split_sizes: Sequence[int], dim: int = 0) -> tuple:
    return split(input, list(split_sizes), dim)


@op("chunk")
def chunk(input: jax.Array, chunks: int, dim: int = 0) -> tuple:
    """``torch.chunk(input, chunks, dim=0)``: chunks of ``ceil(n / chunks)`` (so possibly fewer
    than ``chunks`` of them, as in torch)."""
    if chunks <= 0:
        raise ValueError(f"chunk: `chunks` must be greater than 0, got {chunks}")
    axis = dim_arg(dim, input.ndim, op="chunk")
    n = input.shape[axis]
    if n == 0:
        return tuple(input for _ in range(chunks))
    return _split_at(input, _sizes(n, -(-n // chunks), "chunk"), axis)


@op("tensor_split")
def tensor_split(input: jax.Array, indices_or_sections: Any, dim: int = 0) -> tuple:
    """``torch.tensor_split``: ``n`` near-equal sections (the first ``size % n`` one longer),
    or splits at the given indices."""
    axis = dim_arg(dim, input.ndim, op="tensor_split")
    if is_array(indices_or_sections):
        indices_or_sections = concrete(indices_or_sections, "indices_or_sections",
                                       op="tensor_split", fix="Pass Python ints.").tolist()
    if isinstance(indices_or_sections, (list, tuple)):
        n = input.shape[axis]
        edges = [min(max(i + n if i < 0 else i, 0), n) for i in indices_or_sections]
        bounds = list(zip([0] + edges, edges + [n]))
        return tuple(jax.lax.slice_in_dim(input, a, max(a, b), axis=axis) for a, b in bounds)
    return tuple(jnp.array_split(input, int(indices_or_sections), axis=axis))


@op("unbind")
def unbind(input: jax.Array, dim: int = 0) -> tuple:
    """``torch.unbind(input, dim=0)``: the slices along ``dim``, as a tuple."""
    axis = dim_arg(dim, input.ndim, op="unbind")
    return tuple(jnp.moveaxis(input, axis, 0))


def _promoted(tensors: Sequence[jax.Array], name: str) -> list:
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise ValueError(f"{name}: expected a non-empty list of Tensors")
    dt = None
    for t in tensors:
        dt = promote_types(dt, jnp.dtype(t.dtype))
    return [t.astype(dt) for t in tensors]


@function("torch.cat", "torch.concat", "torch.concatenate")
def cat(tensors: Sequence[jax.Array], dim: int = 0, *, out: Any = None, axis: Any = None) -> \
        jax.Array:
    """``torch.cat(tensors, dim=0)``: dtypes promoted as torch does; 1-d empty tensors are
    skipped (torch's legacy rule)."""
    if axis is not None:
        dim = axis
    tensors = _promoted(tensors, "cat")
    kept = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]
    if not kept:
        return tensors[0]
    if any(t.ndim == 0 for t in kept):
        raise ValueError("cat: zero-dimensional tensor cannot be concatenated")
    axis = dim_arg(dim, kept[0].ndim, op="cat")
    for t in kept:
        if t.ndim != kept[0].ndim or any(a != b for d, (a, b) in enumerate(
                zip(t.shape, kept[0].shape)) if d != axis):
            raise ValueError(f"cat: Sizes of tensors must match except in dimension {axis}: "
                             f"got {list(kept[0].shape)} and {list(t.shape)}")
    return jnp.concatenate(kept, axis=axis)


@function("torch.stack")
def stack(tensors: Sequence[jax.Array], dim: int = 0, *, out: Any = None) -> jax.Array:
    """``torch.stack(tensors, dim=0)``: ``dim`` in ``[-ndim-1, ndim]``."""
    tensors = _promoted(tensors, "stack")
    if any(t.shape != tensors[0].shape for t in tensors):
        raise ValueError(f"stack: expects each tensor to be equal size, got "
                         f"{[list(t.shape) for t in tensors]}")
    return jnp.stack(tensors, axis=dim_arg(dim, tensors[0].ndim + 1, op="stack"))


@function("torch.hstack")
def hstack(tensors: Sequence[jax.Array], *, out: Any = None) -> jax.Array:
    return jnp.hstack(_promoted(tensors, "hstack"))


@function("torch.vstack", "torch.row_stack")
def vstack(tensors: Sequence[jax.Array], *, out: Any = None) -> jax.Array:
    return jnp.vstack(_promoted(tensors, "vstack"))


@op("narrow")
def narrow(input: jax.Array, dim: int, start: Any, length: int) -> jax.Array:
    """``torch.narrow(input, dim, start, length)`` (``start`` may be a traced 0-d tensor)."""
    axis = dim_arg(dim, input.ndim, op="narrow")
    n = input.shape[axis]
    if is_traced(start):
        return jax.lax.dynamic_slice_in_dim(input, start, length, axis=axis)
    start = int(start)
    if start < 0:
        start += n
    if not 0 <= start <= n or length < 0 or start + length > n:
        raise IndexError(f"narrow: start ({start}) + length ({length}) exceeds dimension size "
                         f"({n})")
    return jax.lax.slice_in_dim(input, start, start + length, axis=axis)


@op("select")
def select(input: jax.Array, dim: int, index: int) -> jax.Array:
    """``torch.select(input, dim, index)``: ``input[..., index, ...]``."""
    axis = dim_arg(dim, input.ndim, op="select")
    n = input.shape[axis]
    if not -n <= index < n:
        raise IndexError(f"select: index {index} out of range for tensor of size "
                         f"{list(input.shape)} at dimension {dim}")
    return jnp.take(input, index % n, axis=axis)


@op("flip")
def flip(input: jax.Array, *dims: Any, **kwargs: Any) -> jax.Array:
    """``torch.flip(input, dims)``, ``x.flip(0, 1)``, ``x.flip(dims=[1])``."""
    if kwargs:
        if set(kwargs) != {"dims"} or dims:
            extra = sorted(set(kwargs) - {"dims"}) or ["dims"]
            raise TypeError(f"flip() got an unexpected or repeated keyword argument "
                            f"{extra[0]!r}: it takes `dims` once, as a list of ints")
        dims = (kwargs["dims"],)
    if not dims:  # torch: x.flip() raises; torch.flip(x, []) is the identity
        raise TypeError('flip() missing 1 required positional argument: "dims"')
    return jnp.flip(input, dims_arg(_varargs(dims), input.ndim, op="flip") or ())


@op("roll")
def roll(input: jax.Array, shifts: Any, dims: Any = None) -> jax.Array:
    """``torch.roll(input, shifts, dims=None)``: ``dims=None`` rolls the flattened tensor."""
    if dims is None:
        return jnp.roll(input.reshape(-1), shifts).reshape(input.shape)
    return jnp.roll(input, shifts, axis=dims)


@op("tril", inplace=True)
def tril(input: jax.Array, diagonal: int = 0) -> jax.Array:
    return jnp.tril(input, diagonal)


@op("triu", inplace=True)
def triu(input: jax.Array, diagonal: int = 0) -> jax.Array:
    return jnp.triu(input, diagonal)


@op("diag")
def diag(input: jax.Array, diagonal: int = 0) -> jax.Array:
    """``torch.diag``: a 1-d tensor -> a square matrix; a 2-d tensor -> its diagonal."""
    if input.ndim not in (1, 2):
        raise ValueError(f"diag: expects a 1D or 2D tensor, got {input.ndim}D")
    return jnp.diag(input, diagonal)


@op("diagonal")
def diagonal(input: jax.Array, offset: int = 0, dim1: int = 0, dim2: int = 1) -> jax.Array:
    return jnp.diagonal(input, offset, dim_arg(dim1, input.ndim, "dim1", op="diagonal"),
                        dim_arg(dim2, input.ndim, "dim2", op="diagonal"))


@op("diag_embed")
def diag_embed(input: jax.Array, offset: int = 0, dim1: int = -2, dim2: int = -1) -> jax.Array:
    """``torch.diag_embed``: the last dim as the ``offset`` diagonal of (dim1, dim2) planes."""
    m = input.shape[-1]
    n = m + abs(offset)
    r, c = np.arange(n)[:, None], np.arange(n)[None, :]
    source = np.clip(np.minimum(r, c), 0, max(m - 1, 0))  # entry (r, c) holds input[min(r, c)]
    out = jnp.where(c - r == offset, input[..., source], jnp.zeros((), input.dtype))
    nd = out.ndim
    d1 = dim_arg(dim1, nd, "dim1", op="diag_embed")
    d2 = dim_arg(dim2, nd, "dim2", op="diag_embed")
    if d1 == d2:
        raise ValueError(f"diag_embed: diagonal dimensions cannot be identical {dim1}, {dim2}")
    return jnp.moveaxis(out, (nd - 2, nd - 1), (d1, d2))


# ----------------------------------------------------------------------------- indexing

def _index_parts(x: jax.Array, index: Any, name: str) -> tuple:
    """torch's index as a JAX one: lists become arrays; int indices are range-checked.

    Returns (index tuple, whether it holds a boolean mask).
    """
    parts = index if isinstance(index, tuple) else (index,)
    out, has_mask, dim = [], False, 0
    consumed = sum(0 if p is None or p is Ellipsis else
                   (np.ndim(p) if (is_array(p) or isinstance(p, list)) and
                    jnp.asarray(p).dtype == jnp.bool_ else 1) for p in parts)
    for p in parts:
        if isinstance(p, list):
            p = jnp.asarray(p)
        if p is Ellipsis:
            dim += x.ndim - consumed
        elif p is None:
            pass
        elif isinstance(p, (bool, np.bool_)):
            p = jnp.asarray(p)
            has_mask = True
        elif isinstance(p, (int, np.integer)):
            if dim >= x.ndim:
                raise IndexError(f"{name}: too many indices for tensor of dimension {x.ndim}")
            n = x.shape[dim]
            if not -n <= p < n:
                raise IndexError(f"{name}: index {int(p)} is out of bounds for dimension {dim} "
                                 f"with size {n}")
            dim += 1
        elif is_array(p) and p.dtype == jnp.bool_:
            has_mask = True
            dim += p.ndim
        elif is_array(p) and not jnp.issubdtype(p.dtype, jnp.integer):
            raise IndexError(f"{name}: tensors used as indices must be long, int, byte or bool "
                             f"tensors, got {p.dtype}")
        else:
            dim += 1
        out.append(p)
    return tuple(out), has_mask


def _mask_error(name: str) -> ValueError:
    return ValueError(
        f"{name}: a boolean mask index (x[mask]) selects a data-dependent number of elements, "
        f"which jax.jit cannot compile (one program serves every input); {_masked.SUPPORTED}. "
        f"Otherwise keep the shape: torch.where(mask, x, 0) / x.masked_fill(~mask, 0), or "
        f"run the port without jit")


@function("operator.getitem")
@method("__getitem__")  # a buffer's proxy records ``x[i]`` as this method
def getitem(obj: Any, index: Any) -> Any:
    """``x[index]`` with torch's rules: out-of-range ints raise, lists index like tensors;
    a boolean mask works eagerly. Under ``jax.jit`` a traced 1-d mask over the rows
    (``x[mask]``, ``x[mask, :k]``) gives a :class:`~._masked.MaskedRows` (the rows kept
    full-size, for the row-wise uses :mod:`._masked` supports); any other traced mask
    raises a clear error.

    Non-tensors (tuples, dicts, batches) are indexed as Python does.
    """
    if not is_array(obj):
        return operator.getitem(obj, index)
    parts, has_mask = _index_parts(obj, index, "getitem")
    if has_mask and any(is_traced(p) for p in parts if is_array(p) and p.dtype == jnp.bool_):
        if _masked.selectable(obj, parts):
            return _masked.select(jnp.asarray(obj), parts[0], parts[1:])
        raise _mask_error("getitem")
    return jnp.asarray(obj)[parts]


@function("operator.setitem")
def setitem(x: jax.Array, index: Any, value: Any) -> jax.Array:
    """``x[index] = value`` as a new array (the fx interpreter rebinds ``x`` to it).

    ``value`` is cast to ``x``'s dtype. A boolean mask over ``x``'s leading
    dims with a value that broadcasts to one selected element (``h[mask] = 0``)
    becomes a ``where`` and works under ``jax.jit``.
    """
    x = jnp.asarray(x)
    value = as_array(value, x.dtype) if is_array(value) or is_scalar(value) else \
        jnp.asarray(value, x.dtype)
    parts, has_mask = _index_parts(x, index, "setitem")
    if has_mask and len(parts) == 1 and is_array(parts[0]) and parts[0].dtype == jnp.bool_:
        mask = parts[0]
        if mask.shape == x.shape[:mask.ndim]:
            rest = x.shape[mask.ndim:]
            try:
                jnp.broadcast_shapes(value.shape, rest)
                ok = len(value.shape) <= len(rest)
            except ValueError:
                ok = False
            if ok:
                return jnp.where(mask.reshape(mask.shape + (1,) * len(rest)), value, x)
    if has_mask and any(is_traced(p) for p in parts if is_array(p) and p.dtype == jnp.bool_):
        raise _mask_error("setitem")
    return x.at[parts].set(value)


def _check_range(index: jax.Array, n: int, name: str) -> None:
    if not jnp.issubdtype(index.dtype, jnp.integer):
        raise TypeError(f"{name}: `index` must be an integer tensor, got {index.dtype}")
    if not is_traced(index) and index.size:
        lo, hi = int(jnp.min(index)), int(jnp.max(index))
        if lo < -n or hi >= n:
            raise IndexError(f"{name}: index out of range: `index` holds {lo if lo < -n else hi}"
                             f", the dimension has size {n}")


@op("take_along_dim")
def take_along_dim(input: jax.Array, indices: jax.Array, dim: Optional[int] = None) -> jax.Array:
    """``torch.take_along_dim``: ``dim=None`` indexes the flattened tensor; shapes broadcast."""
    if dim is None:
        return jnp.take_along_axis(input.reshape(-1), indices.reshape(-1), axis=0)
    axis = dim_arg(dim, input.ndim, op="take_along_dim")
    shape_in = list(input.shape)
    shape_ix = list(indices.shape)
    shape_in[axis] = shape_ix[axis] = 1
    common = jnp.broadcast_shapes(tuple(shape_in), tuple(shape_ix))
    x = jnp.broadcast_to(input, common[:axis] + (input.shape[axis],) + common[axis + 1:])
    i = jnp.broadcast_to(indices, common[:axis] + (indices.shape[axis],) + common[axis + 1:])
    return jnp.take_along_axis(x, i, axis=axis)


@op("take")
def take(input: jax.Array, index: jax.Array) -> jax.Array:
    """``torch.take(input, index)``: the flattened input at ``index`` (index's shape)."""
    index = as_array(index)
    _check_range(index, input.size, "take")
    return jnp.take(input.reshape(-1), index.reshape(-1) % max(input.size, 1)).reshape(
        index.shape)


@op("index_fill", inplace=True)
def index_fill(input: jax.Array, dim: int, index: jax.Array, value: Any) -> jax.Array:
    """``torch.index_fill(input, dim, index, value)``: the slices ``index`` along ``dim`` set
    to ``value`` (a number or a 0-d tensor)."""
    axis = dim_arg(dim, input.ndim, op="index_fill")
    index = as_array(index).reshape(-1)
    _check_range(index, input.shape[axis] if input.ndim else 1, "index_fill")
    where_ = (slice(None),) * axis + (index,)
    return input.at[where_].set(as_array(value, input.dtype))


@op("index_put", inplace=True)
def index_put(input: jax.Array, indices: Sequence[Any], values: Any,
              accumulate: bool = False) -> jax.Array:
    """``torch.index_put(input, indices, values, accumulate=False)``: ``input[indices] =
    values`` (``+=`` with ``accumulate``, duplicates summed), as a new array."""
    parts, _ = _index_parts(input, tuple(indices), "index_put")
    values = as_array(values, input.dtype)
    return input.at[parts].add(values) if accumulate else input.at[parts].set(values)


@method("fill_diagonal_")
def fill_diagonal_(self: jax.Array, fill_value: Any, wrap: bool = False) -> jax.Array:
    """``Tensor.fill_diagonal_(fill_value, wrap=False)``: the main diagonal (all dims equal
    index) set to ``fill_value``; ``wrap`` restarts it every ``ncols + 1`` rows of a tall
    matrix, as torch."""
    if self.ndim < 2 or (self.ndim > 2 and len(set(self.shape)) != 1):
        raise ValueError("fill_diagonal_: dimensions must be larger than 1, and all of equal "
                         "length when more than 2")
    if self.ndim == 2:
        rows, cols = self.shape
        r = np.arange(rows)[:, None]
        c = np.arange(cols)[None, :]
        mask = (r % (cols + 1) == c) if wrap else (r == c)  # flat stride cols + 1
    else:
        grids = np.indices(self.shape)
        mask = np.all(grids == grids[0], axis=0)
    return jnp.where(mask, as_array(fill_value, self.dtype), self)


@op("masked_fill", inplace=True)
def masked_fill(input: jax.Array, mask: jax.Array, value: Any) -> jax.Array:
    """``torch.masked_fill(input, mask, value)``: ``value`` a number or a 0-d tensor, cast to
    input's dtype; ``mask`` a bool tensor broadcastable to input."""
    mask = as_array(mask)
    if mask.dtype != jnp.bool_:
        raise TypeError(f"masked_fill: `mask` must be a bool tensor, got {mask.dtype}")
    if is_array(value) and value.ndim != 0:
        raise ValueError(f"masked_fill: only supports a 0-dimensional value tensor, but got "
                         f"tensor with {value.ndim} dimension(s)")
    return jnp.where(mask, as_array(value, input.dtype), input)


@function("torch.where")
def where(condition: jax.Array, input: Any = None, other: Any = None, *, out: Any = None) -> Any:
    """``torch.where(condition, input, other)``, dtypes promoted as torch does (numbers too).

    The one-argument form ``torch.where(condition)`` (the indices of the true
    elements) has a data-dependent length: it works eagerly and raises under
    ``jax.jit``.
    """
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    if input is None or other is None:
        raise TypeError("where: pass both `input` and `other` (or neither)")
    condition = as_array(condition)
    if condition.dtype != jnp.bool_:
        raise TypeError(f"where: expected `condition` to be a boolean tensor, but got a tensor "
                        f"with dtype {condition.dtype}")
    a, b = promote(input, other)
    return jnp.where(condition, a, b)


@method("where")
def where_method(self: jax.Array, condition: jax.Array, other: Any) -> jax.Array:
    """``x.where(condition, y)`` is ``torch.where(condition, x, y)``."""
    return where(condition, self, other)


@op("nonzero")
def nonzero(input: jax.Array, *, out: Any = None, as_tuple: bool = False) -> Any:
    """``torch.nonzero``: the indices of the nonzero elements ([count, ndim] int64, or a tuple
    of 1-d tensors with ``as_tuple``). The count is data-dependent: eager only; under
    ``jax.jit`` it raises."""
    values = concrete(input, "condition", op="where / nonzero",
                      fix="Use the three-argument torch.where(condition, x, y), or a mask "
                          "(x * condition), which keep the shape.")
    found: tuple = np.nonzero(values.reshape(values.shape or (1,)))
    found = tuple(jnp.asarray(f, dtype=long_dtype()) for f in found)
    if as_tuple:
        return found
    return jnp.stack(found, axis=1) if found else jnp.zeros((0, 0), long_dtype())


@function("builtins.getattr")
def getattr_(obj: Any, name: str, *default: Any) -> Any:
    """``x.<attribute>`` for the tensor attributes that are data (``shape``, ``dtype``,
    ``device``, ``T``, ``mT`` ...); other objects as Python's ``getattr``.

    ``x.device`` is the array's device when it has one and ``None`` under
    ``jax.jit`` (the factories ignore devices); ``x.is_cuda`` and
    ``x.requires_grad`` are False; ``x.data`` is ``stop_gradient(x)``.
    """
    if isinstance(obj, BatchVector) and name not in BatchVector.__slots__:
        obj = obj.ids  # a batch vector's tensor attributes are its ids' (batch.device)
    if not is_array(obj):
        return builtins.getattr(obj, name, *default)
    if name == "device":
        try:
            return obj.device
        except Exception:  # noqa: BLE001 - tracers have no device
            return None
    if name in ("is_cuda", "requires_grad", "is_sparse", "is_quantized", "is_meta"):
        return False
    if name == "data":
        return jax.lax.stop_gradient(obj)
    if name == "mT":
        return jnp.swapaxes(obj, -1, -2)
    if name == "layout":
        import torch
        return torch.strided
    if name in ("real", "imag"):
        return jnp.real(obj) if name == "real" else jnp.imag(obj)
    if name == "is_leaf":
        return True
    if name == "grad":
        return None
    return builtins.getattr(obj, name, *default)

