"""The argument and output trees of a torch function and its JAX port, leaf by leaf.

Torch arguments become the port's (:func:`_convert_arg`: tensors through
:mod:`torch2jax_ops.dlpack`, PyG data as a ``PaddedGraph``) or, for the float64
reference, torch's own in float64 (:func:`_to_float64`); input leaves are found
and replaced by path (the differentiated inputs, sparse ones by their stored
values); the port runs jitted with its index arrays as constants
(:func:`jit_with_constant_indices`); and both sides' outputs flatten to leaves
in the same order (Python numbers among them compared as arrays).
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from .. import dlpack
from ._arrays import ParityError, _is_sparse_tensor, _is_tensor
from ._devices import device_of

__all__ = ["jit_with_constant_indices"]


# -------------------------------------------------------------------------- arguments

def _convert_arg(x: Any) -> Any:
    """torch tensor -> JAX array (int64 downcast checked when 64-bit mode is off); a PyG
    ``Data`` / ``Batch`` -> an unpadded :class:`~torch2jax_ops.geometric.PaddedGraph`
    (``from_pyg``: exact counts, so its ``batch`` carries PyG's graph count)."""
    if _is_tensor(x) or _is_sparse_tensor(x):
        return dlpack.to_jax(x, allow_downcast=True)
    if _is_pyg_data(x):
        from ..geometric.data import from_pyg

        return from_pyg(x, copy=True, allow_downcast=True)
    if isinstance(x, (tuple, list)):
        return type(x)(_convert_arg(v) for v in x)
    if isinstance(x, dict):
        return {k: _convert_arg(v) for k, v in x.items()}
    return x


def _to_float64(tree: Any) -> Any:
    """Every floating tensor of an argument tree as float64 (detached); the rest as it is."""
    if _is_sparse_tensor(tree):  # its values cast up (none stay none)
        value = tree.storage.value()
        return tree if value is None or not value.is_floating_point() else \
            tree.set_value(value.detach().double(), layout="coo")
    if _is_tensor(tree):
        return tree.detach().double() if tree.is_floating_point() else tree
    if isinstance(tree, dict):
        return {k: _to_float64(v) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return type(tree)(_to_float64(v) for v in tree)
    return tree


def _is_pyg_data(x: Any) -> bool:
    """A PyG ``Data`` / ``Batch`` / ``HeteroData`` (without importing torch_geometric)."""
    import sys

    pyg = sys.modules.get("torch_geometric.data")
    return pyg is not None and isinstance(x, (pyg.Data, pyg.HeteroData))


def _is_index(x: Any) -> bool:
    """An integer array (edge_index, batch); bool masks stay traced (masked rows have a
    static form of their own)."""
    return isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jnp.integer)


def _unhashable(x: Any) -> bool:
    """A plain leaf jit cannot take as static (a ``slice`` before Python 3.12, a named tuple
    holding arrays): it is closed over as a constant, like the index arrays."""
    if isinstance(x, (jax.Array, np.ndarray)):
        return False
    try:
        hash(x)
    except TypeError:
        return True
    return False


class _NotFusable(Exception):
    """The JAX outputs do not line up with torch's: the unfused path reports how. (Raised
    in ``_compare``'s fused program; :func:`jit_with_constant_indices` lets it through.)"""


def jit_with_constant_indices(fn: Callable) -> Callable:
    """``equinox.filter_jit(fn)``, except that integer arrays among the arguments are
    compile-time constants, not traced.

    What the parity tools run: torch reads sizes off its index tensors (``batch.max() + 1``
    graphs, ``edge_index.max() + 1`` nodes), and a port compared with it must read the same
    sizes; with traced indices those reads would need ``size=`` arguments the torch model
    does not pass. Floating inputs and the parameters stay traced (they are differentiated).
    One compilation per distinct set of index arrays (by identity). A port that cannot
    run so (a utility whose exact form needs concrete values too) runs with everything
    traced, as under the user's own ``jax.jit``; if that fails too, the first error (the
    one with torch's sizes) is raised.
    """
    import equinox as eqx

    cache: dict = {}
    traced = eqx.filter_jit(fn)

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return constant(*args, **kwargs)
        except _NotFusable:
            raise
        except Exception as first:  # noqa: BLE001 - the traced form may still run
            try:
                return traced(*args, **kwargs)
            except _NotFusable:
                raise
            except Exception:  # noqa: BLE001 - torch's sizes: the error that explains
                raise first from None

    def constant(*args: Any, **kwargs: Any) -> Any:
        flat, treedef = jax.tree_util.tree_flatten((args, kwargs))
        fixed = tuple(i for i, leaf in enumerate(flat) if _is_index(leaf) or _unhashable(leaf))
        key = (treedef, fixed, tuple(id(flat[i]) for i in fixed))
        if key not in cache:
            constants = {i: flat[i] for i in fixed}

            def inner(dynamic: list) -> Any:
                a, kw = jax.tree_util.tree_unflatten(
                    treedef, [constants.get(i, d) for i, d in enumerate(dynamic)])
                return fn(*a, **kw)
            cache[key] = (eqx.filter_jit(inner), constants)  # constants: ids stay unique
        return cache[key][0]([None if i in fixed else leaf for i, leaf in enumerate(flat)])
    return call


def _tensor_paths(tree: Any, prefix: str = "", is_leaf: Callable = _is_tensor) -> list:
    """(path, leaf) for every tensor leaf (or ``is_leaf`` leaf) of an argument tree."""
    if is_leaf(tree):
        return [(prefix, tree)]
    if isinstance(tree, dict):
        return [p for k in tree for p in _tensor_paths(tree[k], f"{prefix}[{k!r}]", is_leaf)]
    if isinstance(tree, (tuple, list)):
        return [p for i, v in enumerate(tree)
                for p in _tensor_paths(v, f"{prefix}[{i}]", is_leaf)]
    return []


def _is_jax_input(x: Any) -> bool:
    """A converted input leaf: an array, or a sparse ``BCOO`` / ``BCSR`` (one leaf)."""
    from jax.experimental import sparse as jsparse

    return isinstance(x, (jax.Array, jsparse.JAXSparse))


def _sparse_data(x: Any) -> Any:
    """What is differentiated for a converted input: the array, or a sparse input's values."""
    from jax.experimental import sparse as jsparse

    return x.data if isinstance(x, jsparse.JAXSparse) else x


def _with_data(x: Any) -> Callable[[Any], Any]:
    """``values -> x`` with those values: the array itself, or the sparse input rebuilt."""
    from jax.experimental import sparse as jsparse

    if not isinstance(x, jsparse.JAXSparse):
        return lambda v: v
    leaves, treedef = jax.tree_util.tree_flatten(x)  # BCOO: (data, indices); BCSR: + indptr
    return lambda v: jax.tree_util.tree_unflatten(treedef, [v, *leaves[1:]])


def _entry_values(leaf: Any, grad: Any) -> Any:
    """torch's gradient of a sparse input, read at the input's stored entries ``[nnz, ...]``
    (its storage order, duplicates each read), the layout of JAX's gradient of its values;
    a strided input's gradient as it is."""
    import torch

    if leaf.layout == torch.strided:
        return grad
    dense = grad.to_dense()
    if leaf.layout == torch.sparse_coo:
        return dense[tuple(leaf._indices())]
    if leaf.layout == torch.sparse_csr:
        pointers, minor = leaf.crow_indices(), leaf.col_indices()
    else:  # CSC: pointers over columns
        pointers, minor = leaf.ccol_indices(), leaf.row_indices()
    # on the input's device; output_size: no device-to-host read of the count
    major = torch.repeat_interleave(torch.arange(len(pointers) - 1, device=device_of(pointers)),
                                    pointers[1:] - pointers[:-1], output_size=len(minor))
    return dense[major, minor] if leaf.layout == torch.sparse_csr else dense[minor, major]


def _replace(tree: Any, prefix: str, values: dict) -> Any:
    if prefix in values:
        return values[prefix]
    if isinstance(tree, dict):
        return {k: _replace(v, f"{prefix}[{k!r}]", values) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        items = [_replace(v, f"{prefix}[{i}]", values) for i, v in enumerate(tree)]
        return type(tree)(*items) if hasattr(tree, "_fields") else type(tree)(items)
    return tree


# ---------------------------------------------------------------------------- outputs

def _flatten_torch(tree: Any, prefix: str = "") -> list:
    """(path, leaf) pairs of a torch output tree (tuples, lists, dicts, named tuples)."""
    if isinstance(tree, dict):
        return [p for k in _dict_keys(tree) for p in _flatten_torch(tree[k], f"{prefix}[{k!r}]")]
    if isinstance(tree, (tuple, list)):
        return [p for i, v in enumerate(tree) for p in _flatten_torch(v, f"{prefix}[{i}]")]
    if tree is None:  # no leaf, as in JAX (PyG's hetero layers: None for a type no edge reaches)
        return []
    return [(prefix, tree)]


def _dict_keys(tree: dict) -> list:
    """Keys in JAX's pytree order: sorted for a plain dict, insertion order for OrderedDict."""
    if type(tree) is dict:
        try:
            return sorted(tree)
        except TypeError:
            pass
    return list(tree)


def _flatten_jax(tree: Any) -> list:
    return jax.tree_util.tree_leaves(tree)


def _from_number(t: Any) -> Any:
    """A tensor made from a Python number in torch's output tree (marked: see _numbers_as)."""
    t.t2j_from_number = True
    return t


def _numbers_as(torch_flat: list, jax_flat: list) -> list:
    """A Python number of torch's output (a pooling ratio: float64 / int64 by NumPy's rule)
    that the port computes as a 0-d floating array (a traced ratio, float32 without JAX's
    64-bit mode) is compared in the port's dtype: the number has no dtype of its own."""
    out = []
    for (p, t), a in zip(torch_flat, jax_flat):
        if getattr(t, "t2j_from_number", False) and np.ndim(a) == 0 \
                and np.issubdtype(np.asarray(a).dtype, np.floating) \
                and np.asarray(a).dtype != np.float64:
            t = dlpack.to_torch(jnp.asarray(np.asarray(t.numpy(), np.asarray(a).dtype)))
        out.append((p, t))
    return out


def _is_number(x: Any) -> bool:
    """A Python number (bool, int, float) among a model's outputs."""
    return isinstance(x, (bool, int, float))


def _jax_leaves(label: str, jax_out: Any) -> list:
    """The output's leaves; a leaf that is not an array is a :class:`ParityError`."""
    jax_leaves = [(path, np.asarray(leaf) if _is_number(leaf) else leaf)
                  for path, leaf in jax.tree_util.tree_flatten_with_path(jax_out)[0]]
    for path, leaf in jax_leaves:
        if not isinstance(leaf, (jax.Array, np.ndarray, np.generic)):
            raise ParityError(f"{label}: jax output{jax.tree_util.keystr(path)} is a "
                              f"{type(leaf).__name__}, not an array; return arrays "
                              f"(or trees of them)")
    return [leaf for _, leaf in jax_leaves]
