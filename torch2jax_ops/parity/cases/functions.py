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

The suite runs the JAX side under ``jax.jit`` with the integer arrays as constants
(:meth:`Case.run`); the specs with ``jit=False`` (the ``*-eager`` labels, ``nonzero``)
are the entries whose output shape depends on the values, which run as called.
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
HALF = ("float16", "bfloat16")


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
    #: the oldest torch this case is verified on (older ones lack what it compares)
    min_torch: Optional[str] = None


SPECS: list = []


def spec(keys: Any, make: Callable, dtypes: tuple = FLOATS, label: str = "basic", **kw: Any):
    """Add a spec; keywords that are not :class:`S` fields are options of ``compare``."""
    fields = {f.name for f in dataclasses.fields(S)}
    options = {k: kw.pop(k) for k in list(kw) if k not in fields}
    SPECS.append(S(tuple(keys.split()) if isinstance(keys, str) else tuple(keys), make, dtypes,
                   label, options=options, **kw))


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
    if isinstance(out, tuple) and out and all(isinstance(o, int) for o in out):
        return torch.tensor(list(out), dtype=torch.int64)
    if isinstance(out, (tuple, list)):
        return tuple(_torch_value(o) for o in out)
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
        if name.endswith("_") and not name.startswith("operator."):  # torch.relu_(x): a copy
            inplace_fn = theirs

            def theirs(x, *a, **k):  # noqa: F811
                return inplace_fn(x.clone(), *a, **k)
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


def _impl(key: str) -> Any:
    from torch2jax_ops.nn._registry import functions, methods

    kind, name = key_path(key)
    return (methods() if kind == "method" else functions()).get(name)


@register("functions")
def table_cases() -> Iterable[Case]:
    """Every key of every spec; a key whose implementation an earlier key of the same spec
    already runs in every dtype (an alias: torch.add / Tensor.add) runs in the first only."""
    _load_specs()
    for s in SPECS:
        seen: set = set()
        for key in s.keys:
            impl = _impl(key)
            dtypes = s.dtypes if id(impl) not in seen else s.dtypes[:1]
            seen.add(id(impl))
            for dtype in dtypes:
                yield Case("functions", case_op(key), dtype, s.label, _build(key, s, dtype),
                           s.min_torch)


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
    _half()


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
    # integer dtypes: bounds truncated, steps in double, truncated ([0, 1, 3, 4, 6, 7, 9]);
    # bfloat16: every operation rounded to bfloat16 (a float32 computation differs by an ulp)
    spec("torch.linspace", lambda g: A(0.5, 9.7, 7, dtype=torch.int32), F32, "int32-truncates")
    spec("torch.linspace", lambda g: A(7, -2, 6, dtype=torch.int64), F32, "int64-descending")
    spec("torch.linspace", lambda g: A(0, 10, 4, dtype=torch.bfloat16), F32, "bfloat16-rounding")
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
    spec(".fill_", lambda g: A(g.f(2, 3), 2.5 if not g.is_int else 2), ALL)
    spec(".fill_", lambda g: A(g.f(2, 3), g.f()), FLOATS, "0d-tensor")
    spec(".zero_", lambda g: A(g.f(2, 3)), ALL)
    spec(".copy_", lambda g: A(g.f(2, 3), g.f(3)), ALL, "broadcast")
    spec(".copy_", lambda g: A(g.f(2, 3), g.i(2, 3)), FLOATS, "cast")
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
    spec("torch.flip .flip", lambda g: A(g.f(3, 4), dims=[1]), F_AND_I, "dims-kw")
    spec("torch.flip", lambda g: A(g.f(3, 4), []), F32, "no-dims")
    spec("torch.roll .roll", lambda g: A(g.f(3, 4), 1), F_AND_I, "flat")
    spec("torch.roll .roll", lambda g: A(g.f(3, 4), (1, -2), (0, 1)), F32, "dims")
    spec("torch.tril .tril .tril_ torch.triu .triu .triu_", lambda g: A(g.f(4, 5)), F_AND_I)
    spec("torch.tril .tril torch.triu .triu", lambda g: A(g.f(2, 4, 4), -1), F32, "batched")
    spec("torch.diag .diag", lambda g: A(g.f(3)), F_AND_I, "vector")
    spec("torch.diag .diag", lambda g: A(g.f(3, 4), 1), F32, "matrix-offset")
    spec("torch.diagonal .diagonal", lambda g: A(g.f(2, 3, 4), 0, 1, 2), F32)
    spec("torch.diag_embed .diag_embed", lambda g: A(g.f(2, 3)), F32)
    spec("torch.diag_embed .diag_embed", lambda g: A(g.f(2, 3), -1, 0, 2), F32, "offset-dims")


# --------------------------------------------------------------------------- indexing

