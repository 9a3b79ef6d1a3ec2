"""A CPU kernel for the sum of gathered rows: ``segment_sum(table[src], dst, N)`` in one pass.

PyG's default message passing gathers each edge's source row and adds it at the
edge's target. XLA:CPU runs that as a gather into a fresh ``[E, *F]`` buffer and a
scatter-add, or block by block (:func:`~._gather.streamed_sum`); both move every
message through memory. ``_kernels/gather_scatter_add.cc`` adds each source row
straight into its target row instead, on the threads of XLA's intra-op pool (rows
split by target, so no two threads write one row): at 300k edges x 64 features,
5 ms against 18 ms for the streamed loop and 40 ms for the two steps (2-core CPU,
2026-11-26).

The kernel is an XLA FFI handler compiled against jaxlib's headers into a
per-user cache folder (:func:`kernel_dir`, ``~/.cache/torch2jax_ops/kernels``;
an installed package folder is often read-only): by ``make`` (``python -m
torch2jax_ops build-kernels``), else on first use in a process, so a pip install
gets the fast path too. Without a C++ compiler nothing fails: a warning says so
once and the callers keep their XLA forms (see :func:`build`).
:func:`gather_scatter_add` is a JAX primitive over it:

- every row sums its edges in edge order, XLA:CPU's own order for a gather and a
  scatter-add, so its values are those of the two steps, to the bit;
- it is linear in ``table``: its tangent is itself, its transpose the same kernel
  with ``src`` and ``dst`` swapped (so ``grad``, ``jvp``, ``jacfwd`` and ``hessian``
  work, and the gradient is the two steps' gradient to the bit too);
- under ``vmap`` a batched table becomes extra features (one call), batched ids
  become one call over the stacked graphs;
- other platforms lower it to the two steps.

Whether a caller uses it is :func:`usable`: the library is built and loads, the
process has one device (the kernel has no sharding rule), and the environment
variable ``TORCH2JAX_OPS_NATIVE`` is not ``0``. Without it the callers keep their
XLA forms, with the same values. ``TORCH2JAX_OPS_BUILD=0`` stops the build on first use
(a missing library is then only reported).
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path
from typing import Any, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from ...torch_scatter._gather import slot_sum, take_rows

__all__ = ["SOURCE", "ENVIRONMENT", "kernel_dir", "library_path", "build", "load_error",
           "usable", "gather_scatter_add", "weighted_gather_scatter_add", "edge_dot"]

SOURCE = Path(__file__).parent / "_kernels" / "gather_scatter_add.cc"
#: ``TORCH2JAX_OPS_NATIVE=0`` keeps the XLA forms even where the kernel is built.
ENVIRONMENT = "TORCH2JAX_OPS_NATIVE"
#: ``TORCH2JAX_OPS_BUILD=0``: a missing library is not built on first use.
BUILD_ENVIRONMENT = "TORCH2JAX_OPS_BUILD"
#: the folder of the built libraries (default: the per-user cache, :func:`kernel_dir`)
DIR_ENVIRONMENT = "TORCH2JAX_OPS_KERNEL_DIR"
_TARGETS = {np.dtype(np.float32): ("torch2jax_ops_gather_scatter_add_f32",
                                   "T2jGatherScatterAddF32"),
            np.dtype(np.float64): ("torch2jax_ops_gather_scatter_add_f64",
                                   "T2jGatherScatterAddF64")}
#: the attention pair: the weighted sum and the edge dot (its transpose), per dtype
_WEIGHTED_TARGETS = {np.dtype(np.float32): ("torch2jax_ops_weighted_gather_scatter_add_f32",
                                            "T2jWeightedGatherScatterAddF32"),
                     np.dtype(np.float64): ("torch2jax_ops_weighted_gather_scatter_add_f64",
                                            "T2jWeightedGatherScatterAddF64")}
_DOT_TARGETS = {np.dtype(np.float32): ("torch2jax_ops_edge_dot_f32", "T2jEdgeDotF32"),
                np.dtype(np.float64): ("torch2jax_ops_edge_dot_f64", "T2jEdgeDotF64")}
_FLAGS = ("-O3", "-std=c++17", "-shared", "-fPIC")


def _fingerprint() -> str:
    """The source, the flags and jaxlib's version (its FFI headers): a library built
    from anything else is never loaded."""
    import jaxlib
    digest = hashlib.sha256(SOURCE.read_bytes())
    digest.update(" ".join(_FLAGS).encode())
    digest.update(jaxlib.__version__.encode())
    return digest.hexdigest()[:16]


def kernel_dir() -> Path:
    """Where the kernel libraries are built: ``$TORCH2JAX_OPS_KERNEL_DIR``, else
    ``$XDG_CACHE_HOME/torch2jax_ops/kernels`` (``~/.cache/torch2jax_ops/kernels``), the
    per-user cache beside the parity runner's compilation cache. Not the package folder:
    it is read-only in many installs."""
    explicit = os.environ.get(DIR_ENVIRONMENT)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "torch2jax_ops" / "kernels"


def library_path() -> Path:
    """Where :func:`build` writes the kernel library for this source and jaxlib: one file
    per fingerprint, so environments with other jaxlib versions share the folder."""
    return kernel_dir() / f"libtorch2jax_ops_cpu-{_fingerprint()}.so"


def _compiler(compiler: Optional[str]) -> str:
    """The C++ compiler to run: ``compiler``, else ``$CXX``, else ``c++``, else ``g++``;
    RuntimeError naming what was looked for when there is none."""
    named = compiler or os.environ.get("CXX")
    if named:
        found = shutil.which(named)
        if not found:
            source = "compiler=" if compiler else "$CXX="
            raise RuntimeError(f"build-kernels needs a C++17 compiler, and {source}{named!r} "
                               f"is not found: install g++ or clang, or name one with CXX=...")
        return found
    found = shutil.which("c++") or shutil.which("g++")
    if not found:
        raise RuntimeError("build-kernels needs a C++17 compiler (no c++ or g++ on PATH): "
                           "install g++ or clang, or name one with CXX=...")
    return found


def build(compiler: Optional[str] = None, *, force: bool = False, quiet: bool = False) -> Path:
    """Compile ``_kernels/gather_scatter_add.cc`` into :func:`library_path` (a no-op
    when it is there, unless ``force``) and return the path.

    ``compiler``: a C++17 compiler (default: ``$CXX``, else ``c++``, else ``g++``).
    Raises RuntimeError naming the compiler and its output when it fails, when there is
    no compiler, or naming the folder when it is not writable.
    """
    target = library_path()
    if target.exists() and not force:
        return target
    cxx = _compiler(compiler)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        workspace = tempfile.TemporaryDirectory(dir=target.parent)
    except OSError as exc:
        raise RuntimeError(f"build-kernels writes the library to {target.parent}, which is "
                           f"not writable ({exc.strerror}): name a writable folder with "
                           f"{DIR_ENVIRONMENT}=...") from exc
    with workspace as tmp:
        partial = Path(tmp) / target.name
        command = [cxx, *_FLAGS, "-isystem", jax.ffi.include_dir(), str(SOURCE), "-o",
                   str(partial)]
        if not quiet:
            print(" ".join(command), flush=True)
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"compiling {SOURCE.name} failed ({Path(cxx).name} exited "
                               f"{done.returncode}):\n{done.stderr.strip()}")
        os.replace(partial, target)  # atomic: a process building at the same time is harmless
    _load.cache_clear()
    return target


@functools.cache
def _load() -> Optional[str]:
    """Load the library and register its handlers once; the reason when that fails."""
    path = library_path()
    if not path.exists():
        if os.environ.get(BUILD_ENVIRONMENT, "1") == "0":
            return (f"the CPU kernel is not built ({path} is missing) and "
                    f"{BUILD_ENVIRONMENT}=0: run `python -m torch2jax_ops build-kernels`")
        try:  # first use in this process: build it into the per-user cache
            build(quiet=True)
        except RuntimeError as exc:
            reason = f"the CPU kernel could not be built: {exc}"
            warnings.warn(f"torch2jax_ops: {reason}. The message-passing sums use their XLA "
                          f"forms (the same values, slower on the CPU).", RuntimeWarning,
                          stacklevel=2)
            return reason
    try:
        library = ctypes.cdll.LoadLibrary(str(path))
        for name, symbol in (*_TARGETS.values(), *_WEIGHTED_TARGETS.values(),
                             *_DOT_TARGETS.values()):
            jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(library, symbol)),
                                        platform="cpu")
    except (OSError, AttributeError) as exc:  # pragma: no cover - a broken build
        return f"the CPU kernel {path.name} does not load: {exc}"
    return None


def load_error() -> Optional[str]:
    """Why the kernel cannot run in this process, or None when it can."""
    if os.environ.get(ENVIRONMENT, "1") == "0":
        return f"{ENVIRONMENT}=0"
    return _load()


def usable(dtype: Any) -> bool:
    """Whether a caller tracing now may use :func:`gather_scatter_add` for rows of
    ``dtype`` (float32 or float64): the kernel loads, it is not switched off, and the
    process has one device. Callers pick it on the CPU only
    (``jax.lax.platform_dependent``)."""
    return (np.dtype(dtype) in _TARGETS and jax.device_count() == 1
            and load_error() is None)


def _ids(ids: jax.Array, size: int) -> jax.Array:
    """int32 ids; an id outside ``[0, size)`` becomes -1 before the cast (an int64 id
    past 2**31 must not wrap into range)."""
    if ids.dtype == jnp.int32:
        return ids
    return jnp.where((ids >= 0) & (ids < size), ids, -1).astype(jnp.int32)


def gather_scatter_add(table: jax.Array, src: jax.Array, dst: jax.Array,
                       num_segments: int) -> jax.Array:
    """``segment_sum(table[src], dst, num_segments)`` with the CPU kernel.

    ``table [M, *F]`` (float32 or float64), ``src [E]``, ``dst [E]`` (integers) ->
    ``[num_segments, *F]``. An edge with ``src`` outside ``[0, M)`` or ``dst``
    outside ``[0, num_segments)`` adds nothing (negative ids never wrap around).
    Check :func:`usable` first: this raises when the kernel is not loaded.

    The kernel is an XLA:CPU handler and sees CPU buffers only: where the arrays live on
    another device (a GPU), the program is lowered for that platform and runs the two steps
    instead (gather, scatter-add; the same values up to the order of the sums), with no
    custom call in it.
    """
    if np.dtype(table.dtype) not in _TARGETS:
        raise TypeError(f"gather_scatter_add: table must be float32 or float64, got "
                        f"{table.dtype}")
    if table.ndim < 1 or src.ndim != 1 or dst.shape != src.shape:
        raise ValueError(f"gather_scatter_add: expected table [M, *F], src [E], dst [E], got "
                         f"{table.shape}, {src.shape}, {dst.shape}")
    reason = _load()
    if reason is not None:
        raise RuntimeError(reason)
    return _primitive.bind(table, _ids(src, table.shape[0]), _ids(dst, num_segments),
                           num_segments=int(num_segments))


_primitive = Primitive("torch2jax_ops_gather_scatter_add")


def _abstract(table: Any, src: Any, dst: Any, *, num_segments: int) -> jax.core.ShapedArray:
    return jax.core.ShapedArray((num_segments,) + tuple(table.shape[1:]), table.dtype)


def _reference(table: jax.Array, src: jax.Array, dst: jax.Array, *,
               num_segments: int) -> jax.Array:
    """The two steps: the value of the kernel on every platform."""
    return slot_sum(take_rows(table, src), dst, num_segments)


def _lower_cpu(ctx: Any, table: Any, src: Any, dst: Any, *, num_segments: int) -> Any:
    name = _TARGETS[np.dtype(ctx.avals_in[0].dtype)][0]
    return jax.ffi.ffi_lowering(name)(ctx, table, src, dst)


def _tangent(tangent: jax.Array, table: jax.Array, src: jax.Array, dst: jax.Array, *,
             num_segments: int) -> jax.Array:
    """Linear in the table: the tangent is the kernel applied to the table's tangent."""
    return _primitive.bind(tangent, src, dst, num_segments=num_segments)


