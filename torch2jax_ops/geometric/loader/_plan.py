"""The ladder a :class:`JaxLoader` pads to when none is given, from the loader's batch sizes.

Cheapest source first:

1. A PyG ``DataLoader`` over a dataset (PyG's collater, the default batch
   sampler): the per-graph node and edge counts, read from an
   ``InMemoryDataset``'s slices (no graph is built) or else from one pass over
   the dataset's items (no collation). The batch sizes of a few simulated
   epochs (the sampler's order, or 8 random orders when shuffling) give the
   levels, and the top level is the largest batch possible (the
   ``batch_size`` largest graphs together), so no epoch ever outgrows it.
2. Any other re-iterable loader (NeighborLoader, LinkNeighborLoader,
   ClusterLoader, a list): one pass over it that reads sizes only (the
   batches are dropped; for samplers this costs one epoch of sampling, once
   per JaxLoader). Sampling loaders give different batches every epoch, so
   their top level gets 10% headroom (a list gets none).
3. A one-shot iterator (a generator): the first batch, with 25% headroom;
   the ladder then grows with a warning. Pass ``ladder=`` for these.

Levels sit at the median, the 90th percentile and the top of the sizes, and a
level within 20% of the next one is merged into it
(:meth:`BucketLadder.from_sizes`): a compilation costs far more than a few
percent of padding.
"""
from __future__ import annotations

import dataclasses
import math
import sys
from typing import Any, Optional

import numpy as np

from ..data._padding import BucketLadder
from ._host import Kinds, mask_name, sizes_of

__all__ = ["Plan", "plan_for", "round_up", "graph_loader_sizes", "collates_with_pyg"]


def round_up(value: float, multiple: int = 8) -> int:
    return max(int(math.ceil(value / multiple) * multiple), multiple)


@dataclasses.dataclass
class Plan:
    """The sizes a loader pads to: the ladder, and the slots of each "other" attribute."""
    ladder: BucketLadder
    other_sizes: dict
    source: str


def collates_with_pyg(loader: Any) -> bool:
    """Whether ``loader`` is a ``torch.utils.data.DataLoader`` whose ``collate_fn`` is PyG's
    ``Collater`` (a PyG ``DataLoader``, or torch's with that collater)."""
    tud = sys.modules.get("torch.utils.data")
    pyg_loader = sys.modules.get("torch_geometric.loader.dataloader")
    return (tud is not None and pyg_loader is not None and isinstance(loader, tud.DataLoader)
            and isinstance(loader.collate_fn, pyg_loader.Collater))


def graph_loader_sizes(loader: Any) -> Optional[tuple]:
    """``(nodes per graph, edges per graph, batch_size, shuffle, drop_last)`` of a PyG
    ``DataLoader`` over a dataset with the default sampler, else None."""
    if not collates_with_pyg(loader):
        return None
    tud = sys.modules["torch.utils.data"]
    batches = loader.batch_sampler
    if type(batches) is not tud.BatchSampler or batches.batch_size is None:
        return None
    sampler = batches.sampler
    shuffle = type(sampler) is tud.RandomSampler
    if not (shuffle or type(sampler) is tud.SequentialSampler):
        return None
    if shuffle and (sampler.replacement or sampler._num_samples is not None):
        return None
    dataset = loader.dataset
    try:
        nodes, edges = _dataset_sizes(dataset)
    except Exception:  # an unusual dataset: fall back to a pass over the loader
        return None
    return nodes, edges, int(batches.batch_size), shuffle, bool(batches.drop_last)


def _dataset_sizes(dataset: Any) -> tuple:
    data_mod = sys.modules.get("torch_geometric.data")
    in_memory = data_mod is not None and isinstance(dataset, data_mod.InMemoryDataset)
    if in_memory and dataset.transform is None and dataset.slices is not None \
            and "x" in dataset.slices and "edge_index" in dataset.slices:
        index = np.asarray(dataset.indices())
        nodes = np.diff(dataset.slices["x"].numpy())[index]
        edges = np.diff(dataset.slices["edge_index"].numpy())[index]
        return nodes.astype(np.int64), edges.astype(np.int64)
    sizes = np.array([(int(d.num_nodes or 0), int(d.num_edges)) for d in dataset], np.int64)
    sizes = sizes.reshape(-1, 2)
    return sizes[:, 0], sizes[:, 1]


