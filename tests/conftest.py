"""Torch-free unit tests: the fast tier marks (see testkit/tiers.py); the device a run assumes
and the ``gpu`` mark (testkit/devices.py)."""


def pytest_configure(config):
    """``T2J_TEST_DEFAULT_DEVICE=<i>``: JAX's default device is ``jax.devices()[i]``."""
    from testkit.devices import configure

    configure()


def pytest_runtest_setup(item):
    """A test marked ``gpu`` is skipped, with the reason, unless JAX's backend is a GPU."""
    from testkit.devices import skip_unless_gpu

    skip_unless_gpu(item)


def pytest_collection_modifyitems(config, items):
    from testkit.tiers import mark_tiers

    mark_tiers(items)


def pytest_runtest_teardown(item, nextitem):
    """Keep a long worker's memory bounded (testkit/memory.py)."""
    from testkit.memory import release

    release()
