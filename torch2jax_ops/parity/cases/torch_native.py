"""Parity cases for torch's native scatter API (``torch2jax_ops.torch``) vs real torch.

Section "torch": every function x reduce x include_self x dtype x layout, plus
edge cases (empty index, empty groups, ties, NaN/inf, an index smaller than
``src``, 0-d tensors, PyG's own call patterns). Values and gradients (torch
autograd vs ``jax.vjp``, float dtypes) are compared; float16/bfloat16 layouts
with long groups pin torch's accumulation rule of each op (float32 and one
rounding, or step-by-step rounding in the narrow type).

Where torch has no gradient the case compares values only (or the gradient
w.r.t. ``input`` only): ``scatter(..., reduce=...)`` (torch: "derivative for
aten::scatter is not implemented") and an index smaller than ``src`` (torch's
backward raises "returned an invalid gradient"; ours is 0 outside the block).
"""
from __future__ import annotations

import zlib
from typing import Callable, Iterable, Optional

import numpy as np

from torch2jax_ops import dtypes
from torch2jax_ops.parity._suite import Case, register

SECTION = "torch"
DTYPES = ("float16", "bfloat16", "float32", "float64", "int32", "int64")
SCATTER_REDUCES = ("sum", "prod", "mean", "amax", "amin")
INDEX_REDUCES = ("prod", "mean", "amax", "amin")

#: scatter layouts: (label, input shape, index shape, src shape, dim, ids used)
SCATTER_LAYOUTS = (
    ("1d", (6,), (10,), (10,), 0, 5),             # id 5 unused: an empty group
    ("2d-dim0", (5, 3), (8, 3), (8, 3), 0, 4),
    ("2d-dim1", (3, 5), (3, 8), (3, 8), -1, 5),
    ("3d-dim1", (2, 5, 3), (2, 7, 3), (2, 7, 3), 1, 5),
    ("long-groups", (3, 2), (300, 2), (300, 2), 0, 3),
    # only the index-shaped leading block of src is read; index narrower than input
    ("index-smaller", (5, 4), (6, 2), (7, 3), 0, 5),
    ("index-smaller-grad", (5, 4), (6, 2), (7, 3), 0, 5),
    ("0d", (), (), (), 0, 1),
)

#: index-op layouts: (label, input shape, source shape, dim, ids used)
INDEX_LAYOUTS = (
    ("1d", (6,), (10,), 0, 5),
    ("2d-dim0", (5, 3), (8, 3), 0, 4),
    ("2d-dim1", (3, 5), (3, 8), -1, 5),
    ("3d-dim1", (2, 5, 3), (2, 7, 3), 1, 5),      # float16 index_add: a middle dim steps
    ("3d-dim-1", (2, 3, 5), (2, 3, 40), -1, 5),   # ... the last dim does not
    ("1d-long", (3,), (300,), 0, 3),              # float16: step-by-step rounding
    ("2d-long", (3, 2), (300, 2), 0, 3),
)


def _rng(*key) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def values(rng: np.random.Generator, shape: tuple, dtype: str, kind: str):
    """Test data (torch): ties on a 0.5 grid; products near 1 with a few exact zeros."""
    import torch

    if dtype in dtypes.INT_NAMES:
        data = rng.integers(-2, 3, size=shape) if kind == "prod" else \
            rng.integers(-5, 6, size=shape)
    elif kind == "prod":
        n = int(np.prod(shape, dtype=np.int64))
        data = rng.uniform(0.97, 1.03, size=shape) if n > 100 else rng.uniform(0.5, 1.5, size=shape)
        data = np.where(rng.random(shape) < (0.0 if n > 100 else 0.12), 0.0, data)
    elif kind in ("amax", "amin"):
        data = rng.integers(-3, 4, size=shape) / 2.0
    else:
        data = rng.uniform(-3, 3, size=shape)
    return torch.tensor(np.asarray(data), dtype=torch.float64).to(dtypes.torch_dtype(dtype))


