"""PyG's ``WLConv`` (Weisfeiler-Lehman colour refinement) against its port (section "wl",
parity_tests/test_wl_conv.py).

The colours come from a Python dict on concrete values, so the cases compare integer
outputs exactly; ``compare_modules`` hands the integer inputs to the jitted port as
compile-time constants. Each build makes fresh torch modules: the torch side and the
port start from the same (empty or pre-filled) hashmap, and each grows its own copy.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from torch2jax_ops.parity._suite import Case, register


def _graphs(seed: int, sizes=(5, 7, 4), colours: int = 3, edges_per_node: int = 2):
    """A batch of small random graphs: colours [N], edge_index [2, E], batch [N]."""
    import torch

    rng = np.random.default_rng(seed)
    xs, edges, batch, offset = [], [], [], 0
    for g, n in enumerate(sizes):
        xs.append(rng.integers(0, colours, n))
        if n > 1:
            e = rng.integers(0, n, (2, edges_per_node * n))
            edges.append(e + offset)
        batch.append(np.full(n, g))
        offset += n
    x = torch.tensor(np.concatenate(xs), dtype=torch.int64)
    e = np.concatenate(edges, axis=1) if edges else np.zeros((2, 0), np.int64)
    return x, torch.tensor(e, dtype=torch.int64), torch.tensor(np.concatenate(batch))


def _wl_model(layers: int, norm: bool):
    import torch
    from torch_geometric.nn import WLConv

    class WL(torch.nn.Module):
        """PyG's examples/wl_kernel.py model: a histogram per refinement round."""

        def __init__(self):
            super().__init__()
            self.convs = torch.nn.ModuleList([WLConv() for _ in range(layers)])

        def forward(self, x, edge_index, batch=None):
            hists = []
            for conv in self.convs:
                x = conv(x, edge_index)
                hists.append(conv.histogram(x, batch, norm=norm))
            return x, hists

    return WL()


def _build(kind: str):
    def build():
        import torch
        from torch_geometric.nn import WLConv

        from torch2jax_ops.nn import from_torch

        x, edge_index, batch = _graphs(0)
        if kind == "conv":
            model, args = WLConv(), (x, edge_index)
        elif kind == "conv-one-hot":
            model, args = WLConv(), (torch.nn.functional.one_hot(x, 4), edge_index)
        elif kind == "conv-prefilled":  # the port starts from PyG's hashmap as it is
            model = WLConv()
            model(*_graphs(1)[:2])
            args = (x, edge_index)
        elif kind == "conv-no-edges":
            model, args = WLConv(), (x, torch.zeros((2, 0), dtype=torch.int64))
        elif kind == "wl-model":
            model, args = _wl_model(3, norm=False), (x, edge_index, batch)
        elif kind == "wl-model-norm":
            model, args = _wl_model(3, norm=True), (x, edge_index, batch)
        elif kind == "wl-model-one-graph":
            model, args = _wl_model(2, norm=True), (x, edge_index)
        else:
            raise ValueError(kind)
        return model, from_torch(model), args, {}, {}
    return build


KINDS = ("conv", "conv-one-hot", "conv-prefilled", "conv-no-edges", "wl-model",
         "wl-model-norm", "wl-model-one-graph")


@register("wl")
def wl_cases() -> Iterable[Case]:
    for kind in KINDS:
        yield Case("wl", "WLConv", "int64", kind, _build(kind))
