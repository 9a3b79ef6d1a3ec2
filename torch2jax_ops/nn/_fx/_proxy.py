"""The proxy a traced forward computes with: an fx proxy carrying its JAX value.

Shapes, ``len()``, ``int(x)`` and ``isinstance(x, torch.Tensor)`` behave as in torch
because the value is at hand; a tensor's *value* used as a Python number (under
``jax.jit`` unknown while the program is built) raises, naming the user's line and
which traced argument it comes from.
"""
from __future__ import annotations

import builtins
import operator
from typing import Any

import jax
import numpy as np

from ..._checking import is_array
from .. import _masked
from ._errors import _error, traced_origin, user_frame

__all__: list = []

#: Tensor attributes that are data, not methods: read them on the spot.
_DATA_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim", "T", "mT", "is_cuda",
                              "requires_grad", "layout", "is_sparse", "data", "real", "imag"})


def _make_value_class() -> type:
    """The proxy class (made on first use: torch is imported lazily)."""
    import torch
    import torch.fx as fx

    class _Value(fx.Proxy):
        """A proxy carrying its JAX value: shapes and Python scalars behave concretely."""

        tracer: Any  # always the fx path's tracer (it has ``values``), not any TracerBase

        @property
        def value(self) -> Any:
            return self.tracer.values[self.node]

        # the read-only override is the point: mypy cannot model a __class__ property
        @property  # type: ignore[misc]
        def __class__(self):  # isinstance(x, torch.Tensor) holds for array values
            value = self.tracer.values.get(self.node)
            if is_array(value) or isinstance(value, _masked.MaskedRows):
                return torch.Tensor
            if isinstance(value, tuple):  # torch.max(x, dim=0) is a tuple (of proxies)
                return type(value)
            return type(self)

        def __getattr__(self, k: str) -> Any:
            if k.startswith("_"):  # torch's private flags (Parameter's _is_param ...)
                raise AttributeError(k)
            if k in _DATA_ATTRIBUTES:
                return self.tracer.create_proxy("call_function", builtins.getattr, (self, k), {})
            return super().__getattr__(k)

        def _scalar(self, kind: type) -> Any:
            v = self.value
            if isinstance(v, (bool, int, float, np.integer, np.floating, np.bool_)):
                return kind(v)
            if isinstance(v, jax.Array) and not isinstance(v, jax.core.Tracer) and v.size == 1:
                return kind(v.item())  # a known value (every call traces afresh)
            origin = traced_origin(self.tracer.values, self.tracer.program.name, self.node)
            raise _error(self.node, f"a tensor's value is used as a Python {kind.__name__} "
                                    f"(.item(), int(x), range(x) ...): under JAX the value is "
                                    f"not known while the program is built{origin}")

        def __index__(self) -> int:
            return self._scalar(int)

        def __int__(self) -> int:
            return self._scalar(int)

        def __float__(self) -> float:
            return self._scalar(float)

        def __setitem__(self, index: Any, value: Any) -> None:
            self.tracer.create_proxy("call_function", operator.setitem, (self, index, value), {})

        def __len__(self) -> int:
            v = self.value
            if isinstance(v, (tuple, list, dict)):
                return len(v)
            if is_array(v) and v.ndim:
                return int(v.shape[0])
            if isinstance(v, _masked.MaskedRows):
                raise ValueError(_masked.unsupported("len()", user_frame(
                    self.node.meta.get("stack_trace")), v.origin))
            raise _error(self.node, f"len() of a {type(v).__name__}")

    return _Value
