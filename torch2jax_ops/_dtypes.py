"""The one dtype table of torch2jax_ops: names, torch <-> JAX maps, tolerances.

Every other module asks this one. Names are torch's spellings without the
``torch.`` prefix (``"float32"``, ``"bfloat16"``, ``"int64"`` ...).

Tolerances follow ``torch.testing.assert_close``'s defaults (rtol, atol) for
each floating dtype; integers and bools compare exactly.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

import jax
import jax.numpy as jnp
import numpy as np

FLOAT_NAMES = ("float16", "bfloat16", "float32", "float64")
INT_NAMES = ("uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64")
COMPLEX_NAMES = ("complex64", "complex128")
ALL_NAMES = FLOAT_NAMES + INT_NAMES + ("bool",) + COMPLEX_NAMES

#: dtypes that exist only in JAX's 64-bit mode (``jax_enable_x64``), and the
#: 32-bit type each becomes when that mode is off.
X64_DOWNCAST = {"int64": "int32", "uint64": "uint32", "float64": "float32",
                "complex128": "complex64"}
X64_NAMES = tuple(X64_DOWNCAST)

#: (rtol, atol) per dtype, as torch.testing.assert_close uses by default.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}


#: (rtol, atol) for gradients: a backward pass chains several rounded steps,
#: and torch's own float16/bfloat16 gradients sit up to ~2 ulps from the exact
#: value, so half types allow 4 ulps. Other dtypes as TOLERANCES.
GRAD_TOLERANCES: dict[str, tuple[float, float]] = {
    **TOLERANCES,
    "float16": (4e-3, 1e-5),
    "bfloat16": (3.2e-2, 1e-5),
}


def name_of(dtype: Any) -> str:
    """The canonical name of a torch, NumPy or JAX dtype (or of an array's dtype)."""
    if hasattr(dtype, "dtype") and not isinstance(dtype, type):
        dtype = dtype.dtype
    text = str(dtype)
    if text.startswith("torch."):
        text = text[len("torch."):]
        return {"half": "float16", "float": "float32", "double": "float64",
                "long": "int64", "int": "int32", "short": "int16"}.get(text, text)
    return np.dtype(dtype).name if text != "bfloat16" else "bfloat16"


def jax_dtype(name_or_dtype: Any) -> np.dtype:
    """The JAX (NumPy-style) dtype for a name or a torch dtype."""
    name = name_or_dtype if isinstance(name_or_dtype, str) else name_of(name_or_dtype)
    if name not in ALL_NAMES:
        raise TypeError(f"unsupported dtype {name_or_dtype!r}; supported: {', '.join(ALL_NAMES)}")
    return jnp.dtype(name)


def canonical_jax_dtype(dtype: Any) -> np.dtype:
    """A dtype argument of any flavour as the JAX dtype a JAX array can hold now.

    Takes torch dtypes (``torch.long``), NumPy/JAX dtypes, names, and Python's
    ``float``/``int``/``bool``/``complex`` (as torch reads them in a ``dtype=``:
    float64, int64, bool, complex128). 64-bit types become their 32-bit ones
    while JAX's 64-bit mode is off (JAX could not hold them anyway).
    """
    python = {float: "float64", int: "int64", bool: "bool", complex: "complex128"}
    if isinstance(dtype, type) and dtype in python:
        dtype = python[dtype]
    name = jax_dtype(dtype).name
    if name in X64_DOWNCAST and not x64_enabled():
        name = X64_DOWNCAST[name]
    return jnp.dtype(name)


def torch_dtype(name_or_dtype: Any):
    """The torch dtype for a name or a NumPy/JAX dtype (imports torch)."""
    import torch

    name = name_or_dtype if isinstance(name_or_dtype, str) else name_of(name_or_dtype)
    if name not in ALL_NAMES:
        raise TypeError(f"unsupported dtype {name_or_dtype!r}; supported: {', '.join(ALL_NAMES)}")
    return getattr(torch, name)


def kind_of(dtype: Any) -> str:
    """"float", "int", "complex" or "bool": what must agree between torch and JAX.

    Integer widths may differ (JAX's follows its 64-bit mode); float names may not.
    """
    name = name_of(dtype)
    if name in FLOAT_NAMES:
        return "float"
    if name in INT_NAMES:
        return "int"
    return "complex" if name in COMPLEX_NAMES else name


def tolerance(dtype: Any, kind: str = "output") -> tuple[float, float]:
    """Default (rtol, atol) for comparing values of this dtype; (0, 0) = exact.

    ``kind="grad"`` gives the gradient row (:data:`GRAD_TOLERANCES`).
    """
    table = GRAD_TOLERANCES if kind == "grad" else TOLERANCES
    return table.get(name_of(dtype), (0.0, 0.0))


def accumulation_dtype(dtype: Any) -> np.dtype:
    """The dtype torch accumulates sums of ``dtype`` in on CPU.

    float16 and bfloat16 sums accumulate in float32 and are rounded once at the
    end (JAX's segment_sum would accumulate in the narrow type: 3000 float16
    ones sum to 2048 there, to 3000 in torch). Every other dtype accumulates
    in itself.
    """
    dtype = jnp.dtype(dtype)
    return jnp.dtype(jnp.float32) if dtype in (jnp.float16, jnp.bfloat16) else dtype


def x64_enabled() -> bool:
    """Whether JAX's 64-bit mode (``jax_enable_x64``) is on right now."""
    # jax sets its options on Config as dynamic attributes; its class declares none of them
    return jax.config.jax_enable_x64  # type: ignore[attr-defined]


def needs_x64(dtype: Any) -> bool:
    """True for dtypes that JAX represents only with 64-bit mode on."""
    return name_of(dtype) in X64_NAMES


def index_dtype() -> np.dtype:
    """JAX's default integer width right now: int64 with x64 mode, else int32."""
    return jnp.dtype(jnp.int64 if x64_enabled() else jnp.int32)


@contextlib.contextmanager
def x64(enabled: bool = True) -> Iterator[None]:
    """Temporarily switch JAX's 64-bit mode (restored on exit)."""
    previous = bool(x64_enabled())
    jax.config.update("jax_enable_x64", bool(enabled))
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", previous)
