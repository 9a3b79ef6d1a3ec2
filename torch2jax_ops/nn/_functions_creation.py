"""The mapping table: tensor creation, dtype casts, and a tensor's size/metadata."""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .._checking import is_array
from ._functions_base import (
    canonical,
    dim_arg,
    dtype_arg,
    float_dtype,
    function,
    long_dtype,
    method,
    op,
    promote_types,
    size_args,
)

__all__: list = []


def _fill_dtype(value: Any) -> np.dtype:
    """The dtype torch infers for a fill value: bool, int64, float32 or complex64."""
    kind = getattr(value, "dtype", None)
    if kind is not None:  # a 0-d tensor: its category decides, as value.item() would
        kind = jnp.dtype(kind)
        if kind == jnp.bool_:
            return jnp.dtype(bool)
        if jnp.issubdtype(kind, jnp.integer):
            return long_dtype()
        return float_dtype() if jnp.issubdtype(kind, jnp.floating) else canonical("complex64")
    if isinstance(value, (bool, np.bool_)):
        return jnp.dtype(bool)
    if isinstance(value, (int, np.integer)):
        return long_dtype()
    if isinstance(value, (float, np.floating)):
        return float_dtype()
    return canonical("complex64")


# --------------------------------------------------------------------------- factories

@function("torch.zeros")
def zeros(*size: Any, out: Any = None, dtype: Any = None, layout: Any = None, device: Any = None,
          requires_grad: bool = False, pin_memory: bool = False,
          memory_format: Any = None) -> jax.Array:
    """``torch.zeros(*size, dtype=None)``; the default dtype is float32; ``device`` is ignored."""
    return jnp.zeros(size_args(size, op="zeros"), dtype_arg(dtype, op="zeros") or float_dtype())


@function("torch.ones")
def ones(*size: Any, out: Any = None, dtype: Any = None, layout: Any = None, device: Any = None,
         requires_grad: bool = False, pin_memory: bool = False,
         memory_format: Any = None) -> jax.Array:
    """``torch.ones(*size, dtype=None)``."""
    return jnp.ones(size_args(size, op="ones"), dtype_arg(dtype, op="ones") or float_dtype())


@function("torch.empty")
def empty(*size: Any, out: Any = None, dtype: Any = None, layout: Any = None, device: Any = None,
          requires_grad: bool = False, pin_memory: bool = False,
          memory_format: Any = None) -> jax.Array:
    """``torch.empty``: zeros (torch leaves the memory uninitialised; any value is valid)."""
    return jnp.zeros(size_args(size, op="empty"), dtype_arg(dtype, op="empty") or float_dtype())


@function("torch.full")
def full(size: Any, fill_value: Any, *, out: Any = None, dtype: Any = None, layout: Any = None,
         device: Any = None, requires_grad: bool = False, pin_memory: bool = False) -> jax.Array:
    """``torch.full(size, fill_value)``: the dtype follows the fill value (int -> int64)."""
    dt = dtype_arg(dtype, op="full") or _fill_dtype(fill_value)
    return jnp.full(size_args((size,), op="full"), fill_value, dtype=dt)


def _like(fill: Any, name: str):
    def like(input: jax.Array, *, dtype: Any = None, layout: Any = None, device: Any = None,
             requires_grad: bool = False, memory_format: Any = None) -> jax.Array:
        return jnp.full(input.shape, fill, dtype_arg(dtype, op=name) or input.dtype)
    like.__name__ = like.__qualname__ = name
    like.__doc__ = f"``torch.{name}(input, dtype=None)``."
    return like


zeros_like = function("torch.zeros_like")(_like(0, "zeros_like"))
ones_like = function("torch.ones_like")(_like(1, "ones_like"))
empty_like = function("torch.empty_like")(_like(0, "empty_like"))


@function("torch.full_like")
def full_like(input: jax.Array, fill_value: Any, *, dtype: Any = None, layout: Any = None,
              device: Any = None, requires_grad: bool = False,
              memory_format: Any = None) -> jax.Array:
    """``torch.full_like(input, fill_value, dtype=None)``: input's dtype unless ``dtype``."""
    return jnp.full(input.shape, fill_value, dtype_arg(dtype, op="full_like") or input.dtype)


