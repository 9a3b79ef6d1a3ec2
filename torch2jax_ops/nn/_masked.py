"""Boolean-mask rows under ``jax.jit`` in traced forwards: ``x[mask]`` kept full-size.

Under ``jax.jit`` ``x[mask]`` (``mask`` a traced bool tensor over x's rows) has
a data-dependent number of rows, which one compiled program cannot have. Many
models only use such rows in a way that never needs that number as a shape
(PyG's UniMP ``MaskLabel``, a loss over the training nodes)::

    x[mask] = x[mask] + self.emb(y[mask])     # or  x[mask] += ...
    loss = F.cross_entropy(out[mask], y[mask])
    x[mask].mean(0), x[mask].sum(), x[mask].max() ...

For these the traced forward carries a :class:`MaskedRows` instead: every row
of ``x`` (``full``, [N, *rest]) with the mask ([N] bool). Row-wise ops
(elementwise arithmetic, activations, ``Linear`` / ``Embedding``, a softmax
over a feature dim ...) run on all N rows and keep the mask; a write-back
(``x[mask] = v``) becomes ``torch.where(mask, v, x)``; a reduction over the
rows fills the unselected rows with the reduction's identity (``mean`` divides
by the number of selected rows: NaN for none, as torch); a loss ignores the
unselected rows. Values and gradients are torch's.

The unselected rows of ``full`` hold a copy of the first selected row, so every
row computed is one that torch computes too: no NaN or inf can appear in a
gradient that torch's has not (their gradient is exactly zero).

Anything else -- a masked value returned from the forward, its row count read
(``.size(0)``, ``.shape``), concatenated along the rows, combined with rows of
another mask or with a full-size tensor -- raises ``ValueError`` naming the
line (:func:`unsupported`). Eager calls never get here: a concrete mask indexes
as torch does.

The rules live in one table (:func:`_rules`), keyed by the mapping table's
implementations: a function replaced by a user registration is not trusted.
"""
from __future__ import annotations

import inspect
import math
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .._checking import is_array
from ._registry import functions, generation, methods

__all__ = ["MaskedRows", "select", "holds", "evaluate", "check_output", "unsupported",
           "SUPPORTED", "counted_rows"]

#: what the errors list as supported (one line: the messages are matched by tests)
SUPPORTED = ("supported under jax.jit: `x[mask]` with a 1-d bool mask over the rows, used "
             "only by row-wise ops (elementwise arithmetic, activations, Linear/Embedding, "
             "softmax over a feature dim, other tensors indexed by the same mask), then "
             "written back (`x[mask] = v`, `x[mask] += v`) or reduced (sum, mean, max/min, "
             "amax/amin, norm, logsumexp, prod, a loss such as F.cross_entropy with "
             "reduction 'mean'/'sum')")


class MaskedRows:
    """``x[mask]`` under ``jax.jit``: the rows of ``full`` where ``mask`` holds.

    Attributes:
      full: [N, *rest], x's rows; the rows outside the mask hold a copy of the
        first selected row (row 0 when none is selected).
      mask: [N] bool, the very array the forward indexed with (same object).
      origin: ``file:line: code`` where the rows were selected (for errors).

    Not an array: ``jnp.asarray`` of it raises, so it can never silently stand
    for the full tensor.
    """

    __slots__ = ("full", "mask", "origin")

    def __init__(self, full: jax.Array, mask: jax.Array, origin: Optional[str] = None):
        self.full, self.mask, self.origin = full, mask, origin

    @property
    def ndim(self) -> int:
        return int(self.full.ndim)

    @property
    def dtype(self) -> Any:
        return self.full.dtype

    def __jax_array__(self) -> Any:
        raise ValueError(unsupported("using the rows as a plain array", "", self.origin))

    def __repr__(self) -> str:
        return (f"MaskedRows(rows of {tuple(self.full.shape)} {self.full.dtype}, "
                f"selected at {self.origin})")


