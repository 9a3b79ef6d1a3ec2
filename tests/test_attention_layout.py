"""Attention convs per platform: no message rows on the CPU, plain gathers elsewhere.

On a GPU a joined ``[N, H, C + 1]`` table (features and score, the CPU's layout
before the kernel pair) made every gathered message row ``C + 1`` floats wide
and its gradient a scatter-add of ``[E, H, C + 1]`` rows (issue 34: the
parameter gradient of GATConv 4x64 ran 3x slower than PyG CUDA). These tests
lower for CUDA on a CPU-only machine and read the HLO: what fusion cannot hide
is the operand shape of the gathers and scatters.

On the CPU, where the kernel is built, GATConv's weighted sum and its gradient are
the kernel pair (``weighted_gather_scatter_add`` and ``edge_dot``): no ``[E, H, C]``
(or ``[E, H, C + 1]``) array is gathered or scattered at all.
"""
from __future__ import annotations

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from testkit.devices import require_one_device
from torch2jax_ops.geometric.nn import GATConv

N, E, H, C, F = 40, 160, 4, 8, 6


def _gat() -> GATConv:
    rng = np.random.default_rng(0)
    state = {"lin.weight": rng.standard_normal((H * C, F)).astype(np.float32),
             "att_src": rng.standard_normal((1, H, C)).astype(np.float32),
             "att_dst": rng.standard_normal((1, H, C)).astype(np.float32),
             "bias": rng.standard_normal(H * C).astype(np.float32)}
    return GATConv.from_state_dict(state, heads=H)


def _inputs():
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.standard_normal((N, F)), jnp.float32)
    edge_index = jnp.asarray(rng.integers(0, N, (2, E)), jnp.int32)
    return x, edge_index


def _parameter_gradient_hlo(platform: str) -> str:
    conv = _gat()
    x, edge_index = _inputs()

    def loss(m):
        return jnp.sum(m(x, edge_index) ** 2)

    grad = eqx.filter_grad(loss)
    step = jax.jit(lambda m: grad(m))
    return step.trace(conv).lower(lowering_platforms=(platform,)).as_text()


def _scatter_and_gather_widths(hlo: str, rows: int = 0) -> set:
    """The trailing sizes of every gather result and scatter operand in StableHLO text
    (``rows``: of those with at least that many rows only)."""
    widths = set()
    for line in hlo.splitlines():
        if "stablehlo.gather" in line or "stablehlo.scatter" in line:
            widths.update(int(w) for r, w in re.findall(r"tensor<(\d+)x\d+x(\d+)xf32>", line)
                          if int(r) >= rows)
    return widths


def test_gpu_lowering_gathers_features_and_scores_apart():
    widths = _scatter_and_gather_widths(_parameter_gradient_hlo("cuda"))
    assert C in widths, "the features' [E, H, C] gather/scatter should be there"
    assert C + 1 not in widths, "a joined [E, H, C + 1] row reached the GPU lowering"


def test_cpu_lowering_moves_no_message_rows():
    require_one_device("the CPU kernel")
    hlo = _parameter_gradient_hlo("cpu")
    widths = _scatter_and_gather_widths(hlo, rows=E)
    assert C not in widths and C + 1 not in widths, "[E, H, C] rows reached the CPU lowering"
    # the forward's weighted sum, its gradient w.r.t. the features (the same kernel,
    # ids swapped) and w.r.t. the attention (the edge dot)
    assert hlo.count("torch2jax_ops_weighted_gather_scatter_add_f32") == 2
    assert hlo.count("torch2jax_ops_edge_dot_f32") == 1
