"""The fx path of ``from_torch``: any torch module, its forward replayed in JAX.

The names the rest of the package imports from here; the code is in the private modules.
"""
from .._state import key_scope
from ._tracer import TorchCallable, TracedModule, Unsupported, resolve
from ._tracer import _children, _Program  # noqa: F401  (geometric's traced MessagePassing)

__all__ = ["TracedModule", "TorchCallable", "Unsupported", "resolve", "key_scope"]
