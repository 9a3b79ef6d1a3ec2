"""``torch.func`` on JAX: grad, grad_and_value, vjp, jvp, linearize, jacrev, jacfwd, hessian, vmap, functional_call.

Each function keeps torch's name, signature, defaults and return structure;
where torch and JAX differ, torch wins:

* ``grad_and_value`` returns ``(grad, value)`` (``jax.value_and_grad``
  returns ``(value, grad)``); with ``has_aux``: ``(grad, (value, aux))``.
* ``jvp(func, primals, tangents)`` wants tuples, like torch.
* ``vmap(func, in_dims, out_dims, randomness, *, chunk_size)``: keyword
  arguments are passed through unbatched (``jax.vmap`` maps them);
  ``chunk_size`` runs the batch in chunks of that size (``lax.map`` with
  ``batch_size``) to bound memory; ``randomness`` applies to JAX's explicit
  PRNG keys (see :func:`vmap`).
* ``jacrev(..., chunk_size=)`` computes the Jacobian's rows in chunks.

Beyond torch: :func:`nth_grad` (a derivative whose order is data, so it can be
vmapped over orders) and :func:`jacobian_trace` (Hutchinson's estimator).
"""
from __future__ import annotations

import functools
import operator
from typing import Any, Callable, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import checkify

from . import dtypes
from .dtypes import is_array
from .dependence import dependencies
from .nn.naming import leaf_name

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "linearize", "jacrev", "jacfwd", "hessian",
           "vmap", "functional_call", "nth_grad", "jacobian_trace"]

Argnums = Union[int, tuple]


# ----------------------------------------------------------------------------- helpers

def _name(func: Callable) -> str:
    return getattr(func, "__name__", type(func).__name__)



def _normalize_argnums(argnums: Any, nargs: int, api: str) -> Argnums:
    """argnums as torch accepts it (int or tuple of ints, negatives allowed), in range."""
    def one(a):
        if isinstance(a, bool) or not isinstance(a, int):
            raise TypeError(f"{api}: argnums must be an int or a tuple of ints, got {a!r}")
        if not -nargs <= a < nargs:
            raise ValueError(f"{api}: argnums={a} is out of range for a function called with "
                             f"{nargs} positional argument(s); valid: {-nargs}..{nargs - 1}")
        return a % nargs
    if isinstance(argnums, tuple):
        if not argnums:
            raise ValueError(f"{api}: argnums must be non-empty")
        return tuple(one(a) for a in argnums)
    return one(argnums)


def _check_floating(leaves: Sequence[Any], where: str) -> None:
    for i, leaf in enumerate(leaves):
        dtype = getattr(leaf, "dtype", None)
        if dtype is None or not jnp.issubdtype(dtype, jnp.inexact):
            kind = type(leaf).__name__ if dtype is None else str(dtype)
            raise TypeError(f"{where}: leaf {i} is {kind}; derivatives are taken with respect to "
                            f"floating-point arrays only (torch: only floating point tensors can "
                            f"require gradients). Pass it through a position not in argnums.")


def _float0_zeros(x: Any) -> np.ndarray:
    return np.zeros(np.shape(x), dtype=jax.dtypes.float0)


def _differentiable(x: Any) -> bool:
    return jnp.issubdtype(x.dtype, jnp.inexact)


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
        diff = [o for o in outs if _differentiable(o)]

        def row(*cts):
            it = iter(cts)
            return pullback(tuple(next(it) if _differentiable(o) else _float0_zeros(o)
                                  for o in outs))

        if diff and sum(o.size for o in diff):
            rows = vmap(row, chunk_size=chunk_size)(*_eye_rows(diff))
        else:
            rows = tuple(jnp.zeros((0,) + x.shape, x.dtype) for x in inputs)
        per_input = [_split_rows(r, diff) for r in rows]
        blocks, d = [], 0
        for o in outs:
            if _differentiable(o):
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
        return tuple(t for t, o in zip(pushforward(*tangents), outs) if _differentiable(o))

    cols = iter(vmap(push, chunk_size=chunk_size)(*_eye_rows(inputs)))
    blocks = []
    for o in outs:
        if not _differentiable(o):
            blocks.append(tuple(jnp.zeros(o.shape + x.shape, o.dtype) for x in inputs))
            continue
        col = next(cols)
        parts = _split_rows(col, inputs)
        blocks.append(tuple(jnp.moveaxis(p, 0, -1).reshape(o.shape + x.shape)
                            for p, x in zip(parts, inputs)))
    return outs, tuple(blocks), aux


