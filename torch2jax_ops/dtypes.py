"""The dtype table: torch <-> JAX names, JAX's 64-bit mode, and the parity tolerances.

Names are torch's spellings without the ``torch.`` prefix (``"float32"``,
``"bfloat16"``, ``"int64"`` ...). Tolerances follow
``torch.testing.assert_close``'s defaults per floating dtype; integers and
bools compare exactly. ``x64()`` switches JAX's 64-bit mode for a block.
"""
from ._dtypes import (
                      ALL_NAMES,
                      COMPLEX_NAMES,
                      FLOAT_NAMES,
                      GRAD_TOLERANCES,
                      INT_NAMES,
                      TOLERANCES,
                      X64_DOWNCAST,
                      X64_NAMES,
                      accumulation_dtype,
                      index_dtype,
                      jax_dtype,
                      kind_of,
                      name_of,
                      needs_x64,
                      tolerance,
                      torch_dtype,
                      x64,
)

__all__ = ["FLOAT_NAMES", "INT_NAMES", "COMPLEX_NAMES", "ALL_NAMES", "X64_DOWNCAST", "X64_NAMES",
           "TOLERANCES", "GRAD_TOLERANCES", "name_of", "jax_dtype", "torch_dtype", "kind_of",
           "tolerance", "accumulation_dtype", "needs_x64", "index_dtype", "x64"]