def unsupported(what: str, where: str, origin: Optional[str]) -> str:
    """The error message: what was done, where, where the rows came from, what works."""
    at = f" at {where}" if where else ""
    return (f"boolean mask index under jax.jit: {what}{at} needs the rows of `x[mask]` "
            f"(selected at {origin or 'an unknown line'}) as a tensor of their own, whose "
            f"number of rows is data-dependent (one compiled program serves every input). "
            f"{SUPPORTED}. Otherwise keep the shape: torch.where(mask, x, 0) / "
            f"x.masked_fill(~mask, 0), or run the port without jit")


def counted_rows(x: jax.Array, mask: jax.Array, rows: int) -> jax.Array:
    """``x[mask]`` for a ``mask`` (over x's leading ``mask.ndim`` axes) whose number of True
    entries is known to be ``rows`` (``to_dense_batch``'s mask holds every node): the
    selected entries in torch's (row-major) order, ``[rows, *rest]``. Should fewer be
    set (a pooled batch's dropped nodes), the missing ones at the end are zeros, as the
    static forms pad."""
    x, mask = jnp.asarray(x), jnp.asarray(mask)
    if mask.dtype != jnp.bool_ or x.shape[:mask.ndim] != mask.shape:
        raise ValueError(f"x[mask]: the mask of shape {mask.shape} does not cover the leading "
                         f"axes of x {x.shape}")
    flat = jnp.flatnonzero(mask, size=rows, fill_value=mask.size)
    return x.reshape((-1,) + x.shape[mask.ndim:]).at[flat].get(mode="fill", fill_value=0)


class _NotRowwise(Exception):
    """A rule refused: ``what`` says why (turned into :func:`unsupported`'s message)."""


# ------------------------------------------------------------------------- making them

def select(x: jax.Array, mask: jax.Array, rest: tuple = ()) -> MaskedRows:
    """``x[(mask, *rest)]`` kept full-size: ``mask`` [N] bool over x's rows (N = x.shape[0]);
    ``rest`` the index of the other dims (slices, ints, ``None``, ``...``)."""
    n = x.shape[0]
    full = x
    if n:
        first = jnp.argmax(mask)  # the first selected row (0 when none is)
        m = mask.reshape((n,) + (1,) * (x.ndim - 1))
        full = jnp.where(m, x, jnp.expand_dims(x[first], 0))
    if rest:
        full = full[(slice(None),) + tuple(rest)]
    return MaskedRows(full, mask)


def selectable(x: Any, parts: tuple) -> bool:
    """``x[parts]`` is a row selection :func:`select` keeps full-size: a 1-d bool mask of
    x's row count first, then only slices, ints, ``None`` and ``...``."""
    if not (is_array(x) and x.ndim >= 1 and parts):
        return False
    mask = parts[0]
    if not (is_array(mask) and mask.dtype == jnp.bool_ and mask.shape == (x.shape[0],)):
        return False
    return all(p is None or p is Ellipsis or isinstance(p, (slice, int, np.integer))
               and not isinstance(p, bool) for p in parts[1:])


# --------------------------------------------------------------------------- the rules

def _walk(x: Any) -> list:
    if isinstance(x, MaskedRows):
        return [x]
    if isinstance(x, (tuple, list)):
        return [m for e in x for m in _walk(e)]
    if isinstance(x, dict):
        return [m for e in x.values() for m in _walk(e)]
    return []


def holds(args: Any, kwargs: Any) -> bool:
    """Whether a node's arguments hold a :class:`MaskedRows` (the tracer asks first)."""
    return bool(_walk(args) or _walk(kwargs))


def _full(x: Any) -> Any:
    if isinstance(x, MaskedRows):
        return x.full
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        return tuple(_full(e) for e in x)
    if isinstance(x, list):
        return [_full(e) for e in x]
    if isinstance(x, dict):
        return {k: _full(v) for k, v in x.items()}
    return x


def _wrap(out: Any, mask: jax.Array) -> Any:
    """A row-wise result: every array with the N rows becomes rows of ``mask`` again."""
    n = mask.shape[0]
    if is_array(out):
        if out.ndim >= 1 and out.shape[0] == n:
            return MaskedRows(out, mask)
        raise _NotRowwise("a result that does not keep the rows")
    if isinstance(out, tuple):
        items = [_wrap(e, mask) for e in out]
        return type(out)(*items) if hasattr(out, "_fields") else tuple(items)
    raise _NotRowwise(f"a result of type {type(out).__name__}")


