"""Parity cases for the fx path's mapping table (torch2jax_ops/nn/_functions*.py).

Every registered entry -- a torch function path (``"torch.cat"``), a
``torch.nn.functional`` function, an ``operator`` function or a Tensor method
name -- gets sample calls here. The torch side calls the real torch object
(methods: ``getattr(tensor, name)``; in-place methods on a clone); the JAX side
is the implementation looked up in the registry (``functions()[path]`` /
``methods()[name]``), so these cases check the table itself. Inputs come from
a seeded NumPy generator; float cases also compare gradients.

A spec is ``S(keys, make, dtypes, label, **options)``: ``keys`` name the
entries (``"torch.x"``, ``"F.x"`` for torch.nn.functional, ``"op.x"`` for
operator, ``".x"`` for a Tensor method), ``make(g)`` returns ``(args, kwargs)``
built from the generator ``g`` (:class:`Gen`) for the case's dtype.
"""
from __future__ import annotations

import dataclasses
import math
import zlib
from typing import Any, Callable, Iterable, Optional

import numpy as np

from torch2jax_ops.parity._suite import Case, register

FLOATS = ("float32", "float64")
F32 = ("float32",)
F64 = ("float64",)
INTS = ("int64",)
ALL = FLOATS + INTS
F_AND_I = ("float32", "int64")


# ----------------------------------------------------------------------------- inputs

class Gen:
    """Torch test tensors for one case: floats of the case's dtype, ints, bools, indices."""

    def __init__(self, rng: np.random.Generator, dtype: str):
        import torch

        self.rng, self.dtype = rng, dtype
        self.torch = torch
        self.dt = getattr(torch, dtype)
        self.is_int = dtype.startswith("int") or dtype == "bool"
        #: a float dtype for ops that need one (float32 in integer cases)
        self.fdt = torch.float32 if self.is_int else self.dt

    def _t(self, data: np.ndarray, dtype: Any) -> Any:
        return self.torch.tensor(np.asarray(data), dtype=dtype)

    def f(self, *shape: int) -> Any:
        """The case's dtype: a 0.5 grid (ties, zeros) in floats, -5..5 in ints."""
        if self.is_int:
            return self._t(self.rng.integers(-5, 6, size=shape), self.dt)
        data = np.round(self.rng.uniform(-3, 3, size=shape) * 2) / 2 + \
            self.rng.choice([0, 0.25], size=shape)
        return self._t(data, self.dt)

    def x(self, *shape: int) -> Any:
        """Smooth floats (no ties, no kinks hit) of the case's float dtype."""
        return self._t(self.rng.uniform(-2.5, 2.5, size=shape), self.fdt)

    def pos(self, *shape: int, lo: float = 0.3, hi: float = 3.0) -> Any:
        if self.is_int:
            return self._t(self.rng.integers(1, 6, size=shape), self.dt)
        return self._t(self.rng.uniform(lo, hi, size=shape), self.dt)

    def unit(self, *shape: int) -> Any:
        """Floats in (-0.9, 0.9) (asin, atanh, erfinv)."""
        return self._t(self.rng.uniform(-0.9, 0.9, size=shape), self.fdt)

    def prob(self, *shape: int) -> Any:
        return self._t(self.rng.uniform(0.05, 0.95, size=shape), self.fdt)

    def distinct(self, *shape: int) -> Any:
        n = int(np.prod(shape))
        data = (self.rng.permutation(n) - n / 2) / 4
        if self.is_int:
            return self._t(self.rng.permutation(n).reshape(shape) - n // 2, self.dt)
        return self._t(data.reshape(shape), self.dt)

    def i(self, *shape: int, lo: int = -5, hi: int = 6) -> Any:
        return self._t(self.rng.integers(lo, hi, size=shape), self.torch.int64)

    def i32(self, *shape: int, lo: int = -5, hi: int = 6) -> Any:
        return self._t(self.rng.integers(lo, hi, size=shape), self.torch.int32)

    def idx(self, n: int, *shape: int) -> Any:
        return self._t(self.rng.integers(0, n, size=shape), self.torch.int64)

    def b(self, *shape: int) -> Any:
        return self._t(self.rng.random(size=shape) < 0.5, self.torch.bool)

    def scalar(self) -> Any:
        """A 0-d tensor of the case's dtype."""
        return self.f()


# ----------------------------------------------------------------------------- specs

@dataclasses.dataclass
class S:
    keys: tuple
    make: Callable
    dtypes: tuple = FLOATS
    label: str = "basic"
    grad: bool = True
    options: dict = dataclasses.field(default_factory=dict)
    #: replaces the torch call (same signature) where the real one needs help
    torch_fn: Optional[Callable] = None
    #: random ops: compare a deterministic summary of both outputs
    summary: Optional[Callable] = None


SPECS: list = []


def spec(keys: Any, make: Callable, dtypes: tuple = FLOATS, label: str = "basic", **kw: Any):
    SPECS.append(S(tuple(keys.split()) if isinstance(keys, str) else tuple(keys), make, dtypes,
                   label, **kw))


def key_path(key: str) -> tuple:
    """``"F.relu"`` -> ("function", "torch.nn.functional.relu"); ``".view"`` -> ("method", "view")."""
    if key.startswith("."):
        return "method", key[1:]
    if key.startswith("F."):
        return "function", "torch.nn.functional." + key[2:]
    if key.startswith("op."):
        return "function", "operator." + key[3:]
    return "function", key


def case_op(key: str) -> str:
    kind, name = key_path(key)
    return f"Tensor.{name}" if kind == "method" else name


# ------------------------------------------------------------------------ the sides

def _torch_value(out: Any) -> Any:
    """Non-tensor results (ints, shapes, bools, strings) as tensors, for the comparison."""
    import torch

    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, torch.Size):
        return torch.tensor(list(out), dtype=torch.int64)
    if isinstance(out, str):
        return torch.tensor([ord(c) for c in out], dtype=torch.int64)
    if isinstance(out, bool):
        return torch.tensor(out)
    if isinstance(out, int):
        return torch.tensor(out, dtype=torch.int64)
    if isinstance(out, float):
        return torch.tensor(out, dtype=torch.float64)
    if isinstance(out, (tuple, list)):
        return type(out)(_torch_value(o) for o in out) if not hasattr(out, "_fields") else \
            tuple(_torch_value(o) for o in out)
    return out


