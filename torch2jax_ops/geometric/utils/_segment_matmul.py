"""pyg_lib's ``segment_matmul``, and the typed matmul it shares with ``HeteroLinear``.

``segment_matmul(inputs [N, K], ptr [T + 1], other [T, K, M]) -> [N, M]``:
rows ``ptr[t]:ptr[t + 1]`` of ``inputs`` times ``other[t]`` (pyg_lib's
documented rule, and what PyG's ``HeteroLinear.forward_naive`` computes in a
loop). Underneath both sits :func:`typed_matmul`, ``out_i = x_i @ W[type_i]``
for a per-row type in any order, so ``HeteroLinear`` never sorts.

How it is computed (measured on this project's XLA:CPU machine, 2 cores,
``jax.jit``, float32, forward and forward + backward w.r.t. both operands,
best of 3-5 runs):

* **project-all-then-select**: every row times every type's matrix in one
  matmul (``[N, K] @ [K, T * M]``), then each row picks its type's ``M``
  columns. ``T`` times the flops, but one large GEMM.
* **gathered weights**: each row gathers its ``[K, M]`` matrix and a batched
  matrix-vector product (``einsum("nk,nkm->nm")``). No wasted flops, but
  memory-bound (``N * K * M`` weights read).
* ``jax.lax.ragged_dot`` with group sizes ``diff(ptr)``: lowered densely on
  CPU (``T`` full matmuls, masked), and it needs rows sorted by type.
* a per-type masked sum (``sum_t where(type == t, x, 0) @ W_t``): the flops of
  project-all in ``T`` GEMMs.

======================  =============  ============  =============  ===========
N, K=M, T (f+b ms)      project-all    gathered W    ragged_dot     masked sum
======================  =============  ============  =============  ===========
1000, 32, 4             0.39           1.22          1.25           0.42
20000, 64, 8            72.8           361           157            100
100000, 128, 5          667            --            1054           750
20000, 64, 32           150            232           313            194
20000, 64, 48           451            196           --             --
20000, 32, 64           127            70            240            154
20000, 16, 16           26.0           22.5          --             --
20000, 16, 32           66.7           22.7          --             --
10000, 128, 48          307            634           --             --
5000, 16, 1000          198            2.1           1160           1052
======================  =============  ============  =============  ===========

So project-all is used while ``T <= 8 + sqrt(K * M) / 2`` (the measured
crossover: about 16 types at ``K = M = 16``, 40 at 64, past 48 at 128), the
gathered weights beyond. ragged_dot was never fastest on CPU (1.6-2.2x slower
than project-all at the common sizes). Either intermediate (``N * T * M`` or
``N * K * M`` elements) is built in row blocks of at most 2**26 elements
(``jax.lax.map``), so memory stays bounded for large graphs.
"""
from __future__ import annotations

import math
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ..._checking import as_array, check_index, debug_check, is_traced
from ..._sharding import OutSharding, sharding_aware
from ...nn import register_function
from ...torch_scatter._gather import csr_ids

__all__ = ["segment_matmul", "typed_matmul"]

#: the largest intermediate (elements) built at once; larger inputs go in row blocks
_BLOCK_ELEMENTS = 1 << 26


def _project_all_faster(t: int, k: int, m: int) -> bool:
    """The measured crossover (module docs): project-all up to ``8 + sqrt(K * M) / 2`` types."""
    return t <= 8 + math.sqrt(k * m) / 2


def _project_all(x: jax.Array, types: jax.Array, weight: jax.Array,
                 bias: Optional[jax.Array]) -> jax.Array:
    t, k, m = weight.shape
    proj = x @ jnp.transpose(weight, (1, 0, 2)).reshape(k, t * m)
    if bias is not None:
        proj = proj + bias.reshape(t * m)
    proj = proj.reshape(x.shape[:-1] + (t, m))
    return jnp.take_along_axis(proj, types[..., None, None], axis=-2)[..., 0, :]


def _gathered(x: jax.Array, types: jax.Array, weight: jax.Array,
              bias: Optional[jax.Array]) -> jax.Array:
    out = jnp.einsum("...k,...km->...m", x, jnp.take(weight, types, axis=0))
    return out if bias is None else out + jnp.take(bias, types, axis=0)


