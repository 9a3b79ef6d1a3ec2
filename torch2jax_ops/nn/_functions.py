"""The mapping table: torch functions, ``torch.nn.functional``, Tensor methods and ``operator``
on JAX, with torch's signatures and numerics (registered into :mod:`._registry`)."""
from __future__ import annotations

__all__: list = []