def _bound(impl: Callable, args: tuple, kwargs: dict) -> inspect.BoundArguments:
    bound = inspect.signature(impl).bind(*args, **kwargs)
    bound.apply_defaults()
    return bound


def _dims(dim: Any, ndim: int) -> Optional[tuple]:
    """Normalised dims (``None``: every dim). ``()`` / ``[]`` mean every dim, as torch."""
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return None
    if isinstance(dim, (tuple, list)):
        return tuple(int(d) % ndim for d in dim)
    if isinstance(dim, (int, np.integer)) and not isinstance(dim, bool):
        return (int(dim) % ndim,)
    raise _NotRowwise(f"dim={dim!r}")


def _plain_ok(masks: list, args: Any) -> None:
    """Plain arrays next to masked rows must broadcast without touching the rows."""
    ndim = masks[0].ndim
    if any(m.ndim != ndim for m in masks):
        raise _NotRowwise("combining masked rows of different ranks")
    for a in jax.tree_util.tree_leaves(args, is_leaf=lambda v: isinstance(v, MaskedRows)):
        if is_array(a) and not (a.ndim < ndim or (a.ndim == ndim and a.shape[0] == 1)):
            raise _NotRowwise(f"combining the masked rows with a tensor of shape "
                              f"{tuple(a.shape)} (it would have to have one row per selected "
                              f"row)")


def _first_only(args: tuple, kwargs: dict) -> None:
    if _walk(args[1:]) or _walk(kwargs):
        raise _NotRowwise("masked rows in an argument other than the input")


def _elementwise(impl: Callable, args: tuple, kwargs: dict, mask: jax.Array) -> Any:
    masks = _walk(args) + _walk(kwargs)
    _plain_ok(masks, (args, kwargs))
    return _wrap(impl(*_full(args), **_full(kwargs)), mask)


def _rowwise(check: Optional[Callable] = None) -> Callable:
    """Only the input is masked; ``check(input, bound)`` may refuse (contracting the rows)."""
    def rule(impl: Callable, args: tuple, kwargs: dict, mask: jax.Array) -> Any:
        if not args or not isinstance(args[0], MaskedRows):
            raise _NotRowwise("masked rows in an argument other than the input")
        _first_only(args, kwargs)
        if check is not None:
            check(args[0], _bound(impl, args, kwargs))
        return _wrap(impl(*_full(args), **_full(kwargs)), mask)
    return rule


def _needs_2d(x: MaskedRows, bound: Any) -> None:
    if x.ndim < 2:
        raise _NotRowwise("a product over the masked rows (the input has one dim)")
    other = [v for k, v in bound.arguments.items() if k != next(iter(bound.arguments))
             and is_array(v)]
    if any(o.ndim > 2 for o in other):
        raise _NotRowwise("a batched product (the rows would not lead the result)")


def _layer_norm(x: MaskedRows, bound: Any) -> None:
    if len(tuple(bound.arguments["normalized_shape"])) >= x.ndim:
        raise _NotRowwise("a layer_norm over the rows")


def _one_hot(x: MaskedRows, bound: Any) -> None:
    if bound.arguments.get("num_classes", -1) == -1:
        raise _NotRowwise("one_hot without `num_classes` (it would be read from the data; "
                          "pass num_classes=)")


def _identity(kind: str, dtype: Any) -> Any:
    """The fill that leaves a reduction unchanged."""
    dtype = jnp.dtype(dtype)
    if kind in ("sum", "zero"):
        return jnp.zeros((), dtype)
    if kind == "one":
        return jnp.ones((), dtype)
    big = kind == "max"  # fill for a max: the smallest value
    if dtype == jnp.bool_:
        return jnp.asarray(not big)
    if jnp.issubdtype(dtype, jnp.integer):
        info = jnp.iinfo(dtype)
        return jnp.asarray(info.min if big else info.max, dtype)
    return jnp.asarray(-jnp.inf if big else jnp.inf, dtype)


def _filled(x: MaskedRows, kind: str) -> jax.Array:
    m = x.mask.reshape(x.mask.shape + (1,) * (x.ndim - 1))
    return jnp.where(m, x.full, _identity(kind, x.full.dtype))