def _indexing() -> None:
    import torch

    spec("op.getitem", lambda g: A(g.f(4, 3), 1), ALL, "int")
    spec("op.getitem", lambda g: A(g.f(4, 3), (slice(None), -1)), F32, "slice-negative")
    spec("op.getitem", lambda g: A(g.f(4, 3, 2), (Ellipsis, None, slice(1, None, 2))), F32,
         "ellipsis-none-step")
    spec("op.getitem", lambda g: A(g.f(4, 3), [0, 2, 2]), F_AND_I, "list")
    spec("op.getitem", lambda g: A(g.f(4, 3), g.idx(4, 5)), F_AND_I, "int-tensor")
    spec("op.getitem", lambda g: A(g.f(4, 3), (g.idx(4, 2), g.idx(3, 2))), F32, "two-tensors")
    spec("op.getitem", lambda g: A(g.f(4, 3), (slice(None), g.i(2, lo=-3, hi=3))), F32,
         "negative-index-tensor")
    spec("op.getitem", lambda g: A(g.f(4, 3), g.torch.tensor([True, False, True, True])), F32,
         "bool-mask-eager", jit=False)
    spec("op.getitem", lambda g: A((g.f(2), g.f(3)), 1), F32, "tuple-container")
    spec("op.setitem", lambda g: A(g.f(4, 3), (slice(None), 0), 0.0), F_AND_I, "column-zero")
    spec("op.setitem", lambda g: A(g.f(4, 3), 1, g.f(3)), FLOATS, "row-tensor")
    spec("op.setitem", lambda g: A(g.f(4, 3), g.torch.tensor([True, False, True, False]),
                                   -1.0), F_AND_I, "bool-mask-scalar")
    spec("op.setitem", lambda g: A(g.f(4, 3), g.f(4, 3) > 0, 2.0), F32, "full-mask")
    spec("op.setitem", lambda g: A(g.f(4, 3), g.torch.tensor([2, 0]), g.f(2, 3)), F32,
         "index-tensor")
    spec("torch.index_select .index_select", lambda g: A(g.f(5, 3), 0, g.idx(5, 7)), ALL)
    spec("torch.index_select .index_select", lambda g: A(g.f(3, 5), -1, g.idx(5, 2)), F32,
         "dim-neg")
    spec("torch.gather .gather", lambda g: A(g.f(4, 3), 1, g.idx(3, 4, 5)), ALL)
    spec("torch.gather .gather", lambda g: A(g.f(4, 3), 0, g.idx(4, 2, 2)), F32,
         "smaller-index")
    spec("torch.take_along_dim .take_along_dim", lambda g: A(g.f(4, 3), g.idx(3, 4, 2), 1),
         F32)
    spec("torch.take_along_dim .take_along_dim", lambda g: A(g.f(4, 3), g.idx(12, 5)), F32,
         "flat")
    spec("torch.take .take", lambda g: A(g.f(4, 3), g.idx(12, 2, 2)), F_AND_I)
    spec("torch.index_fill .index_fill .index_fill_",
         lambda g: A(g.f(4, 3), 1, g.torch.tensor([0, 2]), -1.0 if not g.is_int else -1), ALL)
    spec("torch.index_fill .index_fill", lambda g: A(g.f(4, 3), 0, g.torch.tensor([3, 3]),
                                                     g.f()), FLOATS, "0d-value")
    spec("torch.index_put .index_put .index_put_",
         lambda g: A(g.f(4, 3), (g.torch.tensor([0, 2, 0]),), g.f(3, 3), True), FLOATS,
         "accumulate-duplicates")
    spec("torch.index_put .index_put",
         lambda g: A(g.f(4, 3), (g.torch.tensor([1, 3]), g.torch.tensor([0, 2])), g.f(2)), ALL,
         "pairs")
    spec(".fill_diagonal_", lambda g: A(g.f(4, 3), 5.0 if not g.is_int else 5), F_AND_I)
    spec(".fill_diagonal_", lambda g: A(g.f(7, 3), 1.0, True), F32, "wrap")
    spec(".fill_diagonal_", lambda g: A(g.f(3, 3, 3), -2.0), F32, "3d")
    spec("torch.masked_fill .masked_fill .masked_fill_",
         lambda g: A(g.f(4, 3), g.b(4, 3), -1.5 if not g.is_int else -1), ALL)
    spec("torch.masked_fill .masked_fill", lambda g: A(g.f(4, 3), g.b(3), g.f()), FLOATS,
         "broadcast-0d-value")
    spec("torch.masked_fill .masked_fill", lambda g: A(g.f(4, 3), g.b(4, 3), float("-inf")),
         F32, "minus-inf")
    spec("torch.where", lambda g: A(g.b(4, 3), g.f(4, 3), g.f(3)), ALL)
    spec("torch.where", lambda g: A(g.b(4, 3), g.i(4, 3), 0.5), F32, "promote-scalar")
    spec("torch.where", lambda g: A(g.b(4, 3), 1.0, 0.0), F32, "two-scalars")
    spec("torch.where", lambda g: A(g.b(4, 3)), F32, "one-arg-eager", grad=False, jit=False)
    spec(".where", lambda g: A(g.f(4, 3), g.b(4, 3), 0.0), FLOATS)
    spec("torch.nonzero .nonzero", lambda g: A(g.f(3, 4)), F_AND_I, grad=False, jit=False)
    spec("torch.nonzero .nonzero", lambda g: A(g.f(5), as_tuple=True), F32, "as-tuple",
         grad=False, jit=False)
    spec("builtins.getattr", lambda g: A(g.f(3, 4), "T"), F_AND_I, "T")
    spec("builtins.getattr", lambda g: A(g.f(2, 3, 4), "mT"), F32, "mT")
    spec("builtins.getattr", lambda g: A(g.f(3, 4), "data"), F32, "data-no-grad")
    spec("builtins.getattr", lambda g: A(g.f(3, 4), "shape"), F32, "shape")
    spec("builtins.getattr", lambda g: A(g.f(3, 4), "ndim"), F32, "ndim")
    spec("builtins.getattr", lambda g: A(g.f(3, 4), "is_cuda"), F32, "is-cuda")
    spec("builtins.getattr", lambda g: A(g.f(3, 4), "real"), F32, "real")
    spec("builtins.getattr", lambda g: A(torch.return_types.max((g.f(2), g.i(2))), "indices"),
         F32, "named-tuple", torch_fn=getattr)


# ------------------------------------------------------------------------- arithmetic

def _arithmetic() -> None:
    import torch

    binary = {
        "add": "torch.add .add .add_ op.add",
        "sub": "torch.sub .sub .sub_ op.sub torch.subtract .subtract .subtract_",
        "mul": "torch.mul .mul .mul_ op.mul torch.multiply .multiply .multiply_",
        "div": "torch.div .div .div_ op.truediv torch.divide .divide .divide_ "
               "torch.true_divide .true_divide .true_divide_",
        "floordiv": "torch.floor_divide .floor_divide .floor_divide_ op.floordiv",
        "mod": "torch.remainder .remainder .remainder_ op.mod",
        "fmod": "torch.fmod .fmod .fmod_",
        "minmax": "torch.maximum .maximum torch.minimum .minimum torch.fmax .fmax torch.fmin "
                  ".fmin",
    }
    divisor = {"div", "floordiv", "mod", "fmod"}
    for name, keys in binary.items():
        if name in divisor:
            other = (lambda g: g.pos(4, 3) * (1 - 2 * g.b(4, 3).to(g.pos(1).dtype)))
        else:
            other = (lambda g: g.f(4, 3))
        inplace = [k for k in keys.split() if k.endswith("_")]
        outplace = " ".join(k for k in keys.split() if k not in inplace)
        spec(keys, lambda g, other=other: A(g.f(4, 3), other(g)), FLOATS, "same-shape",
             grad=name != "floordiv")
        spec(outplace if name == "div" else keys, lambda g, other=other: A(g.f(4, 3), other(g)),
             INTS, "same-shape")
        spec(keys, lambda g, other=other: A(g.f(4, 3), other(g)[0]), F32, "broadcast-row",
             grad=name != "floordiv")
        if name != "minmax":
            spec(outplace, lambda g: A(g.i32(4, 3, lo=1, hi=5), 2.5), F32,
                 "int-tensor-float-scalar")
        spec(outplace, lambda g: A(g.x(4, 3).float(), g.x(3).double()[0]), F64,
             "float32-tensor-0d-float64-no-widen", grad=name != "floordiv",
             rtol=1.3e-6, atol=1e-5)  # the float64 gradient is a float32 sum
        spec(outplace, lambda g: A(g.i32(3, 2, lo=1, hi=6), g.i(3, 2, lo=1, hi=6)), INTS,
             "int32-int64")
        if "minmax" != name:
            scalar_first = [k for k in outplace.split() if k.startswith("op.")]
            spec(" ".join(scalar_first), lambda g: A(3, g.pos(4)), F_AND_I, "scalar-first",
                 grad=name not in ("floordiv", "mod"))
    spec("op.add op.mul op.sub op.floordiv op.mod op.truediv", lambda g: A(7, 2), INTS,
         "python-ints")
    spec("op.add", lambda g: A((2, 3), (4,)), INTS, "shape-tuples")
    spec("op.mul", lambda g: A((2,), 3), INTS, "tuple-times-int")
    spec("op.add op.mul", lambda g: A(g.b(5), g.b(5)), INTS, "bool-bool")
    spec("torch.add .add", lambda g: A(g.f(4, 3), g.f(4, 3), alpha=2), ALL, "alpha")
    spec("torch.sub .sub", lambda g: A(g.f(4, 3), g.f(3), alpha=0.5), FLOATS, "alpha")
    spec("torch.rsub", lambda g: A(g.f(4, 3), 2.0), FLOATS)
    spec("torch.div .div", lambda g: A(g.f(4, 3), g.pos(4, 3), rounding_mode="trunc"), ALL,
         "trunc")
    spec("torch.div .div", lambda g: A(-g.pos(4, 3), g.pos(3), rounding_mode="floor"), ALL,
         "floor")
    spec("op.truediv torch.true_divide", lambda g: A(g.i32(5, lo=-6), g.i32(5, lo=1, hi=4)),
         F32, "int32-by-int32-float32")
    spec("torch.pow .pow .pow_ op.pow", lambda g: A(g.f(4, 3), 2), ALL, "square")
    spec("torch.pow .pow op.pow", lambda g: A(g.f(4, 3), 3), FLOATS, "cube")
    spec("torch.pow .pow op.pow", lambda g: A(g.pos(4, 3), -1), FLOATS, "negative-int")
    spec("torch.pow .pow op.pow", lambda g: A(g.pos(4, 3), 0.5), FLOATS, "sqrt")
    spec("torch.pow .pow op.pow", lambda g: A(g.pos(4, 3), 1.7), FLOATS, "float-exp")
    spec("torch.pow .pow op.pow", lambda g: A(g.pos(4, 3), g.f(4, 3)), FLOATS, "tensor-exp")
    spec("torch.pow op.pow", lambda g: A(2, g.f(4)), F_AND_I, "scalar-base")
    spec("torch.pow .pow op.pow", lambda g: A(g.i(4, lo=1, hi=4), 2.0), F32,
         "int-float-exponent")
    spec("torch.neg .neg .neg_ op.neg torch.negative .negative .negative_",
         lambda g: A(g.f(4, 3)), ALL)
    spec("op.neg op.pos", lambda g: A(3), INTS, "python")
    spec("op.pos torch.positive .positive", lambda g: A(g.f(4, 3)), F_AND_I)
    spec("torch.abs .abs .abs_ op.abs torch.absolute .absolute .absolute_",
         lambda g: A(g.f(4, 3)), ALL)
    spec("torch.atan2 .atan2 .atan2_ torch.arctan2 .arctan2 .arctan2_",
         lambda g: A(g.x(4, 3), g.x(4, 3)), FLOATS)
    spec("torch.logaddexp .logaddexp", lambda g: A(g.x(4, 3), g.x(3)), FLOATS)
    spec("torch.lerp .lerp .lerp_", lambda g: A(g.x(4, 3), g.x(4, 3), 0.3), FLOATS, "low")
    spec("torch.lerp .lerp", lambda g: A(g.x(4, 3), g.x(4, 3), g.prob(4, 3)), FLOATS,
         "tensor-weight")
    spec("torch.addcmul .addcmul .addcmul_ torch.addcdiv .addcdiv .addcdiv_",
         lambda g: A(g.x(4, 3), g.x(4, 3), g.pos(3), value=0.5), FLOATS)
    _ = torch


