"""PyG's graph Laplacian: ``get_laplacian`` and its static-shape form ``get_laplacian_static``.

``L = D - A`` (``normalization=None``), ``I - D^-1/2 A D^-1/2`` (``"sym"``) or
``I - D^-1 A`` (``"rw"``) as an edge list: the off-diagonal entries ``-a_ij``
on the graph's edges (self-loops removed first), then one diagonal entry per
node. PyG's quirks, kept:

* the degree is the **out**-degree ``deg_i = sum_{(i, j)} w_ij`` at the source
  ``edge_index[0]`` (``gcn_norm`` uses the in-degree at the target), used for
  both ends in ``"sym"``;
* degrees of 0 give 0 instead of ``inf`` (``"sym"``: ``deg^-1/2``, ``"rw"``:
  ``1 / deg``); negative degrees give NaN in ``"sym"``, as ``pow(-0.5)`` does;
* ``num_nodes=None`` is read off ``edge_index`` *after* removing self-loops, so
  a node that only has a self-loop and the largest id is not counted;
* with ``edge_weight=None`` the weights are ones of ``dtype`` (float32 if None).
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ..._checking import as_array
from ..._sharding import OutSharding, sharding_aware
from .._core._edges import aggregate, edge_array, gather, node_count
from ._loops import _concrete, _loops, route_self_loops
from ._norm import _inverse_sqrt

__all__ = ["get_laplacian", "get_laplacian_static"]

_NORMALIZATIONS = (None, "sym", "rw")


def check_normalization(normalization: Any, *, op: str) -> None:
    if normalization not in _NORMALIZATIONS:
        raise ValueError(f"{op}: `normalization` must be None, 'sym' or 'rw' (PyG's "
                         f"'Invalid normalization'), got {normalization!r}")


def _unit_weights(edge_index: jax.Array, dtype: Any) -> jax.Array:
    """PyG's weights when ``edge_weight`` is None: ones of ``dtype`` (float32 if None)."""
    return jnp.ones((edge_index.shape[1],), jnp.float32 if dtype is None else dtype)


def _weights(edge_weight: Any, edge_index: jax.Array, dtype: Any, *, op: str) -> jax.Array:
    if edge_weight is None:
        return _unit_weights(edge_index, dtype)
    edge_weight = as_array(edge_weight, "edge_weight", op=op)
    if edge_weight.shape != (edge_index.shape[1],):
        raise ValueError(f"{op}: `edge_weight` must have shape [num_edges] = "
                         f"({edge_index.shape[1]},), got {tuple(edge_weight.shape)}")
    return edge_weight


def _laplacian(edge_index: jax.Array, edge_weight: jax.Array, normalization: Optional[str],
               n: int) -> tuple[jax.Array, jax.Array]:
    """The core on a checked ``edge_index`` whose self-loops sit in the dropped slot."""
    row, col = edge_index[0], edge_index[1]
    deg = aggregate(edge_weight, row, n, "sum")  # out-degree; dropped edges count nowhere
    kept = row < n
    if normalization is None:
        off = -edge_weight
        diag = deg
    else:
        if normalization == "sym":
            dinv = _inverse_sqrt(deg)
            off = -(gather(dinv, row) * edge_weight * gather(dinv, col))
        else:  # 1 / deg with inf -> 0, no NaN in the gradient at 0
            zero = deg == 0
            dinv = jnp.where(zero, jnp.zeros((), deg.dtype), 1.0 / jnp.where(zero, 1, deg))
            off = -(gather(dinv, row) * edge_weight)
        diag = jnp.ones((n,), off.dtype)
    off = jnp.where(kept, off, jnp.zeros((), off.dtype))  # dropped slots: weight 0
    index = jnp.concatenate([edge_index, _loops(n, edge_index.dtype)], axis=1)
    return index, jnp.concatenate([off, diag.astype(off.dtype)])