# ------------------------------------------------------------------------ grad & co

def grad(func: Callable, argnums: Argnums = 0, has_aux: bool = False) -> Callable:
    """``torch.func.grad``: the gradient of a scalar function w.r.t. ``args[argnums]``.

    Returns a function with ``func``'s arguments returning the gradient (a
    tuple of them for a tuple ``argnums``, pytrees for pytree arguments), or
    ``(grad, aux)`` with ``has_aux=True`` (``func`` then returns
    ``(output, aux)``). Same as ``jax.grad(func, argnums, has_aux)``.
    """
    inner = _grad_and_value(func, argnums, has_aux, f"grad({_name(func)})")

    @functools.wraps(func)
    def run(*args, **kwargs):
        g, value = inner(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return run


def _scalar_output(out: Any, api: str) -> Any:
    if not is_array(out) and not isinstance(out, (int, float)):
        raise RuntimeError(f"{api}: expected f(*args) to return a scalar array, got "
                        f"{type(out).__name__}. Maybe you wanted to use the vjp or jacrev APIs?")
    if np.ndim(out) != 0:
        raise RuntimeError(f"{api}: expected f(*args) to return a scalar array, got an array of "
                         f"shape {tuple(np.shape(out))}. Reduce it (e.g. .sum()) or use vjp / "
                         f"jacrev.")
    return out


def grad_and_value(func: Callable, argnums: Argnums = 0, has_aux: bool = False) -> Callable:
    """``torch.func.grad_and_value``: returns ``(grad, value)``, torch's order.

    With ``has_aux=True``: ``(grad, (value, aux))``. (``jax.value_and_grad``
    returns ``(value, grad)`` and ``((value, aux), grad)``.)
    """
    return _grad_and_value(func, argnums, has_aux, f"grad_and_value({_name(func)})")


def _grad_and_value(func: Callable, argnums: Argnums, has_aux: bool, api: str) -> Callable:

    @functools.wraps(func)
    def run(*args, **kwargs):
        nums = _normalize_argnums(argnums, len(args), api)

        def checked(*a, **k):
            out = func(*a, **k)
            if has_aux:
                if not isinstance(out, tuple) or len(out) != 2:
                    raise TypeError(f"{api}: with has_aux=True, f(*args) must return a tuple "
                                    f"(output, aux), got {type(out).__name__}")
                return _scalar_output(out[0], api), out[1]
            return _scalar_output(out, api)

        diff = [args[i] for i in (nums if isinstance(nums, tuple) else (nums,))]
        _check_floating(jax.tree_util.tree_leaves(diff), f"{api}: the arguments at argnums={argnums}")
        value, g = jax.value_and_grad(checked, nums, has_aux=has_aux)(*args, **kwargs)
        return g, value
    return run


def vjp(func: Callable, *primals: Any, has_aux: bool = False):
    """``torch.func.vjp``: ``(output, vjp_fn)`` or ``(output, vjp_fn, aux)``.

    ``vjp_fn(cotangents)`` returns a tuple with one gradient per primal; the
    cotangents have the structure of ``output`` and are cast to its dtypes.
    torch's ``retain_graph`` / ``create_graph`` keywords of ``vjp_fn`` are
    accepted and have no effect (every JAX result is differentiable).
    """
    result = jax.vjp(func, *primals, has_aux=has_aux)
    out, pullback = result[0], result[1]
    out_tree = jax.tree_util.tree_structure(out)

    def vjp_fn(cotangents: Any, *, retain_graph: Optional[bool] = None,
               create_graph: Optional[bool] = None) -> tuple:
        del retain_graph, create_graph
        ct_tree = jax.tree_util.tree_structure(cotangents)
        if ct_tree != out_tree:
            raise ValueError(f"vjp_fn: expected cotangents with the structure of the output "
                             f"{out_tree}, got {ct_tree}")
        def cast(o, c):
            if not _differentiable(o):
                return _float0_zeros(o)
            if np.shape(c) != o.shape:
                raise ValueError(f"vjp_fn: a cotangent has shape {tuple(np.shape(c))}, the output "
                                 f"it belongs to has shape {tuple(o.shape)}")
            return jnp.asarray(c, o.dtype)
        return pullback(jax.tree_util.tree_map(cast, out, cotangents))

    return (out, vjp_fn) + tuple(result[2:])


def jvp(func: Callable, primals: Any, tangents: Any, *, strict: bool = False,
        has_aux: bool = False):
    """``torch.func.jvp``: ``(output, jvp_out)`` or ``(output, jvp_out, aux)``.

    ``primals`` and ``tangents`` are tuples of the same structure (as torch
    requires). ``strict=True`` raises when an output is independent of the
    inputs (torch returns zeros otherwise, and so do we).
    """
    for label, value in (("primals", primals), ("tangents", tangents)):
        if not isinstance(value, tuple):
            raise RuntimeError(f"jvp(f, primals, tangents): Expected {label} to be a tuple, got "
                               f"{type(value).__name__}. E.g. it should be valid to call "
                               f"f(*primals).")
    p_tree, t_tree = (jax.tree_util.tree_structure(v) for v in (primals, tangents))
    if p_tree != t_tree:
        raise RuntimeError(f"jvp(f, primals, tangents): Expected primals and tangents to have the "
                           f"same structure, got {p_tree} and {t_tree}")
    p_leaves = jax.tree_util.tree_leaves(primals)
    tangents = jax.tree_util.tree_unflatten(t_tree, [
        jnp.asarray(t, p.dtype) if _differentiable(jnp.asarray(p)) else t
        for p, t in zip(p_leaves, jax.tree_util.tree_leaves(tangents))])
    if strict:
        def flat(*leaves):
            out = func(*jax.tree_util.tree_unflatten(p_tree, leaves))
            return jax.tree_util.tree_leaves(out[0] if has_aux else out)
        if any(not d for d in dependencies(flat, *p_leaves)):
            raise RuntimeError("jvp(f, primals, tangents, strict=True): The output of f is "
                               "independent of the inputs. This is not allowed with strict=True.")
    return jax.jvp(func, primals, tangents, has_aux=has_aux)


def linearize(func: Callable, *primals: Any):
    """``torch.func.linearize``: ``(output, jvp_fn)``, ``jvp_fn(*tangents)`` = J @ tangents.

    Linearizes once, so repeated ``jvp_fn`` calls do not re-run ``func``.
    """
    return jax.linearize(func, *primals)


# -------------------------------------------------------------------------- jacobians

def _jac(func: Callable, argnums: Argnums, has_aux: bool, mode: str, api: str,
         chunk_size: Optional[int] = None) -> Callable:
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int)
                                   or chunk_size < 1):
        raise ValueError(f"{api}: chunk_size should be None or an int greater than 0, "
                         f"got {chunk_size!r}")

    @functools.wraps(func)
    def run(*args, **kwargs):
        nums = _normalize_argnums(argnums, len(args), api)
        diff = args[nums] if isinstance(nums, int) else tuple(args[i] for i in nums)
        leaves, in_tree = jax.tree_util.tree_flatten(diff)
        _check_floating(leaves, f"{api}: the arguments at argnums={argnums}")
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
                    raise TypeError(f"{api}: with has_aux=True, f(*args) must return a tuple "
                                    f"(output, aux), got {type(out).__name__}")
                out, aux = out
            flat, seen["tree"] = jax.tree_util.tree_flatten(out)
            for leaf in flat:
                if not is_array(leaf):
                    raise TypeError(f"{api}: f(*args) must return arrays (or pytrees of them), "
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
    return _jac(func, argnums, has_aux, "reverse", f"jacrev({_name(func)})", chunk_size)


def jacfwd(func: Callable, argnums: Argnums = 0, has_aux: bool = False, *,
           randomness: str = "error") -> Callable:
    """``torch.func.jacfwd``: the Jacobian by forward mode, one jvp per input element.

    Same structure as :func:`jacrev`. ``randomness`` is validated as in
    :func:`vmap`; JAX functions take explicit keys, so it changes nothing here.
    Not available for functions with a custom VJP (``autograd.Function``
    ports, ``as_jax``): use :func:`jacrev`.
    """
    _check_randomness(randomness)
    return _jac(func, argnums, has_aux, "forward", f"jacfwd({_name(func)})")


def hessian(func: Callable, argnums: Argnums = 0) -> Callable:
    """``torch.func.hessian``: ``jacfwd(jacrev(func, argnums), argnums)``."""
    return jacfwd(jacrev(func, argnums), argnums)


# ------------------------------------------------------------------------------ vmap

_RANDOMNESS = ("error", "different", "same")


def _check_randomness(randomness: str) -> None:
    if randomness not in _RANDOMNESS:
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or "
                         f"'same'. Got {randomness!r}")


