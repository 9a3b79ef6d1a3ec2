"""PyG's ``HeteroLinear`` (one linear map per row type) and ``HeteroDictLinear`` (one per dict key).

``HeteroLinear(x [N, F_in], type_vec [N]) -> [N, F_out]``, row ``i`` is
``x_i @ weight[type_i] + bias[type_i]``. PyG sorts the rows by type when
``type_vec`` is not sorted, runs a segment matmul (``pyg_lib``) or a loop over
the types, and restores the order; the port computes the same per-row result
without sorting (:func:`~torch2jax_ops.geometric.utils._segment_matmul.typed_matmul`:
one matmul against every type's weight, then a per-row select, or per-row
gathered weights for many types -- the measurements are in that module's
docs), so it works under ``jax.jit`` whatever the order of ``type_vec``.
"""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax

from ..._checking import as_array
from ..._sharding import OutSharding, sharding_aware
from ...nn import Converter, register_converter
from ..utils._segment_matmul import typed_matmul
from ._common import typed_rows

__all__ = ["HeteroLinear", "HeteroDictLinear"]


class HeteroLinear(eqx.Module):
    """``torch_geometric.nn.HeteroLinear``: ``out_i = x_i @ weight[type_i] + bias[type_i]``.

    ``__call__(x [N, F_in], type_vec [N]) -> [N, F_out]``; ``type_vec``
    holds integer types in ``[0, num_types)``, in any order (concrete values
    outside raise ``IndexError``; traced ones give zero rows, reported under
    :func:`torch2jax_ops.checked`). Arrays as PyG's ``state_dict``:
    ``weight [num_types, F_in, F_out]`` (note: not transposed like
    ``torch.nn.Linear``'s), ``bias [num_types, F_out]`` or None.

    ``is_sorted`` is kept for the record only: the port never sorts, so the
    result is the same either way. PyG's own ``is_sorted=True`` with an
    unsorted ``type_vec`` is wrong: its segment pointer (``index2ptr``) assumes
    sorted types, so rows get other types' weights (the bias is still by
    type); the port gives the per-row answer, PyG's ``is_sorted=False`` result.
    """
    weight: jax.Array
    bias: Optional[jax.Array] = None
    is_sorted: bool = eqx.field(static=True, default=False)

    @property
    def num_types(self) -> int:
        return int(self.weight.shape[0])

    @property
    def in_channels(self) -> int:
        return int(self.weight.shape[1])

    @property
    def out_channels(self) -> int:
        return int(self.weight.shape[2])

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x: Any, type_vec: Any, *, out_sharding: OutSharding = None) -> jax.Array:
        x, type_vec = typed_rows(x, type_vec, self.num_types, op="HeteroLinear",
                                 what="weight matrices", in_channels=self.in_channels)
        return typed_matmul(x, type_vec, self.weight, self.bias)


class HeteroDictLinear(eqx.Module):
    """``torch_geometric.nn.HeteroDictLinear``: a ``Linear`` per key of a feature dict.

    ``__call__(x_dict) -> out_dict``: ``out_dict[k] = x_dict[k] @ lins[k].weight.T +
    lins[k].bias`` for every type ``k`` of the layer that is in ``x_dict``, in the
    layer's type order (PyG's ``lins`` order); keys of ``x_dict`` the layer has no
    ``Linear`` for are ignored, as in PyG. Arrays: ``lins.<type>.weight
    [out, in_type]``, ``lins.<type>.bias [out]``.
    """
    lins: dict
    types: tuple = eqx.field(static=True, default=())

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, x_dict: dict, *, out_sharding: OutSharding = None) -> dict:
        op = "HeteroDictLinear"
        if not isinstance(x_dict, dict):
            raise TypeError(f"{op}: `x_dict` must be a dict {{type: [N_type, F_type]}}, got "
                            f"{type(x_dict).__name__}")
        out = {}
        for key in self.types:
            if key not in x_dict:
                continue
            lin = self.lins[key]
            x = as_array(x_dict[key], f"x_dict[{key!r}]", op=op)
            width = lin.weight.shape[1]
            if x.ndim == 0 or x.shape[-1] != width:
                raise ValueError(f"{op}: `x_dict[{key!r}]` must have {width} features in its "
                                 f"last axis (lins[{key!r}] is Linear({width}, "
                                 f"{lin.weight.shape[0]})), got shape {tuple(x.shape)}")
            out[key] = lin(x)
        return out


@register_converter("torch_geometric.nn.dense.linear.HeteroLinear")
def _hetero_linear(m: Any, ctx: Converter) -> HeteroLinear:
    return HeteroLinear(ctx.array(m.weight), ctx.array(m.bias), is_sorted=bool(m.is_sorted))


@register_converter("torch_geometric.nn.dense.linear.HeteroDictLinear")
def _hetero_dict_linear(m: Any, ctx: Converter) -> HeteroDictLinear:
    lins = {key: ctx.child(lin, f"lins.{key}") for key, lin in m.lins.items()}
    return HeteroDictLinear(lins, types=tuple(m.lins.keys()))
