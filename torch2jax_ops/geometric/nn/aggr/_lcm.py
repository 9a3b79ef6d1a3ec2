"""PyG's ``LCMAggregation`` (learnable commutative monoid, Ong & Velickovic): a GRU-cell
tree over each group, whose shape PyG takes from the widest group of the call."""
from __future__ import annotations

import math
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ...._checking import is_traced
from ....nn import Converter, register_converter
from ...utils._dense import to_dense_batch
from ._base import Aggregation, Grouping

__all__ = ["LCMAggregation"]


class LCMAggregation(Aggregation):
    """``torch_geometric.nn.aggr.LCMAggregation``: ``[E, F_in] -> [G, F_out]``.

    PyG packs the groups densely (``to_dense_batch``: ``W`` = the largest group, shorter
    ones padded with zeros) and runs a binary tree over the ``W`` slots: each level
    combines neighbouring slots ``(a, b)`` as ``mean(gru(a, b), gru(b, a))``, an odd last
    slot moving up unchanged, until one slot is left (``ceil(log2 W)`` levels). The
    result depends on ``W``, hence on the batch. Under ``jax.jit`` the port packs to a
    static width (``E``, or the exact ``W`` for concrete ids) and runs the tree with
    PyG's ``W`` as a traced size: slots past the current size are ignored, the odd slot
    moves up as in PyG, and the levels past ``ceil(log2 W)`` leave the result as it is,
    so every batch gets PyG's numbers from one compiled program. With a padded batch's
    ``BatchVector`` (``JaxLoader``, ``pad_graph``) ``W`` is the widest real graph: the
    padding graph is left out, as PyG never sees it (its own row is padding).

    Arrays: ``gru_cell.*`` (a ``GRUCell(F_out, F_out)``) and, with ``project``,
    ``lin.weight [F_out, F_in]``, ``lin.bias [F_out]``.
    """
    gru_cell: Any
    lin: Optional[Any] = None

    def _aggregate(self, x: jax.Array, g: Grouping) -> jax.Array:
        op = "LCMAggregation"
        if x.ndim != 2 or g.axis != 0:
            raise ValueError(f"{op}: expects x [E, F] aggregated along dim 0 (as PyG), got "
                             f"shape {tuple(x.shape)} along dim {g.axis}")
        if self.lin is not None:
            x = jax.nn.relu(self.lin(x))
        counts = jax.ops.segment_sum(jnp.ones(g.ids.shape, jnp.int32), g.ids, g.n)
        if is_traced(g.ids):
            width = x.shape[0]  # every element in one group at most
        else:  # on the host: a count computed with jnp is traced inside a jitted caller
            ids = np.asarray(g.ids)
            ids = ids[(ids >= 0) & (ids < g.n)]
            width = int(np.bincount(ids, minlength=g.n).max()) if g.n and ids.size else 0
        dense, _ = to_dense_batch(x, g.ids, max_num_nodes=width, batch_size=g.n)
        h = jnp.moveaxis(dense, 1, 0)  # [W, G, F]
        if g.padded and g.n:
            # a padded batch: its padding graph (the highest group with elements) is not
            # PyG's, whose W is the widest real group
            pad = jnp.max(jnp.where(g.ids < g.n, g.ids, -1))
            counts = jnp.where(jnp.arange(g.n) == pad, 0, counts)
        size = jnp.max(counts) if g.n else jnp.asarray(0, jnp.int32)  # PyG's W
        if width == 0:
            return jnp.zeros((g.n, h.shape[-1]), x.dtype)
        for _ in range(math.ceil(math.log2(width)) if width > 1 else 0):
            if h.shape[0] % 2:
                h = jnp.concatenate([h, jnp.zeros_like(h[:1])], axis=0)
            pairs = h.reshape(-1, 2, *h.shape[1:])  # [W/2, 2, G, F]
            features = h.shape[-1]
            left_right = pairs.reshape(-1, features)
            right_left = pairs[:, ::-1].reshape(-1, features)
            out = self.gru_cell(left_right, right_left).reshape(pairs.shape).mean(axis=1)
            slot = jnp.arange(out.shape[0])[:, None, None]
            half, odd = size // 2, size % 2
            moved = h[jnp.maximum(size - 1, 0)][None]  # the odd last slot, unchanged
            h = jnp.where(slot < half, out,
                          jnp.where((slot == half) & (odd == 1), moved, jnp.zeros_like(out)))
            size = jnp.where(size > 1, (size + 1) // 2, size)
        return h[0]


@register_converter("torch_geometric.nn.aggr.lcm.LCMAggregation")
def _lcm(m, ctx: Converter) -> LCMAggregation:
    lin = None if getattr(m, "lin", None) is None else ctx.child(m.lin, "lin")
    return LCMAggregation(ctx.child(m.gru_cell, "gru_cell"), lin)

