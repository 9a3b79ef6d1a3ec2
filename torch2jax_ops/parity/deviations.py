"""Where torch2jax_ops knowingly differs from the torch originals.

Each entry is a place where the original is wrong (garbage memory, a wrong
gradient, a crash) or silently accepts a mistake, what we do instead, and the
test in ``parity_tests/`` that proves our answer (finite differences or an
independent formula). The parity report prints this list.
"""
from __future__ import annotations

import dataclasses

__all__ = ["Deviation", "DEVIATIONS", "for_op"]


@dataclasses.dataclass(frozen=True)
class Deviation:
    id: str
    ops: tuple
    original: str
    ours: str
    proof: str  # pytest node id

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


_PROOF = "parity_tests/test_deviations.py::"

DEVIATIONS = (
    Deviation(
        "mul-grad-at-zero", ("scatter_mul", "scatter"),
        "gradient = grad * product / src with NaN set to 0, so an element that is 0 gets 0",
        "gradient = product of the other elements of the group (exact, no division by 0)",
        _PROOF + "test_scatter_mul_gradient_at_zero_is_product_of_others"),
    Deviation(
        "mul-empty-src", ("scatter_mul", "scatter"),
        "an empty `src` gives 0 in every group (a C++ early return), although empty groups "
        "of a non-empty src give 1",
        "1, the empty product, in every case",
        _PROOF + "test_scatter_mul_of_empty_src_is_the_empty_product"),
    Deviation(
        "out-grad-min-max-mul", ("scatter_min", "scatter_max", "scatter_mul", "scatter"),
        "no gradient reaches `out` (the C++ op marks it dirty and returns None)",
        "the exact gradient w.r.t. `out`: the cotangent where out wins (min/max), "
        "cotangent * product (mul)",
        _PROOF + "test_out_gradient_matches_finite_differences"),
    Deviation(
        "bad-index", ("scatter_min", "scatter_max", "scatter_mul", "scatter"),
        "the C++ kernels do no bounds checks: a negative or too-large index corrupts memory",
        "IndexError naming `index` and the valid range (concrete index); dropped under jit, "
        "or an error through torch2jax_ops.checked",
        _PROOF + "test_bad_indices_raise_instead_of_corrupting_memory"),
    Deviation(
        "mean-index-broadcast-along-dim", ("scatter_mean", "scatter"),
        "an index of size 1 along `dim` is broadcast for the sum but not for the count, "
        "so the 'mean' is the sum",
        "the mean of the group's elements",
        _PROOF + "test_mean_with_index_broadcast_along_dim_is_the_mean"),
    Deviation(
        "mean-empty-src-crash", ("scatter_mean", "scatter"),
        "an empty `src` with a non-empty index (e.g. src [1, 0], index [1]) raises "
        "'index 0 is out of bounds' (the count is scattered over the unexpanded index)",
        "the empty result torch_scatter's own size rule gives (size 0 along dim, or dim_size "
        "zeros)",
        _PROOF + "test_mean_of_empty_src_with_nonempty_index_is_empty"),
    Deviation(
        "strict-out-and-dim-size", ("scatter_sum", "scatter_mean", "scatter_mul", "scatter_min",
                                    "scatter_max", "scatter"),
        "`out` larger than src in a non-reduced axis is partly written; `dim_size` "
        "contradicting `out` is ignored",
        "ValueError naming `out` / `dim_size` (JAX returns a new array, there is nothing "
        "to write partly)",
        _PROOF + "test_out_shape_and_dim_size_conflicts_raise"),
)


def for_op(op: str) -> list:
    """The deviations that concern ``op``."""
    return [d for d in DEVIATIONS if op in d.ops]