def _is_key(leaf: Any) -> bool:
    return isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def _prefix_flatten(prefix: Any, tree: Any, what: str, api: str) -> list:
    """Broadcast a torch-style dims prefix (int / None / nested tuples) over ``tree``'s leaves."""
    def spread(dim, sub):
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int)):
            raise ValueError(f"{api}: Got {what}={dim!r} for an input but {what} must be either "
                             f"an integer dimension or None.")
        return [dim] * len(jax.tree_util.tree_leaves(sub))
    try:
        spread_tree = jax.tree_util.tree_map(spread, prefix, tree, is_leaf=lambda x: x is None)
    except ValueError as exc:
        if "must be either" in str(exc):
            raise
        raise ValueError(f"{api}: {what} is not compatible with the structure of the "
                         f"{'inputs' if what == 'in_dims' else 'outputs'}: {what} has structure "
                         f"{jax.tree_util.tree_structure(prefix, is_leaf=lambda x: x is None)} "
                         f"but they have structure {jax.tree_util.tree_structure(tree)}.") from None
    return [d for group in jax.tree_util.tree_leaves(spread_tree, is_leaf=lambda x: isinstance(x, list))
            for d in group]


def vmap(func: Callable, in_dims: Any = 0, out_dims: Any = 0, randomness: str = "error", *,
         chunk_size: Optional[int] = None) -> Callable:
    """``torch.func.vmap`` (also ``torch.vmap``): map ``func`` over a batch dimension.

    Args:
      in_dims: an int (every positional argument), or a (nested) tuple with
        an int or None per argument (None: not mapped), as in torch.
      out_dims: where the batch dimension goes in each output (int, None for
        an unbatched output, or a tuple matching the outputs).
      randomness: torch's flag, applied to JAX's typed PRNG keys
        (``jax.random.key``) passed with ``in_dim=None``: ``"error"`` raises
        (torch raises when a random op runs under vmap), ``"different"`` splits
        the key so every batch element gets its own, ``"same"`` passes the one
        key to all. A batch of keys (mapped) is fine in every mode. Legacy
        ``uint32[2]`` keys cannot be recognised: map or split them yourself.
      chunk_size: run ``chunk_size`` batch elements at a time (sequentially,
        each chunk vectorised) to bound memory; None: all at once. The
        result is the same.

    Keyword arguments of the mapped function are passed through unbatched
    (torch's rule; ``jax.vmap`` would map them).

    Shapes: an argument of shape ``(..., B at in_dim, ...)`` is seen by
    ``func`` without that dimension; outputs get ``B`` back at ``out_dims``.
    """
    _check_randomness(randomness)
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int)
                                   or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size!r})")
    api = f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>)"

    @functools.wraps(func)
    def run(*args, **kwargs):
        if not isinstance(in_dims, (int, tuple)) or isinstance(in_dims, bool):
            raise ValueError(f"{api}: expected `in_dims` to be int or a (potentially nested) "
                             f"tuple matching the structure of inputs, got: {type(in_dims)}.")
        if not args:
            raise ValueError(f"{api}: got no inputs. Maybe you forgot to add inputs, or you are "
                             f"trying to vmap over a function with no inputs.")
        leaves, spec = jax.tree_util.tree_flatten(args)
        dims = _prefix_flatten(in_dims, args, "in_dims", api)
        sizes = []
        for i, (leaf, dim) in enumerate(zip(leaves, dims)):
            if dim is None:
                continue
            if not is_array(leaf):
                raise ValueError(f"{api}: Got in_dim={dim} for an input but the input is of type "
                                 f"{type(leaf).__name__}. We cannot vmap over non-array "
                                 f"arguments, please use None as the respective in_dim")
            nd = np.ndim(leaf)
            if not -nd <= dim < nd:
                raise ValueError(f"{api}: Got in_dim={dim} for some input, but that input is an "
                                 f"array of dimensionality {nd} so expected in_dim to satisfy "
                                 f"-{nd} <= in_dim < {nd}.")
            dims[i] = dim % nd
            sizes.append(np.shape(leaf)[dims[i]])
        if not sizes:
            raise ValueError(f"{api}: Expected at least one array to vmap over")
        if any(s != sizes[0] for s in sizes):
            raise ValueError(f"{api}: Expected all arrays to have the same size in the mapped "
                             f"dimension, got sizes {sizes} for the mapped dimension")
        batch = sizes[0]
        leaves = list(leaves)
        for i, (leaf, dim) in enumerate(zip(leaves, dims)):
            if dim is None and _is_key(leaf) and np.ndim(leaf) == 0:
                if randomness == "error":
                    raise ValueError(
                        f"{api}: a PRNG key is passed with in_dim=None while randomness='error'. "
                        f"torch raises when random operations run under vmap in this mode. Pass "
                        f"randomness='different' (each batch element gets its own key, split "
                        f"from this one) or randomness='same' (all share this key).")
                if randomness == "different":
                    leaves[i], dims[i] = jax.random.split(leaf, batch), 0

        mapped = [i for i, d in enumerate(dims) if d is not None]
        fixed = {i: leaves[i] for i, d in enumerate(dims) if d is None}
        out_tree = {}

        def flat_fn(*xs):
            full = list(fixed.get(i) for i in range(len(leaves)))
            for i, x in zip(mapped, xs):
                full[i] = x
            out = func(*jax.tree_util.tree_unflatten(spec, full), **kwargs)
            flat, out_tree["tree"] = jax.tree_util.tree_flatten(out)
            for leaf in flat:
                if not is_array(leaf):
                    raise ValueError(f"vmap({_name(func)}, ...): `{_name(func)}` must only return "
                                     f"arrays, got type {type(leaf).__name__}.")
            return flat, out

        xs = [leaves[i] for i in mapped]
        axes = [dims[i] for i in mapped]
        whole = chunk_size is None or chunk_size >= batch
        if isinstance(out_dims, int) and not isinstance(out_dims, bool) and whole:
            return jax.vmap(lambda *a: flat_fn(*a)[1], in_axes=axes, out_axes=out_dims)(*xs)
        # Outputs' structure first (abstractly), to spread out_dims over it.
        per_example = [jax.ShapeDtypeStruct(np.delete(np.shape(x), a).tolist(), x.dtype)
                       for x, a in zip(xs, axes)]
        jax.eval_shape(lambda *a: flat_fn(*a)[0], *per_example)
        tree = out_tree["tree"]
        spec_out = out_dims
        if tree.num_leaves == 1 and isinstance(out_dims, tuple) and len(out_dims) == 1 \
                and jax.tree_util.treedef_is_leaf(tree):
            spec_out = out_dims[0]
        flat_out_dims = _prefix_flatten(spec_out, jax.tree_util.tree_unflatten(
            tree, [0] * tree.num_leaves), "out_dims", f"vmap({_name(func)}, ..., "
                                                      f"out_dims={out_dims})(<inputs>)")
        batched = jax.vmap(lambda *a: flat_fn(*a)[0], in_axes=axes, out_axes=flat_out_dims)
        if whole:
            flat = batched(*xs)
        else:
            # lax.map stacks every output: first check (abstractly) that the ones with
            # out_dims=None really are unbatched, as jax.vmap does on the whole path
            jax.eval_shape(batched, *xs)
            front = [jnp.moveaxis(x, a, 0) for x, a in zip(xs, axes)]
            stacked = lax.map(lambda t: flat_fn(*t)[0], tuple(front), batch_size=chunk_size)
            flat = [s[0] if d is None else jnp.moveaxis(s, 0, d % s.ndim)
                    for s, d in zip(stacked, flat_out_dims)]
        return jax.tree_util.tree_unflatten(tree, flat)
    return run


