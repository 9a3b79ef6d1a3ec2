"""PyG's ``torch_geometric.utils.segment``: reduce the rows of ``src`` within ``ptr`` ranges.

With torch_scatter installed (the common case, and the oracle here) PyG calls
``torch_scatter.segment_csr(src, ptr, reduce=reduce)``; without it, torch's
``_segment_reduce``, whose empty min/max segments are also 0. Both agree with
:func:`torch2jax_ops.torch_scatter.segment_csr`, which this calls.
"""
from __future__ import annotations

from typing import cast

import jax
from jax.typing import ArrayLike

from ..._checking import SEGMENT_REDUCTIONS, Reduction, as_array, check_index, check_reduce
from ..._sharding import OutSharding, sharding_aware
from ...torch_scatter import segment_csr

__all__ = ["segment"]


@sharding_aware
def segment(src: ArrayLike, ptr: ArrayLike, reduce: str = "sum",
            *, out_sharding: OutSharding = None) -> jax.Array:
    """``torch_geometric.utils.segment``: ``out[i] = reduce(src[ptr[i]:ptr[i + 1]])``.

    Args:
      src: ``[L, *F]`` values (reduced along the first axis, for a 1-D ``ptr``;
        a k-D ``ptr`` ``[*B, S + 1]`` reduces axis ``k - 1``, torch_scatter's rule).
      ptr: ``[S + 1]`` non-decreasing offsets with ``ptr[0] = 0`` and
        ``ptr[-1] = L``; its length is a static shape, its values may be traced.
      reduce: ``"sum"`` (default), ``"add"``, ``"mean"``, ``"min"``, ``"max"``.

    Returns:
      ``[S, *F]``; empty segments give 0 for every reduction (PyG's and
      torch_scatter's rule; JAX's ``segment_max`` would give ``-inf``).
    """
    op = "segment"
    src = as_array(src, "src", op=op)
    ptr = as_array(ptr, "ptr", op=op)
    check_index(ptr, "ptr", op=op)
    kind = check_reduce(reduce, SEGMENT_REDUCTIONS, op=op,
                        hints={"mul": "segment has no product; use scatter(..., "
                                      "reduce='mul')"})
    if src.ndim < ptr.ndim:
        raise ValueError(f"{op}: `src` ({src.ndim}-D) must have at least as many dimensions "
                         f"as `ptr` ({ptr.ndim}-D)")
    return segment_csr(src, ptr, reduce=cast(Reduction, kind))  # a checked name