# ------------------------------------------------------------------------ elementwise

def _special(g):
    import torch

    data = [float("nan"), float("inf"), -float("inf"), 0.0, -1.5, 2.0]
    return torch.tensor(data, dtype=g.fdt)


def _elementwise() -> None:
    smooth = lambda g: g.x(4, 3)  # noqa: E731
    positive = lambda g: g.pos(4, 3)  # noqa: E731
    unit = lambda g: g.unit(4, 3)  # noqa: E731
    grid = lambda g: g.f(4, 3)  # noqa: E731
    nonzero = lambda g: g.pos(4, 3) * (1 - 2 * g.b(4, 3).to(g.pos(1).dtype))  # noqa: E731
    table = [
        ("exp", "", smooth), ("exp2", "", smooth), ("expm1", "torch.special.expm1", smooth),
        ("log", "", positive), ("log2", "", positive), ("log10", "", positive),
        ("log1p", "torch.special.log1p", positive), ("sqrt", "", positive),
        ("rsqrt", "", positive), ("sin", "", smooth), ("cos", "", smooth), ("tan", "", unit),
        ("asin", "torch.arcsin .arcsin .arcsin_", unit),
        ("acos", "torch.arccos .arccos .arccos_", unit),
        ("atan", "torch.arctan .arctan .arctan_", smooth), ("sinh", "", smooth),
        ("cosh", "", smooth), ("asinh", "torch.arcsinh .arcsinh .arcsinh_", smooth),
        ("atanh", "torch.arctanh .arctanh .arctanh_", unit),
        ("tanh", "F.tanh", smooth), ("sigmoid", "F.sigmoid torch.special.expit", smooth),
        ("erf", "torch.special.erf", smooth), ("erfc", "torch.special.erfc", smooth),
        ("erfinv", "torch.special.erfinv", unit), ("lgamma", "", positive),
        ("digamma", "torch.special.digamma", positive), ("reciprocal", "", nonzero),
        ("floor", "", grid), ("ceil", "", grid), ("trunc", "torch.fix .fix .fix_", grid),
        ("frac", "", grid), ("sign", "torch.sgn .sgn .sgn_", grid), ("square", "", grid),
        ("round", "", grid),
    ]
    int_ok = {"exp", "log", "sqrt", "sigmoid", "tanh", "floor", "ceil", "trunc", "round",
              "sign", "square", "reciprocal", "sin"}
    for name, aliases, make in table:
        keys = f"torch.{name} .{name} .{name}_ {aliases}".split()
        inplace = " ".join(k for k in keys if k.endswith("_"))
        # torch's sgn gradient is a ZeroTensor (compare cannot read it); torch has no
        # derivative for the in-place asinh_ / atanh_
        spec(" ".join(k for k in keys if not k.endswith("_")), lambda g, make=make: A(make(g)),
             FLOATS, grad=name != "sign")
        spec(inplace, lambda g, make=make: A(make(g)), F32, "inplace",
             grad=name not in ("sign", "asinh", "atanh"))
        if name in int_ok:
            spec(f"torch.{name} .{name}", lambda g: A(g.pos(4, 3) if g.is_int else g.f(4, 3)),
                 INTS, "int-input")
    spec("torch.round .round", lambda g: A(g.x(4, 3), decimals=2), FLOATS, "decimals")
    spec("torch.round", lambda g: A(g.torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5], dtype=g.fdt)),
         F32, "half-to-even")
    spec("torch.logit .logit .logit_", lambda g: A(g.prob(4, 3)), FLOATS)
    spec("torch.logit .logit", lambda g: A(g.prob(4, 3), eps=0.2), FLOATS, "eps")
    spec("torch.nan_to_num .nan_to_num .nan_to_num_", lambda g: A(_special(g)), FLOATS)
    spec("torch.nan_to_num .nan_to_num", lambda g: A(_special(g), nan=1.0, posinf=5.0,
                                                     neginf=-7.0), FLOATS, "values")
    spec("torch.isnan .isnan torch.isinf .isinf torch.isposinf .isposinf torch.isneginf "
         ".isneginf torch.isfinite .isfinite", lambda g: A(_special(g)), F32)
    spec("torch.isnan torch.isfinite", lambda g: A(g.f(4)), INTS, "int")
    spec("torch.clamp .clamp .clamp_ torch.clip .clip .clip_",
         lambda g: A(g.f(4, 3), -1, 1), ALL, "both")
    spec("torch.clamp .clamp", lambda g: A(g.f(4, 3), min=0.5), ALL, "min-only-promotes")
    spec("torch.clamp .clamp", lambda g: A(g.f(4, 3), max=g.f(4, 3)), FLOATS, "tensor-max")
    spec("torch.clamp", lambda g: A(g.f(4, 3), 1.0, -1.0), F32, "min-above-max")
    spec("torch.clamp", lambda g: A(_special(g), -1.0, 1.0), F32, "nan")
    spec("torch.clamp_min .clamp_min .clamp_min_", lambda g: A(g.f(4, 3), 0.5), FLOATS)
    spec("torch.clamp_min .clamp_min .clamp_min_", lambda g: A(g.f(4, 3), 1), INTS)
    spec("torch.clamp_max .clamp_max .clamp_max_", lambda g: A(g.f(4, 3), 0.5), FLOATS)


