"""Side-by-side comparison of a torch function and its JAX port.

``compare(torch_fn, jax_fn, *args)`` runs both on the same values (the JAX
side receives the torch inputs through :mod:`torch2jax_ops.dlpack`), compares
every output leaf, and with ``grad=True`` the vector-Jacobian products for one
random cotangent (same values on both sides) w.r.t. every floating input.
Each leaf compares by :func:`~torch2jax_ops.parity.compare_arrays`'s rules
(``_arrays``); a half or float32 leaf that fails is judged again against torch
run in float64. The arguments and outputs are handled in ``_trees``.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..nn._state import replay_scope
from ._arrays import ParityError, ParityResult, _is_tensor, _to_numpy, compare_arrays
from ._devices import tensor_like
from ._precision import matmul_precision
from ._random import torch_draws
from ._trees import (
    _convert_arg,
    _entry_values,
    _flatten_jax,
    _flatten_torch,
    _from_number,
    _is_jax_input,
    _is_number,
    _jax_leaves,
    _NotFusable,
    _numbers_as,
    _replace,
    _sparse_data,
    _tensor_paths,
    _to_float64,
    _with_data,
    jit_with_constant_indices,
)

__all__ = ["compare", "assert_parity"]


def compare(torch_fn: Callable, jax_fn: Callable, *args: Any, grad: bool = True,
            rtol: Optional[float] = None, atol: Optional[float] = None, seed: int = 0,
            grad_wrt: Optional[Sequence[int]] = None, name: Optional[str] = None,
            normwise: bool = False, precision: str = "highest", jit: bool = False,
            **kwargs: Any) -> ParityResult:
    """Run ``torch_fn(*args, **kwargs)`` and ``jax_fn(*jax_args, **jax_kwargs)`` and compare.

    Args:
      torch_fn, jax_fn: the original and the port; they return a tensor/array
        or a (nested) tuple/list/dict of them, with the same structure.
      *args, **kwargs: torch tensors (or trees of them) and plain values; the
        JAX side gets the same values as JAX arrays (zero-copy via DLPack). A
        torch sparse tensor arrives as a ``BCOO`` / ``BCSR`` and is
        differentiated only when it requires grad, by its stored values
        (``[nnz]``: torch's gradient read at the input's entries).
      grad: also compare gradients w.r.t. every floating input tensor.
      rtol, atol: override the dtype's default tolerances (both sides).
      seed: seeds the random cotangent.
      grad_wrt: positions in ``args`` to differentiate (default: every
        floating tensor in ``args``).
      name: a label for the report.
      normwise: compare outputs and gradients norm-wise (see
        :func:`compare_arrays`): for float16/bfloat16 results that are
        differences of O(1) terms (log_softmax, softmax gradients), where
        torch's step-by-step rounding has no elementwise relative accuracy.
      precision: ``"highest"`` (default) runs both sides' float32 matmuls at
        full precision (on an NVIDIA GPU JAX would use TF32, errors ~1e-3);
        ``"default"`` compares each library at its own default precision.
      jit: run the port under ``jax.jit`` as :func:`compare_modules` does by default:
        integer index arrays are compile-time constants (sizes read off them, e.g.
        ``index.max() + 1`` groups, are read as torch reads them), and the outputs and
        the gradients come from one compiled program. ``False`` (default) runs the port
        as called, eagerly for a plain function.
    """
    if jit:
        jax_fn = jit_with_constant_indices(jax_fn)
    with matmul_precision(precision):
        result = _compare(torch_fn, jax_fn, args, grad, rtol, atol, seed, grad_wrt, name,
                          normwise, kwargs, fused=jit)
    result.precision = precision
    return result


def _compare(torch_fn, jax_fn, args, grad, rtol, atol, seed, grad_wrt, name, normwise, kwargs,
             fused=False, torch_fn64=None):
    import torch

    label = name or f"{getattr(torch_fn, '__name__', 'torch_fn')} vs " \
                    f"{getattr(jax_fn, '__name__', 'jax_fn')}"
    _check_inputs(label, args, kwargs)
    arg_tensors = _tensor_paths(list(args))
    positions = set(range(len(args))) if grad_wrt is None else set(grad_wrt)
    # a sparse input (a torch sparse COO / CSR / CSC adjacency; the JAX side gets a BCOO /
    # BCSR) is differentiated only when it requires grad, and then by its stored values:
    # torch's gradient read at the input's entries, JAX's gradient of the BCOO / BCSR data
    wrt = [(p, t) for p, t in arg_tensors
           if grad and t.is_floating_point() and int(p[1:].split("]")[0]) in positions
           and (t.layout == torch.strided or t.requires_grad)]

    # JAX side: same values, converted once, before torch runs (a forward that rewrites its
    # data object, `data.x = ...`, must not hand JAX the rewritten one).
    jax_args = _convert_arg(list(args))
    jax_kwargs = _convert_arg(dict(kwargs))

    # torch side: differentiable leaves are fresh clones that require grad.
    leaves = {p: t.detach().clone().requires_grad_(True) for p, t in wrt}
    torch_args = _replace(list(args), "", {p: leaves[p] for p, _ in wrt})
    with torch_draws() as draws:  # random numbers torch draws: the port takes the same ones
        torch_out = torch_fn(*torch_args, **kwargs)
    if draws:
        jax_fn = _replaying(jax_fn, draws, label)
    # a Python number among tensors in an output tree (a pooling ratio a model returns)
    # compares as NumPy makes it on both sides (float64, int64, bool), with no gradient; a
    # bare number output stays an error (`.item()` dropped the tensor)
    torch_flat = [(p, _from_number(torch.as_tensor(np.asarray(leaf)))
                   if p and _is_number(leaf) else leaf)
                  for p, leaf in _flatten_torch(torch_out)]
    for path, leaf in torch_flat:
        if not _is_tensor(leaf):
            raise ParityError(f"{label}: torch output{path} is a {type(leaf).__name__}, "
                              f"not a tensor; return tensors (or trees of them)")

    converted = dict(_tensor_paths(jax_args, is_leaf=_is_jax_input))
    wrt_values = [_sparse_data(converted[p]) for p, _ in wrt]
    rebuild = {p: _with_data(converted[p]) for p, _ in wrt}

    def run_jax(*diff):
        call_args = _replace(jax_args, "", {p: rebuild[p](v) for (p, _), v in zip(wrt, diff)})
        return jax_fn(*call_args, **jax_kwargs)

    values: dict = {}  # leaf path -> (torch value, JAX value): for the float64 check

    def reference() -> dict:
        with torch_draws(replay=draws):
            return _reference(torch_fn64 or torch_fn, args, kwargs, wrt, seed, torch)

    if fused and wrt:
        done = _fused_results(torch_flat, jax_fn, jax_args, jax_kwargs, wrt, wrt_values, leaves,
                              seed, rtol, atol, torch, normwise, values)
        if done is not None:
            _against_reference(done, values, reference)
            return ParityResult(label, done)

    pullback = None
    if wrt:
        try:
            # one trace for the values and the gradients: the outputs are jax.vjp's primal
            # outputs (a jitted port compiles its forward once, not once more for the VJP)
            jax_out, pullback = jax.vjp(run_jax, *wrt_values)
        except TypeError:  # e.g. a non-array output: the plain call below names it
            pullback = None
    if pullback is None:
        jax_out = run_jax(*wrt_values)
    jax_flat = _jax_leaves(label, jax_out)
    if len(jax_flat) != len(torch_flat):
        raise ParityError(
            f"{label}: output structures differ: torch returned {len(torch_flat)} tensor(s) "
            f"at {[p or '(root)' for p, _ in torch_flat]}, jax returned {len(jax_flat)} array(s) "
            f"({jax.tree_util.tree_structure(jax_out)})")

    torch_flat = _numbers_as(torch_flat, jax_flat)
    values.update({f"output{p}": (t, a) for (p, t), a in zip(torch_flat, jax_flat)})
    results = [compare_arrays(t, a, f"output{p}", "output", rtol, atol, normwise)
               for (p, t), a in zip(torch_flat, jax_flat)]

    mismatched = [r for r, a in zip(results, jax_flat) if tuple(r.shape) != tuple(np.shape(a))]
    if mismatched:  # a cotangent of torch's shape cannot enter JAX's VJP
        for r in mismatched:
            r.message += "; gradients not compared"
    elif wrt:
        results += _compare_grads(torch_flat, jax_out, run_jax, wrt, wrt_values, leaves,
                                  seed, rtol, atol, torch, normwise, pullback, values)
    _against_reference(results, values, reference)
    return ParityResult(label, results)


def _replaying(jax_fn: Callable, draws: list, label: str) -> Callable:
    """``jax_fn`` whose random ops take torch's recorded ``draws`` (all of them, in order)."""
    def call(*args: Any, **kwargs: Any) -> Any:
        with replay_scope(draws) as taken:
            out = jax_fn(*args, **kwargs)
        if taken and len(taken) != len(draws):  # none taken: a cached trace, or no random ops
            raise ParityError(
                f"{label}: torch drew random numbers {len(draws)} time(s) "
                f"({[d.op for d in draws]}), the port only {len(taken)} time(s) "
                f"({[d.op for d in taken]}): they do not draw the same way")
        return out
    return call