def _transpose(cotangent: Any, table: Any, src: jax.Array, dst: jax.Array, *,
               num_segments: int) -> list:
    if not ad.is_undefined_primal(table) or ad.is_undefined_primal(src) or \
            ad.is_undefined_primal(dst):  # pragma: no cover - ids are never linear inputs
        raise NotImplementedError("gather_scatter_add is linear in its table only")
    if type(cotangent) is ad.Zero:
        return [ad.Zero(table.aval), None, None]
    rows = table.aval.shape[0]
    return [_primitive.bind(cotangent, dst, src, num_segments=rows), None, None]


def _batch(args: Sequence[jax.Array], dims: Sequence[Any], *, num_segments: int) -> tuple:
    table, src, dst = args
    table_dim, src_dim, dst_dim = dims
    if src_dim is None and dst_dim is None:
        # one graph: the batch is one more feature axis
        moved = jnp.moveaxis(table, table_dim, 1)
        return _primitive.bind(moved, src, dst, num_segments=num_segments), 1
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)

    def lead(a: jax.Array, d: Any) -> jax.Array:
        if d is None:
            return jnp.broadcast_to(a, (size,) + a.shape)
        return jnp.moveaxis(a, d, 0)

    table, src, dst = lead(table, table_dim), lead(src, src_dim), lead(dst, dst_dim)
    rows = table.shape[1]
    # one call over the stacked graphs: graph b's ids move by b rows, invalid ids stay so
    offsets = jnp.arange(size, dtype=jnp.int32)[:, None]
    src = jnp.where((src >= 0) & (src < rows), src + offsets * rows, -1)
    dst = jnp.where((dst >= 0) & (dst < num_segments), dst + offsets * num_segments, -1)
    out = _primitive.bind(table.reshape((size * rows,) + table.shape[2:]), src.reshape(-1),
                          dst.reshape(-1), num_segments=size * num_segments)
    return out.reshape((size, num_segments) + table.shape[2:]), 0


