"""The device a test assumes, stated (both conftests and the tests use this module). Torch-free.

On a CUDA machine JAX's default device is the GPU (migration_guide/gpu.md, "The test suite
on a card"), so a test states what it assumes instead of taking the default device for the
CPU:

- :func:`on_cpu` / :func:`cpu`: the CPU device, explicitly. Code that only the CPU runs
  (the C++ kernel of ``geometric/_core/_cpu_kernel.py``, an XLA:CPU FFI handler; the streamed
  loop) and zero-copy sharing of CPU torch tensors are tested there.
- :func:`assert_bitwise_on_cpu`: float results are equal to the bit where the platform of
  the array's device promises it (the CPU: XLA:CPU adds in a fixed order), and within the
  dtype's tolerance elsewhere (a GPU's scatter-add order is the hardware's).
- the ``gpu`` mark (pyproject.toml): a test that only a GPU can check; skipped, with the
  reason, unless ``jax.default_backend() == "gpu"`` (:func:`skip_unless_gpu`).

Without a GPU, ``T2J_TEST_DEFAULT_DEVICE=1`` with
``XLA_FLAGS=--xla_force_host_platform_device_count=2`` makes JAX's default device the second
CPU device for the whole run (:func:`configure`), so a test that takes the default device
for "the CPU device the torch tensors live on" fails there as it would on a card.
"""
from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

#: ``T2J_TEST_DEFAULT_DEVICE=<i>``: JAX's default device is ``jax.devices()[i]`` for the run
ENVIRONMENT = "T2J_TEST_DEFAULT_DEVICE"

#: why a ``gpu`` test is skipped elsewhere
SKIP_REASON = "gpu: only a GPU run checks this (JAX's default backend here is {backend!r})"


def configure() -> None:
    """Honour :data:`ENVIRONMENT` (both conftests call this in ``pytest_configure``)."""
    chosen = os.environ.get(ENVIRONMENT)
    if not chosen:
        return
    import jax
    import pytest

    devices = jax.devices()
    if not chosen.isdigit() or int(chosen) >= len(devices):
        raise pytest.UsageError(
            f"{ENVIRONMENT}={chosen}: expected an index into jax.devices(), which are "
            f"{devices}; with one CPU, set XLA_FLAGS=--xla_force_host_platform_device_count=2")
    jax.config.update("jax_default_device", devices[int(chosen)])


def skip_unless_gpu(item: Any) -> None:
    """Skip a test marked ``gpu`` unless JAX's default backend is a GPU (``pytest_runtest_setup``
    of both conftests)."""
    if item.get_closest_marker("gpu") is None:
        return
    import jax
    import pytest

    if jax.default_backend() != "gpu":
        pytest.skip(SKIP_REASON.format(backend=jax.default_backend()))


def cpu() -> Any:
    """The CPU device: where the CPU kernel runs and where torch's CPU tensors are shared."""
    import jax

    return jax.devices("cpu")[0]


@contextlib.contextmanager
def on_cpu() -> Iterator[None]:
    """JAX's default device is the CPU device within the block, whatever it is outside (the
    GPU on a CUDA machine)."""
    import jax

    with jax.default_device(cpu()):
        yield


def platform(array: Any) -> str:
    """The platform of the device a JAX array lives on (``"cpu"``, ``"gpu"``, ``"tpu"``)."""
    (device,) = array.devices()
    return device.platform


def assert_bitwise_on_cpu(actual: Any, desired: Any, *, cpu_rtol: float = 0.0,
                          cpu_atol: float = 0.0) -> None:
    """``actual`` (a JAX array) equals ``desired``: to the bit where ``actual`` lives on the CPU
    (or within ``cpu_rtol``/``cpu_atol``, where a test compares two summation orders), within
    the dtype's tolerance (``torch2jax_ops.dtypes.tolerance``) on a GPU or TPU, whose float
    scatter-adds run in the order the hardware schedules them (and whose float32 arithmetic
    may round a result 1 ulp apart from XLA:CPU's)."""
    import numpy as np

    from torch2jax_ops import dtypes

    got, want = np.asarray(actual), np.asarray(desired)
    if platform(actual) == "cpu":
        if cpu_rtol == 0.0 and cpu_atol == 0.0:
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=cpu_rtol, atol=cpu_atol)
        return
    rtol, atol = dtypes.tolerance(actual.dtype)
    np.testing.assert_allclose(got, want, rtol=max(rtol, cpu_rtol), atol=max(atol, cpu_atol))


def require_one_device(what: str) -> None:
    """Skip, with the reason, in a process with several devices, where ``what`` is off by
    design: the CPU kernel has no sharding rule and the streamed loop would slice sharded edge
    lists (``_cpu_kernel.usable``, ``_gather.stream_block``; checked on two forced host devices
    by tests/test_gather_forms.py::test_one_pass_with_several_devices). The simulated run of
    :data:`ENVIRONMENT` has two CPU devices; a machine with one GPU has one device."""
    import jax
    import pytest

    if jax.device_count() > 1:
        pytest.skip(f"{jax.device_count()} devices: {what} is off in a process with several "
                    f"devices (by design; test_one_pass_with_several_devices checks that)")