def _compact(indices: jax.Array, mask: jax.Array) -> jax.Array:
    """Row indices into the full rows -> indices into the selected rows (torch's)."""
    position = jnp.cumsum(mask.astype(indices.dtype)) - 1
    return jnp.take(position, indices).astype(indices.dtype)


def _reduction(fill: str, dim_name: str = "dim", *, across: Optional[Callable] = None,
               indices: bool = False, check: Optional[Callable] = None) -> Callable:
    """A reduction: over feature dims only it is row-wise; over the rows it reduces the
    selected rows (the others filled with ``fill``'s identity). ``indices``: the result is
    row indices (argmax); a ``(values, indices)`` result (``max(dim=0)``) has its indices
    made torch's (into the selected rows) either way."""
    def rule(impl: Callable, args: tuple, kwargs: dict, mask: jax.Array) -> Any:
        if not args or not isinstance(args[0], MaskedRows):
            return _elementwise(impl, args, kwargs, mask)  # torch.max(a, b[mask]) ...
        bound = _bound(impl, args, kwargs)
        dim = bound.arguments.get(dim_name)
        if isinstance(dim, MaskedRows) or is_array(dim) or bound.arguments.get("other") \
                is not None:  # max(x, other): elementwise
            return _elementwise(impl, args, kwargs, mask)
        _first_only(args, kwargs)
        x = args[0]
        dims = _dims(dim, x.ndim)
        if dims is not None and 0 not in dims:
            return _wrap(impl(*_full(args), **_full(kwargs)), mask)
        if check is not None:
            check(bound)
        if across is not None:
            return across(impl, x, bound, dims)
        if indices and dims is None:
            raise _NotRowwise("an index into all the elements of the masked rows")
        out = impl(_filled(x, fill), *args[1:], **kwargs)
        if isinstance(out, tuple) and hasattr(out, "_fields") and len(out) == 2:
            return type(out)(out[0], _compact(out[1], mask))  # type: ignore[misc]
        return _compact(out, mask) if indices else out
    return rule


def _mean_across(impl: Callable, x: MaskedRows, bound: Any, dims: Optional[tuple]) -> Any:
    dtype = bound.arguments.get("dtype")
    if dtype is None and not jnp.issubdtype(x.full.dtype, jnp.inexact):
        return impl(x.full, **{k: v for k, v in bound.arguments.items() if k != "input"})
    total = functions()["torch.sum"](_filled(x, "sum"), None if dims is None else dims,
                                     bound.arguments.get("keepdim", False), dtype=dtype)
    per_row = math.prod(x.full.shape[d] for d in range(1, x.ndim)
                        if dims is None or d in dims)
    count = jnp.sum(x.mask).astype(total.dtype) * per_row
    return total / count


def _norm_check(bound: Any) -> None:
    p = bound.arguments.get("p", bound.arguments.get("ord", 2))
    if not (p is None or p == "fro" or (isinstance(p, (int, float)) and p > 0)):
        raise _NotRowwise(f"a norm with p={p!r} over the rows (only p > 0 and 'fro')")


_ELEMENTWISE_LOSSES = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
                       "binary_cross_entropy", "binary_cross_entropy_with_logits")


