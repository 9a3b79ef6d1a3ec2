"""A conv's output as a sum of matmuls, so that several convs' outputs are summed with one.

``SAGEConv`` and ``GraphConv`` compute ``agg @ W_nbr.T + x_dst @ W_root.T + b``.
``HeteroConv`` with ``aggr="sum"`` (or ``"mean"``) adds such outputs over
every relation that ends in one node type. Summed term by term, that is one
root matmul per relation on the *same* ``x_dst``, and one neighbour matmul per
relation. :func:`fuse` computes the same sum with one matmul: terms on the
same input array are merged by adding their weights first
(``x @ W1.T + x @ W2.T = x @ (W1 + W2).T``), and the remaining inputs are
concatenated along their features (``[a1, a2] @ [W1, W2].T``). The result is
PyG's up to rounding (the sum is taken in another order); the gradient of each
weight is the same product it is unfused.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp

__all__ = ["LINEAR_AGGRS", "LinearParts", "fuse"]

#: the aggregations that commute with a linear map after them (and are sums)
LINEAR_AGGRS = ("add", "sum", "mean")


class LinearParts(NamedTuple):
    """``sum(x @ w.T for x, w in terms) + sum(addends)``.

    ``terms``: ``(x [N, K], weight [F_out, K])`` pairs, one per linear map
    applied to an input the conv computed (its aggregation) or was given (its
    root features). ``addends``: ``[N, F_out]`` arrays already mapped (an
    aggregation of projected features) and ``[F_out]`` biases.
    """
    terms: tuple[tuple[jax.Array, jax.Array], ...]
    addends: tuple[jax.Array, ...]

    def value(self) -> jax.Array:
        """The conv's output ``[N, F_out]``: each term's own matmul, summed."""
        out = None
        for x, w in self.terms:
            y = x @ w.T
            out = y if out is None else out + y
        for a in self.addends:
            out = a if out is None else out + a
        assert out is not None, "LinearParts with neither terms nor addends"
        return out


def fuse(parts: Sequence[LinearParts]) -> jax.Array:
    """``sum(p.value() for p in parts)`` with one matmul ``[N, K_total] @ [K_total, F_out]``.

    Terms whose input is the same array object (every relation's root term on
    the destination type's features) share one slot with their weights added;
    the other inputs are concatenated along their last axis.
    """
    slots: list[list] = []  # [x, summed weight]
    for part in parts:
        for x, w in part.terms:
            for slot in slots:
                if slot[0] is x:
                    slot[1] = slot[1] + w
                    break
            else:
                slots.append([x, w])
    out = None
    if len(slots) == 1:
        out = slots[0][0] @ slots[0][1].T
    elif slots:
        out = jnp.concatenate([x for x, _ in slots], axis=-1) @ \
            jnp.concatenate([w for _, w in slots], axis=-1).T
    for part in parts:
        for a in part.addends:
            out = a if out is None else out + a
    assert out is not None, "fuse() of parts with neither terms nor addends"
    return out
