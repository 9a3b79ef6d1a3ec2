"""``torch.nn.EmbeddingBag`` as an equinox module: bags of embedding rows, summed / averaged /
max-reduced, without materialising the per-id rows per bag."""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from .._checking import check_bounds, check_index

__all__ = ["EmbeddingBag"]


class EmbeddingBag(eqx.Module):
    """``torch.nn.EmbeddingBag``: ``input [B, n]`` (bags of equal size) or ``input [n]`` with
    ``offsets [B]`` (bag ``i`` is ``input[offsets[i]:offsets[i + 1]]``; with
    ``include_last_offset`` the last offset closes the last bag) -> ``[B, embedding_dim]``.

    ``mode`` ``"sum"`` (optionally weighted by ``per_sample_weights``),
    ``"mean"`` or ``"max"``; ids equal to ``padding_idx`` are left out of their
    bag (and of the mean's count); an empty bag gives zeros, as torch.
    With ``include_last_offset`` the last offset must be ``len(input)`` (torch's
    own results disagree with each other otherwise: its mean divides the last
    bag by the ids up to the end of ``input``); concrete offsets are checked.
    """
    weight: jax.Array
    mode: str = eqx.field(static=True, default="mean")
    padding_idx: Optional[int] = eqx.field(static=True, default=None)
    include_last_offset: bool = eqx.field(static=True, default=False)

    def __call__(self, input: jax.Array, offsets: Optional[jax.Array] = None,
                 per_sample_weights: Optional[jax.Array] = None) -> jax.Array:
        op = "EmbeddingBag"
        ids = jnp.asarray(input)
        check_index(ids, "input", op=op)
        num = self.weight.shape[0]
        check_bounds(ids, num, "input", target=f"the embedding table (num_embeddings={num})",
                     fix="an id must name a row of `weight`", op=op)
        psw = None if per_sample_weights is None else jnp.asarray(per_sample_weights)
        if psw is not None and self.mode != "sum":
            raise ValueError(f"{op}: per_sample_weights was not None. per_sample_weights is "
                             f"only supported for mode='sum' (got mode='{self.mode}')")
        if ids.ndim == 2:
            if offsets is not None:
                raise ValueError(f"{op}: if input is 2D, then offsets has to be None")
            bags, size = ids.shape
            seg = jnp.repeat(jnp.arange(bags), size)
            ids = ids.reshape(-1)
            psw = None if psw is None else psw.reshape(-1)
        elif ids.ndim == 1:
            if offsets is None:
                raise ValueError(f"{op}: offsets has to be a 1D Tensor but got None")
            offsets = jnp.asarray(offsets)
            if offsets.ndim != 1:
                raise ValueError(f"{op}: offsets has to be a 1D Tensor, got shape "
                                 f"{tuple(offsets.shape)}")
            bags = offsets.shape[0] - (1 if self.include_last_offset else 0)
            if self.include_last_offset and not isinstance(offsets, jax.core.Tracer) \
                    and offsets.shape[0] and int(offsets[-1]) != ids.shape[0]:
                raise ValueError(f"{op}: with include_last_offset=True the last offset must "
                                 f"be len(input)={ids.shape[0]} (it closes the last bag), got "
                                 f"{int(offsets[-1])}")
            seg = jnp.searchsorted(offsets, jnp.arange(ids.shape[0]), side="right") - 1
            seg = jnp.where(seg >= bags, bags, seg)  # past the last offset: dropped
        else:
            raise ValueError(f"{op}: input has to be 1D or 2D Tensor, but got Tensor of "
                             f"dimension {ids.ndim}")
        keep = seg < bags
        if self.padding_idx is not None:
            keep = keep & (ids != self.padding_idx)
        seg = jnp.where(keep, seg, bags)
        rows = jnp.take(self.weight, ids, axis=0)
        if psw is not None:
            rows = rows * psw[:, None].astype(rows.dtype)
        count = jax.ops.segment_sum(keep.astype(rows.dtype), seg, bags + 1)[:bags]
        if self.mode == "max":
            out = jax.ops.segment_max(rows, seg, bags + 1)[:bags]
            return jnp.where(count[:, None] > 0, out, jnp.zeros((), rows.dtype))
        out = jax.ops.segment_sum(rows, seg, bags + 1)[:bags]
        if self.mode == "mean":
            out = out / jnp.maximum(count, 1)[:, None]
        return out


def _embedding_bag(m: Any, ctx: Any) -> EmbeddingBag:
    if m.max_norm is not None:
        raise ctx.unsupported(m, f"max_norm={m.max_norm} renormalises the weight rows in place "
                                 f"during the forward; not ported")
    if m.scale_grad_by_freq:
        raise ctx.unsupported(m, "scale_grad_by_freq=True is not ported")
    return EmbeddingBag(ctx.array(m.weight), m.mode, m.padding_idx,
                        bool(m.include_last_offset))


def _register() -> None:
    from ._registry import register_converter
    register_converter("torch.nn.modules.sparse.EmbeddingBag")(_embedding_bag)


_register()
