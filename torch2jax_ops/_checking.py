"""The validation vocabulary every part of the package shares, and the opt-in checked mode.

Every check takes the name of the public operation it runs for as the
keyword-only ``op`` and puts it first in its message, so an error reads
``scatter_sum: `index` contains negative values ...`` whichever layer raised
it. Messages name the argument, the valid range and the fix.

Checked mode: under ``jax.jit`` an index is traced, so its values cannot be
inspected while the function is built; the ops then drop out-of-range
elements. While a function is traced under :func:`checked` they also record
a ``checkify`` debug check, which becomes a real error. Outside
:func:`checked` nothing is recorded: a recorded check is an effect, and a
jitted function with an effect leaves JAX's fast C++ dispatch path (about
13 us per call become about 200 us, whatever the op's size). The flag is part
of the jit cache key, so a function jitted without checks is traced again,
with them, when it later runs under :func:`checked`.
"""
from __future__ import annotations

import contextlib
import functools
import operator
from typing import Any, Callable, Literal, Optional, Sequence, TypeVar, overload

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import config as _jax_config  # bool_state: the one way to key jit on a flag
from jax.experimental import checkify

from ._batch_vector import BatchVector

__all__ = ["checked", "debug_check", "is_traced", "is_array", "is_inexact", "as_array",
           "normalize_dim", "check_index", "check_bounds", "index_extent",
           "static_int", "Reduction", "REDUCTIONS", "SEGMENT_REDUCTIONS", "check_reduce"]

#: A reduction name as torch_scatter / PyG spell it ("add" is "sum").
Reduction = Literal["sum", "add", "mean", "mul", "min", "max"]
#: The reductions of torch_scatter's ``scatter`` and PyG's ``aggr``/``reduce`` strings.
REDUCTIONS: tuple[str, ...] = ("sum", "add", "mul", "mean", "min", "max")
#: ``segment_csr`` / ``segment_coo`` take every reduction but ``mul``.
SEGMENT_REDUCTIONS: tuple[str, ...] = ("sum", "add", "mean", "min", "max")

F = TypeVar("F", bound=Callable[..., Any])

#: on while tracing under :func:`checked`: the index checks are recorded (in the jit key)
_CHECKS = _jax_config.bool_state(
    "torch2jax_ops_index_checks", False,
    "Record torch2jax_ops' index checks (checkify.debug_check) while tracing; set by "
    "torch2jax_ops.checked.", include_in_jit_key=True, include_in_trace_context=True)


def checked(fn: F) -> F:
    """Wrap ``fn`` (jitted or not) so that failed index checks raise.

    >>> f = checked(jax.jit(lambda x, i: scatter_sum(x, i, dim_size=3)))
    >>> f(x, jnp.array([0, 5]))   # raises JaxRuntimeError naming `index`
    """
    checkified = checkify.checkify(fn, errors=checkify.user_checks)

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        with _CHECKS(True):
            error, result = checkified(*args, **kwargs)
        error.throw()
        return result

    return run  # type: ignore[return-value]


def debug_check(pred: Any, msg: str, **payload: Any) -> None:
    """``checkify.debug_check(pred, msg, **payload)``, also under an Explicit-sharded mesh.

    Recorded only while tracing under :func:`checked` (otherwise nothing is
    recorded, and a jitted function keeps JAX's fast dispatch). Under ``jax.vmap``
    over a batch sharded on an Explicit mesh (data parallelism), checkify's
    batching rule sorts the batched predicate along the sharded batch axis
    and fails at trace time; the check then runs with those mesh axes in Auto
    mode (``jax.sharding.auto_axes``), where nothing needs a placement.
    """
    if not _CHECKS.value:
        return
    mesh = jax.sharding.get_abstract_mesh()
    context = not mesh.empty
    if not context:
        for leaf in jax.tree_util.tree_leaves((pred, payload)):
            try:
                candidate = jax.typeof(leaf).sharding.mesh
            except (AttributeError, TypeError):
                continue
            if not candidate.empty and candidate.explicit_axes:
                mesh = candidate
                break
    if mesh.empty or not mesh.explicit_axes:
        checkify.debug_check(pred, msg, **payload)
        return

    def run(pred: Any, payload: dict) -> Any:
        checkify.debug_check(pred, msg, **payload)
        return pred

    scope = contextlib.nullcontext() if context else jax.sharding.use_abstract_mesh(mesh)
    with scope:
        jax.sharding.auto_axes(run, out_sharding=jax.sharding.PartitionSpec())(pred, payload)


def index_extent(index: jax.Array) -> Optional[tuple[int, int]]:
    """(min, max) of a concrete, non-empty index (one host read); None when traced or empty."""
    if is_traced(index) or index.size == 0:
        return None
    values = np.asarray(index)
    return int(values.min()), int(values.max())


