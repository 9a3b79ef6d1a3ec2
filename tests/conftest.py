"""Torch-free unit tests: the fast tier marks (see parity_tests/tiers.py)."""


def pytest_collection_modifyitems(config, items):
    from parity_tests.tiers import mark_tiers

    mark_tiers(items)