_primitive.def_impl(functools.partial(jax.jit, static_argnames="num_segments")(
    lambda table, src, dst, num_segments: _primitive.bind(table, src, dst,
                                                          num_segments=num_segments)))
_primitive.def_abstract_eval(_abstract)
mlir.register_lowering(_primitive, mlir.lower_fun(_reference, multiple_results=False))
mlir.register_lowering(_primitive, _lower_cpu, platform="cpu")
ad.defjvp(_primitive, _tangent, None, None)
ad.primitive_transposes[_primitive] = _transpose
batching.primitive_batchers[_primitive] = _batch



# -- the attention pair ---------------------------------------------------------------------
# weighted_gather_scatter_add is bilinear in (table, weight), edge_dot in (a, b); each one's
# transpose in one argument is the other kernel, so a gradient never builds [E, *H, C].

def _check_pair(op: str, table: jax.Array, other: jax.Array, names: str) -> None:
    if np.dtype(table.dtype) not in _TARGETS or other.dtype != table.dtype:
        raise TypeError(f"{op}: {names} must be both float32 or both float64, got "
                        f"{table.dtype} and {other.dtype}")
    reason = _load()
    if reason is not None:
        raise RuntimeError(reason)


def weighted_gather_scatter_add(table: jax.Array, weight: jax.Array, src: jax.Array,
                                dst: jax.Array, num_segments: int) -> jax.Array:
    """``segment_sum(weight[..., None] * table[src], dst, num_segments)`` with the CPU kernel.

    ``table [M, *H, C]``, ``weight [E, *H]`` (both float32 or both float64), ``src [E]``,
    ``dst [E]`` -> ``[num_segments, *H, C]``: the attention-weighted sum of message passing
    with no ``[E, *H, C]`` buffer. An edge with an id out of range adds nothing. Each
    product is rounded and then added in edge order, as the XLA steps do (the same bits
    on the CPU). Check :func:`usable` first: this raises when the kernel is not loaded.
    """
    op = "weighted_gather_scatter_add"
    _check_pair(op, table, weight, "`table` and `weight`")
    if (table.ndim != weight.ndim + 1 or table.shape[1:-1] != weight.shape[1:]
            or src.ndim != 1 or dst.shape != src.shape or weight.shape[0] != src.shape[0]):
        raise ValueError(f"{op}: expected table [M, *H, C], weight [E, *H], src [E], dst [E], "
                         f"got {table.shape}, {weight.shape}, {src.shape}, {dst.shape}")
    return _weighted.bind(table, weight, _ids(src, table.shape[0]), _ids(dst, num_segments),
                          num_segments=int(num_segments))