def _fused_results(torch_flat, jax_fn, jax_args, jax_kwargs, wrt, wrt_values, leaves, seed,
                   rtol, atol, torch, normwise, values) -> Optional[list]:
    """Outputs and gradients of a jitted port from ONE compiled program (its forward and its
    VJP for torch's cotangent), or None when the outputs do not line up with torch's.

    What ``compare_modules(jit=True)`` runs: the unfused path traces, lowers and loads the
    forward (with its residuals) and the backward as two programs; one program halves that
    work, which is most of a module case's cost once programs are cached.
    """
    float_outs, cotangents, torch_grads = _torch_grads(torch_flat, wrt, leaves, seed, torch)
    shapes = [tuple(t.shape) for _, t in torch_flat]
    paths = [p for p, _ in wrt]

    def step(diff, args, kwargs, cots):
        inputs = dict(_tensor_paths(args, is_leaf=_is_jax_input))

        def run(*values):
            return jax_fn(*_replace(args, "", {p: _with_data(inputs[p])(v)
                                               for p, v in zip(paths, values)}), **kwargs)

        out, pullback = jax.vjp(run, *diff)
        flat, treedef = jax.tree_util.tree_flatten(out)
        if len(flat) != len(shapes) or any(
                not isinstance(a, jax.Array) or tuple(a.shape) != s
                for a, s in zip(flat, shapes)):
            raise _NotFusable
        cot = [jnp.zeros(a.shape, a.dtype) if jnp.issubdtype(a.dtype, jnp.inexact)
               else np.zeros(a.shape, jax.dtypes.float0) for a in flat]
        for i, c in zip(float_outs, cots):
            if jnp.issubdtype(flat[i].dtype, jnp.inexact):
                cot[i] = c.astype(flat[i].dtype)
        return out, pullback(jax.tree_util.tree_unflatten(treedef, cot))

    try:
        jax_out, jax_grads = jit_with_constant_indices(step)(
            list(wrt_values), jax_args, jax_kwargs, [np.asarray(c) for c in cotangents])
    except (_NotFusable, TypeError):  # the unfused path names what differs
        return None
    outs = jax.tree_util.tree_leaves(jax_out)
    torch_flat = _numbers_as(torch_flat, outs)
    values.update({f"output{p}": (t, a) for (p, t), a in zip(torch_flat, outs)})
    values.update({f"grad{p}": (tg, jg) for p, tg, jg in zip(paths, torch_grads, jax_grads)})
    results = [compare_arrays(t, a, f"output{p}", "output", rtol, atol, normwise)
               for (p, t), a in zip(torch_flat, outs)]
    return results + [compare_arrays(tg, jg, f"grad{p}", "grad", rtol, atol, normwise)
                      for p, tg, jg in zip(paths, torch_grads, jax_grads)]


