import os

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ["pytester"]  # test_parity_tool runs the `parity` fixture as users do

# Random cases stay few enough for CI on 2 cores; raise with HYPOTHESIS_PROFILE=thorough.
settings.register_profile("ci", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=500, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def require_torch(minimum: str, why: str) -> None:
    """Skip (with the reason) where the installed torch predates ``minimum``, whose behaviour
    this test pins; the suite then stays green on an older torch (the GPU image's 2.11)."""
    import pytest
    import torch

    installed = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    if installed < tuple(int(p) for p in minimum.split(".")):
        pytest.skip(f"torch {torch.__version__}: {why} (verified from torch {minimum} on)")


def run_on_host_devices(script: str, devices: int, done_line: str, timeout: int) -> None:
    """Run ``script`` in a child Python with ``devices`` forced CPU devices (the count must be
    set before JAX starts) from the repository root; assert it printed ``done_line``."""
    import subprocess
    import sys
    from pathlib import Path

    env = {"XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
           "JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"}
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", script], cwd=root, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0 and done_line in done.stdout, \
        done.stdout[-2000:] + done.stderr[-3000:]


@pytest.fixture(autouse=True)
def own_parity_results(tmp_path_factory, monkeypatch):
    """Each test stores and reuses parity results in a folder of its own: a test that runs
    the suite measures it, never a user's earlier run (torch2jax_ops/parity/_results.py)."""
    monkeypatch.setenv("TORCH2JAX_OPS_RESULTS_DIR", str(tmp_path_factory.mktemp("results")))


@pytest.fixture
def on_host():
    """JAX's default device is the CPU during the test: where a CPU torch tensor can be shared.

    ``from_torch`` / ``from_pyg`` place on the default device: on a GPU machine they copy
    a CPU tensor to the GPU (as they should), so a zero-copy test pins the CPU.
    """
    from testkit.devices import on_cpu

    with on_cpu():
        yield


def pytest_configure(config):
    """``T2J_TEST_DEFAULT_DEVICE=<i>``: JAX's default device is ``jax.devices()[i]``
    (testkit/devices.py)."""
    from testkit.devices import configure

    configure()


def pytest_collection_modifyitems(config, items):
    from testkit.tiers import mark_tiers

    mark_tiers(items)


def pytest_runtest_setup(item):
    """A parity case verified from a newer torch than the installed one (``Case.min_torch``)
    is skipped with its reason, in every test that takes a ``case``; a test marked ``gpu``
    unless JAX's backend is a GPU (testkit/devices.py)."""
    import pytest

    from testkit.devices import skip_unless_gpu
    from torch2jax_ops.parity._suite import Case

    skip_unless_gpu(item)
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("case") if callspec is not None else None
    if isinstance(case, Case) and case.skip_reason():
        pytest.skip(case.skip_reason())


def pytest_runtest_teardown(item, nextitem):
    """Keep a long worker's memory bounded (testkit/memory.py)."""
    from testkit.memory import release

    release()