@sharding_aware
def get_laplacian_static(edge_index: ArrayLike, edge_weight: Optional[ArrayLike] = None,
                         normalization: Optional[str] = None,
                         dtype: Any = None, *, num_nodes: int,
                         out_sharding: OutSharding = None) -> tuple[jax.Array, jax.Array]:
    """:func:`get_laplacian` with a static shape, for ``jax.jit``: ``E + N`` entries.

    Args:
      edge_index: ``[2, E]`` integer array (ids in ``[0, num_nodes]``).
      edge_weight: ``None`` or ``[E]`` weights.
      normalization: ``None``, ``"sym"`` or ``"rw"``.
      dtype: the weights' dtype when ``edge_weight`` is None (float32 if None).
      num_nodes: ``N`` (a Python int).

    Returns:
      ``(edge_index [2, E + N], edge_weight [E + N])``: slot ``e < E`` holds
      edge ``e`` (a self-loop is routed to the dropped slot ``(N, N)`` with
      weight 0), slot ``E + i`` the diagonal entry of node ``i``. Every
      :mod:`torch2jax_ops.geometric` op reads it as :func:`get_laplacian`'s
      output.
    """
    op = "get_laplacian_static"
    check_normalization(normalization, op=op)
    edge_index = edge_array(edge_index, op=op)
    n = node_count(num_nodes, edge_index, op=op)
    edge_array(edge_index, n, op=op)
    edge_weight = _weights(edge_weight, edge_index, dtype, op=op)
    return laplacian_static(edge_index, edge_weight, normalization, n)


def laplacian_static(edge_index: jax.Array, edge_weight: Optional[jax.Array],
                     normalization: Optional[str], n: int,
                     dtype: Any = None) -> tuple[jax.Array, jax.Array]:
    """:func:`get_laplacian_static` on a checked graph (a layer's): ``edge_index [2, E]``
    ids in ``[0, n]``, ``edge_weight`` None (ones of ``dtype``) or ``[E]``,
    ``normalization`` one of PyG's three. Validates nothing again."""
    if edge_weight is None:
        edge_weight = _unit_weights(edge_index, dtype)
    return _laplacian(route_self_loops(edge_index, n), edge_weight, normalization, n)


@sharding_aware
def get_laplacian(edge_index: ArrayLike, edge_weight: Optional[ArrayLike] = None,
                  normalization: Optional[str] = None,
                  dtype: Any = None, num_nodes: Optional[int] = None,
                  *, out_sharding: OutSharding = None
                  ) -> tuple[jax.Array, jax.Array]:
    """PyG's ``get_laplacian``: the Laplacian of ``edge_index`` as ``(edge_index, edge_weight)``.

    Args:
      edge_index: ``[2, E]`` integer array.
      edge_weight: ``None`` or ``[E]`` weights (``None``: ones of ``dtype``).
      normalization: ``None`` (``L = D - A``), ``"sym"`` (``I - D^-1/2 A D^-1/2``)
        or ``"rw"`` (``I - D^-1 A``).
      dtype: the weights' dtype when ``edge_weight`` is None (float32 if None).
      num_nodes: ``N``; else the largest id among the non-loop edges + 1 (PyG's
        order: loops are removed first).

    Returns:
      ``(edge_index [2, E' + N], edge_weight [E' + N])``: the ``E'`` non-loop
      edges in order with ``-a_ij``, then ``(i, i)`` for every node with the
      diagonal (degree, or 1 when normalised). The edge count depends on the
      data: needs a concrete ``edge_index``; under jit use
      :func:`get_laplacian_static`.
    """
    op = "get_laplacian"
    check_normalization(normalization, op=op)
    edge_index = edge_array(edge_index, op=op)
    _concrete(edge_index, "get_laplacian_static", op=op)
    edge_weight = _weights(edge_weight, edge_index, dtype, op=op)
    keep = np.flatnonzero(np.asarray(edge_index[0] != edge_index[1]))
    edge_index, edge_weight = edge_index[:, keep], edge_weight[keep]
    n = node_count(num_nodes, edge_index, op=op)
    edge_array(edge_index, n, op=op)
    return _laplacian(edge_index, edge_weight, normalization, n)