def _new(fill: Any, name: str):
    def new(self: jax.Array, *size: Any, dtype: Any = None, device: Any = None,
            requires_grad: bool = False, layout: Any = None, pin_memory: bool = False) -> jax.Array:
        return jnp.full(size_args(size, op=name), fill, dtype_arg(dtype, op=name) or self.dtype)
    new.__name__ = new.__qualname__ = name
    new.__doc__ = f"``Tensor.{name}(*size, dtype=None)``: self's dtype unless ``dtype``."
    return new


new_zeros = method("new_zeros")(_new(0, "new_zeros"))
new_ones = method("new_ones")(_new(1, "new_ones"))
new_empty = method("new_empty")(_new(0, "new_empty"))


@method("new_full")
def new_full(self: jax.Array, size: Any, fill_value: Any, *, dtype: Any = None,
             device: Any = None, requires_grad: bool = False, layout: Any = None,
             pin_memory: bool = False) -> jax.Array:
    """``Tensor.new_full(size, fill_value, dtype=None)``: self's dtype unless ``dtype``."""
    return jnp.full(size_args((size,), op="new_full"), fill_value,
                    dtype_arg(dtype, op="new_full") or self.dtype)


def _data_dtype(data: Any) -> np.dtype:
    """The dtype ``torch.tensor(data)`` infers: tensors keep theirs, numbers take torch's
    (bool, int64, float32, complex64), all promoted together."""
    out = None
    for leaf in jax.tree_util.tree_leaves(data):
        dt = jnp.dtype(leaf.dtype) if is_array(leaf) else _fill_dtype(leaf)
        out = promote_types(out, dt)
    return float_dtype() if out is None else canonical(out.name)


def _stack_data(data: Any, dtype: np.dtype) -> jax.Array:
    if isinstance(data, (list, tuple)):
        if not data:
            return jnp.zeros((0,), dtype)
        return jnp.stack([_stack_data(d, dtype) for d in data])
    return jnp.asarray(data, dtype=dtype)


@function("torch.tensor")
def tensor(data: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False,
           pin_memory: bool = False) -> jax.Array:
    """``torch.tensor(data, dtype=None)``: nested lists of numbers and 0-d tensors, copied
    out of autograd (no gradient flows back into tensors in ``data``, as torch).

    The dtype follows torch: bools -> bool, ints -> int64, floats -> float32.
    """
    dt = dtype_arg(dtype, op="tensor") or (data.dtype if is_array(data) else _data_dtype(data))
    return jax.lax.stop_gradient(_stack_data(data, dt))


@function("torch.as_tensor")
def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> jax.Array:
    """``torch.as_tensor(data, dtype=None)``: a tensor is returned as it is (cast when
    ``dtype`` differs, gradient kept); other data as :func:`tensor`."""
    if is_array(data):
        dt = dtype_arg(dtype, op="as_tensor")
        return data if dt is None else data.astype(dt)
    return tensor(data, dtype)


@method("new_tensor")
def new_tensor(self: jax.Array, data: Any, dtype: Any = None, device: Any = None,
               requires_grad: bool = False) -> jax.Array:
    """``Tensor.new_tensor(data, dtype=None)``: self's dtype unless ``dtype``."""
    return tensor(data, dtype=dtype_arg(dtype, op="new_tensor") or self.dtype)


def _number(x: Any, name: str) -> Any:
    if is_array(x):
        return x.item() if not isinstance(x, jax.core.Tracer) else _traced(name)
    return x


def _traced(name: str) -> Any:
    raise ValueError(f"arange: `{name}` decides the output's length and must be concrete, not a "
                     f"tensor's traced value (shapes are static under jax.jit)")


@function("torch.arange")
def arange(start: Any = 0, end: Any = None, step: Any = 1, *, out: Any = None, dtype: Any = None,
           layout: Any = None, device: Any = None, requires_grad: bool = False) -> jax.Array:
    """``torch.arange(end)`` / ``(start, end, step=1)``: int64 for ints, else float32.

    Values are ``start + i * step`` computed in float64 and rounded once (torch's
    CPU kernel accumulates in double).
    """
    if end is None:
        start, end = 0, start
    start, end, step = _number(start, "start"), _number(end, "end"), _number(step, "step")
    if step == 0:
        raise ValueError("arange: `step` must be nonzero")
    if (end - start) / step < 0:
        raise ValueError(f"arange: upper bound and larger bound inconsistent with step sign "
                         f"(start={start}, end={end}, step={step})")
    dt = dtype_arg(dtype, op="arange")
    if dt is None:
        dt = float_dtype() if any(isinstance(v, (float, np.floating))
                                  for v in (start, end, step)) else long_dtype()
    length = int(np.ceil((end - start) / step))
    values = start + np.arange(length, dtype=np.float64) * step
    if jnp.issubdtype(dt, jnp.integer):
        values = np.asarray(start + np.arange(length, dtype=np.int64) * step) \
            if all(isinstance(v, (int, np.integer)) for v in (start, step)) \
            else np.trunc(values)  # float bounds, integer dtype: torch truncates
    return jnp.asarray(values.astype(dt))


