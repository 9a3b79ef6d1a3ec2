"""``torch.nn.MultiheadAttention`` as an equinox module, computing what torch's CPU path computes.

The steps of ``torch.nn.functional.multi_head_attention_forward``: project
``q, k, v`` (one packed ``in_proj_weight [3E, E]``, or ``q/k/v_proj_weight``
with ``kdim`` / ``vdim``), append ``bias_k`` / ``bias_v`` and a zero key/value
(``add_zero_attn``) along the source axis (padding both masks with a
"keep" column), merge ``key_padding_mask`` into ``attn_mask`` (a bool mask
becomes ``-inf`` where True, a float mask is added), ``softmax(q k^T /
sqrt(head_dim) + mask)``, average the weights over heads if asked, project
with ``out_proj``.

A fully masked query row: with ``need_weights=True`` torch's softmax gives
NaN weights and a NaN output row; with ``need_weights=False`` torch runs
``scaled_dot_product_attention``, whose CPU kernel gives that row zero
attention (the output row is ``out_proj.bias``). The port returns the same.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from ._layers import Linear, dropout

__all__ = ["MultiheadAttention"]


def _canonical(mask: Any, name: str, dtype: Any, op: str) -> Optional[jax.Array]:
    if mask is None:
        return None
    mask = jnp.asarray(mask)
    if mask.dtype == jnp.bool_:
        return jnp.where(mask, jnp.asarray(-jnp.inf, dtype), jnp.asarray(0, dtype))
    if not jnp.issubdtype(mask.dtype, jnp.floating):
        raise TypeError(f"{op}: only bool and floating types of {name} are supported, got "
                        f"{mask.dtype}")
    return mask


class MultiheadAttention(eqx.Module):
    """``torch.nn.MultiheadAttention``: ``(query, key, value) -> (attn_output, attn_weights)``.

    Shapes as torch: ``query [L, N, E]`` (``[N, L, E]`` with ``batch_first``,
    ``[L, E]`` unbatched), ``key [S, N, kdim]``, ``value [S, N, vdim]``;
    ``key_padding_mask [N, S]`` (``[S]`` unbatched), ``attn_mask [L, S]`` or
    ``[N * num_heads, L, S]`` (bool: True = not allowed; float: added). Returns
    ``attn_output`` like ``query`` and the weights ``[N, L, S]`` (averaged over
    heads) or ``[N, num_heads, L, S]`` (``average_attn_weights=False``), None
    with ``need_weights=False``. In training mode with ``dropout > 0`` the
    attention weights are dropped out: pass ``dropout_key=`` (the argument
    ``key`` is torch's key tensor) or call inside :func:`torch2jax_ops.nn.key_scope`.
    """
    out_proj: Linear
    in_proj_weight: Optional[jax.Array] = None
    q_proj_weight: Optional[jax.Array] = None
    k_proj_weight: Optional[jax.Array] = None
    v_proj_weight: Optional[jax.Array] = None
    in_proj_bias: Optional[jax.Array] = None
    bias_k: Optional[jax.Array] = None
    bias_v: Optional[jax.Array] = None
    embed_dim: int = eqx.field(static=True, default=0)
    num_heads: int = eqx.field(static=True, default=1)
    dropout: float = eqx.field(static=True, default=0.0)
    add_zero_attn: bool = eqx.field(static=True, default=False)
    batch_first: bool = eqx.field(static=True, default=False)
    training: bool = eqx.field(static=True, default=False)

    def __call__(self, query: jax.Array, key: jax.Array, value: jax.Array,
                 key_padding_mask: Optional[jax.Array] = None, need_weights: bool = True,
                 attn_mask: Optional[jax.Array] = None, average_attn_weights: bool = True,
                 is_causal: bool = False, *, dropout_key: Any = None) -> tuple:
        op = "MultiheadAttention"
        q_in, k_in, v_in = jnp.asarray(query), jnp.asarray(key), jnp.asarray(value)
        if q_in.ndim not in (2, 3):
            raise ValueError(f"{op}: query should be unbatched 2D or batched 3D tensor but "
                             f"received {q_in.ndim}-D query tensor")
        batched = q_in.ndim == 3
        if k_in.ndim != q_in.ndim or v_in.ndim != q_in.ndim:
            raise ValueError(f"{op}: For {'batched' if batched else 'unbatched'} "
                             f"{q_in.ndim}-D query, expected key and value to be "
                             f"{q_in.ndim}-D, but found {k_in.ndim}-D and {v_in.ndim}-D tensors")
        if batched and self.batch_first:
            q_in, k_in, v_in = (jnp.swapaxes(t, 0, 1) for t in (q_in, k_in, v_in))
        if not batched:
            q_in, k_in, v_in = q_in[:, None], k_in[:, None], v_in[:, None]
            if key_padding_mask is not None:
                key_padding_mask = jnp.asarray(key_padding_mask)[None]
        L, N, E = q_in.shape
        S = k_in.shape[0]
        H = self.num_heads
        hd = E // H
        if E != self.embed_dim:
            raise ValueError(f"{op}: was expecting embedding dimension of {self.embed_dim}, "
                             f"but got {E}")
        if k_in.shape[:2] != v_in.shape[:2]:
            raise ValueError(f"{op}: key's sequence and batch dims {k_in.shape[:2]} do not "
                             f"match value's {v_in.shape[:2]}")
        dtype = q_in.dtype
        kpm = _canonical(key_padding_mask, "key_padding_mask", dtype, op)
        if is_causal and attn_mask is None:
            raise ValueError(f"{op}: Need attn_mask if specifying the is_causal hint (is_causal "
                             f"is only a hint: pass the causal mask itself)")
        mask = _canonical(attn_mask, "attn_mask", dtype, op)

        # projections
        wq: Any
        wk: Any
        wv: Any
        bq: Any
        bk: Any
        bv: Any
        if self.in_proj_weight is not None:
            wq, wk, wv = jnp.split(self.in_proj_weight, 3, axis=0)
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        if self.in_proj_bias is not None:
            bq, bk, bv = jnp.split(self.in_proj_bias, 3)
        else:
            bq = bk = bv = None

        def proj(x, w, b):
            y = x @ w.T
            return y if b is None else y + b

        q, k, v = proj(q_in, wq, bq), proj(k_in, wk, bk), proj(v_in, wv, bv)

        if mask is not None:
            if mask.ndim == 2:
                if mask.shape != (L, S):
                    raise ValueError(f"{op}: The shape of the 2D attn_mask is {mask.shape}, but "
                                     f"should be {(L, S)}.")
                mask = mask[None]
            elif mask.ndim == 3:
                if mask.shape != (N * H, L, S):
                    raise ValueError(f"{op}: The shape of the 3D attn_mask is {mask.shape}, but "
                                     f"should be {(N * H, L, S)}.")
            else:
                raise ValueError(f"{op}: attn_mask's dimension {mask.ndim} is not supported "
                                 f"(2-D [L, S] or 3-D [N * num_heads, L, S])")

        def pad_col(m):
            return None if m is None else jnp.pad(m, [(0, 0)] * (m.ndim - 1) + [(0, 1)])

        if self.bias_k is not None and self.bias_v is not None:
            k = jnp.concatenate([k, jnp.broadcast_to(self.bias_k, (1, N, E))], axis=0)
            v = jnp.concatenate([v, jnp.broadcast_to(self.bias_v, (1, N, E))], axis=0)
            mask, kpm = pad_col(mask), pad_col(kpm)
        # [N * H, len, hd], torch's view + transpose
        q = jnp.swapaxes(q.reshape(L, N * H, hd), 0, 1)
        k = jnp.swapaxes(k.reshape(k.shape[0], N * H, hd), 0, 1)
        v = jnp.swapaxes(v.reshape(v.shape[0], N * H, hd), 0, 1)
        if self.add_zero_attn:
            k = jnp.concatenate([k, jnp.zeros((N * H, 1, hd), k.dtype)], axis=1)
            v = jnp.concatenate([v, jnp.zeros((N * H, 1, hd), v.dtype)], axis=1)
            mask, kpm = pad_col(mask), pad_col(kpm)
        src = k.shape[1]
        if kpm is not None:
            if kpm.shape != (N, src):
                raise ValueError(f"{op}: expected key_padding_mask of shape "
                                 f"{(N, S) if batched else (S,)}, got "
                                 f"{tuple(jnp.asarray(key_padding_mask).shape)}")
            kpm = jnp.broadcast_to(kpm[:, None, None, :], (N, H, 1, src)).reshape(N * H, 1, src)
            mask = kpm if mask is None else mask + kpm
        p = self.dropout if self.training else 0.0

        scores = (q * math.sqrt(1.0 / hd)) @ jnp.swapaxes(k, -2, -1)
        if mask is not None:
            scores = scores + mask
        if need_weights:
            weights = jax.nn.softmax(scores, axis=-1)
        else:  # scaled_dot_product_attention's CPU kernel: a fully masked row attends nowhere
            top = jnp.max(scores, axis=-1, keepdims=True)
            dead = top == -jnp.inf
            e = jnp.exp(scores - jnp.where(dead, 0, top))
            weights = e / jnp.where(dead, 1, jnp.sum(e, axis=-1, keepdims=True))
        if p > 0:
            weights = dropout(weights, p, True, dropout_key, op=op)
        out = weights @ v  # [N * H, L, hd]
        out = jnp.swapaxes(out, 0, 1).reshape(L * N, E)
        out = self.out_proj(out).reshape(L, N, -1)
        if need_weights:
            w = weights.reshape(N, H, L, src)
            if average_attn_weights:
                w = jnp.mean(w, axis=1)
        if not batched:
            out = out[:, 0]
            if need_weights:
                w = w[0]
        elif self.batch_first:
            out = jnp.swapaxes(out, 0, 1)
        return out, (w if need_weights else None)


def _mha_converter(m: Any, ctx: Any) -> MultiheadAttention:
    if not getattr(m, "_qkv_same_embed_dim", True) and m.in_proj_weight is not None:
        raise ctx.unsupported(m, "it has both in_proj_weight and separate q/k/v weights")
    return MultiheadAttention(
        out_proj=ctx.child(m.out_proj, "out_proj"), in_proj_weight=ctx.array(m.in_proj_weight),
        q_proj_weight=ctx.array(m.q_proj_weight), k_proj_weight=ctx.array(m.k_proj_weight),
        v_proj_weight=ctx.array(m.v_proj_weight), in_proj_bias=ctx.array(m.in_proj_bias),
        bias_k=ctx.array(m.bias_k), bias_v=ctx.array(m.bias_v), embed_dim=int(m.embed_dim),
        num_heads=int(m.num_heads), dropout=float(m.dropout),
        add_zero_attn=bool(m.add_zero_attn), batch_first=bool(m.batch_first),
        training=bool(m.training))


def _register() -> None:
    from ._registry import register_converter
    register_converter("torch.nn.modules.activation.MultiheadAttention")(_mha_converter)
    register_converter("torch.nn.modules.linear.NonDynamicallyQuantizableLinear")(
        lambda m, ctx: Linear(ctx.array(m.weight), ctx.array(m.bias)))


_register()