# --------------------------------------------------------------------- functional_call

def functional_call(module: Any, parameter_and_buffer_dicts: Any, args: Any = None,
                    kwargs: Optional[dict] = None, *, tie_weights: bool = True,
                    strict: bool = False) -> Any:
    """``torch.func.functional_call``: call ``module`` with some arrays replaced by name.

    ``module`` is a callable pytree (an equinox module, the modules of
    ``torch2jax_ops.nn`` / ``geometric.nn``); names are torch's dotted
    ``state_dict`` keys (see :func:`torch2jax_ops.nn.state_dict`).
    ``parameter_and_buffer_dicts`` is a dict or a sequence of dicts (keys may
    not repeat across them). ``args`` is a tuple, or a single argument.

    * ``strict=True``: every array of the module must be given.
    * ``tie_weights=True``: a leaf that is the same array object as a replaced
      one is replaced too (torch's tied weights); giving tied names different
      values raises.
    * Unlike torch, a name that matches no array raises ``KeyError`` even with
      ``strict=False`` (torch silently ignores it, so a typo runs the model
      with its old weights): documented deviation ``functional-call-unknown-key``.
    """
    dicts = ([parameter_and_buffer_dicts] if isinstance(parameter_and_buffer_dicts, dict)
             else list(parameter_and_buffer_dicts))
    params: dict = {}
    for d in dicts:
        if not isinstance(d, dict):
            raise TypeError(f"functional_call: expected a dict or a sequence of dicts of arrays, "
                            f"got {type(d).__name__}")
        repeated = sorted(set(params) & set(d))
        if repeated:
            raise ValueError(f"functional_call: {repeated} appeared in multiple dictionaries; "
                             f"behavior of functional call is ambiguous")
        params.update(d)
    flat, treedef = jax.tree_util.tree_flatten_with_path(module)
    names = [leaf_name(path) for path, _ in flat]
    arrays = {n for (n, (_, leaf)) in zip(names, flat) if is_array(leaf)}
    unknown = sorted(set(params) - arrays)
    if unknown:
        close = sorted(arrays)[:8]
        raise KeyError(f"functional_call: {unknown} name no array of {type(module).__name__} "
                       f"(its arrays: {close}{' ...' if len(arrays) > 8 else ''}). torch would "
                       f"ignore these keys silently and run with the old values.")
    if strict:
        missing = sorted(arrays - set(params))
        if missing:
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n\t"
                               f"Missing key(s): {', '.join(map(repr, missing))}.")
    new = []
    for name, (_, leaf) in zip(names, flat):
        value = params.get(name)
        if tie_weights and is_array(leaf):  # tied weights: the same array under several names
            tied = [n for n, (_, other) in zip(names, flat) if other is leaf and n in params]
            if len({id(params[n]) for n in tied}) > 1:
                raise ValueError(f"functional_call got multiple values for keys {tied}, which are "
                                 f"tied. Consider using tie_weights=False")
            value = params[tied[0]] if tied else None
        new.append(leaf if value is None else value)
    call_args = () if args is None else (args if isinstance(args, tuple) else (args,))
    return jax.tree_util.tree_unflatten(treedef, new)(*call_args, **(kwargs or {}))