def scatter_index(rng: np.random.Generator, shape: tuple, dim: int, ids: int,
                  unique: bool = False):
    """An int64 index; ``unique``: no two entries of a column along ``dim`` collide."""
    import torch

    if not unique:
        return torch.tensor(rng.integers(0, ids, size=shape), dtype=torch.int64)
    if not shape:
        return torch.tensor(0)
    dim = dim % len(shape)
    moved = (shape[dim],) + tuple(n for d, n in enumerate(shape) if d != dim)
    cols = int(np.prod(moved[1:], dtype=np.int64))
    data = np.stack([rng.permutation(ids)[:shape[dim]] for _ in range(cols)], axis=-1)
    data = np.moveaxis(data.reshape(moved), 0, dim)
    return torch.tensor(np.ascontiguousarray(data), dtype=torch.int64)


def _block(src, index):
    """src's index-shaped leading block: what torch reads. Its backward raises for a
    larger src, so the "-grad" layouts hand torch the block (same values) to get
    torch's gradient rule; ours must then be 0 outside the block."""
    return src[tuple(slice(0, n) for n in index.shape)]


def _smaller_options(label: str) -> dict:
    # "index-smaller": torch's own call with the larger src, values only (its backward raises)
    return {"grad": False} if label == "index-smaller" else {}


def _layouts(layouts: tuple, dtype: Optional[str]) -> tuple:
    """The "-grad" layouts only where gradients are compared (float dtypes)."""
    keep = dtype in dtypes.FLOAT_NAMES
    return tuple(lay for lay in layouts if keep or not lay[0].endswith("-grad"))


def _pair(name: str, torch_fn: Callable, jax_fn: Callable) -> tuple[Callable, Callable]:
    torch_fn.__name__ = f"torch.{name}"
    jax_fn.__name__ = f"torch2jax_ops.torch.{name}"
    return torch_fn, jax_fn


def _ours():
    from torch2jax_ops import torch as ours
    return ours


def torch_index_select(input, dim, index):
    """torch's own ``index_select``: importing torch_geometric replaces ``torch.index_select``
    with a wrapper (torch_geometric/hash_tensor.py) that rejects the 0-d inputs torch accepts,
    so the reference calls the builtin the wrapper wraps."""
    import torch
    return torch._C._VariableFunctions.index_select(input, dim, index)


# ----------------------------------------------------------------------------- scatter family

@register(SECTION)
def scatter_reduce_cases() -> Iterable[Case]:
    for reduce in SCATTER_REDUCES:
        for include_self in (True, False):
            for dtype in DTYPES:
                for layout in _layouts(SCATTER_LAYOUTS, dtype):
                    label = f"{layout[0]}-{'self' if include_self else 'noself'}"
                    yield Case(SECTION, f"scatter_reduce-{reduce}", dtype, label,
                               _scatter_reduce_build(reduce, include_self, dtype, layout))


def _scatter_reduce_build(reduce, include_self, dtype, layout, name="scatter_reduce"):
    def build():
        import torch

        label, x_shape, i_shape, s_shape, dim, ids = layout
        rng = _rng(name, reduce, include_self, dtype, label)
        x = values(rng, x_shape, dtype, reduce)
        index = scatter_index(rng, i_shape, dim, ids)
        src = values(rng, s_shape, dtype, reduce)
        block = _block if label == "index-smaller-grad" else (lambda s, i: s)
        if name == "scatter_add":
            pair = _pair(name, lambda x, i, s: torch.scatter_add(x, dim, i, block(s, i)),
                         lambda x, i, s: _ours().scatter_add(x, dim, i, s))
        else:
            pair = _pair(name, lambda x, i, s: torch.scatter_reduce(
                x, dim, i, block(s, i), reduce, include_self=include_self),
                lambda x, i, s: _ours().scatter_reduce(x, dim, i, s, reduce,
                                                       include_self=include_self))
        return (*pair, (x, index, src), {}, _smaller_options(label))
    return build


@register(SECTION)
def scatter_add_cases() -> Iterable[Case]:
    for dtype in DTYPES:
        for layout in _layouts(SCATTER_LAYOUTS, dtype):
            yield Case(SECTION, "scatter_add", dtype, layout[0],
                       _scatter_reduce_build("sum", True, dtype, layout, "scatter_add"))


#: layouts for scatter without reduce: unique ids per column (torch's order is undefined)
ASSIGN_LAYOUTS = (
    ("1d", (8,), (5,), (5,), 0, 8),
    ("2d-dim0", (6, 3), (4, 3), (4, 3), 0, 6),
    ("2d-dim1", (3, 6), (3, 4), (3, 4), 1, 6),
    ("index-smaller", (6, 4), (3, 2), (4, 3), 0, 6),
    ("index-smaller-grad", (6, 4), (3, 2), (4, 3), 0, 6),
)


