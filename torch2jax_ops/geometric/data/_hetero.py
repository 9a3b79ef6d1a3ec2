"""A PyG ``HeteroData`` on the JAX side: :class:`HeteroGraph`, padded per type to a :class:`HeteroLadder`.

Shapes are per type: ``x_dict[t] [N_t, F_t]``, ``edge_index_dict[r] [2, E_r]``
(int32; row 0 ids of the source type, row 1 of the destination type),
``edge_attr_dict[r] [E_r, D_r]``, masks ``node_mask_dict[t] [N_t]`` and
``edge_mask_dict[r] [E_r]``. Padding follows the homogeneous convention
(:mod:`torch2jax_ops.geometric.data._padding`): real rows first; every node type
gets at least one padding node, and the padding edges of ``(src, rel, dst)``
join the first padding node of ``src`` to the first padding node of ``dst``.
Nothing real touches the padding, so every layer's output on the real rows is
what it is without padding, and the padded batch is still a valid PyG input.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional

import equinox as eqx
import jax
import numpy as np

from ... import _dtypes
from ...dlpack import Placement, default_device
from ._rules import BOOKKEEPING, check_placement
from ._tensor import convert_tensor

__all__ = ["HeteroGraph", "HeteroLadder", "hetero_from_pyg", "pad_hetero", "is_hetero",
           "hetero_sizes"]

NodeType = str
EdgeType = tuple


def is_hetero(obj: Any) -> bool:
    """A ``torch_geometric.data.HeteroData`` (never imports torch_geometric itself)."""
    import sys

    pyg = sys.modules.get("torch_geometric.data")
    return pyg is not None and isinstance(obj, getattr(pyg, "HeteroData", ()))


class HeteroGraph(eqx.Module):
    """A heterogeneous graph (or mini-batch) of JAX arrays: a pytree, pass it to ``jax.jit``.

    Call a ported hetero model as ``port(g.x_dict, g.edge_index_dict)``, as in
    PyG. ``node_types`` / ``edge_types`` keep PyG's order (:meth:`metadata`);
    the dicts are keyed by node type (``"paper"``) and edge-type tuple
    (``("author", "writes", "paper")``).

    Fields: ``x_dict``, ``edge_index_dict``, ``edge_attr_dict`` (edge types
    that have ``edge_attr``), ``y_dict`` (node types with labels, padded like
    ``x``), ``node_mask_dict`` / ``edge_mask_dict`` (True on real rows),
    ``seed_mask_dict`` (a ``NeighborLoader`` batch: its input type's first
    ``batch_size`` nodes), ``node_extras`` / ``edge_extras``: every other tensor
    attribute, by type then name (``node_extras["paper"]["train_mask"]``,
    ``edge_extras[edge_type]["e_id"]``), padded to its type's rows.
    """
    x_dict: dict
    edge_index_dict: dict
    edge_attr_dict: dict
    y_dict: dict
    node_mask_dict: dict
    edge_mask_dict: dict
    seed_mask_dict: dict
    node_extras: dict
    edge_extras: dict
    node_types: tuple = eqx.field(static=True)
    edge_types: tuple = eqx.field(static=True)

    def metadata(self) -> tuple[list, list]:
        """``(node_types, edge_types)`` as ``HeteroData.metadata()`` gives them."""
        return list(self.node_types), list(self.edge_types)

    def num_nodes_dict(self) -> dict:
        """Padded node count per type (static)."""
        return {t: int(m.shape[0]) for t, m in self.node_mask_dict.items()}

    def num_edges_dict(self) -> dict:
        """Padded edge count per type (static)."""
        return {r: int(m.shape[0]) for r, m in self.edge_mask_dict.items()}


def hetero_sizes(data: Any) -> tuple[dict, dict]:
    """Real ``({node_type: nodes}, {edge_type: edges})`` of a ``HeteroData``."""
    nodes = {t: int(data[t].num_nodes or 0) for t in data.node_types}
    edges = {r: int(data[r].edge_index.shape[1]) if "edge_index" in data[r] else 0
             for r in data.edge_types}
    return nodes, edges


def _where(key: Any, name: str) -> str:
    return f"{key!r}.{name}" if isinstance(key, tuple) else f"'{key}'.{name}"


def hetero_from_pyg(data: Any, *, device: Placement = None, copy: Optional[bool] = None,
                    allow_downcast: bool = False, exclude: tuple = (),
                    op: str = "from_pyg") -> HeteroGraph:
    """A ``HeteroData`` as a :class:`HeteroGraph`, unpadded (masks all True), zero-copy
    where dtypes stay (what :func:`~torch2jax_ops.geometric.data.from_pyg` does for one)."""
    import torch

    check_placement(device, op=op)
    target = default_device() if device is None else device
    x64 = bool(_dtypes.x64_enabled())
    nodes, edges = hetero_sizes(data)
    out: dict = {k: {} for k in ("x", "ei", "ea", "y", "nm", "em", "seed", "nx", "ex")}

    def conv(value, where):
        return convert_tensor(value, where, device=target, copy=copy, allow_downcast=allow_downcast,
                        x64=x64, op=op)

    for t in data.node_types:
        store = data[t]
        extras = {}
        for key in store.keys():
            value = store[key]
            if key == "x":
                out["x"][t] = conv(value, _where(t, key))
            elif key == "y" and isinstance(value, torch.Tensor):
                out["y"][t] = conv(value, _where(t, key))
            elif key in BOOKKEEPING or key in exclude:
                continue
            elif isinstance(value, torch.Tensor):
                extras[key] = conv(value, _where(t, key))
        batch_size = store.get("batch_size") if hasattr(store, "get") else None
        if isinstance(batch_size, int):
            out["seed"][t] = jax.device_put(np.arange(nodes[t]) < batch_size, target)
        out["nm"][t] = jax.device_put(np.ones((nodes[t],), bool), target)
        if extras:
            out["nx"][t] = extras
    for r in data.edge_types:
        store = data[r]
        extras = {}
        for key in store.keys():
            value = store[key]
            if key == "edge_index":
                out["ei"][r] = conv(value, _where(r, key))
            elif key == "edge_attr":
                out["ea"][r] = conv(value, _where(r, key))
            elif isinstance(value, torch.Tensor) and key not in exclude:
                extras[key] = conv(value, _where(r, key))
        if r not in out["ei"]:
            out["ei"][r] = jax.device_put(np.zeros((2, 0), np.int32), target)
        out["em"][r] = jax.device_put(np.ones((edges[r],), bool), target)
        if extras:
            out["ex"][r] = extras
    return HeteroGraph(out["x"], out["ei"], out["ea"], out["y"], out["nm"], out["em"],
                       out["seed"], out["nx"], out["ex"], tuple(data.node_types),
                       tuple(tuple(r) for r in data.edge_types))


# --------------------------------------------------------------------------- ladder

def _up(v: float, multiple: int) -> int:
    return int(math.ceil(v / multiple) * multiple)


@dataclasses.dataclass(frozen=True)
class HeteroLadder:
    """Padded sizes per type, one ``({node_type: N_t}, {edge_type: E_r})`` pair per level.

    :meth:`pick` chooses the lowest level where every type fits, so an epoch of
    heterogeneous batches compiles at most ``len(levels)`` times. Node sizes
    leave room for each type's padding node.
    """
    levels: tuple

    def __post_init__(self):
        if not self.levels:
            raise ValueError("HeteroLadder: give at least one level ({node_type: nodes}, "
                             "{edge_type: edges})")

    @classmethod
    def from_sizes(cls, nodes: list, edges: list, *, quantiles: tuple = (0.5, 0.9, 1.0),
                   headroom: float = 1.0, merge_within: float = 1.2,
                   multiple: int = 8) -> HeteroLadder:
        """A short ladder fitted to per-batch sizes: one level per quantile of each type's
        counts (the top one the largest batch times ``headroom``), a level within
        ``merge_within`` of the next one in every type merged into it.

        Args:
          nodes: one ``{node_type: real nodes}`` per batch.
          edges: one ``{edge_type: real edges}`` per batch.
        """
        if not nodes or len(nodes) != len(edges):
            raise ValueError(f"HeteroLadder.from_sizes: `nodes` and `edges` need one dict per "
                             f"batch and at least one batch, got {len(nodes)} and {len(edges)}")
        node_types = list(dict.fromkeys(t for n in nodes for t in n))
        edge_types = list(dict.fromkeys(r for e in edges for r in e))
        qs = sorted({float(q) for q in quantiles} | {1.0})
        levels = []
        for q in qs:
            grow = headroom if q == 1.0 else 1.0

            def at(rows, key, q=q):
                return int(np.quantile([row.get(key, 0) for row in rows], q, method="higher"))
            levels.append(({t: _up(at(nodes, t) * grow + 1, multiple) for t in node_types},
                           {r: max(_up(at(edges, r) * grow, multiple), multiple)
                            for r in edge_types}))
        kept: list = []
        for level in reversed(levels):
            if kept and all(level[0][t] * merge_within >= kept[-1][0][t] for t in node_types) \
                    and all(level[1][r] * merge_within >= kept[-1][1][r] for r in edge_types):
                continue
            kept.append(level)
        kept.reverse()
        return cls(tuple(kept))

    def fits(self, nodes: dict, edges: dict, level: int = -1) -> bool:
        n, e = self.levels[level]
        return all(nodes[t] < n.get(t, 0) for t in nodes) and \
            all(edges[r] <= e.get(r, 0) for r in edges)

    def pick(self, nodes: dict, edges: dict) -> int:
        """The lowest level fitting every type (``ValueError`` when none does)."""
        for i in range(len(self.levels)):
            if self.fits(nodes, edges, i):
                return i
        raise ValueError(f"HeteroLadder: a batch with nodes {nodes} and edges {edges} fits no "
                         f"level (top: {self.levels[-1]})")

    def grown(self, nodes: dict, edges: dict, factor: float = 1.25,
              multiple: int = 8) -> HeteroLadder:
        """This ladder with one more level holding the batch (``factor`` headroom)."""
        n, e = self.levels[-1]
        top_n = {t: max(n.get(t, 0), _up(nodes.get(t, 0) * factor + 1, multiple))
                 for t in dict.fromkeys(list(n) + list(nodes))}
        top_e = {r: max(e.get(r, 0), _up(edges.get(r, 0) * factor, multiple))
                 for r in dict.fromkeys(list(e) + list(edges))}
        return HeteroLadder(self.levels + ((top_n, top_e),))


# -------------------------------------------------------------------------- padding

#: a NeighborLoader batch's per-seed attributes (one row per seed; the seeds are the input
#: type's first ``batch_size`` nodes): padded to the type's rows, real where ``seed_mask``
_SEED_LEVEL = ("input_id", "seed_time")

def _rows(a: np.ndarray, total: int, value: Any = 0) -> np.ndarray:
    pad = [(0, total - a.shape[0])] + [(0, 0)] * (a.ndim - 1)
    return np.pad(a, pad, constant_values=value)


def pad_hetero(graph: HeteroGraph, num_nodes: dict, num_edges: dict, *,
               device: Placement = None) -> HeteroGraph:
    """Pad every type of ``graph`` (real rows first) to ``num_nodes[t]`` / ``num_edges[r]``.

    Each ``num_nodes[t]`` must exceed the type's real count (room for its
    padding node); padding edges of ``(src, rel, dst)`` join the first padding
    node of ``src`` to that of ``dst``; features, labels and extras pad with
    zeros (``n_id`` with the padding node); per-seed attributes (``input_id``,
    ``seed_time``) pad to the type's rows (real where ``seed_mask_dict``).
    Runs on the host (NumPy), before jit.
    """
    op = "pad_hetero"
    target = default_device() if device is None else device
    real_n = {t: int(m.shape[0]) for t, m in graph.node_mask_dict.items()}
    real_e = {r: int(m.shape[0]) for r, m in graph.edge_mask_dict.items()}
    for t, n in real_n.items():
        if num_nodes.get(t, 0) <= n:
            raise ValueError(f"{op}: `num_nodes[{t!r}]`={num_nodes.get(t)} leaves no room for "
                             f"the padding node: the type has {n} nodes, so pass >= {n + 1}")
    for r, e in real_e.items():
        if num_edges.get(r, -1) < e:
            raise ValueError(f"{op}: `num_edges[{r!r}]`={num_edges.get(r)} is smaller than the "
                             f"{e} real edges of that type")

    def put(a):
        return jax.device_put(a, target)

    def host(a):
        return np.asarray(a)

    x = {t: put(_rows(host(v), num_nodes[t])) for t, v in graph.x_dict.items()}
    y = {t: put(_rows(host(v), num_nodes[t])) for t, v in graph.y_dict.items()}
    nm = {t: put(np.arange(num_nodes[t]) < real_n[t]) for t in real_n}
    seed = {t: put(_rows(host(v), num_nodes[t], False)) for t, v in graph.seed_mask_dict.items()}
    ei, ea, em = {}, {}, {}
    for r, index in graph.edge_index_dict.items():
        src, _, dst = r
        e, total = real_e[r], num_edges[r]
        pad_ids = np.array([[real_n[src]], [real_n[dst]]], np.int32)
        ei[r] = put(np.concatenate([host(index).astype(np.int32),
                                    np.broadcast_to(pad_ids, (2, total - e))], axis=1))
        em[r] = put(np.arange(total) < e)
        if r in graph.edge_attr_dict:
            ea[r] = put(_rows(host(graph.edge_attr_dict[r]), total))
    extras: dict = {}
    for key, attrs in list(graph.node_extras.items()) + list(graph.edge_extras.items()):
        rows = num_edges[key] if isinstance(key, tuple) else num_nodes[key]
        real = real_e[key] if isinstance(key, tuple) else real_n[key]
        padded = {}
        for name, value in attrs.items():
            value = host(value)
            if name in _SEED_LEVEL and not isinstance(key, tuple) and value.ndim and \
                    value.shape[0] <= real:  # one row per seed: seeds are the first nodes
                padded[name] = put(_rows(value, rows))
                continue
            if value.ndim == 0 or value.shape[0] != real:
                raise ValueError(f"{op}: {_where(key, name)} has shape {value.shape}: neither "
                                 f"one row per {'edge' if isinstance(key, tuple) else 'node'} "
                                 f"of its type ({real}); such attributes are not padded "
                                 f"(exclude them)")
            fill = real_n[key] if (not isinstance(key, tuple) and name == "n_id") else 0
            padded[name] = put(_rows(value, rows, fill))
        extras[key] = padded
    return HeteroGraph(x, ei, ea, y, nm, em, seed,
                       {k: v for k, v in extras.items() if not isinstance(k, tuple)},
                       {k: v for k, v in extras.items() if isinstance(k, tuple)},
                       graph.node_types, graph.edge_types)