def _jax_value(out: Any) -> Any:
    if isinstance(out, str):
        return np.asarray([ord(c) for c in out], dtype=np.int64)
    if isinstance(out, bool):
        return np.asarray(out)
    if isinstance(out, int):
        return np.asarray(out, dtype=np.int64)
    if isinstance(out, float):
        return np.asarray(out, dtype=np.float64)
    if isinstance(out, tuple) and not hasattr(out, "_fields") and all(
            isinstance(o, int) for o in out) and out:
        return np.asarray(out, dtype=np.int64)
    if isinstance(out, (tuple, list)):
        return tuple(_jax_value(o) for o in out)
    return out


def _sides(key: str, s: S) -> tuple:
    import torch

    from torch2jax_ops.nn._fx import key_scope, resolve
    from torch2jax_ops.nn._registry import functions, methods

    kind, name = key_path(key)
    if kind == "method":
        impl = methods()[name]

        def theirs(self, *a, **k):
            if name.endswith("_"):
                self = self.clone()
            return getattr(self, name)(*a, **k)
    else:
        impl = functions()[name]
        theirs = resolve(name)
        if name == "operator.setitem":
            def theirs(x, index, value):  # noqa: F811 - x[index] = value, on a copy
                y = x.clone()
                y[index] = value
                return y
    if s.torch_fn is not None:
        theirs = s.torch_fn
    summary = s.summary

    def torch_fn(*a, **k):
        torch.manual_seed(0)
        out = theirs(*a, **k)
        return _torch_value(summary(out, torch) if summary else out)

    def jax_fn(*a, **k):
        import jax
        import jax.numpy as jnp

        with key_scope(jax.random.key(0)):
            out = impl(*a, **k)
        return _jax_value(summary(out, jnp) if summary else out)

    torch_fn.__name__, jax_fn.__name__ = f"torch:{key}", f"table:{key}"
    return torch_fn, jax_fn