@function("torch.linspace")
def linspace(start: Any, end: Any, steps: int, *, out: Any = None, dtype: Any = None,
             layout: Any = None, device: Any = None, requires_grad: bool = False) -> jax.Array:
    """``torch.linspace``: torch's symmetric formula (start + i*step for the first half,
    end - (steps-1-i)*step for the second)."""
    dt = dtype_arg(dtype, op="linspace") or float_dtype()
    start, end = _number(start, "start"), _number(end, "end")
    if steps < 0:
        raise ValueError(f"linspace: `steps` must be non-negative, got {steps}")
    if jnp.issubdtype(dt, jnp.integer):
        # torch: the bounds truncated to the integer type, the steps in double, truncated
        work, start, end = np.dtype(np.float64), int(start), int(end)
    else:  # torch computes in the dtype itself, each operation rounded (bfloat16 too)
        work = np.dtype(dt.name)
    if steps == 1:
        return jnp.full((1,), start, dt)
    i = np.arange(steps, dtype=work)
    step = (work.type(end) - work.type(start)) / work.type(steps - 1)
    half = steps // 2
    values = np.where(i < half, work.type(start) + step * i,
                      work.type(end) - step * (steps - 1 - i))
    if jnp.issubdtype(dt, jnp.integer):
        values = np.trunc(values)
    return jnp.asarray(values, dtype=work).astype(dt)


@function("torch.eye")
def eye(n: int, m: Optional[int] = None, *, out: Any = None, dtype: Any = None,
        layout: Any = None, device: Any = None, requires_grad: bool = False) -> jax.Array:
    """``torch.eye(n, m=None, dtype=None)``."""
    return jnp.eye(n, n if m is None else m, dtype=dtype_arg(dtype, op="eye") or float_dtype())


# ----------------------------------------------------------------------- in-place fills

@method("fill_")
def fill_(self: jax.Array, value: Any) -> jax.Array:
    """``Tensor.fill_(value)``: self's shape and dtype, every element ``value`` (a new array;
    the interpreter rebinds it)."""
    return jnp.full(self.shape, value, self.dtype)


@method("zero_")
def zero_(self: jax.Array) -> jax.Array:
    """``Tensor.zero_()``."""
    return jnp.zeros(self.shape, self.dtype)


@method("copy_")
def copy_(self: jax.Array, src: Any, non_blocking: bool = False) -> jax.Array:
    """``Tensor.copy_(src)``: ``src`` broadcast to self's shape, cast to self's dtype."""
    src = jnp.asarray(src)
    try:
        jnp.broadcast_shapes(src.shape, self.shape)
    except ValueError:
        raise ValueError(f"copy_: the source of shape {list(src.shape)} does not broadcast to "
                         f"the destination's shape {list(self.shape)}") from None
    return jnp.broadcast_to(src.astype(self.dtype), self.shape)


# ---------------------------------------------------------------------- dtypes, devices

def _is_device(x: Any) -> bool:
    return isinstance(x, str) or type(x).__name__ in ("device", "Device") or (
        hasattr(x, "platform") and hasattr(x, "id"))


@method("to")
def to(self: jax.Array, *args: Any, dtype: Any = None, device: Any = None,
       non_blocking: bool = False, copy: bool = False, memory_format: Any = None) -> jax.Array:
    """``Tensor.to(dtype)`` / ``(device)`` / ``(device, dtype)`` / ``(other)``.

    Devices are ignored (JAX places arrays itself); ``to(other)`` casts to
    ``other``'s dtype.
    """
    for a in args:
        if is_array(a):
            dtype = a.dtype
        elif a is None or _is_device(a) or isinstance(a, int):
            continue  # a device (or a CUDA ordinal)
        elif isinstance(a, bool):
            continue  # non_blocking / copy given positionally
        else:
            dtype = a
    dt = dtype_arg(dtype, op="to")
    return self if dt is None else self.astype(dt)


