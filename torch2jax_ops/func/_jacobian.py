"""Jacobians: ``jacrev``, ``jacfwd``, ``hessian``, and the block layout shared with ``autograd.functional``."""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._checking import is_array, is_inexact
from ._common import (
    Argnums,
    _check_floating,
    _check_randomness,
    _float0_zeros,
    _name,
    _normalize_argnums,
)
from ._vmap import vmap


def _eye_rows(arrays: Sequence[Any]) -> list:
    """One-hot basis, one row per element of all ``arrays`` together: ``(N, *a.shape)`` per array."""
    sizes = [int(np.prod(a.shape, dtype=np.int64)) for a in arrays]
    total = sum(sizes)
    rows, offset = [], 0
    for a, size in zip(arrays, sizes):
        cols = jnp.arange(total)[:, None] == (offset + jnp.arange(size))[None, :]
        rows.append(cols.astype(a.dtype).reshape((total,) + tuple(a.shape)))
        offset += size
    return rows


def _split_rows(rows: Any, arrays: Sequence[Any]) -> list:
    """Inverse of :func:`_eye_rows`'s layout: the slice of ``rows`` (axis 0) for each array."""
    out, offset = [], 0
    for a in arrays:
        size = int(np.prod(a.shape, dtype=np.int64))
        out.append(rows[offset:offset + size])
        offset += size
    return out


def jacobian_blocks(f_flat: Callable, inputs: Sequence[Any], *, mode: str = "reverse",
                    chunk_size: Optional[int] = None, has_aux: bool = False):
    """The Jacobian of ``f_flat(*inputs) -> tuple of arrays`` as blocks.

    Returns ``(outputs, blocks, aux)`` with ``blocks[k][j]`` of shape
    ``outputs[k].shape + inputs[j].shape``: dtype of input ``j`` in reverse
    mode, of output ``k`` in forward mode (torch's rule). Integer outputs get
    zero blocks (torch: they do not require grad). Shared by
    :func:`jacrev`/:func:`jacfwd` and ``autograd.functional.jacobian``/``hessian``.
    """
    inputs = tuple(inputs)
    if mode == "reverse":
        if has_aux:
            outs, pullback, aux = jax.vjp(f_flat, *inputs, has_aux=True)
        else:
            (outs, pullback), aux = jax.vjp(f_flat, *inputs), None
        diff = [o for o in outs if is_inexact(o)]

        def row(*cts):
            it = iter(cts)
            return pullback(tuple(next(it) if is_inexact(o) else _float0_zeros(o)
                                  for o in outs))

        if diff and sum(o.size for o in diff):
            rows = vmap(row, chunk_size=chunk_size)(*_eye_rows(diff))
        else:
            rows = tuple(jnp.zeros((0,) + x.shape, x.dtype) for x in inputs)
        per_input = [_split_rows(r, diff) for r in rows]
        blocks, d = [], 0
        for o in outs:
            if is_inexact(o):
                blocks.append(tuple(per_input[j][d].reshape(o.shape + x.shape)
                                    for j, x in enumerate(inputs)))
                d += 1
            else:
                blocks.append(tuple(jnp.zeros(o.shape + x.shape, x.dtype) for x in inputs))
        return outs, tuple(blocks), aux
    if mode != "forward":
        raise ValueError(f"mode must be 'reverse' or 'forward', got {mode!r}")
    if has_aux:
        outs, pushforward, aux = jax.linearize(f_flat, *inputs, has_aux=True)
    else:
        (outs, pushforward), aux = jax.linearize(f_flat, *inputs), None

    def push(*tangents):  # integer outputs have float0 tangents: leave them out
        return tuple(t for t, o in zip(pushforward(*tangents), outs) if is_inexact(o))

    cols = iter(vmap(push, chunk_size=chunk_size)(*_eye_rows(inputs)))
    blocks = []
    for o in outs:
        if not is_inexact(o):
            blocks.append(tuple(jnp.zeros(o.shape + x.shape, o.dtype) for x in inputs))
            continue
        col = next(cols)
        parts = _split_rows(col, inputs)
        blocks.append(tuple(jnp.moveaxis(p, 0, -1).reshape(o.shape + x.shape)
                            for p, x in zip(parts, inputs)))
    return outs, tuple(blocks), aux


