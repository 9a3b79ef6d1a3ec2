"""Where torch2jax_ops knowingly differs from the torch originals.

Each entry is a place where the original is wrong (garbage memory, a wrong
gradient, a crash) or silently accepts a mistake, what we do instead, and the
test in ``parity_tests/`` that proves our answer (finite differences or an
independent formula). The parity report prints this list.
"""
from __future__ import annotations

import dataclasses

__all__ = ["Deviation", "DEVIATIONS", "deviations_of"]


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
_CSR = ("segment_csr", "segment_sum_csr", "segment_add_csr", "segment_mean_csr",
        "segment_min_csr", "segment_max_csr")
_COO = ("segment_coo", "segment_sum_coo", "segment_add_coo", "segment_mean_coo",
        "segment_min_coo", "segment_max_coo")
_EXTREME = ("segment_csr", "segment_min_csr", "segment_max_csr",
            "segment_coo", "segment_min_coo", "segment_max_coo")
_COMPOSITES = ("scatter_std", "scatter_logsumexp", "scatter_softmax", "scatter_log_softmax")

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
                                    "scatter_max", "scatter") + _COO + ("gather_coo",
                                                                          "gather_csr"),
        "`out` larger than src in a non-reduced axis is partly written; `dim_size` "
        "contradicting `out` is ignored",
        "ValueError naming `out` / `dim_size` (JAX returns a new array, there is nothing "
        "to write partly)",
        _PROOF + "test_out_shape_and_dim_size_conflicts_raise"),
    # ------------------------------------------------------------ segment / gather
    Deviation(
        "csr-grad-outside-range", ("segment_csr", "segment_sum_csr", "segment_add_csr",
                                   "segment_mean_csr"),
        "positions of src outside [indptr[0], indptr[-1]) get uninitialised memory as "
        "gradient (sum), or the backward raises a size-mismatch RuntimeError (mean)",
        "0 there (those positions do not reach the output), the exact gradient elsewhere",
        _PROOF + "test_csr_gradient_outside_the_pointer_range_is_zero"),
    Deviation(
        "segment-stale-arg", _EXTREME,
        "in a segment where no element beats the start value (all -inf for max, all +inf "
        "for min, the dtype's extreme finite value, or COO's out= winning) the arg is the "
        "previous segment's, and the gradient goes there; CSR also returns the lowest "
        "(highest) finite value instead of 0",
        "the rules of scatter_max: value 0 (out's value with out=), arg src.shape[dim], "
        "no gradient to src",
        _PROOF + "test_segment_min_max_report_no_stale_arg"),
    Deviation(
        "csr-no-segments-crash", _CSR,
        "an indptr with a single entry (zero segments) kills the process (SIGFPE)",
        "an empty result with 0 rows along the reduced axis",
        _PROOF + "test_csr_with_zero_segments_is_empty"),
    Deviation(
        "gather-csr-outside-range", ("gather_csr",),
        "without out=, output positions before indptr[0] are uninitialised memory",
        "0 there (with out=: out's values, as torch_scatter)",
        _PROOF + "test_gather_csr_before_the_first_pointer_is_zero"),
    Deviation(
        "coo-out-first-group", _COO,
        "with out=, the first group of each row starts from out[0] instead of its own "
        "row of out, unless the index starts at 0 (out + sum is wrong there)",
        "(out + sum), (out + sum) / count, min/max(out, group) for every group",
        _PROOF + "test_segment_coo_accumulates_into_its_own_row_of_out"),
    Deviation(
        "out-grad-segment", _COO + ("gather_csr",),
        "no gradient reaches out=, although segment_coo accumulates into it and gather_csr "
        "keeps it outside the pointer range",
        "the exact gradient w.r.t. out",
        _PROOF + "test_segment_out_gradient_matches_finite_differences"),
    Deviation(
        "coo-broadcast-backward", _COO,
        "the backward raises 'src.size(i) == index.size(i) INTERNAL ASSERT FAILED' when the "
        "index is broadcast along a leading axis",
        "the exact gradient",
        _PROOF + "test_segment_coo_broadcast_index_has_a_gradient"),
    Deviation(
        "segment-empty-crash", _COO + ("gather_coo",),
        "kills the process: segment_coo's backward of an empty src with dim_size (SIGFPE), "
        "gather_coo of an empty index (SIGFPE), gather_coo's backward of an empty src "
        "(SIGSEGV)",
        "empty results and zero gradients",
        _PROOF + "test_empty_segment_inputs_are_well_defined"),
    Deviation(
        "unchecked-segment-input", _CSR + _COO + ("gather_csr", "gather_coo"),
        "no checks: an unsorted segment_coo index gives wrong sums, an indptr out of range "
        "or decreasing and an out-of-range gather index read or write outside the buffers",
        "ValueError / IndexError naming the argument (concrete input); under jit the "
        "grouping stays correct or bad elements are dropped, and torch2jax_ops.checked "
        "raises",
        _PROOF + "test_bad_segment_input_raises"),
    Deviation(
        "gather-coo-any-order", ("gather_coo",),
        "an unsorted index raises 'idx <= next_idx INTERNAL ASSERT FAILED'",
        "any order is gathered (a gather does not depend on it)",
        _PROOF + "test_gather_coo_takes_any_order"),
    # ------------------------------------------------------------------ composites
    Deviation(
        "std-grad-at-zero", ("scatter_std",),
        "the gradient is NaN for a one-element group (std is constantly 0 there) and for a "
        "group of equal values",
        "0: the derivative of the constant, and the smallest subgradient at the kink",
        _PROOF + "test_std_gradient_where_the_deviation_is_zero"),
    Deviation(
        "logsumexp-out", ("scatter_logsumexp",),
        "with out=, groups without src become 0 (2.1.2; fixed later upstream), and the "
        "backward raises (an in-place exp_ on out)",
        "log(exp(out) + sum exp(src)) in every group (out where there is no src), "
        "differentiable w.r.t. src and out",
        _PROOF + "test_logsumexp_with_out_keeps_out_and_has_a_gradient"),
    Deviation(
        "logsumexp-empty-index", ("scatter_logsumexp",),
        "an empty index without dim_size raises RuntimeError (max() of an empty tensor)",
        "the scatter family's rule: 0 groups",
        _PROOF + "test_logsumexp_of_empty_index_is_empty"),
    Deviation(
        "softmax-extreme-finite", ("scatter_softmax", "scatter_log_softmax"),
        "a group whose max is the dtype's lowest finite value is taken for empty and "
        "shifted by 0: softmax gives 0/0 = NaN or a wrong split, log_softmax a wrong value",
        "shifted by its true max: the softmax of the group",
        _PROOF + "test_softmax_of_lowest_finite_group"),
    Deviation(
        "half-precision-composites", _COMPOSITES,
        "float16/bfloat16 round after every step (up to ~30 eps from the exact result); in "
        "float16 eps=1e-12 underflows to 0, so a +inf logsumexp group gives 0 and an all "
        "-inf log_softmax group NaN (float32/64 give the largest finite value and -inf)",
        "computed in float32 and rounded once (correctly rounded, within 0.5 eps), the "
        "float32 rules in every dtype; parity compares these dtypes norm-wise",
        _PROOF + "test_half_precision_composites_are_correctly_rounded"),
    Deviation(
        "functional-call-unknown-key", ("func.functional_call",),
        "torch.func.functional_call ignores a key that names no parameter or buffer (with "
        "the default strict=False): a typo such as 'lin1.weigth' runs the model with its old "
        "weights and no error",
        "KeyError naming the unknown keys and the module's array names; missing keys are "
        "still allowed unless strict=True",
        _PROOF + "test_functional_call_unknown_key_raises"),
    Deviation(
        "jacobian-forward-mode-lists", ("autograd.functional.jacobian",
                                        "autograd.functional.hessian"),
        "with strategy='forward-mode' (outer_jacobian_strategy for hessian), tuple inputs or "
        "outputs give lists (or lists of lists), although the docs and reverse mode give tuples",
        "tuples in both modes, as documented; the values are the same",
        _PROOF + "test_forward_mode_jacobian_structure_is_tuples"),
    Deviation(
        "vmap-chunks-unbatched-output", ("func.vmap",),
        "torch.func.vmap with chunk_size smaller than the batch raises TypeError (torch.cat "
        "with dim=None) when an output has out_dims=None",
        "the unbatched output, as without chunk_size",
        _PROOF + "test_chunked_vmap_with_an_unbatched_output"),
    Deviation(
        "jacobian-empty-output", ("autograd.functional.jacobian",),
        "an output with no elements (reverse mode, the default) raises RuntimeError "
        "'stack expects a non-empty TensorList'",
        "the empty Jacobian of shape out.shape + in.shape, as torch.func.jacrev gives",
        _PROOF + "test_jacobian_of_an_empty_output_is_empty"),
    Deviation(
        "to-dense-batch-unsorted", ("geometric.to_dense_batch",),
        "torch_geometric.utils.to_dense_batch with an unsorted `batch` silently drops and "
        "misplaces nodes (it assumes each graph's nodes are contiguous)",
        "ValueError on a concrete unsorted batch; under jit the order is checked through "
        "torch2jax_ops.checked",
        _PROOF + "test_to_dense_batch_rejects_an_unsorted_batch"),
    Deviation(
        "hetero-linear-is-sorted", ("geometric.nn.HeteroLinear",),
        "torch_geometric.nn.HeteroLinear(is_sorted=True) with an unsorted `type_vec` builds "
        "its segment pointer as if it were sorted: rows get other types' weights",
        "every row gets its own type's weight (x_i @ W[t_i] + b[t_i]); is_sorted is a speed "
        "hint only",
        _PROOF + "test_hetero_linear_is_sorted_with_unsorted_types_gives_each_row_its_weight"),
    Deviation(
        "hgt-edge-type-order", ("geometric.nn.HGTConv",),
        "torch_geometric.nn.HGTConv pairs relation matrices with edge types by the order of "
        "`edge_index_dict`: any order but the metadata's mixes relations up",
        "each edge type gets its own relation matrices whatever the dict order (JAX sorts "
        "dict keys under jit): PyG's result for data.edge_index_dict",
        _PROOF + "test_hgt_pairs_relation_matrices_by_edge_type_whatever_the_dict_order"),
    Deviation(
        "pyg-fused-propagate-template", ("geometric.nn.SAGEConv", "geometric.nn.GraphConv",
                                         "geometric.nn.GCNConv", "geometric.nn.GINConv"),
        "PyG generates a layer class's propagate once, from the first instance built in "
        "the process: when that one cannot fuse (e.g. SAGEConv(aggr=['mean', 'max'])), "
        "every later instance of the class raises NotImplementedError \"'message_and_"
        "aggregate' not implemented\" on a SparseTensor adj_t",
        "each layer fuses by its own aggregation: the sparse product PyG's own undecorated "
        "propagate gives, whatever was built before (the parity cases run PyG that way)",
        _PROOF + "test_a_sparse_layer_fuses_whatever_its_class_built_first"),
)


def deviations_of(op: str) -> list:
    """The deviations that concern ``op``."""
    return [d for d in DEVIATIONS if op in d.ops]
