"""``torch.func.vmap`` on JAX: torch's in_dims/out_dims rules, ``chunk_size`` and ``randomness``."""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._checking import is_array
from ._common import _check_randomness, _name


def _is_key(leaf: Any) -> bool:
    return isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def _prefix_flatten(prefix: Any, tree: Any, what: str, *, op: str) -> list:
    """Broadcast a torch-style dims prefix (int / None / nested tuples) over ``tree``'s leaves."""
    def spread(dim, sub):
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int)):
            raise ValueError(f"{op}: Got {what}={dim!r} for an input but {what} must be either "
                             f"an integer dimension or None.")
        return [dim] * len(jax.tree_util.tree_leaves(sub))
    try:
        spread_tree = jax.tree_util.tree_map(spread, prefix, tree, is_leaf=lambda x: x is None)
    except ValueError as exc:
        if "must be either" in str(exc):
            raise
        raise ValueError(f"{op}: {what} is not compatible with the structure of the "
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
    op = f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>)"

    @functools.wraps(func)
    def run(*args, **kwargs):
        if not isinstance(in_dims, (int, tuple)) or isinstance(in_dims, bool):
            raise ValueError(f"{op}: expected `in_dims` to be int or a (potentially nested) "
                             f"tuple matching the structure of inputs, got: {type(in_dims)}.")
        if not args:
            raise ValueError(f"{op}: got no inputs. Maybe you forgot to add inputs, or you are "
                             f"trying to vmap over a function with no inputs.")
        leaves, spec = jax.tree_util.tree_flatten(args)
        dims = _prefix_flatten(in_dims, args, "in_dims", op=op)
        sizes = []
        for i, (leaf, dim) in enumerate(zip(leaves, dims)):
            if dim is None:
                continue
            if not is_array(leaf):
                raise ValueError(f"{op}: Got in_dim={dim} for an input but the input is of type "
                                 f"{type(leaf).__name__}. We cannot vmap over non-array "
                                 f"arguments, please use None as the respective in_dim")
            nd = np.ndim(leaf)
            if not -nd <= dim < nd:
                raise ValueError(f"{op}: Got in_dim={dim} for some input, but that input is an "
                                 f"array of dimensionality {nd} so expected in_dim to satisfy "
                                 f"-{nd} <= in_dim < {nd}.")
            dims[i] = dim % nd
            sizes.append(np.shape(leaf)[dims[i]])
        if not sizes:
            raise ValueError(f"{op}: Expected at least one array to vmap over")
        if any(s != sizes[0] for s in sizes):
            raise ValueError(f"{op}: Expected all arrays to have the same size in the mapped "
                             f"dimension, got sizes {sizes} for the mapped dimension")
        batch = sizes[0]
        leaves = list(leaves)
        for i, (leaf, dim) in enumerate(zip(leaves, dims)):
            if dim is None and _is_key(leaf) and np.ndim(leaf) == 0:
                if randomness == "error":
                    raise ValueError(
                        f"{op}: a PRNG key is passed with in_dim=None while randomness='error'. "
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
            tree, [0] * tree.num_leaves), "out_dims", op=f"vmap({_name(func)}, ..., "
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
