"""Sharded arrays: one implementation for no mesh, JAX's Auto sharding and Explicit sharding.

(Being implemented for the multi-device issue; until then :func:`sharding_aware`
returns the function unchanged.)
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar

__all__ = ["sharding_aware"]

F = TypeVar("F", bound=Callable[..., Any])


def sharding_aware(fn: F) -> F:
    """Make a public op or a layer's ``__call__`` work on Explicit-sharded arrays."""
    return fn