def edge_dot(a: jax.Array, b: jax.Array, ia: jax.Array, ib: jax.Array) -> jax.Array:
    """``sum(a[ia] * b[ib], axis=-1)`` with the CPU kernel: one dot per edge and head.

    ``a [Ma, *H, C]``, ``b [Mb, *H, C]`` (both float32 or both float64), ``ia [E]``,
    ``ib [E]`` -> ``[E, *H]``; 0 for an edge with an id out of range. The transpose of
    :func:`weighted_gather_scatter_add` in its weight (and attention's query-key score).
    """
    op = "edge_dot"
    _check_pair(op, a, b, "`a` and `b`")
    if a.ndim < 2 or b.shape[1:] != a.shape[1:] or ia.ndim != 1 or ib.shape != ia.shape:
        raise ValueError(f"{op}: expected a [Ma, *H, C], b [Mb, *H, C], ia [E], ib [E], got "
                         f"{a.shape}, {b.shape}, {ia.shape}, {ib.shape}")
    return _dot.bind(a, b, _ids(ia, a.shape[0]), _ids(ib, b.shape[0]))


def _weighted_reference(table: jax.Array, weight: jax.Array, src: jax.Array, dst: jax.Array,
                        *, num_segments: int) -> jax.Array:
    """The XLA steps: the value of the weighted kernel on every platform."""
    return slot_sum(weight[..., None] * take_rows(table, src), dst, num_segments)


