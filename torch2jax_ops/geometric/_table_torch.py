"""The graph layer's fx-table entries for torch's native scatter API (``torch2jax_ops.torch``).

PyG 2.x's aggregations call ``Tensor.scatter_reduce_`` / ``scatter_add_`` /
``index_add_`` (not torch_scatter); a traced forward that does is replayed
with :mod:`torch2jax_ops.torch`. Registered here, in the Graph layer, because
the Ops layer may not import the converter registry. The in-place methods map
to the out-of-place functions: the fx interpreter rebinds their result to the
tensor updated in place. These entries replace the general table's
``index_select``/``gather`` (same paths): this layer loads after it.
"""
from __future__ import annotations

from typing import Any, Optional

from .. import torch as torch_api
from ..nn import register_function, register_method

__all__: list = []


@register_function("torch.scatter_reduce")
@register_method("scatter_reduce", "scatter_reduce_")
def _fx_scatter_reduce(input: Any, dim: int, index: Any, src: Any, reduce: str, *,
                       include_self: bool = True, out: Any = None) -> Any:
    return torch_api.scatter_reduce(input, dim, index, src, reduce, include_self=include_self)


@register_function("torch.scatter_add")
@register_method("scatter_add", "scatter_add_")
def _fx_scatter_add(input: Any, dim: int, index: Any, src: Any, *, out: Any = None) -> Any:
    return torch_api.scatter_add(input, dim, index, src)


@register_function("torch.scatter")
@register_method("scatter", "scatter_")
def _fx_scatter(input: Any, dim: int, index: Any, src: Any = None, *, value: Any = None,
                reduce: Optional[str] = None, out: Any = None) -> Any:
    return torch_api.scatter(input, dim, index, src, value=value, reduce=reduce)


@register_function("torch.index_add")
@register_method("index_add", "index_add_")
def _fx_index_add(input: Any, dim: int, index: Any, source: Any, *, alpha: Any = 1,
                  out: Any = None) -> Any:
    return torch_api.index_add(input, dim, index, source, alpha=alpha)


@register_function("torch.index_reduce")
@register_method("index_reduce", "index_reduce_")
def _fx_index_reduce(input: Any, dim: int, index: Any, source: Any, reduce: str, *,
                     include_self: bool = True, out: Any = None) -> Any:
    return torch_api.index_reduce(input, dim, index, source, reduce, include_self=include_self)


@register_function("torch.index_select")
@register_method("index_select")
def _fx_index_select(input: Any, dim: int, index: Any, *, out: Any = None) -> Any:
    return torch_api.index_select(input, dim, index)


@register_function("torch.gather")
@register_method("gather")
def _fx_gather(input: Any, dim: int, index: Any, *, sparse_grad: bool = False,
               out: Any = None) -> Any:
    # sparse_grad only picks torch's gradient layout; the values are the same
    return torch_api.gather(input, dim, index)
