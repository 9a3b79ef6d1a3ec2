"""The fast path of a PyG ``DataLoader`` over an ``InMemoryDataset``: batches gathered with
NumPy straight from the dataset's stored tensors, without building a ``Data`` per graph.

PyG's ``Collater`` builds a ``Data`` object for every graph of a batch (an
``InMemoryDataset`` slices and copies each attribute) and concatenates them
with per-key bookkeeping: about 0.1 ms per graph in Python, most of an epoch
of a small-graph model, and, in :class:`~torch2jax_ops.geometric.loader.JaxLoader`'s
background thread, time taken from the jitted step on a machine with few cores.

When the result is provably the same, this module gathers a batch in a few
vectorised NumPy calls instead: every stored attribute is one tensor sliced
per graph (the dataset's ``slices``), concatenated along PyG's ``__cat_dim__``,
with node ids (``*index*``, ``face``) shifted by the nodes before them; plus
the ``batch`` vector, ``ptr`` and ``num_graphs`` that ``Batch`` adds. The
batch order comes from a ``torch.utils.data.DataLoader`` over the positions
with the wrapped loader's own batch sampler and generator, so it draws from
torch's random generator exactly as the wrapped loader would: the same seed
gives the same batches.

Used only when all of these hold (else the wrapped loader is iterated as it
is): a ``torch.utils.data.DataLoader`` with PyG's ``Collater`` (no
``follow_batch``, no ``exclude_keys``), ``num_workers=0``; an
``InMemoryDataset`` with no ``transform``, PyG's own ``get``/``__getitem__``,
stored as a plain ``Data`` whose ``__cat_dim__``/``__inc__`` are PyG's
defaults; every attribute a tensor with ``slices``, none named ``*batch*``
(PyG increments those by their maximum), and node counts known from ``x``.
"""
from __future__ import annotations

import sys
from typing import Any, Iterator, Optional

import numpy as np

from ._plan import collates_with_pyg

__all__ = ["fast_batches"]

_INT32_MAX = 2**31 - 1


class _Positions:
    """A dataset whose items are their own positions (the sampler's order, nothing loaded)."""

    def __init__(self, size: int):
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, position: int) -> int:
        return position


def _positions(batch: list) -> list:
    return batch


def _plan(loader: Any) -> Optional[dict]:
    """What the fast path needs from ``loader``, or None when it does not apply."""
    if not collates_with_pyg(loader) or loader.num_workers:
        return None
    tud = sys.modules["torch.utils.data"]
    pyg_loader = sys.modules["torch_geometric.loader.dataloader"]
    pyg_data = sys.modules["torch_geometric.data"]  # imported by PyG's collater
    # exact types: a subclass may iterate or collate its own way
    if type(loader) not in (tud.DataLoader, pyg_loader.DataLoader):
        return None
    collate = loader.collate_fn
    if type(collate) is not pyg_loader.Collater or collate.follow_batch or collate.exclude_keys:
        return None
    dataset = loader.dataset
    memory = pyg_data.InMemoryDataset
    if not isinstance(dataset, memory) or dataset.transform is not None:
        return None
    kind = type(dataset)
    if kind.get is not memory.get or kind.__getitem__ is not pyg_data.Dataset.__getitem__:
        return None
    data: Any = getattr(dataset, "_data", None)
    slices = dataset.slices
    base = pyg_data.Data
    if type(data) is not base or slices is None or "x" not in slices:
        return None
    import torch

    stored = {}
    for key in data.keys():
        value = data[key]
        if "batch" in key or key not in slices or not isinstance(value, torch.Tensor) \
                or value.layout != torch.strided or value.device.type != "cpu" or not value.ndim:
            return None
        axis = data.__cat_dim__(key, value)
        if not isinstance(axis, int):
            return None
        inc = data.__inc__(key, value)
        shift = inc is not None and not (isinstance(inc, int) and inc == 0)
        if shift and not ("index" in key or key == "face"):
            return None  # an increment other than the node count
        stored[key] = (value.detach().numpy(), axis % value.ndim,
                       np.asarray(slices[key].numpy(), np.int64), shift)
    nodes = np.diff(stored["x"][2])
    # node ids of a batch are below the dataset's node count: when every shifted id fits
    # int32 (the dtype JaxLoader gives node ids), gather them as int32 already
    total = int(nodes.sum())
    small = np.int32 if total < _INT32_MAX else np.int64
    for key, (array, axis, bounds, shift) in stored.items():
        if shift and array.dtype == np.int64 and array.size and small is np.int32 \
                and array.min() >= 0 and array.max() < _INT32_MAX - total:
            stored[key] = (array.astype(np.int32), axis, bounds, shift)
    return {"stored": stored, "nodes": nodes, "index": np.asarray(dataset.indices(), np.int64),
            "ids": small}


def _take(array: np.ndarray, axis: int, bounds: np.ndarray, chosen: np.ndarray) -> tuple:
    """The chosen graphs' parts of one stored tensor, concatenated along ``axis``, and each
    part's length."""
    starts, lengths = bounds[chosen], bounds[chosen + 1] - bounds[chosen]
    total = int(lengths.sum())
    offsets = np.cumsum(lengths) - lengths
    rows = np.repeat(starts - offsets, lengths) + np.arange(total)
    return np.take(array, rows, axis=axis), lengths


def fast_batches(loader: Any) -> Optional[Iterator[dict]]:
    """The batches of ``loader`` as dicts of NumPy arrays (what ``Batch`` would hold: every
    stored attribute, ``batch``, ``ptr``, ``num_graphs``), or None where the fast path does
    not apply (module docstring)."""
    plan = _plan(loader)
    if plan is None:
        return None
    import torch.utils.data as tud

    order: Any = tud.DataLoader(_Positions(len(loader.dataset)),  # type: ignore[arg-type]
                                batch_sampler=loader.batch_sampler, collate_fn=_positions,
                                generator=loader.generator)
    return _batches(order, plan)


def _batches(order: Any, plan: dict) -> Iterator[dict]:
    stored, nodes, index, ids = plan["stored"], plan["nodes"], plan["index"], plan["ids"]
    for positions in order:
        chosen = index[np.asarray(positions, np.int64)]
        counts = nodes[chosen]
        graphs = len(chosen)
        first = np.cumsum(counts) - counts  # each graph's first node in the batch
        item: dict = {}
        for key, (array, axis, bounds, shift) in stored.items():
            part, lengths = _take(array, axis, bounds, chosen)
            if shift:
                along = [1] * part.ndim
                along[axis] = -1
                part = part + np.repeat(first, lengths).astype(part.dtype).reshape(along)
            item[key] = part
        item["batch"] = np.repeat(np.arange(graphs, dtype=ids), counts)
        item["ptr"] = np.concatenate([[0], np.cumsum(counts)]).astype(ids)
        item["num_graphs"] = graphs
        item["num_nodes"] = int(counts.sum())
        yield item
