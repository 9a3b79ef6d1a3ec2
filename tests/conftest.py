"""Torch-free unit tests: the fast tier marks (see parity_tests/tiers.py)."""


def pytest_collection_modifyitems(config, items):
    from parity_tests.tiers import mark_tiers

    mark_tiers(items)


def pytest_runtest_teardown(item, nextitem):
    """Keep a long worker's memory bounded (parity_tests/memory.py)."""
    from parity_tests.memory import release

    release()
