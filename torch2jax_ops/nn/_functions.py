"""The mapping table of the fx path: torch functions, ``torch.nn.functional``, Tensor methods
and ``operator`` on JAX, with torch's signatures, dtype rules and numerics.

Each entry is registered into :mod:`._registry` (``register_function`` by the
dotted path of the torch object, ``register_method`` by Tensor method name)
and runs on the JAX values a traced forward carries (see :mod:`._fx`).
Sections, one private module each:

* :mod:`._functions_base` -- registration, the dtype argument helper
  (:func:`dtype_arg`) and torch's type promotion (:func:`result_type`);
* :mod:`._functions_creation` -- zeros/ones/full/arange/tensor/``*_like``,
  ``new_*``, casts (``.to``, ``.float()`` ...), ``size``/``dim``/``numel``;
* :mod:`._functions_shape` -- view/reshape/permute/expand/cat/split/chunk,
  and indexing (``x[i]``, ``x[i] = v``, gather, index_select, where ...);
* :mod:`._functions_math` -- arithmetic and ``operator.*``, elementwise math,
  comparisons, logic, clamp, the matmul family and ``F.linear``;
* :mod:`._functions_reduce` -- sum/mean/std/max/min/argmax/norm, scans,
  sort/topk;
* :mod:`._functions_nn` -- activations, softmax, normalisation, embedding,
  one_hot, pad, similarity, dropout and random factories;
* :mod:`._functions_loss` -- the losses;
* :mod:`._functions_sparse` -- torch sparse COO / CSR tensors (BCOO / BCSR): construction,
  sparse products, accessors.

:func:`function_keys` / :func:`method_keys` list what this table registers (from the
registry: one entry per key, so the order these modules load in changes nothing).
"""
from __future__ import annotations

from . import (  # noqa: F401  (each registers its entries)
    _functions_creation,
    _functions_loss,
    _functions_math,
    _functions_nn,
    _functions_reduce,
    _functions_shape,
    _functions_sparse,
)
from ._functions_base import dtype_arg, function_keys, method_keys, promote, result_type

__all__ = ["function_keys", "method_keys", "dtype_arg", "promote", "result_type"]
