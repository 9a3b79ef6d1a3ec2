"""Side-by-side comparison of a torch module and its JAX port, parameter by parameter.

``compare_modules(torch_module, jax_module, *args)`` calls both with the same
inputs and parameters (by ``state_dict`` name, through ``functional_call`` on
each side), compares the outputs, and the gradients of one random projection
of the outputs w.r.t. every parameter and every floating input. The result
lists the worst leaves first, so a wrong layer shows up at the top::

    result = compare_modules(model, port, x, edge_index)
    result["grad conv1.lin.weight"].max_abs
"""
from __future__ import annotations

import contextlib
import copy
import math
import re
from typing import Any, Optional

import jax

from .. import _dtypes
from ..nn import named_arrays
from ._arrays import LeafResult, ParityError, ParityResult, _finite, compare_arrays
from ._compare import _compare
from ._precision import matmul_precision
from ._trees import _tensor_paths, jit_with_constant_indices

__all__ = ["compare_modules", "assert_modules_parity", "compare_weights"]


def _check_names(jax_module: Any, params: dict, label: str) -> None:
    """Every torch parameter must be an array of the port, by the same name and shape."""

    try:
        ours = dict(named_arrays(jax_module))
    except Exception as exc:  # noqa: BLE001 - not a pytree we can read
        raise ParityError(f"{label}: cannot read the arrays of the JAX module "
                          f"({type(jax_module).__name__}): {exc}") from None
    missing = [k for k in params if k not in ours]
    if missing:
        raise ParityError(
            f"{label}: the JAX module has no array named {missing[:6]}"
            f"{' ...' if len(missing) > 6 else ''} (torch parameters are matched by their "
            f"state_dict names; the JAX module's arrays are {sorted(ours)[:8]}"
            f"{' ...' if len(ours) > 8 else ''}). Name the JAX attributes like torch's, or "
            f"build the port with torch2jax_ops.nn.from_torch.")
    for key, value in params.items():
        theirs, mine = tuple(value.shape), tuple(ours[key].shape)
        if theirs != mine:
            hint = " (transposed?)" if theirs == mine[::-1] else ""
            raise ParityError(f"{label}: parameter {key!r} has shape {theirs} in torch but "
                              f"{mine} in the JAX module{hint}")


def _rename(path: str) -> str:
    """compare's leaf paths -> module terms: ``grad[0]['w']`` -> ``grad w``, ``grad[1]`` -> ``grad args[0]``."""
    match = re.fullmatch(r"grad\[0\]\[(.+)\]", path)
    if match:
        return "grad " + match.group(1).strip("'\"")
    match = re.fullmatch(r"grad\[(\d+)\](.*)", path)
    if match:
        return f"grad args[{int(match.group(1)) - 1}]{match.group(2)}"
    return path


def compare_modules(torch_module: Any, jax_module: Any, *args: Any, grad: bool = True,
                    grad_inputs: bool = True, rtol: Optional[float] = None,
                    atol: Optional[float] = None, seed: int = 0, name: Optional[str] = None,
                    normwise: bool = False, jit: bool = True, precision: str = "highest",
                    weights: str = "torch", **kwargs: Any) -> ParityResult:
    """Compare ``torch_module(*args, **kwargs)`` with ``jax_module(*jax_args, **jax_kwargs)``.

    Args:
      torch_module: a ``torch.nn.Module`` (put it in ``eval()`` mode if it has
        dropout or batch norm: training-mode randomness cannot match).
      jax_module: its port, a callable pytree whose arrays carry torch's
        ``state_dict`` names (equinox modules with the same attribute names,
        the modules of :mod:`torch2jax_ops.nn` / :mod:`torch2jax_ops.geometric.nn`).
      *args, **kwargs: the inputs, as torch tensors (or trees of them) and
        plain values; non-array values (``num_graphs``) are static under jit.
        A PyG ``Data`` / ``Batch`` (a ``forward(self, data)`` model) reaches
        the port as ``from_pyg(data)``: a ``PaddedGraph`` with PyG's exact
        counts.
        A torch sparse COO / CSR / CSC tensor (an ``adj_t``) reaches the port
        as its ``BCOO`` / ``BCSR`` (``to_jax``); it is differentiated only when
        it requires grad, and then by its stored values: ``grad args[i]`` is
        ``[nnz]``, torch's gradient read at the input's entries.
      grad: compare gradients w.r.t. every parameter (by name) and, with
        ``grad_inputs``, every floating input tensor in ``args``.
      rtol, atol, seed, normwise: as in :func:`compare`.
      jit: run the JAX side under ``equinox.filter_jit`` (default), as it will
        be used; ``False`` runs it eagerly (easier to debug). Integer inputs
        (``edge_index``, ``batch``) are compile-time constants,
        so sizes the torch model reads off them (``batch.max() + 1``) are read
        the same way; floating inputs and parameters are traced.
      precision: as in :func:`compare` (``"highest"``: no TF32 on either side).
      weights: ``"torch"`` (default) runs both sides with the torch module's
        parameters, so the comparison checks the port's *computation*;
        ``"own"`` runs each side with its own arrays, so a mistake in how the
        weights were loaded or converted (a wrong checkpoint key, a transpose,
        a stale copy) shows up too. Gradients are by name either way.
        :func:`compare_weights` lists the weight differences themselves.

    Returns:
      a :class:`ParityResult` whose leaves are ``output...``, ``grad <param
      name>`` and ``grad args[i]``, worst first.

    Raises:
      ParityError: the torch module is not a module, or a torch parameter has
      no array of the same name (or shape) in the JAX module.
    """
    import torch
    from torch.func import functional_call as torch_call

    from .. import func

    label = name or f"{type(torch_module).__name__} vs {type(jax_module).__name__}"
    if not isinstance(torch_module, torch.nn.Module):
        raise ParityError(f"{label}: compare_modules takes a torch.nn.Module first, got "
                          f"{type(torch_module).__name__}; for functions use compare()")
    if not callable(jax_module):
        raise ParityError(f"{label}: the JAX module ({type(jax_module).__name__}) is not callable")
    params = {k: v.detach() for k, v in torch_module.named_parameters()}  # compare clones them
    _check_names(jax_module, params, label)

    held = contextlib.ExitStack()

    def with_params(module, p, a, kw):
        # the module keeps these parameters until the comparison ends, not only for the
        # call: a reentrant checkpoint (PyG's DeepGCNLayer(ckpt_grad=True)) runs the
        # forward again inside backward(), and must differentiate the same leaves
        if reparametrize is None:  # a torch without the helper: the plain functional call
            return torch_call(module, p, a, kw)
        held.enter_context(reparametrize(module, p, tie_weights=True))
        return module(*a, **kw)

    reparametrize = getattr(torch.nn.utils.stateless, "_reparametrize_module", None)

    def theirs(p, *a, **kw):
        return with_params(torch_module, p, a, kw)

    if weights not in ("torch", "own"):
        raise ParityError(f"{label}: weights must be 'torch' (both sides run with the torch "
                          f"module's parameters) or 'own' (each side its own), got {weights!r}")
    own = dict(named_arrays(jax_module)) if weights == "own" else None

    def ours(p, *a, **kw):
        if own is not None:  # the JAX module's own values; gradients still flow by name
            p = {k: own[k] + (v - jax.lax.stop_gradient(v)) for k, v in p.items()}
        return func.functional_call(jax_module, p, a, kw)

    if jit:  # index inputs are constants: sizes read off them are read as torch reads them
        ours = jit_with_constant_indices(ours)
    # every argument holding tensors: plain tensors, pairs, and dicts (x_dict of a hetero model)
    positions = [0] + ([i + 1 for i, a in enumerate(args) if _tensor_paths([a])]
                       if grad_inputs else [])
    # jitted, the forward and the gradients come from one compiled program (_compare's
    # fused path), as a training step computes them
    def theirs64(p, *a, **kw):  # the float64 reference (_compare asks only on a failure)
        if not double:
            double.append(copy.deepcopy(torch_module).double())
        return with_params(double[0], p, a, kw)

    double: list = []
    with matmul_precision(precision), held:
        result = _compare(theirs, ours, (params, *args), grad, rtol, atol, seed, positions,
                          label, normwise, kwargs, fused=jit, torch_fn64=theirs64)
    result.precision = precision
    for leaf in result.leaves:
        leaf.path = _rename(leaf.path)
    result.leaves.sort(key=lambda leaf: (leaf.passed, -_finite(leaf.tol_ratio)))
    return result