# ------------------------------------------------------------- derivatives of any order

def _concrete_int(x: Any) -> Optional[int]:
    """``x`` as a Python int when its value is known now, None when traced."""
    if isinstance(x, jax.core.Tracer):
        return None
    try:
        return operator.index(x)
    except TypeError:
        arr = np.asarray(x)
        if arr.shape != () or not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"nth_grad: order must be an integer scalar, got {x!r}") from None
        return int(arr)


def nth_grad(func: Callable, order: Any, *args: Any, argnum: int = 0, max_order: int = 8):
    """The ``order``-th derivative of a scalar function of a scalar, at ``args``.

    ``func(*args)`` returns a scalar; the derivative is taken w.r.t. the
    scalar ``args[argnum]`` (other arguments are held fixed). ``order`` may be
    traced: the derivatives 0..``max_order`` are built once (nested
    ``jax.grad``) and one is chosen with ``lax.switch``, so

    >>> vmap(lambda k, x: nth_grad(jnp.sin, k, x))(orders, xs)

    evaluates a different order per element. ``max_order`` is static (the
    table's size; compile time grows with it).

    A concrete ``order`` outside ``[0, max_order]`` raises ``ValueError``.
    A traced one cannot raise: the result is NaN, and :func:`torch2jax_ops.checked`
    turns it into an error naming ``order``.
    """
    if isinstance(max_order, bool) or not isinstance(max_order, int) or max_order < 0:
        raise ValueError(f"nth_grad: max_order must be a Python int >= 0 (static), got "
                         f"{max_order!r}")
    argnum = _normalize_argnums(argnum, len(args), "nth_grad")
    x = args[argnum]
    if np.ndim(x) != 0 or not jnp.issubdtype(jnp.result_type(x), jnp.inexact):
        raise TypeError(f"nth_grad: args[{argnum}] must be a floating-point scalar (shape ()), "
                        f"got {jnp.result_type(x)} of shape {tuple(np.shape(x))}; for arrays, "
                        f"vmap nth_grad over them")
    x = jnp.asarray(x)

    def at(x_):
        call = list(args)
        call[argnum] = x_
        return _scalar_output(func(*call), "nth_grad")

    known = _concrete_int(order)
    if known is not None and not 0 <= known <= max_order:
        raise ValueError(f"nth_grad: order={known} is outside [0, max_order={max_order}]; "
                         f"raise max_order (static) to take higher derivatives")
    table = [at]
    for _ in range(max_order if known is None else known):
        table.append(jax.grad(table[-1]))
    if known is not None:
        return table[known](x)
    order = jnp.asarray(order)
    if not jnp.issubdtype(order.dtype, jnp.integer):
        raise TypeError(f"nth_grad: order must be an integer, got {order.dtype}")
    valid = (order >= 0) & (order <= max_order)
    checkify.debug_check(valid, f"nth_grad: order is outside [0, max_order={max_order}]")
    value = lax.switch(jnp.clip(order, 0, max_order), table, x)
    return jnp.where(valid, value, jnp.nan)


