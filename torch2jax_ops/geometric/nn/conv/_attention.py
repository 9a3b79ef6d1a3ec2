"""What the attention and gating convs share: the softmax-weighted sum, self-loops node-wise,
attention dropout, activations and the ``aggr`` / ``aggr_module`` base.

The family: GATv2Conv, TransformerConv, SuperGATConv, AGNNConv (a softmax over
each target's incoming edges), GeneralConv, ResGatedGraphConv, GatedGraphConv,
FiLMConv (gated messages). Each is a :class:`MessagePassing`; ``aggr`` is a
reduction name or, for PyG's other aggregations, the converted ``aggr_module``.

The softmax convs take the fast road of GATConv when they aggregate by sum
(PyG's default for all of them): :func:`attend` normalises after aggregating
(numerator and denominator summed per node, no per-edge division), and the
self-loops PyG appends after removing the existing ones enter node-wise (no
gather, no scatter for them). With another ``aggr`` the loops become edges and the normalised
attention is computed per edge, as PyG does, before ``aggregate``.
Shapes: scores ``[E, *H]``, messages ``[E, *H, C]``; one head is carried
without the unit axis (``[E]``, ``[E, C]``), which XLA:CPU runs faster.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp

from ....nn import Converter
from ....nn._state import next_key
from ..._core._edges import gather_rows, valid
from ...utils._loops import route_self_loops
from ...utils._softmax import segment_softmax, softmax_aggregate
from .._message_passing import MessagePassing
from ._propagation import WeightedPropagation, torch_function

__all__ = ["GatedPropagation", "sums", "drop_dangling", "loop_plan", "attend", "edge_attention",
           "edges_with_loops", "dropout_weights", "l2_normalize", "convert_act", "activate",
           "heads_view", "merge_heads", "head_dot"]


class GatedPropagation(MessagePassing):
    """The family's base: ``aggregate`` by ``aggr`` (a reduction name) or ``aggr_module``.

    Subclasses declare ``aggr: str = eqx.field(static=True, default="add")`` and
    ``aggr_module: Any = None`` (PyG's ``aggr_module`` with its parameters,
    called as ``aggr_module(inputs, index, ptr=None, dim_size=None, dim=node_dim)``).
    """
    aggregate = WeightedPropagation.aggregate


def sums(layer: Any) -> bool:
    """True when ``layer`` aggregates by a plain sum (PyG's ``aggr="add"``)."""
    return getattr(layer, "aggr_module", None) is None and layer.aggr in ("add", "sum")


def drop_dangling(edge_index: jax.Array, n_src: int, n_dst: int) -> jax.Array:
    """An edge whose source is the dropped slot is dropped at its target too.

    ``propagate`` gathers zeros for a dropped source, which would still count
    in a mean, a max or a softmax at the target; routing the target to the
    dropped slot ``n_dst`` removes the edge entirely (PyG never sees it).
    """
    src, dst = edge_index[0], edge_index[1]
    return jnp.stack([src, jnp.where(valid(src, n_src), dst, jnp.asarray(n_dst, dst.dtype))])


def loop_plan(edge_index: jax.Array, n_src: int, n_dst: int,
              add_self_loops: bool) -> tuple[jax.Array, jax.Array, int]:
    """``(src [E], dst [E], L)``: PyG's ``remove_self_loops`` + ``add_self_loops(num_nodes=L)``.

    The existing loops go to the dropped slot; the ``L = min(N_src, N_dst)``
    new loops are not edges here: :func:`attend` adds them node-wise. An edge
    whose source is dropped is dropped at its target too (no message, no
    softmax weight).
    """
    n_loops = min(n_src, n_dst) if add_self_loops else 0
    if add_self_loops:
        src, dst = route_self_loops(edge_index, max(n_src, n_dst))
    else:
        src, dst = edge_index[0], edge_index[1]
    dst = jnp.where(valid(src, n_src), dst, n_dst)
    return src, dst, n_loops


def edges_with_loops(edge_index: jax.Array, n_src: int, n_dst: int,
                     add_self_loops: bool) -> jax.Array:
    """The edge list PyG's attention weights refer to, in a static shape.

    ``[2, E + L]``: the input edges in their slots (removed loops as the
    dropped pair ``(M, M)``, ``M = max(N_src, N_dst)``), then one loop per
    node ``i < L``. PyG returns the same edges compacted (loops deleted).
    """
    if not add_self_loops:
        return edge_index
    m = max(n_src, n_dst)
    loops = jnp.arange(min(n_src, n_dst), dtype=edge_index.dtype)
    return jnp.concatenate([route_self_loops(edge_index, m), jnp.stack([loops, loops])], axis=1)


def dropout_weights(training: bool, p: float, key: Any, shape: tuple, loop_shape: tuple, *,
                    op: str) -> tuple[Optional[jax.Array], Optional[jax.Array]]:
    """Attention dropout (``F.dropout(alpha, p)``): ``keep / (1 - p)`` per edge and per loop."""
    if not training or p == 0:
        return None, None
    if not 0 <= p <= 1:
        raise ValueError(f"{op}: `dropout` has to be between 0 and 1, but got {p}")
    if p == 1:
        return jnp.zeros(shape), jnp.zeros(loop_shape)
    key = next_key(op) if key is None else key
    weights = jax.random.bernoulli(key, 1 - p, shape) / (1 - p)
    loop_weights = jax.random.bernoulli(jax.random.fold_in(key, 1), 1 - p, loop_shape) / (1 - p)
    return weights, loop_weights


def _with_loops(edges: jax.Array, loops: Optional[jax.Array]) -> jax.Array:
    return edges if loops is None or loops.shape[0] == 0 else \
        jnp.concatenate([edges, loops.astype(edges.dtype)], axis=0)


def edge_attention(scores: jax.Array, dst: jax.Array, n: int,
                   loop_scores: Optional[jax.Array] = None,
                   weights: Optional[jax.Array] = None,
                   loop_weights: Optional[jax.Array] = None) -> jax.Array:
    """PyG's normalised attention per edge: ``softmax(scores, dst, num_nodes=n)`` (x dropout).

    ``[E + L, *H]``: the edges, then the ``L`` node-wise loops (``(i, i)`` for
    ``i < L``). Dropped edges get 0.
    """
    loops = 0 if loop_scores is None else loop_scores.shape[0]
    index = _with_loops(dst, None if not loops else jnp.arange(loops, dtype=dst.dtype))
    alpha = segment_softmax(_with_loops(scores, loop_scores), index, n)
    if weights is not None:
        alpha = alpha * _with_loops(weights, loop_weights).astype(alpha.dtype)
    return alpha


def attend(layer: Any, scores: jax.Array, messages: jax.Array, dst: jax.Array, n: int,
           loop_scores: Optional[jax.Array] = None, loop_messages: Optional[jax.Array] = None,
           weights: Optional[jax.Array] = None,
           loop_weights: Optional[jax.Array] = None,
           src: Optional[jax.Array] = None) -> jax.Array:
    """``aggregate(softmax(scores)[..., None] * messages)`` at the targets ``dst``: ``[n, *H, C]``.

    ``scores [E, *H]``, ``messages [E, *H, C]`` (with ``src [E]``: ``[N_src, *H, C]``,
    each edge's message is ``messages[src]``); ``loop_*`` are the node-wise
    self-loops of nodes ``i < L``; ``weights`` the attention dropout. By sum:
    :func:`~torch2jax_ops.geometric.utils._softmax.softmax_aggregate` (normalised after
    the sum; on the CPU the source rows are never gathered); by any other ``aggr``:
    PyG's order (softmax per edge, weighted messages, ``layer.aggregate``).
    """
    if sums(layer):
        return softmax_aggregate(scores, messages, dst, n, loop_scores, loop_messages,
                                 weights, loop_weights, src=src)
    if src is not None:
        messages = gather_rows(messages, src)
    loops = 0 if loop_scores is None else loop_scores.shape[0]
    alpha = edge_attention(scores, dst, n, loop_scores, weights, loop_weights)
    index = _with_loops(dst, None if not loops else jnp.arange(loops, dtype=dst.dtype))
    index = jnp.where(valid(index, n), index, n)
    weighted = alpha[..., None] * _with_loops(messages, loop_messages)
    return layer.aggregate(weighted, index, dim_size=n)


def l2_normalize(x: jax.Array) -> jax.Array:
    """``F.normalize(x, p=2, dim=-1)``: ``x / max(||x||, 1e-12)``."""
    norm = jnp.linalg.norm(x, axis=-1, keepdims=True)
    return x / jnp.maximum(norm, 1e-12)


def convert_act(m: Any, ctx: Converter, name: str = "act") -> dict:
    """The port's ``act`` (a module, converted) / ``act_fn`` (a JAX function) fields.

    ``None`` stays ``None``; a ``torch.nn`` module (``Sigmoid()``, ``ReLU()``,
    ``PReLU`` ...) goes through its converter (its arrays keep their names);
    a plain function (``torch.tanh``, ``F.relu``) maps through the fx table.
    """
    import torch

    act = getattr(m, name)
    if act is None:
        return {name: None, f"{name}_fn": None}
    if isinstance(act, torch.nn.Module):
        return {name: ctx.child(act, name), f"{name}_fn": None}
    return {name: None, f"{name}_fn": torch_function(act, ctx, m, name)}


def activate(layer: Any, x: jax.Array, name: str = "act") -> jax.Array:
    """Apply ``layer``'s activation (module ``act`` or function ``act_fn``); None: identity."""
    module = getattr(layer, name)
    if module is not None:
        return module(x)
    fn: Optional[Callable] = getattr(layer, f"{name}_fn")
    return x if fn is None else fn(x)


def head_dot(x: jax.Array, att: jax.Array) -> jax.Array:
    """``(x * att).sum(-1)`` with a learned ``att``: ``[*, H, C] . [H, C] -> [*, H]`` (one
    head: ``[*, C] . [C] -> [*]``), as one matmul.

    The heads' vectors sit on the diagonal blocks of an ``[H*C, H]`` matrix. The
    broadcast-multiply-reduce form makes XLA:CPU materialise ``att`` broadcast to
    every row (an E-sized buffer per layer for per-edge attention) for a
    separate reduction kernel; the matmul reads ``x`` once (GATv2Conv x2 at 1M
    edges, forward+backward: 4% less time). The same sum up to float rounding.
    """
    if att.ndim == 1:
        return x @ att
    heads, channels = att.shape
    block = att[:, :, None] * jnp.eye(heads, dtype=att.dtype)[:, None, :]  # [H, C, H]
    return x.reshape(x.shape[:-2] + (heads * channels,)) @ block.reshape(heads * channels,
                                                                         heads)


def heads_view(h: jax.Array, heads: int, channels: int) -> jax.Array:
    """``[N, H*C]`` -> ``[N, H, C]``, or ``[N, C]`` for one head (no unit axis)."""
    return h if heads == 1 else h.reshape(h.shape[:-1] + (heads, channels))


def merge_heads(out: jax.Array, heads: int, concat: bool) -> jax.Array:
    """``[N, H, C]`` (``[N, C]`` for one head) -> ``[N, H*C]`` (concat) or the head mean."""
    if heads == 1:
        return out
    return out.reshape(out.shape[0], -1) if concat else jnp.mean(out, axis=1)