def _check_inputs(label: str, args: tuple, kwargs: dict) -> None:
    """Inputs are torch tensors (the JAX side gets converted copies), never arrays."""
    def walk(tree, path):
        if isinstance(tree, (np.ndarray, jax.Array)):
            raise ParityError(
                f"{label}: {path} is a {type(tree).__name__}; compare takes the torch inputs "
                f"and hands JAX the same values itself: pass torch.as_tensor(...) instead")
        if isinstance(tree, dict):
            for k, v in tree.items():
                walk(v, f"{path}[{k!r}]")
        elif isinstance(tree, (tuple, list)):
            for i, v in enumerate(tree):
                walk(v, f"{path}[{i}]")
    walk(list(args), "args")
    walk(dict(kwargs), "kwargs")


def _torch_grads(torch_flat, wrt, leaves, seed, torch) -> tuple:
    """torch's side of the gradient check: (the floating outputs' positions, one random
    cotangent each, ``d sum(out * cot) / d input`` for every input in ``wrt``).

    The cotangents are NumPy draws (the JAX side takes the same values); torch's copy of
    each is made on its output's device, and a gradient on its input's device."""
    rng = np.random.default_rng(seed)
    float_outs = [i for i, (_, t) in enumerate(torch_flat) if t.is_floating_point()]
    cotangents = [rng.standard_normal(tuple(torch_flat[i][1].shape)) for i in float_outs]
    diff_outs = [(torch_flat[i][1], c) for i, c in zip(float_outs, cotangents)
                 if torch_flat[i][1].requires_grad]
    if diff_outs:
        outs = [o for o, _ in diff_outs]
        cots = [tensor_like(c, o) for o, c in diff_outs]  # each on its output's device
        targets = [leaves[p] for p, _ in wrt]
        try:
            torch_grads = torch.autograd.grad(
                outs, targets, cots, allow_unused=True,
                retain_graph=True)  # the unfused path asks again when the fused one cannot run
        except RuntimeError as error:
            if "use_reentrant=True" not in str(error):
                raise
            torch_grads = _backward_grads(outs, cots, targets, torch)
    else:
        torch_grads = [None] * len(wrt)
    torch_grads = [_entry_values(leaves[p], torch.zeros_like(leaves[p]) if g is None else g)
                   for (p, _), g in zip(wrt, torch_grads)]
    return float_outs, cotangents, torch_grads


