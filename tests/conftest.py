"""Torch-free unit tests: the fast tier marks (see testkit/tiers.py)."""


def pytest_collection_modifyitems(config, items):
    from testkit.tiers import mark_tiers

    mark_tiers(items)


def pytest_runtest_teardown(item, nextitem):
    """Keep a long worker's memory bounded (testkit/memory.py)."""
    from testkit.memory import release

    release()