# --------------------------------------------------------------------- compare, logic

def _compare_logic() -> None:
    import torch

    for name, alias in (("eq", ""), ("ne", "torch.not_equal .not_equal"),
                        ("lt", "torch.less .less"), ("le", "torch.less_equal .less_equal"),
                        ("gt", "torch.greater .greater"),
                        ("ge", "torch.greater_equal .greater_equal")):
        keys = f"torch.{name} .{name} op.{name} {alias}"
        spec(keys, lambda g: A(g.f(4, 3), g.f(3)), ALL)
        spec(f"torch.{name} op.{name}", lambda g: A(g.i(4, 3), 0.5), F32, "int-vs-float")
        spec(f"op.{name}", lambda g: A(2, 3), INTS, "python")
    spec("op.eq op.ne", lambda g: A(torch.float32, torch.float32), F32, "torch-dtypes")
    spec("op.eq", lambda g: A(np.dtype("float32"), torch.float32), F32, "jax-vs-torch-dtype",
         torch_fn=lambda a, b: torch.tensor(True))
    spec("torch.isclose .isclose", lambda g: A(g.f(4, 3), g.f(4, 3) + 1e-6), FLOATS)
    for name in ("logical_and", "logical_or", "logical_xor"):
        spec(f"torch.{name} .{name} .{name}_", lambda g: A(g.b(4, 3), g.b(4, 3)), INTS, "bool")
        spec(f"torch.{name} .{name}", lambda g: A(g.f(4, 3), g.f(3)), F32, "numbers")
    spec("torch.logical_not .logical_not .logical_not_", lambda g: A(g.b(4, 3)), INTS)
    spec("torch.logical_not .logical_not", lambda g: A(g.f(4, 3)), F32, "numbers")
    bitwise = ("bitwise_and", "and_"), ("bitwise_or", "or_"), ("bitwise_xor", "xor")
    for name, opname in bitwise:
        spec(f"torch.{name} .{name} .{name}_ op.{opname}", lambda g: A(g.i(4, 3), g.i(3)), INTS)
        spec(f"torch.{name} op.{opname}", lambda g: A(g.b(4, 3), g.b(4, 3)), INTS, "bool")
        spec(f"op.{opname}", lambda g: A(6, 3), INTS, "python")
    for name, opname in (("bitwise_left_shift", "lshift"), ("bitwise_right_shift", "rshift")):
        spec(f"torch.{name} .{name} .{name}_ op.{opname}",
             lambda g: A(g.i(4, 3, lo=0, hi=9), g.i(3, lo=0, hi=4)), INTS)
    spec("torch.bitwise_not .bitwise_not .bitwise_not_ op.invert", lambda g: A(g.i(4, 3)), INTS)
    spec("torch.bitwise_not op.invert", lambda g: A(g.b(4, 3)), INTS, "bool")
    spec("op.invert", lambda g: A(5), INTS, "python")


# ---------------------------------------------------------------------------- matmul

def _matmul() -> None:
    spec("torch.matmul .matmul op.matmul", lambda g: A(g.f(4, 3), g.f(3, 5)), ALL, "2d")
    spec("torch.matmul op.matmul", lambda g: A(g.f(2, 1, 4, 3), g.f(5, 3, 2)), FLOATS,
         "batch-broadcast")
    spec("torch.matmul op.matmul", lambda g: A(g.f(3), g.f(3, 4)), F32, "1d-2d")
    spec("torch.matmul op.matmul", lambda g: A(g.f(4, 3), g.f(3)), F32, "2d-1d")
    spec("torch.matmul op.matmul", lambda g: A(g.f(3), g.f(3)), F32, "1d-1d")
    spec("torch.mm .mm", lambda g: A(g.f(4, 3), g.f(3, 2)), ALL)
    spec("torch.bmm .bmm", lambda g: A(g.f(2, 4, 3), g.f(2, 3, 2)), FLOATS)
    spec("torch.mv .mv", lambda g: A(g.f(4, 3), g.f(3)), FLOATS)
    spec("torch.dot .dot torch.inner .inner", lambda g: A(g.f(5), g.f(5)), ALL)
    spec("torch.inner .inner", lambda g: A(g.f(2, 5), g.f(3, 5)), F32, "nd")
    spec("torch.outer .outer torch.ger .ger", lambda g: A(g.f(4), g.f(3)), ALL)
    spec("torch.einsum", lambda g: A("bij,bjk->bik", g.f(2, 3, 4), g.f(2, 4, 5)), FLOATS)
    spec("torch.einsum", lambda g: A("ij,j", [g.f(3, 4), g.f(4)]), F32, "list-operands")
    spec("torch.einsum", lambda g: A("...i,...i->...", g.f(2, 3, 4), g.f(3, 4)), F32,
         "ellipsis")
    spec("torch.tensordot", lambda g: A(g.f(2, 3, 4), g.f(3, 4, 5)), F32)
    spec("torch.tensordot", lambda g: A(g.f(2, 3, 4), g.f(4, 2), dims=([0, 2], [1, 0])), F32,
         "dims-lists")
    spec("torch.addmm .addmm .addmm_", lambda g: A(g.f(4, 2), g.f(4, 3), g.f(3, 2)), FLOATS)
    spec("torch.addmm", lambda g: A(g.f(2), g.f(4, 3), g.f(3, 2), beta=0.5, alpha=2.0),
         FLOATS, "beta-alpha-broadcast")
    spec("torch.addmm", lambda g: A(g.torch.full((4, 2), float("nan"), dtype=g.fdt),
                                    g.f(4, 3), g.f(3, 2), beta=0), F32, "beta-zero-ignores-nan")
    spec("torch.baddbmm .baddbmm .baddbmm_",
         lambda g: A(g.f(2, 4, 2), g.f(2, 4, 3), g.f(2, 3, 2), alpha=0.5), FLOATS)
    spec("F.linear torch._C._nn.linear", lambda g: A(g.f(5, 3), g.f(4, 3), g.f(4)), FLOATS)
    spec("F.linear", lambda g: A(g.f(2, 5, 3), g.f(4, 3)), F32, "no-bias-batched")


# ------------------------------------------------------------------------- reductions

