"""Heterogeneous batches in :class:`~torch2jax_ops.geometric.loader.JaxLoader`: a loader of
``HeteroData`` (``NeighborLoader`` / ``HGTLoader`` on a ``HeteroData``, a ``DataLoader`` of
``HeteroData`` graphs, a list) is padded per type to a
:class:`~torch2jax_ops.geometric.data.HeteroLadder` and yields
:class:`~torch2jax_ops.geometric.data.HeteroGraph`\\ s."""
from __future__ import annotations

from typing import Any, Optional, cast

import jax

from ..data._hetero import (
    HeteroGraph,
    HeteroLadder,
    hetero_from_pyg,
    hetero_sizes,
    is_hetero,
    pad_hetero,
)
from ._plan import Plan

__all__ = ["hetero_source", "hetero_plan", "prepare_hetero"]


def hetero_source(loader: Any) -> bool:
    """Whether ``loader`` yields ``HeteroData``: a sampler over one (``loader.data``), a
    ``DataLoader`` whose dataset holds them, or a list of them."""
    if is_hetero(getattr(loader, "data", None)):
        return True
    if isinstance(loader, (list, tuple)):
        return bool(loader) and is_hetero(loader[0])
    dataset = getattr(loader, "dataset", None)
    try:
        return dataset is not None and len(dataset) > 0 and is_hetero(dataset[0])
    except (TypeError, IndexError, KeyError):
        return False


def hetero_plan(loader: Any, *, op: str) -> Optional[Plan]:
    """A ladder fitted to one pass over the loader's sizes (None for a one-shot iterator:
    sized by its first batch)."""
    iterator = iter(loader)
    if iterator is loader:
        return None
    nodes, edges = [], []
    for index, item in enumerate(iterator):
        if not is_hetero(item):
            raise TypeError(f"{op}: batch {index}: expected a torch_geometric.data.HeteroData "
                            f"like the batches before it, got {type(item).__qualname__}")
        n, e = hetero_sizes(item)
        nodes.append(n)
        edges.append(e)
    if not nodes:
        raise ValueError(f"{op}: the loader yielded no batches")
    headroom = 1.0 if isinstance(loader, (list, tuple)) else 1.1
    # a Plan whose ladder is a HeteroLadder (JaxLoader dispatches on the ladder's type)
    return Plan(cast(Any, HeteroLadder.from_sizes(nodes, edges, headroom=headroom)), {},
                "a pass over the loader")


def prepare_hetero(item: Any, plan: Optional[Plan], index: int, target: Any, *,
                   allow_downcast: bool, exclude: tuple, op: str) -> tuple[HeteroGraph, Any, list, Plan]:
    """Convert and pad one ``HeteroData``: ``(HeteroGraph on the device, the level's sizes,
    warnings, the plan -- grown by a level when the batch exceeds the top)``."""
    if not is_hetero(item):
        raise TypeError(f"{op}: batch {index}: expected a torch_geometric.data.HeteroData like "
                        f"the loader's other batches, got {type(item).__qualname__}")
    nodes, edges = hetero_sizes(item)
    notes = []
    if plan is None:
        plan = Plan(cast(Any, HeteroLadder.from_sizes([nodes], [edges], quantiles=(1.0,),
                                                      headroom=1.25)), {}, "the first batch")
    ladder = cast(HeteroLadder, plan.ladder)
    if not ladder.fits(nodes, edges):
        grown = ladder.grown(nodes, edges)
        top_n, top_e = grown.levels[-1]
        notes.append(f"{op}: batch {index} has nodes {nodes} and edges {edges}, more than the "
                     f"ladder's top level: added a level of {top_n} nodes and {top_e} edges "
                     f"(one more compilation). Size the ladder for your largest batch up front: "
                     f"JaxLoader(loader, ladder=HeteroLadder.from_sizes([max nodes per type], "
                     f"[max edges per type]))")
        plan.ladder = cast(Any, grown)
        ladder = grown
    sizes = ladder.levels[ladder.pick(nodes, edges)]
    host = hetero_from_pyg(item, device=jax.devices("cpu")[0], allow_downcast=allow_downcast,
                           exclude=exclude, op=op)
    padded = pad_hetero(host, sizes[0], sizes[1], device=target)
    key = (tuple(sorted(sizes[0].items())), tuple(sorted(sizes[1].items())))
    return jax.block_until_ready(padded), key, notes, plan