def _simulated(nodes: np.ndarray, edges: np.ndarray, batch_size: int, shuffle: bool,
               drop_last: bool, epochs: int = 8) -> tuple:
    """Batch sizes of simulated epochs, plus the largest batch possible."""
    m = len(nodes)
    rng = np.random.default_rng(0)
    orders = [rng.permutation(m) for _ in range(epochs)] if shuffle else [np.arange(m)]
    starts = np.arange(0, m, batch_size)
    full = m - m % batch_size if drop_last else m
    out_n, out_e, out_g = [], [], []
    for order in orders:
        order = order[:full]
        if not len(order):
            continue
        s = starts[starts < len(order)]
        out_n.append(np.add.reduceat(nodes[order], s))
        out_e.append(np.add.reduceat(edges[order], s))
        out_g.append(np.diff(np.append(s, len(order))))
    b = min(batch_size, m)
    bound = (np.sort(nodes)[::-1][:b].sum(), np.sort(edges)[::-1][:b].sum(), b)
    return (np.concatenate(out_n + [[bound[0]]]), np.concatenate(out_e + [[bound[1]]]),
            np.concatenate(out_g + [[bound[2]]]))


def _other_sizes(kinds: Kinds, seen: dict, headroom: float) -> dict:
    sizes: dict = {}
    for key, count in seen.items():
        if kinds.memo.get(key, ["other"])[0] == "other" and key not in ("y", "ptr"):
            name = mask_name(key)
            sizes[name] = max(sizes.get(name, 0), round_up(count * headroom))
    return sizes


def plan_for(loader: Any, kinds: Kinds, *, op: str) -> Optional[Plan]:
    """The plan of ``loader`` by the cheapest route (module docstring); None for a one-shot
    iterator, whose plan comes from its first batch."""
    dataset = graph_loader_sizes(loader)
    if dataset is not None:
        nodes, edges, batch_size, shuffle, drop_last = dataset
        if len(nodes):
            n, e, g = _simulated(nodes, edges, batch_size, shuffle, drop_last)
            return Plan(BucketLadder.from_sizes(n, e, g), {}, "dataset sizes")
    try:
        iterator = iter(loader)
    except TypeError:
        raise TypeError(f"{op}: `loader` must be iterable (a DataLoader, NeighborLoader, a list "
                        f"of batches ...), got {type(loader).__name__}") from None
    if iterator is loader:
        return None
    headroom = 1.0 if isinstance(loader, (list, tuple)) else 1.1
    n_list, e_list, g_list = [], [], []
    seen: dict = {}
    for index, item in enumerate(iterator):
        n, e, g, shapes = sizes_of(item, op=op, where=f"batch {index}: ")
        n_list.append(n)
        e_list.append(e)
        g_list.append(g)
        for key, (size, _axis) in shapes.items():
            kinds.observe(key, size, n, e, g, op=op)
            seen[key] = max(seen.get(key, 0), size)
    if not n_list:
        return Plan(BucketLadder((16,), (32,), (2,)), {}, "an empty loader")
    ladder = BucketLadder.from_sizes(n_list, e_list, g_list, headroom=headroom)
    return Plan(ladder, _other_sizes(kinds, seen, headroom), "a pass over the loader")


def plan_from_batch(nodes: int, edges: int, graphs: int) -> Plan:
    """A one-shot iterator's plan: its first batch with 25% headroom."""
    return Plan(BucketLadder.from_sizes([nodes], [edges], [graphs], quantiles=(1.0,),
                                        headroom=1.25), {},
                "the first batch")