@method("type")
def type_(self: jax.Array, dtype: Any = None, non_blocking: bool = False) -> Any:
    """``Tensor.type(dtype)`` casts; ``Tensor.type()`` names the type (``"torch.FloatTensor"``)."""
    if dtype is None:
        names = {"float32": "Float", "float64": "Double", "float16": "Half",
                 "bfloat16": "BFloat16", "int64": "Long", "int32": "Int", "int16": "Short",
                 "int8": "Char", "uint8": "Byte", "bool": "Bool"}
        return f"torch.{names.get(jnp.dtype(self.dtype).name, 'Float')}Tensor"
    if isinstance(dtype, str) and dtype.startswith("torch.") and dtype.endswith("Tensor"):
        names = {"Float": "float32", "Double": "float64", "Half": "float16",
                 "BFloat16": "bfloat16", "Long": "int64", "Int": "int32", "Short": "int16",
                 "Char": "int8", "Byte": "uint8", "Bool": "bool"}
        dtype = names[dtype[len("torch."):-len("Tensor")]]
    return self.astype(dtype_arg(dtype, op="type"))


@method("type_as")
def type_as(self: jax.Array, other: jax.Array) -> jax.Array:
    """``Tensor.type_as(other)``: cast to ``other``'s dtype."""
    return self.astype(other.dtype)


def _cast(name: str, torch_name: str):
    def cast(self: jax.Array, memory_format: Any = None) -> jax.Array:
        return self.astype(canonical(torch_name))
    cast.__name__ = cast.__qualname__ = name
    cast.__doc__ = f"``Tensor.{name}()``: cast to {torch_name}."
    return cast


for _name, _torch_name in (("float", "float32"), ("double", "float64"), ("half", "float16"),
                           ("bfloat16", "bfloat16"), ("long", "int64"), ("int", "int32"),
                           ("short", "int16"), ("char", "int8"), ("byte", "uint8"),
                           ("bool", "bool")):
    method(_name)(_cast(_name, _torch_name))


@method("cpu", "cuda", "contiguous", "requires_grad_")
def identity(self: jax.Array, *args: Any, **kwargs: Any) -> jax.Array:
    """Device moves, memory layout and autograd flags: the identity in JAX."""
    return self


@op("clone")
def clone(input: jax.Array, *, memory_format: Any = None) -> jax.Array:
    """``torch.clone``: JAX arrays are immutable, so the array itself."""
    return input


@op("detach", inplace=False)
def detach(input: jax.Array) -> jax.Array:
    """``Tensor.detach()``: ``jax.lax.stop_gradient``."""
    return jax.lax.stop_gradient(input)


method("detach_")(detach)


@method("item")
def item(self: jax.Array) -> jax.Array:
    """``Tensor.item()``: the one element as a 0-d array without gradient (torch returns a
    Python number). Its value is not known under jit: arithmetic on it works, using it as a
    Python int or in an ``if`` raises."""
    if self.size != 1:
        raise ValueError(f"item: a Tensor with {self.size} elements cannot be converted to "
                         f"Scalar")
    return jax.lax.stop_gradient(self.reshape(()))


# ------------------------------------------------------------------------ size, metadata

@method("size")
def size(self: jax.Array, dim: Optional[int] = None) -> Any:
    """``Tensor.size()`` -> a tuple of ints; ``size(dim)`` -> an int."""
    if dim is None:
        return tuple(int(s) for s in self.shape)
    return int(self.shape[dim_arg(dim, self.ndim, op="size")])


@method("dim", "ndimension")
def dim(self: jax.Array) -> int:
    """``Tensor.dim()``: the number of dims, an int."""
    return int(self.ndim)


@op("numel", methods=("nelement",))
def numel(input: jax.Array) -> int:
    """``torch.numel``: the number of elements, an int."""
    return int(np.prod(input.shape, dtype=np.int64))


@op("is_floating_point")
def is_floating_point(input: jax.Array) -> bool:
    return bool(jnp.issubdtype(input.dtype, jnp.floating))


@op("is_complex")
def is_complex(input: jax.Array) -> bool:
    return bool(jnp.issubdtype(input.dtype, jnp.complexfloating))


@method("get_device")
def get_device(self: jax.Array) -> int:
    """``Tensor.get_device()``: -1 (a CPU tensor: JAX places arrays itself)."""
    return -1


@method("element_size")
def element_size(self: jax.Array) -> int:
    return int(jnp.dtype(self.dtype).itemsize)