def _backward_grads(outs: list, cots: list, targets: list, torch: Any) -> list:
    """The gradients by ``backward()``: torch.utils.checkpoint(use_reentrant=True) (PyG's
    DeepGCNLayer with ckpt_grad) refuses ``torch.autograd.grad``. Each target's own
    ``.grad`` is set aside and given back."""
    saved = [t.grad for t in targets]
    try:
        for t in targets:
            t.grad = None
        torch.autograd.backward(outs, cots, retain_graph=True)
        return [None if t.grad is None else t.grad.clone() for t in targets]
    finally:
        for t, g in zip(targets, saved):
            t.grad = g


def _compare_grads(torch_flat, jax_out, run_jax, wrt, wrt_values, leaves, seed, rtol, atol,
                   torch, normwise=False, pullback=None, values=None):
    float_outs, cotangents, torch_grads = _torch_grads(torch_flat, wrt, leaves, seed, torch)

    # JAX: the same cotangent through jax.vjp of the floating outputs.
    def float_outputs(*diff):
        flat = _flatten_jax(run_jax(*diff))
        return [flat[i] for i in float_outs]

    if pullback is not None:  # the forward's own VJP: every output gets a cotangent
        flat, treedef = jax.tree_util.tree_flatten(jax_out)
        flat = [jnp.asarray(a) if _is_number(a) else a for a in flat]
        cot = [jnp.zeros(np.shape(a), a.dtype) if jnp.issubdtype(a.dtype, jnp.inexact)
               else np.zeros(np.shape(a), jax.dtypes.float0) for a in flat]
        for i, c in zip(float_outs, cotangents):
            if jnp.issubdtype(flat[i].dtype, jnp.inexact):
                cot[i] = jnp.asarray(c, dtype=flat[i].dtype)
        jax_grads = pullback(jax.tree_util.tree_unflatten(treedef, cot))
    else:
        outs, vjp = jax.vjp(float_outputs, *wrt_values)
        jax_grads = vjp([jnp.asarray(c, dtype=o.dtype) for o, c in zip(outs, cotangents)])
    if values is not None:
        values.update({f"grad{p}": (tg, jg) for (p, _), tg, jg in zip(wrt, torch_grads, jax_grads)})
    return [compare_arrays(tg, jg, f"grad{p}", "grad", rtol, atol, normwise)
            for (p, _), tg, jg in zip(wrt, torch_grads, jax_grads)]