@register(SECTION)
def scatter_cases() -> Iterable[Case]:
    """``torch.scatter``: src or value, without reduce (unique ids) or with add/multiply."""
    for dtype in DTYPES:
        for layout in _layouts(ASSIGN_LAYOUTS, dtype):
            for form in ("src", "value"):
                yield Case(SECTION, f"scatter-{form}", dtype, layout[0],
                           _scatter_build(form, None, dtype, layout))
        for layout in _layouts(SCATTER_LAYOUTS, None):
            if layout[0] == "0d":
                continue
            for reduce in ("add", "multiply"):
                for form in ("src", "value"):
                    yield Case(SECTION, f"scatter-{form}-{reduce}", dtype, layout[0],
                               _scatter_build(form, reduce, dtype, layout))


def _scatter_build(form, reduce, dtype, layout):
    def build():
        import torch

        label, x_shape, i_shape, s_shape, dim, ids = layout
        kind = "prod" if reduce == "multiply" else "sum"
        rng = _rng("scatter", form, reduce, dtype, label)
        x = values(rng, x_shape, dtype, kind)
        index = scatter_index(rng, i_shape, dim, ids, unique=reduce is None)
        extra = {} if reduce is None else {"reduce": reduce}
        # torch has no gradient for the reduce forms; a smaller index: see _block
        options = {"grad": False} if reduce is not None else _smaller_options(label)
        if form == "src":
            src = values(rng, s_shape, dtype, kind)
            block = _block if label == "index-smaller-grad" else (lambda s, i: s)
            pair = _pair("scatter", lambda x, i, s: torch.scatter(x, dim, i, block(s, i),
                                                                  **extra),
                         lambda x, i, s: _ours().scatter(x, dim, i, s, **extra))
            return (*pair, (x, index, src), {}, options)
        value = 1.25 if dtype in dtypes.FLOAT_NAMES else 3
        if reduce == "multiply" and dtype in dtypes.FLOAT_NAMES:
            value = 1.0009765625  # 1 + 2^-10: products that round in float16
        pair = _pair("scatter", lambda x, i: torch.scatter(x, dim, i, value, **extra),
                     lambda x, i: _ours().scatter(x, dim, i, value=value, **extra))
        return (*pair, (x, index), {}, options)
    return build


#: gather layouts: (label, input shape, index shape, dim, ids)
GATHER_LAYOUTS = (
    ("1d", (6,), (9,), 0, 6),
    ("2d-dim0", (5, 3), (7, 3), 0, 5),
    ("2d-dim1", (3, 5), (3, 8), 1, 5),
    ("index-smaller", (5, 4), (6, 2), 0, 5),
    ("3d-dim-1", (2, 3, 4), (2, 2, 6), -1, 4),
    ("0d", (), (), 0, 1),
    ("long-duplicates", (3, 2), (300, 2), 0, 3),   # gradient: many float16 adds per row
)


@register(SECTION)
def gather_cases() -> Iterable[Case]:
    for dtype in DTYPES:
        for label, x_shape, i_shape, dim, ids in GATHER_LAYOUTS:
            def build(dtype=dtype, label=label, x_shape=x_shape, i_shape=i_shape, dim=dim,
                      ids=ids):
                import torch

                rng = _rng("gather", dtype, label)
                x = values(rng, x_shape, dtype, "sum")
                index = scatter_index(rng, i_shape, dim, ids)
                pair = _pair("gather", lambda x, i: torch.gather(x, dim, i),
                             lambda x, i: _ours().gather(x, dim, i))
                return (*pair, (x, index), {}, {})
            yield Case(SECTION, "gather", dtype, label, build)


# ----------------------------------------------------------------------------- index family

def _index_inputs(name, key, dtype, layout, kind):
    label, x_shape, s_shape, dim, ids = layout
    rng = _rng(name, key, dtype, label)
    x = values(rng, x_shape, dtype, kind)
    source = values(rng, s_shape, dtype, kind)
    index = scatter_index(rng, (s_shape[dim],), 0, ids)
    return x, index, source, dim