def _dot_reference(a: jax.Array, b: jax.Array, ia: jax.Array, ib: jax.Array) -> jax.Array:
    return jnp.sum(take_rows(a, ia) * take_rows(b, ib), axis=-1)


def _weighted_transpose(cotangent: Any, table: Any, weight: Any, src: jax.Array,
                        dst: jax.Array, *, num_segments: int) -> list:
    if ad.is_undefined_primal(src) or ad.is_undefined_primal(dst):  # pragma: no cover
        raise NotImplementedError("weighted_gather_scatter_add: ids are never linear inputs")
    if ad.is_undefined_primal(table):  # d table[s] += weight[e] * ct[d]
        if type(cotangent) is ad.Zero:
            return [ad.Zero(table.aval), None, None, None]
        return [_weighted.bind(cotangent, weight, dst, src,
                               num_segments=table.aval.shape[0]), None, None, None]
    if type(cotangent) is ad.Zero:  # d weight[e] = <table[s], ct[d]>
        return [None, ad.Zero(weight.aval), None, None]
    return [None, _dot.bind(table, cotangent, src, dst), None, None]


def _dot_transpose(cotangent: Any, a: Any, b: Any, ia: jax.Array, ib: jax.Array) -> list:
    if ad.is_undefined_primal(ia) or ad.is_undefined_primal(ib):  # pragma: no cover
        raise NotImplementedError("edge_dot: ids are never linear inputs")
    if ad.is_undefined_primal(a):  # d a[ia] += ct[e] * b[ib]
        if type(cotangent) is ad.Zero:
            return [ad.Zero(a.aval), None, None, None]
        return [_weighted.bind(b, cotangent, ib, ia, num_segments=a.aval.shape[0]),
                None, None, None]
    if type(cotangent) is ad.Zero:
        return [None, ad.Zero(b.aval), None, None]
    return [None, _weighted.bind(a, cotangent, ia, ib, num_segments=b.aval.shape[0]),
            None, None]


def _batched(reference: Any) -> Any:
    """A batching rule by the XLA steps under ``vmap`` (correct, without the kernel)."""
    def rule(args: Sequence[jax.Array], dims: Sequence[Any], **params: Any) -> tuple:
        return jax.vmap(functools.partial(reference, **params), in_axes=tuple(dims))(*args), 0
    return rule


def _ffi(targets: dict) -> Any:
    def lower(ctx: Any, *args: Any, **params: Any) -> Any:
        return jax.ffi.ffi_lowering(targets[np.dtype(ctx.avals_in[0].dtype)][0])(ctx, *args)
    return lower


_weighted = Primitive("torch2jax_ops_weighted_gather_scatter_add")
_weighted.def_impl(functools.partial(jax.jit, static_argnames="num_segments")(
    lambda table, weight, src, dst, num_segments: _weighted.bind(
        table, weight, src, dst, num_segments=num_segments)))
_weighted.def_abstract_eval(lambda table, weight, src, dst, *, num_segments: jax.core.ShapedArray(
    (num_segments,) + tuple(table.shape[1:]), table.dtype))
mlir.register_lowering(_weighted, mlir.lower_fun(_weighted_reference, multiple_results=False))
mlir.register_lowering(_weighted, _ffi(_WEIGHTED_TARGETS), platform="cpu")
ad.defjvp(_weighted,
          lambda t, table, weight, src, dst, *, num_segments: _weighted.bind(
              t, weight, src, dst, num_segments=num_segments),
          lambda t, table, weight, src, dst, *, num_segments: _weighted.bind(
              table, t, src, dst, num_segments=num_segments), None, None)
ad.primitive_transposes[_weighted] = _weighted_transpose
batching.primitive_batchers[_weighted] = _batched(_weighted_reference)

_dot = Primitive("torch2jax_ops_edge_dot")
_dot.def_impl(jax.jit(lambda a, b, ia, ib: _dot.bind(a, b, ia, ib)))
_dot.def_abstract_eval(lambda a, b, ia, ib: jax.core.ShapedArray(
    (ia.shape[0],) + tuple(a.shape[1:-1]), a.dtype))
mlir.register_lowering(_dot, mlir.lower_fun(_dot_reference, multiple_results=False))
mlir.register_lowering(_dot, _ffi(_DOT_TARGETS), platform="cpu")
ad.defjvp(_dot, lambda t, a, b, ia, ib: _dot.bind(t, b, ia, ib),
          lambda t, a, b, ia, ib: _dot.bind(a, t, ia, ib), None, None)
ad.primitive_transposes[_dot] = _dot_transpose
batching.primitive_batchers[_dot] = _batched(_dot_reference)
