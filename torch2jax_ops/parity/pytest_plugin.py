"""The pytest plugin of torch2jax_ops: a ``parity`` fixture.

Installed with the package (entry point ``pytest11``), so any test can ask
for it::

    def test_my_port(parity):
        parity(torch_fn, jax_fn, x, index)          # assert_parity
        parity.modules(torch_model, jax_model, x)   # assert_modules_parity

A mismatch fails the test with the readable table of the comparison; every
comparison's worst error/tolerance is recorded as a ``user_properties`` entry
of the test (in JUnit XML with ``--junitxml``).
"""
from __future__ import annotations

from typing import Any, Callable

import pytest

__all__ = ["ParityFixture", "parity"]


class ParityFixture:
    """What the ``parity`` fixture gives: assert_parity / compare_modules bound to one test."""

    def __init__(self, node: Any) -> None:
        self.node = node
        #: every :class:`~torch2jax_ops.parity.ParityResult` of this test, in order.
        self.results: list = []

    def _record(self, result: Any) -> Any:
        self.results.append(result)
        self.node.user_properties.append((f"parity {result.name}", f"{result.tol_ratio:.3g}"))
        if not result.passed:
            raise AssertionError(str(result))
        return result

    def __call__(self, torch_fn: Callable, jax_fn: Callable, *args: Any, **options: Any) -> Any:
        """:func:`~torch2jax_ops.parity.assert_parity`; returns the result."""
        from ._compare import compare

        return self._record(compare(torch_fn, jax_fn, *args, **options))

    def modules(self, torch_module: Any, jax_module: Any, *args: Any, **options: Any) -> Any:
        """:func:`~torch2jax_ops.parity.assert_modules_parity`; returns the result."""
        from ._modules import compare_modules

        return self._record(compare_modules(torch_module, jax_module, *args, **options))


@pytest.fixture
def parity(request: pytest.FixtureRequest) -> ParityFixture:
    """Assert that a JAX port matches its torch original (outputs and gradients)."""
    return ParityFixture(request.node)
