"""One PyG tensor attribute to JAX by the rules of :mod:`._rules` (shared by ``from_pyg`` for
``Data`` and ``HeteroData``): dtype targets, checked id ranges, errors naming the attribute."""
from __future__ import annotations

from typing import Any, Optional

import jax

from ... import _dtypes
from ...dlpack import Placement, to_jax
from ._rules import check_fits, check_torch_device, target_dtype

__all__ = ["convert_tensor"]


def convert_tensor(t: Any, key: str, *, device: Placement, copy: Optional[bool],
            allow_downcast: bool, x64: bool, op: str) -> jax.Array:
    """One tensor attribute to JAX by the rules of :mod:`._rules`; errors name ``key``."""
    import torch

    if t.layout != torch.strided:
        raise TypeError(f"{op}: `{key}` is a {t.layout} tensor; only dense tensors are taken "
                        f"(data.{key} = data.{key}.to_dense(), or keep an edge_index)")
    check_torch_device(t.device, key, op=op)
    name = _dtypes.name_of(t.dtype)
    target = target_dtype(name, key, x64=x64, allow_downcast=allow_downcast, op=op)
    if target is not None:
        if copy is False:
            raise ValueError(f"{op}: `{key}` is {name} and becomes {target}, a new buffer, but "
                             f"copy=False; pass copy=None to allow the conversion (copy=False "
                             f"shares only what keeps its dtype)")
        if name in ("int64", "uint64") and t.numel():
            signed = t if name == "int64" else t.view(torch.int64)
            lo, hi = (int(v) for v in torch.aminmax(signed.detach()))
            if name == "uint64" and lo < 0:
                hi = 2 ** 64 - 1
            check_fits(lo, hi, target, key, x64=x64, op=op)
        t = t.detach().to(_dtypes.torch_dtype(target))
    try:
        return to_jax(t, copy=copy, allow_downcast=False, device=device)
    except (TypeError, ValueError, OverflowError) as exc:
        raise type(exc)(f"{op}: `{key}`: {exc}") from exc