def _reductions() -> None:
    import torch

    spec("torch.sum .sum", lambda g: A(g.f(4, 3)), ALL, "all")
    spec("torch.sum .sum", lambda g: A(g.f(4, 3, 2), (0, -1), keepdim=True), ALL, "dims-keepdim")
    spec("torch.sum .sum", lambda g: A(g.f(4, 3), 1, dtype=torch.float64), F64, "dtype")
    spec("torch.sum .sum", lambda g: A(g.b(4, 3), 0), INTS, "bool-to-int64")
    spec("torch.sum", lambda g: A(g.i32(4, 3)), INTS, "int32-to-int64")
    spec("torch.sum", lambda g: A(g.f(4, 3), ()), F32, "empty-dims-all")
    spec("torch.nansum .nansum", lambda g: A(_special(g)[[0, 3, 4, 5]]), F32)
    spec("torch.mean .mean", lambda g: A(g.f(4, 3)), FLOATS, "all")
    spec("torch.mean .mean", lambda g: A(g.f(4, 3, 2), [0, 2], True), FLOATS, "dims-keepdim")
    spec("torch.mean .mean", lambda g: A(g.f(4, 3), -1, dtype=torch.float32), INTS, "int-dtype")
    spec("torch.nanmean .nanmean", lambda g: A(_special(g)[[0, 3, 4, 5]]), F32)
    spec("torch.prod .prod", lambda g: A(g.f(4, 3)), ALL, "all")
    spec("torch.prod .prod", lambda g: A(g.f(4, 3), 1, True), ALL, "dim-keepdim")
    spec("torch.prod", lambda g: A(g.torch.tensor([[0.0, 2.0, 3.0], [0.0, 0.0, 1.5]],
                                                  dtype=g.fdt), 1), FLOATS, "zeros-grad")
    for name in ("var", "std"):
        spec(f"torch.{name} .{name}", lambda g: A(g.f(5, 4)), FLOATS, "all-unbiased")
        spec(f"torch.{name} .{name}", lambda g: A(g.f(5, 4), 1, keepdim=True), FLOATS, "dim")
        spec(f"torch.{name} .{name}", lambda g: A(g.f(5, 4), 0, False), FLOATS,
             "legacy-unbiased-false")
        spec(f"torch.{name} .{name}", lambda g: A(g.f(5, 4), (0, 1), correction=0), FLOATS,
             "correction")
        spec(f"torch.{name}", lambda g: A(g.f(5, 4), False), F32, "positional-unbiased")
    spec("torch.var_mean torch.std_mean", lambda g: A(g.f(5, 4), 1), FLOATS)
    for name in ("max", "min"):
        spec(f"torch.{name} .{name}", lambda g: A(g.f(4, 5)), ALL, "full")
        spec(f"torch.{name} .{name}", lambda g: A(g.f(4, 5), 1), ALL, "dim-ties-first")
        spec(f"torch.{name} .{name}", lambda g: A(g.f(4, 5), dim=0, keepdim=True), FLOATS,
             "dim-keepdim")
        spec(f"torch.{name} .{name}", lambda g: A(g.f(4, 5), g.f(5)), FLOATS, "elementwise")
        spec(f"torch.{name}", lambda g: A(_special(g)), F32, "nan")
        spec(f"torch.{name}", lambda g: A(_special(g).reshape(2, 3), 1), F32, "nan-dim")
        spec(f"torch.a{name} .a{name}", lambda g: A(g.f(4, 5)), ALL, "all-ties-share-grad")
        spec(f"torch.a{name} .a{name}", lambda g: A(g.f(4, 5, 2), (0, 2), True), FLOATS, "dims")
        spec(f"torch.arg{name} .arg{name}", lambda g: A(g.f(4, 5)), ALL, "flat-ties-first")
        spec(f"torch.arg{name} .arg{name}", lambda g: A(g.f(4, 5), -1), ALL, "dim")
        spec(f"torch.arg{name} .arg{name}", lambda g: A(g.f(4, 5), 0, True), F32, "keepdim")
        spec(f"torch.arg{name}", lambda g: A(g.f(4, 5), keepdim=True), F32, "flat-keepdim")
    # torch 2.11 has no derivative for aminmax (2.13, the pinned one, has)
    spec("torch.aminmax .aminmax", lambda g: A(g.f(4, 5)), F_AND_I, min_torch="2.13")
    spec("torch.aminmax .aminmax", lambda g: A(g.f(4, 5), dim=1, keepdim=True), F32, "dim",
         min_torch="2.13")
    spec("torch.logsumexp .logsumexp torch.special.logsumexp", lambda g: A(g.x(4, 5), 1),
         FLOATS)
    spec("torch.logsumexp", lambda g: A(g.torch.tensor([[-float("inf")] * 3, [1.0, 2, 3]],
                                                       dtype=g.fdt), 1, True), F32, "minus-inf")
    spec("torch.logsumexp", lambda g: A(g.f(4, 5), (0, 1)), INTS, "int")
    spec("torch.any .any torch.all .all", lambda g: A(g.b(4, 3)), INTS, "bool")
    spec("torch.any .any torch.all .all", lambda g: A(g.f(4, 3), 1), F_AND_I, "dim")
    spec("torch.any torch.all", lambda g: A(g.b(4, 3, 2), (0, 2), True), INTS, "dims-keepdim")
    spec("torch.count_nonzero .count_nonzero", lambda g: A(g.f(4, 3)), F_AND_I)
    spec("torch.count_nonzero .count_nonzero", lambda g: A(g.f(4, 3), 0), F32, "dim")
    spec("torch.cumsum .cumsum .cumsum_ torch.cumprod .cumprod .cumprod_",
         lambda g: A(g.f(4, 3), 0), ALL)
    spec("torch.cumsum .cumsum", lambda g: A(g.b(4, 3), -1), INTS, "bool-int64")
    spec("torch.cumsum .cumsum", lambda g: A(g.f(4, 3), 1, dtype=torch.float64), F64, "dtype")
    spec("torch.cummax .cummax torch.cummin .cummin", lambda g: A(g.f(4, 6), 1), ALL,
         "ties-last")
    spec("torch.cummax torch.cummin", lambda g: A(g.torch.tensor(
        [1.0, float("nan"), 3.0, float("nan"), -1.0], dtype=g.fdt), 0), F32, "nan-sticks")
    spec("torch.norm .norm", lambda g: A(g.f(4, 3)), FLOATS, "fro-all")
    spec("torch.norm .norm", lambda g: A(g.f(4, 3), 2, 1), FLOATS, "p2-dim")
    spec("torch.norm .norm", lambda g: A(g.f(4, 3), 1, -1, True), FLOATS, "p1-keepdim")
    spec("torch.norm .norm", lambda g: A(g.f(4, 3), float("inf"), 1), FLOATS, "inf")
    spec("torch.norm .norm", lambda g: A(g.f(4, 3), 3, 0), FLOATS, "p3")
    spec("torch.norm", lambda g: A(g.torch.zeros(2, 3, dtype=g.fdt), 2, 1), F32, "zero-grad")
    spec("torch.norm", lambda g: A(g.f(4, 3), 0, 1), F32, "p0")
    spec("torch.norm", lambda g: A(g.f(4, 3), float("-inf"), 1), F32, "minus-inf")
    spec("torch.linalg.vector_norm", lambda g: A(g.f(4, 3)), FLOATS)
    spec("torch.linalg.vector_norm", lambda g: A(g.f(4, 3), 3.5, (0, 1), True), F32, "ord")
    spec("torch.linalg.norm", lambda g: A(g.f(4, 3)), FLOATS)
    spec("torch.linalg.norm", lambda g: A(g.f(4, 3), 1, 1), F32, "vector-dim")
    spec("torch.sort .sort", lambda g: A(g.f(4, 6)), ALL, "ties-stable")
    spec("torch.sort .sort", lambda g: A(g.f(4, 6), 0, True), ALL, "descending-ties")
    spec("torch.sort", lambda g: A(_special(g), descending=True, stable=True), F32, "nan-desc")
    spec("torch.sort", lambda g: A(_special(g), stable=True), F32, "nan-asc")
    spec("torch.argsort .argsort", lambda g: A(g.f(4, 6), stable=True), ALL)
    spec("torch.argsort .argsort", lambda g: A(g.f(4, 6), dim=0, descending=True, stable=True),
         F_AND_I, "descending")
    spec("torch.msort .msort", lambda g: A(g.f(5, 3)), F32)
    spec("torch.topk .topk", lambda g: A(g.distinct(4, 6), 3), ALL, "distinct")
    spec("torch.topk .topk", lambda g: A(g.distinct(4, 6), 2, 0, False), FLOATS, "smallest")
    spec("torch.topk", lambda g: A(g.f(4, 6), 3), F32, "ties-values",
         summary=lambda out, lib: out[0])
    spec("torch.kthvalue .kthvalue", lambda g: A(g.distinct(4, 6), 2), FLOATS)
    spec("torch.kthvalue .kthvalue", lambda g: A(g.distinct(4, 6), 3, 0, True), F_AND_I,
         "dim-keepdim")
    spec("torch.median .median", lambda g: A(g.distinct(4, 6)), F_AND_I, "lower-middle")
    spec("torch.median .median", lambda g: A(g.distinct(4, 6), 1), F32, "dim")