# ------------------------------------------------------------ the float64 reference

#: the dtypes whose failing leaves are judged again against torch run in float64
REFERENCE_DTYPES = ("float16", "bfloat16", "float32")


def _reference(torch_fn, args, kwargs, wrt, seed, torch) -> dict:
    """torch's outputs and gradients in float64 (inputs and cotangent cast up), by leaf path."""
    leaves64 = {p: t.detach().double().clone().requires_grad_(True) for p, t in wrt}
    args64 = _replace(_to_float64(list(args)), "", leaves64)
    flat64 = [(p, torch.as_tensor(np.asarray(leaf)) if p and _is_number(leaf) else leaf)
              for p, leaf in _flatten_torch(torch_fn(*args64, **_to_float64(dict(kwargs))))]
    ref = {f"output{p}": _to_numpy(t).astype(np.float64) for p, t in flat64}
    if wrt:
        _, _, grads64 = _torch_grads(flat64, wrt, leaves64, seed, torch)
        ref.update({f"grad{p}": _to_numpy(g).astype(np.float64) for (p, _), g in zip(wrt, grads64)})
    return ref


def _against_reference(results: list, values: dict, reference: Callable[[], dict]) -> None:
    """Judge again the half and float32 leaves that failed only by their values.

    Two float32 results of a long, cancelling sum (a learnable temperature's gradient over
    every message) can each be a few ulps of the sum away from the exact value, in opposite
    directions, and so differ from each other by more than the tolerance. Such a leaf passes
    when the port is within the dtype's tolerance of torch's float64 result, or no farther
    from it than torch's own result is (elementwise); its ``tol_ratio`` becomes the ratio to
    that bound and its message says so. NaN/inf, shape and dtype differences are never
    forgiven, nor is a leaf torch cannot compute in float64.
    """
    failing = [r for r in results if not r.passed and r.dtype in REFERENCE_DTYPES
               and r.path in values and r.message.split(" of ")[0].isdigit()
               and "NaN/inf" not in r.message]
    if not failing:
        return
    try:
        ref = reference()
    except Exception as exc:  # noqa: BLE001 - reported on the leaves
        for r in failing:
            r.message += f"; no float64 reference ({type(exc).__name__}: {exc})"
        return
    for r in failing:
        exact = ref.get(r.path)
        theirs, ours = (_to_numpy(v).astype(np.float64) for v in values[r.path])
        if exact is None or exact.shape != ours.shape or not np.all(np.isfinite(exact)):
            continue
        ours_err, torch_err = np.abs(ours - exact), np.abs(theirs - exact)
        bound = np.maximum(r.atol + r.rtol * np.abs(exact), torch_err)
        ratio = float(np.max(ours_err / np.maximum(bound, np.finfo(np.float64).tiny)))
        note = (f"(ours {ours_err.max():.3g} from it, torch's {r.dtype} result "
                f"{torch_err.max():.3g})")
        if ratio <= 1.0:
            r.passed, r.tol_ratio = True, ratio
            r.message += (f" of torch's {r.dtype} result, but within tolerance of torch's "
                          f"float64 result or no farther from it than torch {note}")
        else:
            r.message += f"; against torch's float64 result {note}"


def assert_parity(torch_fn: Callable, jax_fn: Callable, *args: Any, **options: Any) -> ParityResult:
    """:func:`compare`, raising ``AssertionError`` with the readable table on a mismatch.

    The pytest helper: ``assert_parity(torch_scatter.scatter_max, scatter_max, src, index)``.
    """
    result = compare(torch_fn, jax_fn, *args, **options)
    if not result.passed:
        raise AssertionError(str(result))
    return result