def _rng(*key: Any) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _build(key: str, s: S, dtype: str) -> Callable:
    def build():
        g = Gen(_rng(key, dtype, s.label), dtype)
        args, kwargs = s.make(g)
        torch_fn, jax_fn = _sides(key, s)
        options = dict(s.options)
        if not s.grad or s.summary is not None:
            options["grad"] = False
        return torch_fn, jax_fn, tuple(args), dict(kwargs), options
    return build


@register("functions")
def table_cases() -> Iterable[Case]:
    _load_specs()
    for s in SPECS:
        for key in s.keys:
            for dtype in s.dtypes:
                yield Case("functions", case_op(key), dtype, s.label, _build(key, s, dtype))


_LOADED: list = []


def _load_specs() -> None:
    if _LOADED:
        return
    _LOADED.append(True)
    _creation()
    _shape()
    _indexing()
    _arithmetic()
    _elementwise()
    _compare_logic()
    _matmul()
    _reductions()
    _activations()
    _normalisation()
    _losses()
    _random()


def A(*args: Any, **kwargs: Any) -> tuple:
    """``make`` helpers return ``A(*args, **kwargs)``."""
    return args, kwargs


# --------------------------------------------------------------------------- creation

def _creation() -> None:
    import torch

    def dtype_kw(g):
        return {} if g.dtype == "float32" else {"dtype": g.dt}

    spec("torch.zeros torch.ones", lambda g: A(2, 3, **dtype_kw(g)), ALL, "varargs")
    spec("torch.zeros torch.ones", lambda g: A((2, 0, 4), **dtype_kw(g)), F32, "tuple-empty")
    spec("torch.empty", lambda g: A((2, 3), **dtype_kw(g)), ALL,
         torch_fn=lambda *a, **k: torch.empty(*a, **k).zero_())
    spec("torch.full", lambda g: A((2, 3), 1.5), F32, "float-fill")
    spec("torch.full", lambda g: A((4,), 3), INTS, "int-fill-is-int64")
    spec("torch.full", lambda g: A((2, 2), True), INTS, "bool-fill")
    spec("torch.full", lambda g: A([3], 2, dtype=torch.float64), F64, "dtype")
    spec("torch.zeros_like torch.ones_like", lambda g: A(g.f(3, 2)), ALL)
    spec("torch.zeros_like torch.ones_like", lambda g: A(g.f(3, 2), dtype=torch.int64), INTS,
         "dtype")
    spec("torch.empty_like", lambda g: A(g.f(3, 2)), ALL,
         torch_fn=lambda x, **k: torch.empty_like(x, **k).zero_())
    spec("torch.full_like", lambda g: A(g.f(3, 2), 7), ALL)
    spec("torch.full_like", lambda g: A(g.f(3), 0.5, dtype=torch.float64), F64, "dtype")
    spec(".new_zeros .new_ones", lambda g: A(g.f(2), 3, 2), ALL, "varargs")
    spec(".new_zeros .new_ones", lambda g: A(g.f(2), (2, 2), dtype=torch.int64), INTS, "dtype")
    spec(".new_empty", lambda g: A(g.f(2), (3,)), ALL,
         torch_fn=lambda x, *a, **k: x.new_empty(*a, **k).zero_())
    spec(".new_full", lambda g: A(g.f(2), (2, 3), 2.5), FLOATS)
    spec(".new_tensor", lambda g: A(g.f(2), [[1, 2], [3, 4]]), ALL, grad=False)
    spec("torch.tensor", lambda g: A([[1, 2], [3, 4]]), INTS, "ints-int64", grad=False)
    spec("torch.tensor", lambda g: A([1.5, 2, -3]), F32, "floats-float32", grad=False)
    spec("torch.tensor", lambda g: A([True, False]), INTS, "bools", grad=False)
    spec("torch.tensor", lambda g: A([1, 2], dtype=torch.float64), F64, "dtype", grad=False)
    spec("torch.tensor", lambda g: A([g.f(), g.f()]), FLOATS, "0d-tensors-no-grad")
    spec("torch.as_tensor", lambda g: A(g.f(3)), ALL, "tensor-keeps-grad")
    spec("torch.as_tensor", lambda g: A([[1, 2]], dtype=torch.float64), F64, "list-dtype",
         grad=False)
    spec("torch.arange", lambda g: A(5), INTS, "end-int64")
    spec("torch.arange", lambda g: A(1, 8, 2), INTS, "start-end-step")
    spec("torch.arange", lambda g: A(10, 0, -3), INTS, "negative-step")
    spec("torch.arange", lambda g: A(0.5, 3.0, 0.3), FLOATS, "float-float32",
         torch_fn=lambda *a, **k: torch.arange(*a, **k))
    spec("torch.arange", lambda g: A(0, 2, 0.25, dtype=torch.float64), F64, "dtype")
    spec("torch.linspace", lambda g: A(0, 1, 7), F32)
    spec("torch.linspace", lambda g: A(-2.5, 3.3, 11, dtype=torch.float64), F64, "dtype")
    spec("torch.linspace", lambda g: A(-1, 1, 1), F32, "one-step")
    spec("torch.eye", lambda g: A(3), F32)
    spec("torch.eye", lambda g: A(2, 4, dtype=torch.int64), INTS, "rect-dtype")

    # casts and devices
    spec(".to", lambda g: A(g.f(3), torch.float64), ("float64", "int64"), "dtype")
    spec(".to", lambda g: A(g.f(3), torch.int64), INTS, "to-int64")
    spec(".to", lambda g: A(g.f(3), "cpu"), F32, "device-ignored")
    spec(".to", lambda g: A(g.f(3), torch.device("cpu"), torch.float64), F64, "device-dtype")
    spec(".to", lambda g: A(g.f(3), g.i(2)), F64, "other-tensor")
    spec(".to", lambda g: A(g.f(3), dtype=torch.float64, copy=True), F64, "kwargs")
    spec(".type", lambda g: A(g.f(3), torch.float64), F64, "dtype")
    spec(".type", lambda g: A(g.f(3), "torch.DoubleTensor"), F64, "string")
    spec(".type", lambda g: A(g.f(3)), ("float32", "int64"), "name", grad=False)
    spec(".type_as", lambda g: A(g.f(3), g.x(2).double()), F64)
    for name, dt in (("float", F64), ("double", F64), ("half", F32), ("bfloat16", F32),
                     ("long", F64), ("int", F64), ("short", F32), ("char", F32),
                     ("byte", F32), ("bool", F32)):
        spec(f".{name}", (lambda g: A(g.pos(4))) if name == "byte" else (lambda g: A(g.f(4))),
             dt + INTS, "cast")
    spec(".cpu .contiguous", lambda g: A(g.f(2, 3)), ALL)
    spec(".cuda", lambda g: A(g.f(2, 3)), F32, "identity-on-jax", torch_fn=lambda x: x)
    spec(".requires_grad_", lambda g: A(g.x(2, 3)), F32)
    spec("torch.clone .clone", lambda g: A(g.f(2, 3)), ALL)
    spec("torch.detach .detach .detach_", lambda g: A(g.f(2, 3)), FLOATS)
    spec(".item", lambda g: A(g.f(1, 1)), ALL,
         torch_fn=lambda x: torch.as_tensor(x.item(), dtype=x.dtype))
    spec(".size", lambda g: A(g.f(2, 3, 4)), F32, "all")
    spec(".size", lambda g: A(g.f(2, 3, 4), -1), F32, "negative-dim")
    spec(".size", lambda g: A(g.f(2, 3, 4), dim=1), F32, "dim-kw")
    spec(".dim .ndimension torch.numel .numel .nelement", lambda g: A(g.f(2, 3, 4)), F32)
    spec("torch.is_floating_point .is_floating_point torch.is_complex .is_complex",
         lambda g: A(g.f(2)), F_AND_I)
    spec(".get_device", lambda g: A(g.f(2)), F32)
    spec(".element_size", lambda g: A(g.f(2)), ALL)