def compare_weights(torch_module: Any, jax_module: Any, *, rtol: Optional[float] = 0.0,
                    atol: Optional[float] = 0.0, buffers: bool = True) -> ParityResult:
    """The weights themselves, torch's ``state_dict`` vs the port's arrays, by name, worst first.

    Every torch parameter (and buffer, with ``buffers``) must exist in the JAX
    module under the same dotted name, with the same shape and values (exactly,
    by default: a conversion copies values; pass ``rtol``/``atol`` for a port
    rebuilt from a checkpoint in another dtype). A name missing on either
    side, a shape or a value that differs, each is a failing leaf
    ``weight <name>``; what the JAX module has beyond torch's names is listed
    as failing leaves ``extra <name>``.

    Use it with ``compare_modules(..., weights="own")``: that one says *whether*
    the outputs differ, this one says *which weight* is wrong.
    """
    import torch

    label = f"weights of {type(torch_module).__name__} vs {type(jax_module).__name__}"
    if not isinstance(torch_module, torch.nn.Module):
        raise ParityError(f"{label}: compare_weights takes a torch.nn.Module first, got "
                          f"{type(torch_module).__name__}")
    theirs: dict[str, torch.Tensor] = dict(torch_module.named_parameters())
    if buffers:
        theirs.update(dict(torch_module.named_buffers()))
    ours = dict(named_arrays(jax_module))
    leaves = []
    for key, tensor in theirs.items():
        if key not in ours:
            leaves.append(LeafResult(f"weight {key}", "weight", tuple(tensor.shape),
                                     _dtypes.name_of(tensor.dtype), math.inf, math.inf,
                                     math.inf, None, 0.0, 0.0, False,
                                     "missing in the JAX module"))
            continue
        leaf = compare_arrays(tensor.detach(), ours[key], f"weight {key}", "weight", rtol, atol)
        if leaf.message.startswith("dtype differs") and _dtypes.kind_of(tensor.dtype) == "int":
            leaf.message = ""  # int64 counters held as int32 with x64 off: compare values
        leaves.append(leaf)
    for key in sorted(set(ours) - set(theirs)):
        leaves.append(LeafResult(f"extra {key}", "weight", tuple(ours[key].shape),
                                 _dtypes.name_of(ours[key].dtype), math.inf, math.inf, math.inf,
                                 None, 0.0, 0.0, False, "not in the torch state_dict"))
    leaves.sort(key=lambda leaf: (leaf.passed, -_finite(leaf.tol_ratio)))
    return ParityResult(label, leaves)


def assert_modules_parity(torch_module: Any, jax_module: Any, *args: Any,
                          **options: Any) -> ParityResult:
    """:func:`compare_modules`, raising ``AssertionError`` with the table on a mismatch."""
    result = compare_modules(torch_module, jax_module, *args, **options)
    if not result.passed:
        raise AssertionError(str(result))
    return result