@register(SECTION)
def index_add_cases() -> Iterable[Case]:
    for alpha in (1, 2.5):
        for dtype in DTYPES:
            for layout in INDEX_LAYOUTS:
                def build(alpha=alpha, dtype=dtype, layout=layout):
                    import torch

                    x, index, source, dim = _index_inputs("index_add", alpha, dtype, layout,
                                                          "sum")
                    pair = _pair("index_add",
                                 lambda x, i, s: torch.index_add(x, dim, i, s, alpha=alpha),
                                 lambda x, i, s: _ours().index_add(x, dim, i, s, alpha=alpha))
                    return (*pair, (x, index, source), {}, {})
                yield Case(SECTION, "index_add", dtype, f"{layout[0]}-alpha{alpha}", build)


@register(SECTION)
def index_reduce_cases() -> Iterable[Case]:
    for reduce in INDEX_REDUCES:
        for include_self in (True, False):
            for dtype in DTYPES:
                for layout in INDEX_LAYOUTS:
                    def build(reduce=reduce, include_self=include_self, dtype=dtype,
                              layout=layout):
                        import torch

                        x, index, source, dim = _index_inputs(
                            "index_reduce", (reduce, include_self), dtype, layout, reduce)
                        pair = _pair("index_reduce", lambda x, i, s: torch.index_reduce(
                            x, dim, i, s, reduce, include_self=include_self),
                            lambda x, i, s: _ours().index_reduce(
                                x, dim, i, s, reduce, include_self=include_self))
                        return (*pair, (x, index, source), {}, {})
                    label = f"{layout[0]}-{'self' if include_self else 'noself'}"
                    yield Case(SECTION, f"index_reduce-{reduce}", dtype, label, build)


#: index_select layouts: (label, input shape, index length (None: 0-d), dim, ids)
SELECT_LAYOUTS = (
    ("1d", (6,), 9, 0, 6),
    ("2d-dim0", (5, 3), 7, 0, 5),
    ("2d-dim1", (3, 5), 8, -1, 5),
    ("0d-index", (4, 3), None, 1, 3),
    ("0d-input", (), 1, 0, 1),
    ("1d-long-duplicates", (3,), 300, 0, 3),     # gradient: step-by-step float16 index_add
)


@register(SECTION)
def index_select_cases() -> Iterable[Case]:
    for dtype in DTYPES:
        for label, x_shape, length, dim, ids in SELECT_LAYOUTS:
            def build(dtype=dtype, label=label, x_shape=x_shape, length=length, dim=dim,
                      ids=ids):

                rng = _rng("index_select", dtype, label)
                x = values(rng, x_shape, dtype, "sum")
                index = scatter_index(rng, () if length is None else (length,), 0, ids)
                pair = _pair("index_select", lambda x, i: torch_index_select(x, dim, i),
                             lambda x, i: _ours().index_select(x, dim, i))
                return (*pair, (x, index), {}, {})
            yield Case(SECTION, "index_select", dtype, label, build)


# ----------------------------------------------------------------------------- edge cases

def _pyg_sum_torch(src, index):
    return src.new_zeros((4, 3)).scatter_add_(0, index.view(-1, 1).expand_as(src), src)


def _pyg_sum_ours(src, index):
    import jax.numpy as jnp

    return _ours().scatter_add(jnp.zeros((4, 3), src.dtype), 0,
                               jnp.broadcast_to(index[:, None], src.shape), src)

def _edge(op: str, dtype: str, label: str, torch_fn: Callable, jax_fn: Callable,
          args: Callable, options: Optional[dict] = None) -> Case:
    def build():
        pair = _pair(op.split("-")[0], torch_fn, jax_fn)
        return (*pair, args(), {}, dict(options or {}))
    return Case(SECTION, op, dtype, label, build)


