"""The test tiers: ``make test`` runs everything; ``make test-fast`` runs what is not marked
``slow``: the torch-free unit tests, one parity case per (section, op, dtype family), the
first variant of every other parametrized test, and the behaviour tests of modules not listed
here. Torch-free (tests/conftest.py uses it too)."""
from __future__ import annotations

#: modules whose tests are slow as a whole (subprocesses, hypothesis, whole pages, examples)
SLOW_MODULES = frozenset({
    "test_scatter_hypothesis", "test_segment_hypothesis", "test_docs", "test_benchmark_script",
    "test_deviations", "test_examples", "test_data_loader", "test_distributed_jax",
    "test_loader_jax", "test_wheel",
})

#: single tests that take 5 s or more on the 2-core CI machine (random sweeps of many cases,
#: hundreds of compilations): the full suite runs them
SLOW_TESTS = frozenset({
    "test_200_graphs_of_10_to_10000_nodes_compile_at_most_8_times",
    "test_scatter_reduce_random", "test_gather_and_index_select_random", "test_index_ops_random",
    "test_random_jacrev_jacobian_against_torch",
    "test_user_model_training_mode_draws_from_the_port_key",
    "test_user_model_with_utilities_matches_pyg", "test_layers_match_pyg_on_random_graphs",
    "test_static_forms_under_jit_equal_eager", "test_models_through_the_fx_path",
    "test_as_jax_under_jit_vmap_jacrev_and_second_order",
    "test_hierarchical_user_model_runs_eagerly_with_pygs_sizes",
    "test_user_model_with_native_scatter_calls_converts",
    "test_dropout_rates_match_pyg_in_distribution",
    "test_sharded_layers_match_pyg_on_four_host_devices",
    "test_gatv2_attention_weights_match_pyg_after_compaction", "test_spmm_random_matrices",
})


def mark_tiers(items: list) -> None:
    """Mark ``slow`` every test of :data:`SLOW_MODULES` and :data:`SLOW_TESTS`, every parity
    case that does not represent its (section, op, dtype family), and every variant but the
    first of the other parametrized tests."""
    import pytest

    from torch2jax_ops.parity._suite import Case, representatives

    cases = [item.callspec.params["case"] for item in items
             if hasattr(item, "callspec") and isinstance(item.callspec.params.get("case"), Case)]
    keep = {id(c) for c in representatives(cases)}
    slow = pytest.mark.slow
    seen: set = set()
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""
        name = getattr(item, "originalname", item.name)
        params = item.callspec.params if hasattr(item, "callspec") else {}
        case = params.get("case")
        if isinstance(case, Case):
            later_variant = id(case) not in keep
        else:
            later_variant = bool(params) and (module, name) in seen
            seen.add((module, name))
        if module in SLOW_MODULES or name in SLOW_TESTS or later_variant:
            item.add_marker(slow)