def check_bounds(index: jax.Array, size: int, name: str = "index",
                 extent: Optional[tuple[int, int]] = None,
                 target: str = "the output along dim",
                 fix: str = "raise dim_size or fix the index", *, op: str) -> None:
    """Reject indices outside ``[0, size)``: eagerly when concrete, via checkify when traced."""
    if index.size == 0:
        return
    if is_traced(index):
        debug_check(
            jnp.all((index >= 0) & (index < size)),
            f"{op}: `{name}` has values outside [0, {size}) (min {{lo}}, max {{hi}})",
            lo=jnp.min(index), hi=jnp.max(index))
        return
    found = extent or index_extent(index)
    assert found is not None  # concrete and non-empty here
    lo, hi = found
    if lo < 0:
        raise IndexError(
            f"{op}: `{name}` contains negative values (min {lo}); valid range is "
            f"[0, {size}). Negative indices never wrap around in torch2jax_ops")
    if hi >= size:
        raise IndexError(
            f"{op}: `{name}` contains {hi}, out of range for {target} of size {size} "
            f"(valid range [0, {size})); {fix}")


def is_traced(x: Any) -> bool:
    """True when ``x`` is a tracer (inside jit, vmap, grad w.r.t. it ...)."""
    return isinstance(x, jax.core.Tracer)


def is_array(x: Any) -> bool:
    """A JAX array (tracers included) or a NumPy array: what the JAX-side APIs take as an array."""
    return isinstance(x, (jax.Array, np.ndarray))


def is_inexact(x: Any) -> bool:
    """True for a floating or complex dtype, or an array (or ShapeDtypeStruct) of one.

    What torch lets require gradients; integer and bool values get none.
    """
    dtype = getattr(x, "dtype", x)
    try:
        return bool(jnp.issubdtype(dtype, jnp.inexact))
    except TypeError:
        return False


def as_array(x: Any, name: str, *, op: str) -> jax.Array:
    """``x`` as a JAX array; a torch tensor gets an error that says how to convert.
    A :class:`~torch2jax_ops._batch_vector.BatchVector` gives its ids."""
    if isinstance(x, BatchVector):
        x = x.ids
    if type(x).__module__.startswith("torch"):
        raise TypeError(
            f"{op}: `{name}` is a torch tensor; pass a JAX array instead "
            f"(torch2jax_ops.dlpack.to_jax(tensor) converts without a copy)")
    if isinstance(x, (jax.Array, np.ndarray, np.generic)) or is_traced(x):
        return jnp.asarray(x)
    if isinstance(x, (list, tuple, int, float, bool)):
        return jnp.asarray(x)
    raise TypeError(f"{op}: `{name}` must be an array, got {type(x).__name__}")


def normalize_dim(dim: Any, ndim: int, name: str = "dim", *, op: str) -> int:
    """torch's dim normalisation: ``dim`` in ``[-ndim, ndim - 1]``."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{op}: `{name}` must be a Python int, got {type(dim).__name__}")
    lo, hi = -max(ndim, 1), max(ndim, 1) - 1
    if not lo <= dim <= hi:
        raise IndexError(
            f"{op}: `{name}`={dim} is out of range for a {ndim}-D `src` "
            f"(expected to be in range of [{lo}, {hi}])")
    return int(dim) % max(ndim, 1)


def check_index(index: jax.Array, name: str = "index", *, op: str) -> None:
    """The index must hold integers (torch needs int64; int32 etc. are accepted here)."""
    if not jnp.issubdtype(index.dtype, jnp.integer):
        raise TypeError(
            f"{op}: `{name}` must have an integer dtype, got {index.dtype} "
            f"(use index.astype(jnp.int32), or int64 with jax_enable_x64)")


@overload
def static_int(value: None, name: str, minimum: int = 0, *, op: str) -> None: ...
@overload
def static_int(value: int | np.integer | jax.Array, name: str, minimum: int = 0, *,
               op: str) -> int: ...
@overload
def static_int(value: Any, name: str, minimum: int = 0, *, op: str) -> Optional[int]: ...
def static_int(value: Any, name: str, minimum: int = 0, *, op: str) -> Optional[int]:
    """A size argument as a Python int (``None`` stays ``None``).

    Sizes decide output shapes, and shapes are static in JAX: a traced value
    cannot be used, and the error says how to make it static.
    """
    if value is None:
        return None
    if is_traced(value):
        raise TypeError(
            f"{op}: `{name}` must be a concrete Python int, but it is traced: output "
            f"shapes are static under jax.jit. Pass it as a Python int, or mark it "
            f"static: jax.jit(f, static_argnames='{name}')")
    try:
        number = operator.index(value if not hasattr(value, "item") else value.item())
    except TypeError:
        raise TypeError(f"{op}: `{name}` must be an int, got {value!r}") from None
    if number < minimum:
        raise ValueError(f"{op}: `{name}` must be >= {minimum}, got {number}")
    return number


def check_reduce(reduce: Any, allowed: Sequence[str] = REDUCTIONS, name: str = "reduce", *,
                 op: str, hints: Optional[dict] = None) -> str:
    """A reduction name from ``allowed``, canonical (``"add"`` -> ``"sum"``).

    ``hints`` maps a refused name to advice appended to the error.
    """
    if not isinstance(reduce, str) or reduce not in allowed:
        hint = (hints or {}).get(reduce, "") if isinstance(reduce, str) else ""
        raise ValueError(f"{op}: `{name}` must be one of {', '.join(map(repr, allowed))}, "
                         f"got {reduce!r}" + (f" ({hint})" if hint else ""))
    return "sum" if reduce == "add" else reduce
