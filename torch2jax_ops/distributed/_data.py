"""Data parallelism over batches of padded graphs: stack, split the batch axis, replicate."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import jax
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from ..geometric.data._padding import PaddedGraph
from ._graph import place

__all__ = ["stack_graphs", "shard_batch", "replicate"]


def stack_graphs(graphs: Sequence[PaddedGraph]) -> PaddedGraph:
    """``B`` padded graphs of the same padded sizes as one :class:`PaddedGraph` with a leading axis.

    ``x [B, N, *F]``, ``edge_index [B, 2, E]``, ``batch [B, N]`` ... (host
    arrays). Pad each graph with ``pad_graph(..., num_nodes=N, num_edges=E,
    num_graphs=G)`` (the same sizes for all), then ``jax.vmap`` a per-graph
    model over the leading axis; :func:`shard_batch` splits it over devices.
    """
    op = "stack_graphs"
    graphs = list(graphs)
    if not graphs or not all(isinstance(g, PaddedGraph) for g in graphs):
        raise TypeError(f"{op}: expected a non-empty sequence of PaddedGraph (from "
                        f"torch2jax_ops.geometric.pad_graph)")
    first = jax.tree_util.tree_structure(graphs[0])
    for i, g in enumerate(graphs):
        if jax.tree_util.tree_structure(g) != first:  # type: ignore[operator]  # jaxlib has no PyTreeDef stub
            state = "None" if g.edge_attr is None else "set"
            raise ValueError(f"{op}: graph {i} has edge_attr={state} unlike graph 0; give every "
                             f"graph edge_attr, or none")
        for name in PaddedGraph._fields:
            a, b = getattr(g, name), getattr(graphs[0], name)
            if a is not None and np.shape(a) != np.shape(b):
                raise ValueError(
                    f"{op}: graph {i}'s `{name}` has shape {np.shape(a)}, graph 0's "
                    f"{np.shape(b)}; pad every graph to the same sizes (pad_graph(..., "
                    f"num_nodes=, num_edges=, num_graphs=) with the same values)")
    return jax.tree_util.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *graphs)


def _data_axis(mesh: Mesh, axis: Optional[str], op: str) -> str:
    if not isinstance(mesh, Mesh):
        raise TypeError(f"{op}: `mesh` must be a jax.sharding.Mesh, got {type(mesh).__name__}")
    axis = mesh.axis_names[0] if axis is None else axis
    if axis not in mesh.axis_names:
        raise ValueError(f"{op}: the mesh has no axis {axis!r} (its axes: {mesh.axis_names})")
    return axis


def shard_batch(tree: Any, *, mesh: Mesh, axis: Optional[str] = None) -> Any:
    """Every array of ``tree`` with its leading (batch) axis split over ``axis`` of ``mesh``.

    ``axis`` defaults to the mesh's first axis. The batch size must be a
    multiple of that axis' size (pad the batch with empty graphs otherwise).
    Host data, identical in every process of a multi-process run.
    """
    op = "shard_batch"
    axis = _data_axis(mesh, axis, op)
    size = mesh.shape[axis]

    def put(leaf: Any) -> Any:
        if leaf is None:
            return None
        array = np.asarray(leaf)
        if array.ndim == 0 or array.shape[0] % size:
            raise ValueError(f"{op}: a leaf of shape {array.shape} has no leading batch axis "
                             f"divisible by the {size} devices of axis {axis!r}; pad the batch "
                             f"to a multiple of {size}")
        return place(array, mesh, P(axis))

    return jax.tree_util.tree_map(put, tree)


def replicate(tree: Any, *, mesh: Mesh) -> Any:
    """Every array of ``tree`` (a model, its optimiser state) on every device of ``mesh``.

    A model from ``from_torch`` lives on one device; under ``jax.set_mesh`` it
    must be replicated before it meets sharded data (else: "incompatible
    devices"). Non-array leaves are kept.
    """
    if not isinstance(mesh, Mesh):
        raise TypeError(f"replicate: `mesh` must be a jax.sharding.Mesh, got "
                        f"{type(mesh).__name__}")
    return jax.tree_util.tree_map(
        lambda leaf: place(leaf, mesh, P()) if isinstance(leaf, (jax.Array, np.ndarray))
        else leaf, tree)