# ------------------------------------------------------------------------ activations

def _activations() -> None:
    import torch

    grid = lambda g: g.f(4, 5)  # noqa: E731
    spec("F.relu F.relu_ torch.relu torch.relu_ .relu .relu_", lambda g: A(grid(g)), ALL)
    spec("F.relu6", lambda g: A(g.f(4, 5) * 3), FLOATS, "kinks-0-6")
    spec("F.leaky_relu F.leaky_relu_", lambda g: A(grid(g)), FLOATS)
    spec("F.leaky_relu", lambda g: A(grid(g), 0.2), FLOATS, "slope")
    spec("F.elu F.elu_", lambda g: A(grid(g)), FLOATS)
    spec("F.elu", lambda g: A(grid(g), alpha=0.7), FLOATS, "alpha")
    spec("F.selu F.selu_ torch.selu torch.selu_", lambda g: A(grid(g)), FLOATS)
    spec("F.celu F.celu_ torch.celu torch.celu_", lambda g: A(grid(g), 0.8), FLOATS)
    spec("F.gelu", lambda g: A(grid(g)), FLOATS, "erf")
    spec("F.gelu", lambda g: A(grid(g), approximate="tanh"), FLOATS, "tanh")
    spec("F.silu F.mish F.softsign F.tanhshrink F.logsigmoid", lambda g: A(grid(g)), FLOATS)
    spec("F.softplus", lambda g: A(grid(g)), FLOATS)
    spec("F.softplus", lambda g: A(g.f(4, 5) * 4, beta=2.0, threshold=5.0), FLOATS,
         "beta-threshold")
    spec("F.softshrink", lambda g: A(grid(g), 1.0), FLOATS)
    spec("F.hardshrink torch.hardshrink .hardshrink", lambda g: A(grid(g), 1.0), FLOATS)
    spec("F.threshold F.threshold_ torch.threshold torch.threshold_",
         lambda g: A(grid(g), 0.5, -2.0), FLOATS)
    spec("F.hardtanh F.hardtanh_", lambda g: A(grid(g)), FLOATS, "kinks")
    spec("F.hardtanh", lambda g: A(grid(g), -2.0, 0.5), FLOATS, "bounds")
    spec("F.hardsigmoid F.hardswish", lambda g: A(g.f(4, 5) * 2), FLOATS, "kinks-3")
    spec("F.prelu torch.prelu .prelu", lambda g: A(grid(g), g.x(5)), FLOATS, "channels")
    spec("F.prelu", lambda g: A(g.f(2, 3, 4), g.x(1)), F32, "one-weight")
    spec("F.rrelu F.rrelu_ torch.rrelu torch.rrelu_", lambda g: A(grid(g)), FLOATS, "eval")
    spec("F.glu", lambda g: A(g.f(4, 6)), FLOATS)
    spec("F.glu", lambda g: A(g.f(4, 6), 0), F32, "dim0")
    spec("F.softmax F.log_softmax F.softmin", lambda g: A(g.x(4, 5), 1), FLOATS)
    spec("F.softmax F.log_softmax", lambda g: A(g.x(2, 4, 5), -1, dtype=torch.float64), F64,
         "dtype")
    spec("F.softmax F.log_softmax", lambda g: A(g.x(2, 4, 5)), F32, "implicit-dim")
    spec("F.softmax F.log_softmax", lambda g: A(g.torch.tensor(
        [[-float("inf"), 0.0, 1.0], [2.0, -float("inf"), 2.0]], dtype=g.fdt), 1), F32,
         "masked-inf")
    spec("torch.softmax .softmax torch.log_softmax .log_softmax torch.special.softmax "
         "torch.special.log_softmax", lambda g: A(g.x(4, 5), -1), FLOATS)
    spec("torch.softmax .softmax", lambda g: A(g.i(4, 5), 0, torch.float32), INTS, "int-dtype")


# ---------------------------------------------------------------------- normalisation

