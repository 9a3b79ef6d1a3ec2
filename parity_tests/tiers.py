"""The test tiers: ``make test`` runs everything; ``make test-fast`` runs what is not marked
``slow``: the torch-free unit tests, one parity case per (section, op, dtype family), and the
behaviour tests of modules not listed here. Torch-free (tests/conftest.py uses it too)."""
from __future__ import annotations

#: modules whose tests are slow as a whole (subprocesses, hypothesis, whole pages, examples)
SLOW_MODULES = frozenset({
    "test_scatter_hypothesis", "test_segment_hypothesis", "test_docs", "test_benchmark_script",
    "test_deviations", "test_examples", "test_data_loader", "test_distributed_jax",
    "test_loader_jax",
})


def mark_tiers(items: list) -> None:
    """Mark ``slow`` every test of :data:`SLOW_MODULES` and every parity case that does
    not represent its (section, op, dtype family)."""
    import pytest

    from torch2jax_ops.parity._suite import Case, representatives

    cases = [item.callspec.params["case"] for item in items
             if hasattr(item, "callspec") and isinstance(item.callspec.params.get("case"), Case)]
    keep = {id(c) for c in representatives(cases)}
    slow = pytest.mark.slow
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""
        case = item.callspec.params.get("case") if hasattr(item, "callspec") else None
        if module in SLOW_MODULES or (isinstance(case, Case) and id(case) not in keep):
            item.add_marker(slow)