def _jac(func: Callable, argnums: Argnums, has_aux: bool, mode: str, chunk_size: Optional[int] = None, *, op: str) -> Callable:
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int)
                                   or chunk_size < 1):
        raise ValueError(f"{op}: chunk_size should be None or an int greater than 0, "
                         f"got {chunk_size!r}")

    @functools.wraps(func)
    def run(*args, **kwargs):
        nums = _normalize_argnums(argnums, len(args), op=op)
        diff = args[nums] if isinstance(nums, int) else tuple(args[i] for i in nums)
        leaves, in_tree = jax.tree_util.tree_flatten(diff)
        _check_floating(leaves, op=f"{op}: the arguments at argnums={argnums}")
        seen = {}

        def f_flat(*xs):
            sub = jax.tree_util.tree_unflatten(in_tree, xs)
            call = list(args)
            if isinstance(nums, int):
                call[nums] = sub
            else:
                for i, s in zip(nums, sub):
                    call[i] = s
            out = func(*call, **kwargs)
            if has_aux:
                if not isinstance(out, tuple) or len(out) != 2:
                    raise TypeError(f"{op}: with has_aux=True, f(*args) must return a tuple "
                                    f"(output, aux), got {type(out).__name__}")
                out, aux = out
            flat, seen["tree"] = jax.tree_util.tree_flatten(out)
            for leaf in flat:
                if not is_array(leaf):
                    raise TypeError(f"{op}: f(*args) must return arrays (or pytrees of them), "
                                    f"got a {type(leaf).__name__}")
            return (tuple(flat), aux) if has_aux else tuple(flat)

        _, blocks, aux = jacobian_blocks(f_flat, leaves, mode=mode, chunk_size=chunk_size,
                                         has_aux=has_aux)
        jac = jax.tree_util.tree_unflatten(
            seen["tree"], [jax.tree_util.tree_unflatten(in_tree, list(b)) for b in blocks])
        return (jac, aux) if has_aux else jac
    return run


def jacrev(func: Callable, argnums: Argnums = 0, *, has_aux: bool = False,
           chunk_size: Optional[int] = None, _preallocate_and_copy: bool = False) -> Callable:
    """``torch.func.jacrev``: the Jacobian by reverse mode, one vjp per output element.

    The result has the output's structure with, at each output leaf, the
    structure of ``args[argnums]`` (a tuple of them for a tuple ``argnums``);
    each block has shape ``output.shape + input.shape``. ``chunk_size=k``
    computes ``k`` rows at a time (bounded memory); ``None`` all at once.
    ``_preallocate_and_copy`` is accepted and has no effect.
    """
    del _preallocate_and_copy
    return _jac(func, argnums, has_aux, "reverse", chunk_size, op=f"jacrev({_name(func)})")


def jacfwd(func: Callable, argnums: Argnums = 0, has_aux: bool = False, *,
           randomness: str = "error") -> Callable:
    """``torch.func.jacfwd``: the Jacobian by forward mode, one jvp per input element.

    Same structure as :func:`jacrev`. ``randomness`` is validated as in
    :func:`vmap`; JAX functions take explicit keys, so it changes nothing here.
    Not available for functions with a custom VJP (``autograd.Function``
    ports, ``as_jax``): use :func:`jacrev`.
    """
    _check_randomness(randomness)
    return _jac(func, argnums, has_aux, "forward", op=f"jacfwd({_name(func)})")


def hessian(func: Callable, argnums: Argnums = 0) -> Callable:
    """``torch.func.hessian``: ``jacfwd(jacrev(func, argnums), argnums)``."""
    return jacfwd(jacrev(func, argnums), argnums)