def _normalisation() -> None:
    spec("F.layer_norm torch.layer_norm", lambda g: A(g.x(4, 5), (5,), g.x(5), g.x(5)), FLOATS)
    spec("F.layer_norm", lambda g: A(g.x(2, 3, 4), [3, 4], eps=1e-3), F32, "no-affine")
    spec("F.rms_norm torch.rms_norm", lambda g: A(g.x(4, 5), (5,), g.x(5)), FLOATS)
    spec("F.rms_norm", lambda g: A(g.x(4, 5), [5], None, 1e-3), F32, "eps")
    spec("F.group_norm torch.group_norm", lambda g: A(g.x(2, 6, 3), 3, g.x(6), g.x(6)), FLOATS)
    spec("F.batch_norm",
         lambda g: A(g.x(5, 3), g.x(3), g.pos(3), g.x(3), g.x(3), False, 0.1, 1e-5), FLOATS,
         "eval", grad_wrt=[0, 3, 4])
    spec("torch.batch_norm",
         lambda g: A(g.x(5, 3), g.x(3), g.x(3), g.x(3), g.pos(3), False, 0.1, 1e-5, False),
         FLOATS, "eval", grad_wrt=[0, 1, 2])
    spec("torch.batch_norm",
         lambda g: A(g.x(5, 3, 2), g.x(3), g.x(3), None, None, True, 0.1, 1e-5, False),
         F32, "training")
    spec("F.batch_norm", lambda g: A(g.x(5, 3, 2), None, None, g.x(3), g.x(3), training=True),
         FLOATS, "training-batch-stats")
    spec("F.instance_norm",
         lambda g: A(g.x(2, 3, 5), None, None, g.x(3), g.x(3), True, 0.1, 1e-5), FLOATS)
    spec("torch.instance_norm",
         lambda g: A(g.x(2, 3, 5), g.x(3), g.x(3), None, None, True, 0.1, 1e-5, False), FLOATS)
    spec("F.normalize", lambda g: A(g.f(4, 5)), FLOATS)
    spec("F.normalize", lambda g: A(g.f(4, 5), 1.0, -1), FLOATS, "p1-last")
    spec("F.normalize", lambda g: A(g.torch.zeros(2, 3, dtype=g.fdt), dim=1), F32, "zero-rows")
    spec("F.cosine_similarity torch.cosine_similarity", lambda g: A(g.f(4, 5), g.f(4, 5)),
         FLOATS)
    spec("F.cosine_similarity", lambda g: A(g.f(4, 5), g.f(5), -1), F32, "broadcast")
    spec("F.cosine_similarity", lambda g: A(g.torch.zeros(2, 3, dtype=g.fdt), g.f(2, 3)), F32,
         "zero-vector")
    spec("F.pairwise_distance torch.pairwise_distance", lambda g: A(g.f(4, 5), g.f(4, 5)),
         FLOATS)
    spec("F.pairwise_distance", lambda g: A(g.f(4, 5), g.f(4, 5), 1.0, keepdim=True), F32, "p1")
    # cdist: g.f is a 0.25 grid (ties, zero differences; exact sums and products), so
    # identical rows give a distance of exactly 0 in both formulas (the gradient there: 0)
    def twins(g, rows1, rows2, cols, batch=()):
        x1 = g.f(*batch, rows1, cols)
        return x1, g.torch.cat([x1[..., :2, :], g.f(*batch, rows2 - 2, cols)], dim=-2)
    spec("torch.cdist torch.functional.cdist", lambda g: A(g.x(4, 3), g.x(5, 3)), FLOATS)
    spec("torch.cdist", lambda g: A(*twins(g, 4, 5, 3)), FLOATS, "p2-zero-distance")
    for p, name in ((1.0, "p1"), (0.0, "p0"), (math.inf, "pinf-ties"), (0.5, "p0.5"),
                    (1.5, "p1.5"), (3.0, "p3")):
        spec("torch.cdist", lambda g, p=p: A(*twins(g, 4, 5, 3), p), FLOATS, name)
    spec("torch.cdist", lambda g: A(g.x(2, 1, 4, 3), g.x(5, 3, 3), 3.0), FLOATS,
         "batch-broadcast")
    # P or R > 25: torch's default switches to the matmul form (|a|^2 + |b|^2 - 2 a.b)
    spec("torch.cdist", lambda g: A(g.x(30, 4), g.x(7, 4)), FLOATS, "p2-mm-if-necessary")
    spec("torch.cdist", lambda g: A(*twins(g, 27, 6, 4)), FLOATS, "p2-mm-zero-distance")
    spec("torch.cdist", lambda g: A(g.x(2, 1, 26, 3), g.x(3, 5, 3)), FLOATS, "p2-mm-batch")

    def cancellation(g):
        # 26 rows (> 25: the matmul form) at s(1 + eps) with eps = half the dtype's
        # precision: s^2 (1 + eps)^2 rounds to s^2 (1 + 2 eps) and every other term of the
        # matmul form is exact, so torch's distance to s is exactly 0 (direct form: s eps)
        eps = 2.0 ** (-12 if g.fdt == g.torch.float32 else -27)
        s = 1024.0
        x1 = g.torch.full((26, 1), s * (1 + eps), dtype=g.fdt)
        return x1, g.torch.tensor([[s], [2 * s]], dtype=g.fdt)
    spec("torch.cdist", lambda g: A(*cancellation(g)), FLOATS, "p2-mm-cancellation")
    spec("torch.cdist", lambda g: A(*twins(g, 4, 5, 3), compute_mode="use_mm_for_euclid_dist"),
         FLOATS, "p2-mm-always")
    spec("torch.cdist", lambda g: A(g.x(30, 4), g.x(6, 4),
                                    compute_mode="donot_use_mm_for_euclid_dist"), FLOATS,
         "p2-mm-never")
    spec("torch.cdist", lambda g: A(g.x(30, 4), g.x(6, 4), 1.0), FLOATS, "p1-large")
    spec("torch.cdist", lambda g: A(g.x(0, 3), g.x(4, 3)), FLOATS, "empty-rows")
    spec("torch.cdist", lambda g: A(g.x(2, 3, 0), g.x(2, 4, 0), 1.0), FLOATS, "empty-features")
    spec("F.embedding", lambda g: A(g.idx(6, 4, 2), g.x(6, 3)), FLOATS)
    spec("F.embedding", lambda g: A(g.torch.tensor([0, 2, 2, 5]), g.x(6, 3), padding_idx=2),
         FLOATS, "padding-idx-no-grad")
    spec("F.one_hot", lambda g: A(g.idx(4, 5), 6), INTS)
    spec("F.one_hot", lambda g: A(g.idx(4, 2, 3)), INTS, "inferred-eager", jit=False)
    spec("F.pad torch._C._nn.pad", lambda g: A(g.f(2, 3, 4), (1, 2)), ALL, "last-dim")
    spec("F.pad", lambda g: A(g.f(2, 3, 4), (1, 0, -1, 2), value=1.5), FLOATS,
         "two-dims-crop-value")
    spec("F.pad", lambda g: A(g.f(1, 2, 5), (2, 1), mode="reflect"), F32, "reflect")
    spec("F.pad", lambda g: A(g.f(1, 2, 5), (2, 1), mode="replicate"), F32, "replicate")
    spec("F.pad", lambda g: A(g.f(1, 2, 5), (2, 1), mode="circular"), F32, "circular")
    spec("F.dropout", lambda g: A(g.f(4, 5), 0.5, False), FLOATS, "eval-identity")
    spec("F.dropout", lambda g: A(g.f(4, 5), 0.0), F32, "p0-identity")
    spec("torch.dropout torch.dropout_", lambda g: A(g.f(4, 5), 0.3, False), F32, "eval")
    spec("F.dropout1d", lambda g: A(g.f(2, 3, 4), 0.5, False), F32, "eval")
    spec("F.dropout2d", lambda g: A(g.f(2, 3, 4, 2), 0.5, False), F32, "eval")
    spec("F.dropout3d", lambda g: A(g.f(2, 3, 2, 2, 2), 0.5, False), F32, "eval")


# ----------------------------------------------------------------------------- losses