def jacobian_trace(func: Callable, x: Any, *, key: Any, num_samples: int) -> Any:
    """Hutchinson's estimate of ``trace(d func / d x)`` (e.g. a divergence), Rademacher probes.

    ``func`` maps ``x`` to an array of ``x``'s shape. The estimate is
    ``mean_s <v_s, J v_s>`` over ``num_samples`` (static) probes
    ``v = jax.random.rademacher(key, (num_samples, *x.shape), x.dtype)``: the
    same probes a torch port can rebuild to compare. Unbiased; variance
    ``2 * sum_{i != j} J_ij^2 / num_samples`` (for symmetric ``J``). Uses one
    linearisation and ``num_samples`` vjps (reverse mode), so ``func`` may
    contain custom-VJP ops. Differentiable w.r.t. anything ``func`` closes over.
    Half-precision inputs accumulate in float32.
    """
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1:
        raise ValueError(f"jacobian_trace: num_samples must be a Python int >= 1 (static), got "
                         f"{num_samples!r}")
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"jacobian_trace: x must be a floating-point array, got {x.dtype}")
    out, pullback = jax.vjp(func, x)
    if not is_array(out) or out.shape != x.shape:
        raise ValueError(f"jacobian_trace: func(x) must have x's shape {tuple(x.shape)} (a square "
                         f"Jacobian), got {getattr(out, 'shape', type(out).__name__)}")
    probes = jax.random.rademacher(key, (num_samples,) + x.shape, dtype=x.dtype)
    (vjs,) = jax.vmap(pullback)(jnp.asarray(probes, out.dtype))
    acc = dtypes.accumulation_dtype(x.dtype)
    products = jnp.sum((vjs.astype(acc) * probes.astype(acc)).reshape(num_samples, -1), axis=1)
    return jnp.mean(products).astype(x.dtype)