@register(SECTION)
def edge_cases() -> Iterable[Case]:
    """Empty indices, NaN/inf, exact ties with ``input``, zeros in products, PyG's patterns."""
    import torch

    t = torch.tensor
    nan, inf = float("nan"), float("inf")
    ours = _ours
    for dtype in ("float16", "bfloat16", "float32", "float64"):
        td = dtypes.torch_dtype(dtype)
        for reduce in SCATTER_REDUCES:
            for include_self in (True, False):
                tag = "self" if include_self else "noself"

                def sr(x, i, s, reduce=reduce, include_self=include_self):
                    return torch.scatter_reduce(x, 0, i, s, reduce, include_self=include_self)

                def sr_ours(x, i, s, reduce=reduce, include_self=include_self):
                    return ours().scatter_reduce(x, 0, i, s, reduce, include_self=include_self)

                def ir(x, i, s, reduce=reduce, include_self=include_self):
                    return torch.index_reduce(x, 0, i, s, reduce, include_self=include_self)

                def ir_ours(x, i, s, reduce=reduce, include_self=include_self):
                    return ours().index_reduce(x, 0, i, s, reduce, include_self=include_self)

                # NaN and inf in src and in input; groups of one kind each
                yield _edge(f"scatter_reduce-{reduce}", dtype, f"nan-inf-{tag}", sr, sr_ours,
                            lambda td=td: (
                                t([nan, 1.0, 2.0, -inf, 0.5, 3.0, 1.0], dtype=td),
                                t([0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5]),
                                t([1.0, nan, inf, -inf, inf, 2.0, -1.0, -1.0, nan, nan, 0.5],
                                  dtype=td)))
                # exact ties between src elements and with input's element
                yield _edge(f"scatter_reduce-{reduce}", dtype, f"ties-with-input-{tag}", sr,
                            sr_ours, lambda td=td: (
                                t([3.0, 1.0, 5.0, 0.0], dtype=td), t([0, 0, 0, 1, 2, 3, 3]),
                                t([3.0, 3.0, 1.0, 1.0, 2.0, 0.0, 0.0], dtype=td)))
                # empty index: input unchanged (src empty too: torch's backward raises
                # for a larger src)
                yield _edge(f"scatter_reduce-{reduce}", dtype, f"empty-index-{tag}", sr,
                            sr_ours, lambda td=td: (t([1.0, 2.0], dtype=td),
                                                    torch.zeros(0, dtype=torch.int64),
                                                    torch.zeros(0, dtype=td)))
                if reduce in INDEX_REDUCES:
                    yield _edge(f"index_reduce-{reduce}", dtype, f"nan-inf-{tag}", ir,
                                ir_ours, lambda td=td: (
                                    t([[nan, 1.0], [2.0, -inf], [0.5, 3.0]], dtype=td),
                                    t([0, 1, 1, 2, 0]),
                                    t([[1.0, nan], [inf, -inf], [inf, 2.0], [nan, 0.0],
                                       [-1.0, 1.0]], dtype=td)))
                    yield _edge(f"index_reduce-{reduce}", dtype, f"empty-index-{tag}", ir,
                                ir_ours, lambda td=td: (t([[1.0, 2.0]], dtype=td),
                                                        torch.zeros(0, dtype=torch.int64),
                                                        torch.zeros(0, 2, dtype=td)))
        # products with zeros: one zero, two zeros, a zero input element
        for include_self in (True, False):
            tag = "self" if include_self else "noself"
            yield _edge("scatter_reduce-prod", dtype, f"zeros-{tag}",
                        lambda x, i, s, inc=include_self: torch.scatter_reduce(
                            x, 0, i, s, "prod", include_self=inc),
                        lambda x, i, s, inc=include_self: ours().scatter_reduce(
                            x, 0, i, s, "prod", include_self=inc),
                        lambda td=td: (t([0.0, 2.0, 5.0, 3.0, 1.5], dtype=td),
                                       t([0, 0, 1, 1, 2, 2, 3, 4]),
                                       t([2.0, 3.0, 0.0, 4.0, 0.0, 0.0, 7.0, 0.0], dtype=td)))
            yield _edge("index_reduce-prod", dtype, f"zeros-{tag}",
                        lambda x, i, s, inc=include_self: torch.index_reduce(
                            x, 0, i, s, "prod", include_self=inc),
                        lambda x, i, s, inc=include_self: ours().index_reduce(
                            x, 0, i, s, "prod", include_self=inc),
                        lambda td=td: (t([0.0, 2.0, 5.0, 3.0, 1.5], dtype=td),
                                       t([0, 0, 1, 1, 2, 2, 3, 4]),
                                       t([2.0, 3.0, 0.0, 4.0, 0.0, 0.0, 7.0, 0.0], dtype=td)))
        # PyG 2.x's utils.scatter on CPU: zeros.scatter_reduce_(dim, index.expand_as(src),
        # src, "amax"/"amin", include_self=False). After a ReLU many maxima are exactly 0 =
        # the zeros' value: torch splits the gradient with the (dropped) self element too.
        for reduce in ("amax", "amin"):
            def pyg_torch(src, index, reduce=reduce):
                full = index.view(-1, 1).expand_as(src)
                return src.new_zeros((5, src.shape[1])).scatter_reduce_(
                    0, full, src, reduce, include_self=False)

            def pyg_ours(src, index, reduce=reduce):
                import jax.numpy as jnp
                full = jnp.broadcast_to(index[:, None], src.shape)
                return ours().scatter_reduce(jnp.zeros((5, src.shape[1]), src.dtype), 0, full,
                                             src, reduce, include_self=False)

            def pyg_args(td=td, reduce=reduce):
                rng = _rng("pyg", reduce, str(td))
                data = np.maximum(rng.integers(-2, 3, size=(12, 3)), 0) / 2.0
                sign = 1.0 if reduce == "amax" else -1.0
                return (torch.tensor(sign * data, dtype=torch.float64).to(td),
                        torch.tensor(rng.integers(0, 4, size=12)))
            yield _edge(f"scatter_reduce-{reduce}", dtype, "pyg-relu-ties-with-zeros",
                        pyg_torch, pyg_ours, pyg_args)
        # PyG's sum/mean: scatter_add_ with an expanded (stride-0) index
        yield _edge("scatter_add", dtype, "pyg-expanded-index", _pyg_sum_torch, _pyg_sum_ours,
                    lambda td=td: (torch.tensor(_rng("pyg-sum", str(td)).uniform(
                        -2, 2, size=(400, 3))).to(td), torch.tensor(
                        _rng("pyg-sum-i", str(td)).integers(0, 3, size=400))))
        # index_add into a 1-d float tensor with repeated ids (step-by-step in half types)
        yield _edge("index_add", dtype, "ones-3000-into-1d",
                    lambda x, i, s: torch.index_add(x, 0, i, s),
                    lambda x, i, s: ours().index_add(x, 0, i, s),
                    lambda td=td: (torch.zeros(2, dtype=td),
                                   torch.zeros(3000, dtype=torch.int64),
                                   torch.ones(3000, dtype=td)))
        yield _edge("index_reduce-mean", dtype, "ones-3000-counts",
                    lambda x, i, s: torch.index_reduce(x, 0, i, s, "mean"),
                    lambda x, i, s: ours().index_reduce(x, 0, i, s, "mean"),
                    lambda td=td: (torch.zeros(2, 2, dtype=td),
                                   torch.zeros(3000, dtype=torch.int64),
                                   torch.ones(3000, 2, dtype=td)))
        yield _edge("scatter_reduce-mean", dtype, "ones-3000-counts",
                    lambda x, i, s: torch.scatter_reduce(x, 0, i, s, "mean"),
                    lambda x, i, s: ours().scatter_reduce(x, 0, i, s, "mean"),
                    lambda td=td: (torch.zeros(2, dtype=td),
                                   torch.zeros(3000, dtype=torch.int64),
                                   torch.ones(3000, dtype=td)))
    # integer specifics: floor-mean of negative sums, wrapping products, int alpha truncation
    for dtype in ("int32", "int64"):
        td = dtypes.torch_dtype(dtype)
        for include_self in (True, False):
            yield _edge("scatter_reduce-mean", dtype,
                        f"negative-floor-{'self' if include_self else 'noself'}",
                        lambda x, i, s, inc=include_self: torch.scatter_reduce(
                            x, 0, i, s, "mean", include_self=inc),
                        lambda x, i, s, inc=include_self: ours().scatter_reduce(
                            x, 0, i, s, "mean", include_self=inc),
                        lambda td=td: (t([0, 0, 7, 1], dtype=td), t([0, 0, 1, 2, 2, 2]),
                                       t([-3, -2, 5, -1, -1, 0], dtype=td)))
        yield _edge("index_add", dtype, "float-alpha-truncates",
                    lambda x, i, s: torch.index_add(x, 0, i, s, alpha=-1.5),
                    lambda x, i, s: ours().index_add(x, 0, i, s, alpha=-1.5),
                    lambda td=td: (t([1, 2, 3], dtype=td), t([0, 0, 2]),
                                   t([3, 4, 5], dtype=td)))