# ------------------------------------------------------------------------------ shape

def _shape() -> None:
    spec(".view", lambda g: A(g.f(2, 3, 4), -1, 4), ALL, "infer")
    spec(".view", lambda g: A(g.f(2, 3, 4), (4, 6)), F32, "tuple")
    spec(".view", lambda g: A(g.f(6), 2, 1, 3), F32, "unsqueeze-like")
    spec(".view", lambda g: A(g.f(2, 2).float(), g.torch.int32), F32, "dtype-bitcast",
         grad=False)
    spec("torch.reshape", lambda g: A(g.f(2, 3, 4), (3, -1)), ALL)
    spec(".reshape", lambda g: A(g.f(2, 3, 4), 6, 4), ALL, "varargs")
    spec(".reshape", lambda g: A(g.f(2, 3), (-1,)), F32, "tuple")
    spec(".view_as .reshape_as", lambda g: A(g.f(2, 6), g.f(3, 4)), F_AND_I)
    spec("torch.flatten .flatten", lambda g: A(g.f(2, 3, 4, 5)), ALL)
    spec("torch.flatten .flatten", lambda g: A(g.f(2, 3, 4, 5), 1, -2), F32, "start-end")
    spec("torch.flatten .flatten", lambda g: A(g.f(), 0), F32, "0d")
    spec("torch.unflatten .unflatten", lambda g: A(g.f(2, 12), 1, (3, -1)), F_AND_I)
    spec("torch.squeeze .squeeze", lambda g: A(g.f(2, 1, 3, 1)), ALL, "all")
    spec("torch.squeeze .squeeze", lambda g: A(g.f(2, 1, 3, 1), 1), F32, "dim")
    spec("torch.squeeze .squeeze", lambda g: A(g.f(2, 1, 3, 1), 0), F32, "non-1-dim-kept")
    spec("torch.squeeze .squeeze", lambda g: A(g.f(2, 1, 3, 1), (1, -1)), F32, "tuple")
    spec(".squeeze_", lambda g: A(g.f(2, 1, 3)), F32)
    spec("torch.unsqueeze .unsqueeze .unsqueeze_", lambda g: A(g.f(2, 3), -1), ALL)
    spec("torch.unsqueeze .unsqueeze", lambda g: A(g.f(2, 3), 1), F32, "middle")
    spec("torch.transpose .transpose torch.swapaxes .swapaxes torch.swapdims .swapdims",
         lambda g: A(g.f(2, 3, 4), 0, -1), F_AND_I)
    spec(".transpose_ .swapaxes_ .swapdims_", lambda g: A(g.f(2, 3), 0, 1), F32)
    spec("torch.t .t .t_", lambda g: A(g.f(2, 3)), F_AND_I)
    spec("torch.t .t", lambda g: A(g.f(3)), F32, "1d")
    spec("torch.permute", lambda g: A(g.f(2, 3, 4), (2, 0, 1)), F_AND_I)
    spec(".permute", lambda g: A(g.f(2, 3, 4), 1, -1, 0), F_AND_I, "varargs")
    spec(".permute", lambda g: A(g.f(2, 3, 4), [2, 1, 0]), F32, "list")
    spec("torch.movedim .movedim torch.moveaxis .moveaxis",
         lambda g: A(g.f(2, 3, 4), 0, -1), F32)
    spec("torch.movedim .movedim", lambda g: A(g.f(2, 3, 4), (0, 1), (2, 0)), F32, "tuples")
    spec(".expand", lambda g: A(g.f(3, 1), 2, 3, 4), F_AND_I, "new-leading")
    spec(".expand", lambda g: A(g.f(3, 1), -1, 5), F32, "minus-one")
    spec(".expand", lambda g: A(g.f(3, 1), (3, 2)), F32, "tuple")
    spec(".expand_as", lambda g: A(g.f(1, 4), g.f(3, 4)), F32)
    spec("torch.broadcast_to .broadcast_to", lambda g: A(g.f(3, 1), (2, 3, 4)), F32)
    spec("torch.broadcast_tensors", lambda g: A(g.f(3, 1), g.f(4)), F32)
    spec(".repeat", lambda g: A(g.f(2, 3), 2, 1), F_AND_I)
    spec(".repeat", lambda g: A(g.f(3), (2, 1, 2)), F32, "new-dims")
    spec("torch.tile .tile", lambda g: A(g.f(2, 3), (2,)), F_AND_I)
    spec("torch.repeat_interleave .repeat_interleave", lambda g: A(g.f(2, 3), 2), F_AND_I,
         "int-flat")
    spec("torch.repeat_interleave .repeat_interleave",
         lambda g: A(g.f(3, 2), g.torch.tensor([1, 0, 3]), dim=0), F32, "tensor-repeats")
    spec("torch.repeat_interleave .repeat_interleave",
         lambda g: A(g.f(3, 2), g.torch.tensor([1, 0, 3]), dim=0, output_size=4), F32,
         "output-size")
    spec("torch.repeat_interleave", lambda g: A(g.torch.tensor([2, 0, 1])), INTS, "repeats-only")
    spec("torch.split .split", lambda g: A(g.f(7, 2), 3), F_AND_I, "size")
    spec("torch.split .split", lambda g: A(g.f(2, 7), [1, 4, 2], dim=-1), F32, "sections")
    spec("torch.split_with_sizes .split_with_sizes", lambda g: A(g.f(6, 2), [2, 4]), F32)
    spec("torch.chunk .chunk", lambda g: A(g.f(5, 3), 4), F_AND_I, "fewer-chunks")
    spec("torch.chunk .chunk", lambda g: A(g.f(2, 6), 3, -1), F32, "even")
    spec("torch.tensor_split .tensor_split", lambda g: A(g.f(7, 2), 3), F32, "sections")
    spec("torch.tensor_split .tensor_split", lambda g: A(g.f(7, 2), [1, 5]), F32, "indices")
    spec("torch.unbind .unbind", lambda g: A(g.f(3, 2)), F_AND_I)
    spec("torch.unbind .unbind", lambda g: A(g.f(3, 2), -1), F32, "last")
    spec("torch.cat torch.concat torch.concatenate", lambda g: A([g.f(2, 3), g.f(1, 3)]),
         ALL)
    spec("torch.cat", lambda g: A((g.f(2, 3), g.f(2, 1)), dim=-1), F32, "dim-neg")
    spec("torch.cat", lambda g: A([g.f(2, 3), g.i(2, 3)], 1), F64, "promote")
    spec("torch.cat", lambda g: A([g.f(2, 3), g.torch.zeros(0)]), F32, "legacy-empty")
    spec("torch.stack", lambda g: A([g.f(2, 3), g.f(2, 3)]), ALL)
    spec("torch.stack", lambda g: A([g.f(2, 3), g.f(2, 3)], dim=-1), F32, "last")
    spec("torch.hstack", lambda g: A([g.f(2, 3), g.f(2, 1)]), F32)
    spec("torch.vstack torch.row_stack", lambda g: A([g.f(3), g.f(2, 3)]), F32)
    spec("torch.narrow .narrow", lambda g: A(g.f(5, 3), 0, 1, 3), F_AND_I)
    spec("torch.narrow .narrow", lambda g: A(g.f(5, 3), -1, -2, 2), F32, "negative")
    spec("torch.select .select", lambda g: A(g.f(4, 3), 1, -1), F_AND_I)
    spec("torch.flip", lambda g: A(g.f(3, 4), [0, 1]), F_AND_I)
    spec(".flip", lambda g: A(g.f(3, 4), -1), F32, "varargs")
    spec("torch.roll .roll", lambda g: A(g.f(3, 4), 1), F_AND_I, "flat")
    spec("torch.roll .roll", lambda g: A(g.f(3, 4), (1, -2), (0, 1)), F32, "dims")
    spec("torch.tril .tril .tril_ torch.triu .triu .triu_", lambda g: A(g.f(4, 5)), F_AND_I)
    spec("torch.tril .tril torch.triu .triu", lambda g: A(g.f(2, 4, 4), -1), F32, "batched")
    spec("torch.diag .diag", lambda g: A(g.f(3)), F_AND_I, "vector")
    spec("torch.diag .diag", lambda g: A(g.f(3, 4), 1), F32, "matrix-offset")
    spec("torch.diagonal .diagonal", lambda g: A(g.f(2, 3, 4), 0, 1, 2), F32)
    spec("torch.diag_embed .diag_embed", lambda g: A(g.f(2, 3)), F32)
    spec("torch.diag_embed .diag_embed", lambda g: A(g.f(2, 3), -1, 0, 2), F32, "offset-dims")