def _loss(name: str) -> Callable:
    """A loss of masked rows: 'mean'/'sum' over the selected rows, 'none' row-wise."""
    from ._functions_loss import _reduction as reduction_of

    def rule(impl: Callable, args: tuple, kwargs: dict, mask: jax.Array) -> Any:
        bound = _bound(impl, args, kwargs)
        a = bound.arguments
        x, target = a["input"], a["target"]
        if not isinstance(x, MaskedRows):
            raise _NotRowwise("a loss whose input is not the masked rows")
        reduction = reduction_of(a.get("size_average"), a.get("reduce"), a["reduction"], name)
        a = dict(a)
        a["size_average"] = a["reduce"] = None
        if "size_average" not in bound.signature.parameters:
            del a["size_average"], a["reduce"]
        classes = name in ("cross_entropy", "nll_loss")
        if classes and (x.ndim < 2 or not isinstance(target, MaskedRows)):
            raise _NotRowwise(f"{name} needs an input of two or more dims and a target "
                              f"indexed by the same mask")
        class_index = classes and not jnp.issubdtype(target.dtype, jnp.inexact)
        if class_index:
            if target.ndim != x.ndim - 1 or _walk([v for k, v in a.items()
                                                   if k not in ("input", "target")]):
                raise _NotRowwise(f"{name} with a target of rank {target.ndim} for an input "
                                  f"of rank {x.ndim}, or a masked weight")
            # the unselected rows take ignore_index: out of the loss, its mean and gradient
            m = mask.reshape(mask.shape + (1,) * (target.ndim - 1))
            a["target"] = jnp.where(m, target.full, a["ignore_index"])
            a["input"] = x.full
            out = impl(**_full(a))
            return _wrap(out, mask) if reduction == "none" else out
        _plain_ok(_walk(list(a.values())), list(a.values()))
        a["reduction"] = "none"
        loss = impl(**_full(a))
        if reduction == "none":
            return _wrap(loss, mask)
        if not (is_array(loss) and loss.ndim >= 1 and loss.shape[0] == mask.shape[0]):
            raise _NotRowwise(f"{name}: a per-element loss without the rows")
        rows = MaskedRows(loss, mask)
        total = jnp.sum(_filled(rows, "sum"))
        if reduction == "sum":
            return total
        count = jnp.sum(mask).astype(loss.dtype) * math.prod(loss.shape[1:])
        return total / count
    return rule


def _setitem(impl: Callable, args: tuple, kwargs: dict, mask: jax.Array) -> Any:
    x, index, value = args
    if isinstance(index, tuple) and len(index) == 1:
        index = index[0]
    if isinstance(x, MaskedRows) or not isinstance(value, MaskedRows) or index is not mask:
        raise _NotRowwise("an assignment other than `x[mask] = v` (v computed row-wise from "
                          "rows of the same mask)")
    if not is_array(x) or x.shape[:1] != mask.shape or value.ndim != x.ndim:
        raise _NotRowwise("an assignment whose value does not have the target's rank")
    try:
        ok = jnp.broadcast_shapes(value.full.shape, x.shape) == tuple(x.shape)
    except ValueError:
        ok = False
    if not ok:
        raise _NotRowwise(f"assigning rows of shape {tuple(value.full.shape[1:])} into rows "
                          f"of shape {tuple(x.shape[1:])}")
    m = mask.reshape(mask.shape + (1,) * (x.ndim - 1))
    return jnp.where(m, value.full.astype(x.dtype), x)


def _getitem(impl: Callable, args: tuple, kwargs: dict, mask: jax.Array) -> Any:
    x, index = args
    parts = index if isinstance(index, tuple) else (index,)
    if not isinstance(x, MaskedRows) or _walk(parts) or not parts \
            or not isinstance(parts[0], slice) or parts[0] != slice(None):
        raise _NotRowwise("indexing the masked rows other than `rows[:, ...]`")
    return _wrap(impl(x.full, index), mask)


def _cat(impl: Callable, args: tuple, kwargs: dict, mask: jax.Array) -> Any:
    bound = _bound(impl, args, kwargs)
    tensors = list(bound.arguments["tensors"])
    if not tensors or not all(isinstance(t, MaskedRows) for t in tensors):
        raise _NotRowwise("concatenating masked rows with other tensors")
    if len({t.ndim for t in tensors}) != 1 or 0 in (_dims(bound.arguments["dim"],
                                                          tensors[0].ndim) or (0,)):
        raise _NotRowwise("concatenating masked rows along the rows")
    return _wrap(impl(*_full(args), **_full(kwargs)), mask)


_DATA = frozenset({"dtype", "device", "ndim", "is_cuda", "requires_grad", "is_sparse",
                   "layout", "data"})


def _getattr(impl: Callable, args: tuple, kwargs: dict, mask: jax.Array) -> Any:
    x, name = args[0], args[1]
    if not isinstance(x, MaskedRows) or name not in _DATA:
        raise _NotRowwise(f"reading `.{name}` of the masked rows")
    out = impl(x.full, *args[1:], **kwargs)
    return MaskedRows(out, mask) if name == "data" else out


