"""Parity cases of PyG's ``HGTConv`` (section "hetero"), on :func:`hetero_graph`'s graphs.

Node widths: author 6, paper 8, term 4 (venue 5 in "with-venue"). PyG mixes
in the input through the gate ``skip`` only for the node types whose width
equals ``out_channels``, so the variants pick widths that take that branch
for one type (or for none). "with-venue" adds a type that only sends (absent
from the output) and an edge type with no edges. One variant feeds
``edge_index_dict`` without the edge types into ``term``: ``term`` still gets
``out_lin(0)``, skip-mixed, as in PyG. (PyG's result for an ``edge_index_dict``
in another order than the metadata's is a documented deviation, tested in
``parity_tests/test_hetero_hgt.py``.)
"""
from __future__ import annotations

from typing import Any, Callable

from torch2jax_ops.parity.cases.hetero import HAS, inputs, register_layers


def _hgt(out_channels: int, heads: int, sized: bool = False) -> Callable:
    def make(data):
        import torch_geometric.nn as tnn

        in_channels: Any = ({t: data[t].x.shape[1] for t in data.node_types} if sized
                            else -1)
        return tnn.HGTConv(in_channels, out_channels, data.metadata(), heads=heads)
    return make


def _without_term_edges(data: Any) -> tuple:
    x_dict, edge_index_dict = inputs(data)
    return x_dict, {et: e for et, e in edge_index_dict.items() if et[-1] != HAS[-1]}


def _layers() -> dict[str, tuple[Callable, Callable]]:
    """label -> (make(data) -> PyG module, inputs(data) -> args)."""
    return {
        "HGTConv-1-head": (_hgt(10, 1), inputs),  # width 10: no skip for any type
        "HGTConv-2-heads": (_hgt(10, 2), inputs),
        "HGTConv-1-head-skip-paper": (_hgt(8, 1), inputs),  # paper is 8 wide: gated skip
        "HGTConv-2-heads-skip-author": (_hgt(6, 2), inputs),  # author is 6 wide
        "HGTConv-4-heads-sized": (_hgt(8, 4, sized=True), inputs),  # in_channels as a dict
        "HGTConv-no-edges-into-term": (_hgt(4, 2), _without_term_edges),  # term 4 wide: skip
    }


hgt_cases = register_layers(_layers)