def typed_matmul(x: jax.Array, types: jax.Array, weight: jax.Array,
                 bias: Optional[jax.Array] = None) -> jax.Array:
    """``out[i] = x[i] @ weight[types[i]] (+ bias[types[i]])`` for types in any order.

    ``x`` ``[N, K]``, ``types`` ``[N]`` integers, ``weight`` ``[T, K, M]``,
    ``bias`` ``[T, M]`` or None -> ``[N, M]``. A row whose type lies outside
    ``[0, T)`` gets 0 (and passes no gradient). Arguments are not checked
    here (the public ops check them). The strategy is chosen by shape, as
    measured (module docs).
    """
    n = x.shape[0]
    t, k, m = weight.shape
    dtype = jnp.result_type(x, weight) if bias is None else jnp.result_type(x, weight, bias)
    if n == 0 or t == 0 or m == 0:
        return jnp.zeros((n, m), dtype)
    ok = (types >= 0) & (types < t)
    safe = jnp.where(ok, types, 0)
    # an invalid row reads zeros: no inf * 0 in the weight gradient of type 0
    x = jnp.where(ok[:, None], x, jnp.zeros((), x.dtype))
    project = _project_all_faster(t, k, m)
    compute = _project_all if project else _gathered
    block = max(1, _BLOCK_ELEMENTS // max(1, t * m if project else k * m))
    if n <= block:
        out = compute(x, safe, weight, bias)
    else:
        out = jax.lax.map(lambda row: compute(row[0], row[1], weight, bias), (x, safe),
                          batch_size=block)
    return jnp.where(ok[:, None], out, jnp.zeros((), out.dtype)).astype(dtype)


def _check_ptr(ptr: jax.Array, n: int, op: str) -> None:
    """``ptr`` rises (non-decreasing) within ``[0, N]``: eagerly, or via checkify when traced."""
    if is_traced(ptr):
        debug_check(jnp.all(jnp.diff(ptr) >= 0) & (ptr[0] >= 0) & (ptr[-1] <= n),
                    f"{op}: `ptr` must be non-decreasing with values in [0, {n}] "
                    f"(inputs.shape[0]); got values in [{{lo}}, {{hi}}]",
                    lo=jnp.min(ptr), hi=jnp.max(ptr))
        return
    p = np.asarray(ptr)
    if p[0] < 0:
        raise ValueError(f"{op}: `ptr` starts at {int(p[0])}; its values must lie in "
                         f"[0, {n}] (inputs.shape[0] = {n})")
    if p[-1] > n:
        raise ValueError(f"{op}: `ptr` ends at {int(p[-1])}, but `inputs` has only {n} rows; "
                         f"its values must lie in [0, {n}]")
    falls = np.flatnonzero(np.diff(p) < 0)
    if falls.size:
        i = int(falls[0])
        raise ValueError(f"{op}: `ptr` must be non-decreasing (segment t is rows "
                         f"ptr[t]:ptr[t + 1]), but ptr[{i}] = {int(p[i])} > ptr[{i + 1}] = "
                         f"{int(p[i + 1])}")


@sharding_aware
def segment_matmul(inputs: ArrayLike, ptr: ArrayLike, other: ArrayLike,
                   *, out_sharding: OutSharding = None) -> jax.Array:
    """``pyg_lib.ops.segment_matmul``: ``out[ptr[t]:ptr[t + 1]] = inputs[ptr[t]:ptr[t + 1]] @ other[t]``.

    Args:
      inputs: ``[N, K]``.
      ptr: ``[T + 1]`` integers, non-decreasing, values in ``[0, N]``: the
        segment boundaries (empty segments allowed). Its length is a static
        shape; its values may be traced (under ``jax.jit`` the range check runs
        only under :func:`torch2jax_ops.checked`).
      other: ``[T, K, M]``, the same dtype as ``inputs`` (torch's matmul rule).

    Returns:
      ``[N, M]``. Rows outside ``[ptr[0], ptr[-1])`` belong to no segment and
      are 0 (with no gradient). pyg_lib leaves them undefined: its kernel
      writes into ``new_empty`` memory, and its CPU kernel lays the segments
      out from row 0 with sizes ``diff(ptr)`` (``split_with_sizes``, which
      raises unless ``ptr[-1] - ptr[0] == N``); PyG's ``forward_naive`` uses
      the absolute rows ``ptr[t]:ptr[t + 1]`` as here. When ``ptr`` starts at
      0 and ends at ``N`` (every ``HeteroLinear`` call) all three agree.

    Differentiable w.r.t. ``inputs`` and ``other``; works under ``jax.jit``
    and ``jax.vmap`` (``ptr`` may be batched too). Computed by
    :func:`typed_matmul` (strategy and measurements in the module docs).
    """
    op = "segment_matmul"
    inputs = as_array(inputs, "inputs", op=op)
    ptr = as_array(ptr, "ptr", op=op)
    other = as_array(other, "other", op=op)
    if inputs.ndim != 2:
        raise ValueError(f"{op}: `inputs` must be 2-D [N, K], got shape {tuple(inputs.shape)}")
    if other.ndim != 3:
        raise ValueError(f"{op}: `other` must be 3-D [T, K, M] (one [K, M] matrix per "
                         f"segment), got shape {tuple(other.shape)}")
    if other.shape[1] != inputs.shape[1]:
        raise ValueError(f"{op}: `other` has matrices of {other.shape[1]} rows ([T, K, M] = "
                         f"{tuple(other.shape)}), but `inputs` has K = {inputs.shape[1]} "
                         f"columns; other.shape[1] must equal inputs.shape[1]")
    check_index(ptr, "ptr", op=op)
    t = other.shape[0]
    if ptr.ndim != 1 or ptr.shape[0] != t + 1:
        raise ValueError(f"{op}: `ptr` must be 1-D with T + 1 = {t + 1} entries (T = "
                         f"other.shape[0] = {t} segments), got shape {tuple(ptr.shape)}")
    if inputs.dtype != other.dtype:
        raise TypeError(f"{op}: `other` has dtype {other.dtype} but `inputs` has "
                        f"{inputs.dtype}; both must have the same dtype (as torch's matmul)")
    n = inputs.shape[0]
    _check_ptr(ptr, n, op)
    # segment id of each row: -1 before ptr[0], T from ptr[-1] on (both reach no segment)
    types = csr_ids(ptr, n)
    return typed_matmul(inputs, types, other)


register_function("pyg_lib.ops.segment_matmul")(segment_matmul)