def _size(impl: Callable, args: tuple, kwargs: dict, mask: jax.Array) -> Any:
    x = args[0]
    bound = _bound(impl, args, kwargs)
    dim = bound.arguments.get("dim")
    if dim is None or _dims(dim, x.ndim) == (0,):
        raise _NotRowwise("reading the number of masked rows (`.size(0)`, `.shape`)")
    return impl(x.full, dim)


def _dim(impl: Callable, args: tuple, kwargs: dict, mask: jax.Array) -> Any:
    return args[0].ndim


_CASTS = ("float", "double", "half", "bfloat16", "long", "int", "short", "bool", "to", "type",
          "type_as", "detach", "clone", "contiguous", "cpu", "cuda")

_BINARY = ("add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "pow",
           "maximum", "minimum", "fmax", "fmin", "atan2", "logaddexp", "lerp", "addcmul",
           "addcdiv", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
           "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "masked_fill", "where",
           "clamp", "clip", "clamp_min", "clamp_max", "isclose")

_UNARY = ("neg", "negative", "positive", "abs", "absolute", "exp", "exp2", "expm1", "log",
          "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid",
          "erf", "erfc", "reciprocal", "floor", "ceil", "trunc", "frac", "round", "sign",
          "square", "relu", "logit", "nan_to_num", "isnan", "isinf", "isfinite",
          "logical_not", "bitwise_not", "hardshrink")

_OPERATORS = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "abs",
              "invert", "and_", "or_", "xor", "eq", "ne", "lt", "le", "gt", "ge")

_F_ELEMENTWISE = ("relu", "relu6", "leaky_relu", "elu", "selu", "celu", "gelu", "silu",
                  "mish", "softplus", "softsign", "tanhshrink", "softshrink", "hardshrink",
                  "threshold", "hardtanh", "hardsigmoid", "hardswish", "logsigmoid", "tanh",
                  "sigmoid", "dropout")

#: reductions: (table name, fill, options)
_REDUCTIONS: dict[str, tuple] = {
    "sum": ("sum", {}), "nansum": ("sum", {}), "mean": ("sum", {"across": _mean_across}),
    "max": ("max", {}), "min": ("min", {}), "amax": ("max", {}),
    "amin": ("min", {}), "logsumexp": ("max", {}), "prod": ("one", {}),
    "any": ("zero", {}), "all": ("one", {}), "count_nonzero": ("zero", {}),
    "norm": ("zero", {"check": _norm_check}),
    "argmax": ("max", {"indices": True}), "argmin": ("min", {"indices": True}),
}


def _rule_paths() -> list:
    """(kind, key, rule): every mapping-table entry masked rows may pass through."""
    out: list = []

    def add(key: str, rule: Callable, kind: str = "function") -> None:
        out.append((kind, key, rule))

    for name in _BINARY + _UNARY:
        add(f"torch.{name}", _elementwise)
        add(name, _elementwise, "method")
    for name in ("subtract", "multiply", "divide", "special.expit", "nn.functional.tanh",
                 "nn.functional.sigmoid"):
        add(f"torch.{name}", _elementwise)
    for name in _OPERATORS:
        add(f"operator.{name}", _elementwise)
    for name in _F_ELEMENTWISE:
        add(f"torch.nn.functional.{name}", _elementwise)
    for name in _CASTS:
        add(name, _rowwise(), "method")
    add("torch.clone", _rowwise())
    for name in ("softmax", "log_softmax", "cumsum", "cumprod"):
        rule = _reduction("sum", check=_refuse(f"{name} over the rows"))
        add(f"torch.{name}", rule)
        add(name, rule, "method")
    for name in ("softmax", "log_softmax", "normalize", "glu"):
        add(f"torch.nn.functional.{name}", _reduction("sum", check=_refuse(f"{name} over the "
                                                                            f"rows")))
    for name, (fill, options) in _REDUCTIONS.items():
        rule = _reduction("sum" if fill == "sum" else fill, **options)
        add(f"torch.{name}", rule)
        add(name, rule, "method")
    add("torch.linalg.vector_norm", _reduction("zero", check=_norm_check))
    for key in ("torch.nn.functional.linear", "torch._C._nn.linear", "torch.matmul",
                "operator.matmul", "torch.mm"):
        add(key, _rowwise(_needs_2d))
    for name in ("matmul", "mm"):
        add(name, _rowwise(_needs_2d), "method")
    add("torch.nn.functional.embedding", _rowwise())
    add("torch.nn.functional.prelu", _rowwise())
    add("torch.nn.functional.one_hot", _rowwise(_one_hot))
    add("torch.nn.functional.layer_norm", _rowwise(_layer_norm))
    add("torch.nn.functional.rms_norm", _rowwise(_layer_norm))
    for name in ("cross_entropy", "nll_loss") + _ELEMENTWISE_LOSSES:
        add(f"torch.nn.functional.{name}", _loss(name))
    add("operator.setitem", _setitem)
    add("operator.getitem", _getitem)
    add("__getitem__", _getitem, "method")
    add("torch.cat", _cat)
    add("torch.concat", _cat)
    add("torch.concatenate", _cat)
    add("builtins.getattr", _getattr)
    add("size", _size, "method")
    add("dim", _dim, "method")
    return out