def _losses() -> None:
    for name in ("mse_loss", "l1_loss", "smooth_l1_loss"):
        for reduction in ("mean", "sum", "none"):
            spec(f"F.{name}", lambda g, r=reduction: A(g.f(4, 3), g.f(4, 3), reduction=r),
                 FLOATS, reduction)
    spec("F.mse_loss F.l1_loss", lambda g: A(g.f(4, 3), g.f(4, 3), weight=g.pos(4, 3)), FLOATS,
         "weight")
    spec("F.mse_loss", lambda g: A(g.f(4, 3), g.f(4, 3), size_average=False), F32, "legacy")
    spec("F.smooth_l1_loss", lambda g: A(g.f(4, 3), g.f(4, 3), beta=0.5), FLOATS, "beta")
    spec("F.huber_loss", lambda g: A(g.f(4, 3), g.f(4, 3)), FLOATS)
    spec("F.huber_loss", lambda g: A(g.f(4, 3), g.f(4, 3), "sum", 0.5, g.pos(4, 3)), FLOATS,
         "delta-weight")
    spec("F.binary_cross_entropy", lambda g: A(g.prob(4, 3), g.prob(4, 3)), FLOATS)
    spec("F.binary_cross_entropy", lambda g: A(g.prob(4, 3), g.b(4, 3).to(g.fdt),
                                               g.pos(4, 3), reduction="sum"), FLOATS, "weight",
         grad_wrt=[0, 1])
    spec("F.binary_cross_entropy", lambda g: A(g.torch.tensor([0.0, 1.0, 0.5], dtype=g.fdt),
                                               g.torch.tensor([1.0, 0.0, 1.0], dtype=g.fdt),
                                               reduction="none"), F32, "log-clamp", grad=False)
    spec("F.binary_cross_entropy_with_logits",
         lambda g: A(g.f(4, 3), g.prob(4, 3)), FLOATS)
    spec("F.binary_cross_entropy_with_logits",
         lambda g: A(g.f(4, 3), g.b(4, 3).to(g.fdt), g.pos(4, 3), reduction="none",
                     pos_weight=g.pos(3)), FLOATS, "weights", grad_wrt=[0, 1])
    spec("F.nll_loss", lambda g: A(g.x(5, 4), g.idx(4, 5)), FLOATS)
    spec("F.nll_loss", lambda g: A(g.x(5, 4), g.torch.tensor([0, -100, 3, 1, -100]),
                                   g.pos(4)), FLOATS, "weight-ignore", grad_wrt=[0])
    spec("F.nll_loss", lambda g: A(g.x(2, 4, 3), g.idx(4, 2, 3), reduction="none"), F32,
         "spatial-none")
    spec("F.nll_loss", lambda g: A(g.x(4), g.torch.tensor(2), reduction="sum"), F32, "unbatched")
    spec("F.cross_entropy", lambda g: A(g.x(5, 4), g.idx(4, 5)), FLOATS)
    spec("F.cross_entropy", lambda g: A(g.x(5, 4), g.torch.tensor([0, 2, -1, 1, -1]),
                                        g.pos(4), ignore_index=-1), FLOATS, "weight-ignore",
         grad_wrt=[0])
    spec("F.cross_entropy", lambda g: A(g.x(5, 4), g.torch.tensor([0, 2, 7, 1, 7]),
                                        g.pos(4), ignore_index=7, label_smoothing=0.2), FLOATS,
         "weight-ignore-smoothing", grad_wrt=[0])
    spec("F.cross_entropy", lambda g: A(g.x(5, 4), g.idx(4, 5), label_smoothing=0.1,
                                        reduction="sum"), FLOATS, "smoothing-sum")
    spec("F.cross_entropy", lambda g: A(g.x(2, 4, 3), g.idx(4, 2, 3), label_smoothing=0.1,
                                        reduction="none"), F32, "spatial-smoothing-none")
    spec("F.cross_entropy", lambda g: A(g.x(5, 4), g.torch.softmax(g.x(5, 4), 1)), FLOATS,
         "probabilities")
    spec("F.cross_entropy", lambda g: A(g.x(5, 4), g.torch.softmax(g.x(5, 4), 1), g.pos(4),
                                        label_smoothing=0.3), F32, "probabilities-weight-smooth",
         grad_wrt=[0, 1])
    spec("F.kl_div", lambda g: A(g.torch.log_softmax(g.x(4, 5), 1), g.torch.softmax(
        g.x(4, 5), 1), reduction="batchmean"), FLOATS)
    spec("F.kl_div", lambda g: A(g.torch.log_softmax(g.x(4, 5), 1), g.torch.log_softmax(
        g.x(4, 5), 1), reduction="sum", log_target=True), F32, "log-target")
    spec("F.kl_div", lambda g: A(g.x(4, 5), g.torch.tensor([0.0, 0.5, 0.5, 0.0, 0.0],
                                                           dtype=g.fdt)), F32, "zero-target")


# ----------------------------------------------------------------------------- random

def _in_range(lo: float, hi: float) -> Callable:
    return lambda out, lib: ((out >= lo) & (out < hi)).all()


def _shape_dtype(out: Any, lib: Any) -> Any:
    """Shape and dtype kind only: the values are random."""
    return lib.zeros_like(out)


def _random() -> None:
    import torch

    spec("torch.rand", lambda g: A(3, 4), F32, "range", summary=_in_range(0, 1))
    spec("torch.rand", lambda g: A((2, 3), dtype=torch.float64), F64, "shape",
         summary=_shape_dtype)
    spec("torch.rand_like", lambda g: A(g.f(3, 4)), FLOATS, "range", summary=_in_range(0, 1))
    spec("torch.randn", lambda g: A(3, 4), F32, "shape", summary=_shape_dtype)
    spec("torch.randn_like", lambda g: A(g.f(3, 4)), FLOATS, "shape", summary=_shape_dtype)
    spec("torch.randint", lambda g: A(2, 7, (50,)), INTS, "range", summary=_in_range(2, 7))
    spec("torch.randint", lambda g: A(5, (3, 2)), INTS, "high-size", summary=_shape_dtype)
    spec("torch.randint_like", lambda g: A(g.i(20), 3), INTS, "range",
         summary=_in_range(0, 3))
    spec("torch.randperm", lambda g: A(9), INTS, "is-permutation",
         summary=lambda out, lib: lib.sort(out)[0] if lib is torch else lib.sort(out))
    spec("torch.bernoulli .bernoulli", lambda g: A(g.b(4, 5).to(g.fdt)), FLOATS,
         "probabilities-0-1")
    spec("torch.bernoulli", lambda g: A(g.f(4, 5), 0.0), F32, "p-zero", grad=False)
    spec(".bernoulli_", lambda g: A(g.f(4, 5), 1.0), F32, "p-one")
    spec(".uniform_", lambda g: A(g.f(50), -2.0, 3.0), F32, "range", summary=_in_range(-2, 3))
    spec(".normal_", lambda g: A(g.f(4), 1.5, 0.0), F32, "std-zero")
    spec("torch.normal", lambda g: A(g.f(4, 3), 0.0), F32, "std-zero")
    spec("torch.normal", lambda g: A(0.0, 1.0, (3, 2)), F32, "size", summary=_shape_dtype)
    spec("F.rrelu", lambda g: A(g.pos(4, 5) - 4, 0.1, 0.3, training=True), F32,
         "training-slope-range", summary=lambda out, lib: ((out <= -0.1 * 0.7) &
                                                          (out >= -0.3 * 4)).all())
    spec("F.dropout torch.dropout", lambda g: A(g.pos(1000), 0.25, True), F32,
         "training-kept-scaled",
         summary=lambda out, lib: ((out == 0) | (out >= 0.3 / 0.75 - 1e-6)).all())
    spec("F.dropout1d F.dropout2d", lambda g: A(g.pos(4, 16, 3), 0.5, True), F32,
         "training-channels", summary=lambda out, lib: ((out == 0).all(-1) |
                                                         (out != 0).all(-1)).all())


# ----------------------------------------------------------------------------- float16

def _half() -> None:
    """Half types: torch's CPU kernels accumulate / compute in float32 and round once."""
    spec("torch.add torch.mul op.truediv", lambda g: A(g.f(4, 3), g.f(3)), HALF, "half")
    spec("torch.sum torch.mean", lambda g: A(g.x(3000).to(g.dt)), HALF, "half-accumulate")
    spec("torch.cumsum", lambda g: A(g.pos(50).to(g.dt), 0), HALF, "half")
    spec("F.relu torch.exp torch.sqrt", lambda g: A(g.pos(4, 3)), HALF, "half")
    spec("F.softmax F.log_softmax", lambda g: A(g.x(4, 7).to(g.dt), -1), HALF, "half",
         normwise=True)
    spec("F.layer_norm", lambda g: A(g.x(4, 7).to(g.dt), (7,), g.x(7).to(g.dt),
                                     g.x(7).to(g.dt)), HALF, "half", normwise=True)