def _refuse(what: str) -> Callable:
    def check(bound: Any) -> None:
        raise _NotRowwise(what)
    return check


_RULES: dict = {"generation": -1, "by_id": {}}


def _rules() -> dict:
    """``id(mapping-table implementation) -> rule``, rebuilt when the registry changes."""
    if _RULES["generation"] != generation():
        table, names = functions(), methods()
        by_id: dict = {}
        for kind, key, rule in _rule_paths():
            impl = (table if kind == "function" else names).get(key)
            if impl is not None:
                by_id[id(impl)] = (impl, rule)
        _RULES["by_id"], _RULES["generation"] = by_id, generation()
    return _RULES["by_id"]


def missing_rule_keys() -> list:
    """Rule keys the mapping table does not have (a typo here; the tests ask for none)."""
    table, names = functions(), methods()
    return [key for kind, key, _ in _rule_paths()
            if key not in (table if kind == "function" else names)]


#: torch.nn module classes that act on each row alone (their port is called on all rows)
_ROW_MODULES = frozenset({
    "torch.nn.modules.linear.Linear", "torch.nn.modules.linear.Identity",
    "torch.nn.modules.sparse.Embedding", "torch.nn.modules.dropout.Dropout",
    "torch_geometric.nn.dense.linear.Linear",
} | {f"torch.nn.modules.activation.{n}" for n in (
    "ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Softplus",
    "Sigmoid", "Tanh", "Hardtanh", "Hardsigmoid", "Hardswish", "LogSigmoid", "PReLU",
    "Softsign", "Tanhshrink")})


# ------------------------------------------------------------------------ the entry point

def evaluate(node: Any, impl: Any, args: tuple, kwargs: dict, where: str,
             torch_module: Any = None) -> Any:
    """A traced node whose arguments hold :class:`MaskedRows`: its row-wise value, or
    ``ValueError`` naming ``where`` (the user's line) when the rows cannot stay full-size.

    ``impl`` is the mapping table's implementation (the port, for ``call_module``,
    with ``torch_module`` the torch submodule).
    """
    masks = _walk(args) + _walk(kwargs)
    origin, mask = masks[0].origin, masks[0].mask
    name = node.target if isinstance(node.target, str) else getattr(
        node.target, "__name__", repr(node.target))
    try:
        if any(m.mask is not mask for m in masks):
            raise _NotRowwise("combining the rows of two different masks")
        if node.op == "call_module":
            from ._registry import class_path

            path = class_path(type(torch_module)) if torch_module is not None else ""
            if impl is None or path not in _ROW_MODULES:
                raise _NotRowwise(f"the module `{node.target}` ({path or 'no port'})")
            return _rowwise()(impl, args, kwargs, mask)
        entry = _rules().get(id(impl))
        if impl is None or entry is None or entry[0] is not impl:
            raise _NotRowwise(f"`{name}`")
        return entry[1](impl, args, kwargs, mask)
    except _NotRowwise as exc:
        raise ValueError(unsupported(str(exc), where, origin)) from None


def check_output(out: Any) -> None:
    """A forward's output holding :class:`MaskedRows` raises (their row count would be the
    output's shape)."""
    found = _walk(out)
    if found:
        raise ValueError(unsupported("returning the masked rows from the forward", "",
                                     found[0].origin))
