"""PyG's ``HeteroConv`` as an equinox module, with its converter.

One conv per edge type; the outputs for each destination node type are grouped
with ``aggr``. Its forward is PyG's, line for line (how each conv's arguments
are picked from the ``*_dict`` arguments, which relations run, the grouping),
with one difference in how the sum is taken: where every relation into a node
type is a ``SAGEConv`` / ``GraphConv`` with a sum or mean ``aggr`` and
``aggr`` is ``"sum"`` or ``"mean"``, the relations' matmuls become one
(:func:`~torch2jax_ops.geometric.nn._linear_parts.fuse`: the root terms on that
type's features share one matmul on the summed weights, the aggregations are
concatenated into the other). PyG's value up to rounding, fewer and larger
matmuls, forward and backward.
"""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from ...._sharding import OutSharding, sharding_aware
from ....nn import Converter, UnsupportedModuleError, register_converter
from ....nn._fx import Unsupported
from ....nn._registry import functions
from .._linear_parts import fuse

__all__ = ["HeteroConv", "group"]

#: the group ``aggr``s whose per-relation sums fuse into one matmul
_FUSED_GROUPS = ("sum", "mean")


def group(xs: list, aggr: Optional[str], *, op: str = "HeteroConv") -> jax.Array:
    """PyG's ``hetero_conv.group``: one node type's outputs ``[N, F]`` over its relations.

    ``None``: stacked along a new axis 1 (``[N, R, F]``); ``"cat"``: concatenated
    along the features; any other ``aggr`` names a torch reduction applied over the
    relations, ``torch.<aggr>(torch.stack(xs), dim=0)`` (``"sum"``, ``"mean"``,
    ``"max"``, ``"min"``, ``"prod"`` ...; a ``(values, indices)`` result keeps the
    values). One relation: its output as it is (PyG returns it before any
    reduction).
    """
    if aggr is None:
        return jnp.stack(xs, axis=1)
    if len(xs) == 1:
        return xs[0]
    if aggr == "cat":
        return jnp.concatenate(xs, axis=-1)
    reduce = functions().get(f"torch.{aggr}")
    if reduce is None:
        raise ValueError(f"{op}: aggr={aggr!r} names no torch reduction with a port (PyG "
                         f"calls torch.{aggr}(torch.stack(xs), dim=0)); use 'sum', 'mean', "
                         f"'max', 'min', 'cat' or None")
    out = reduce(jnp.stack(xs), dim=0)
    return out[0] if isinstance(out, tuple) else out


class HeteroConv(eqx.Module):
    """``torch_geometric.nn.HeteroConv``: ``{edge_type: conv}``, outputs grouped per node type.

    ``__call__(x_dict, edge_index_dict, *other_dicts, **kwargs_dicts) -> {node_type: out}``,
    as PyG's forward: for each edge type ``(src, rel, dst)``, a positional
    ``*_dict`` argument contributes its ``edge_type`` entry, or its ``src`` entry when
    ``src == dst``, or the pair ``(d.get(src), d.get(dst))``; keyword arguments
    must end in ``_dict`` and contribute the same way under their name without
    it. A relation runs only if some argument has an entry for its edge type
    (its edge index). Outputs for one destination type are grouped with
    :func:`group` (``aggr``), in the layer's order of edge types.

    ``convs`` is keyed by PyG's own key of each conv (``"<src___rel___dst>"``), so
    the state_dict names match torch's (``convs.<author___writes___paper>.lin_l.weight``).
    """
    convs: dict
    edge_types: tuple = eqx.field(static=True)  # ((src, rel, dst), ...) in the layer's order
    keys: tuple = eqx.field(static=True)  # the conv of each edge type, in ``convs``
    aggr: Optional[str] = eqx.field(static=True, default="sum")

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, *args_dict: Any,
                 out_sharding: OutSharding = None, **kwargs_dict: Any) -> dict:
        op = "HeteroConv"
        for arg in kwargs_dict:
            if not arg.endswith("_dict"):
                raise ValueError(f"Keyword arguments in '{op}' need to end with '_dict' "
                                 f"(got '{arg}')")
        for i, value_dict in enumerate(args_dict):
            if not isinstance(value_dict, dict):
                raise TypeError(f"{op}: positional argument {i} must be a dict keyed by node "
                                f"type or edge type (x_dict, edge_index_dict ...), got "
                                f"{type(value_dict).__name__}")
        calls: dict = {}
        for edge_type, key in zip(self.edge_types, self.keys):
            src, _, dst = edge_type
            has_edge_level_arg = False
            args = []
            for value_dict in args_dict:
                if edge_type in value_dict:
                    has_edge_level_arg = True
                    args.append(value_dict[edge_type])
                elif src == dst and src in value_dict:
                    args.append(value_dict[src])
                elif src in value_dict or dst in value_dict:
                    args.append((value_dict.get(src, None), value_dict.get(dst, None)))
            kwargs = {}
            for arg, value_dict in kwargs_dict.items():
                name = arg[:-5]
                if edge_type in value_dict:
                    has_edge_level_arg = True
                    kwargs[name] = value_dict[edge_type]
                elif src == dst and src in value_dict:
                    kwargs[name] = value_dict[src]
                elif src in value_dict or dst in value_dict:
                    kwargs[name] = (value_dict.get(src, None), value_dict.get(dst, None))
            if has_edge_level_arg:
                calls.setdefault(dst, []).append((self.convs[key], args, kwargs))
        return {dst: self._group(members) for dst, members in calls.items()}

    def _group(self, members: list) -> jax.Array:
        if self.aggr not in _FUSED_GROUPS or len(members) == 1:
            return group([conv(*args, **kwargs) for conv, args, kwargs in members], self.aggr)
        # a conv's parts are its output's terms (its own call is parts.value()): computed
        # once, fused when every member has them, else summed member by member
        parts = [conv.linear_parts(*args, **kwargs) if hasattr(conv, "linear_parts") else None
                 for conv, args, kwargs in members]
        linear = [p for p in parts if p is not None]
        if len(linear) == len(parts):
            out = fuse(linear)
            return out / len(members) if self.aggr == "mean" else out
        return group([conv(*args, **kwargs) if p is None else p.value()
                      for p, (conv, args, kwargs) in zip(parts, members)], self.aggr)


@register_converter("torch_geometric.nn.conv.hetero_conv.HeteroConv")
def _hetero_conv(m: Any, ctx: Converter) -> HeteroConv:
    convs = {}
    # PyG's ModuleDict keeps an edge type under "<src___rel___dst>"; keys() gives the tuples
    for edge_type, (key, conv) in zip(m.convs.keys(), m.convs._modules.items()):
        try:
            convs[key] = ctx.child(conv, f"convs.{key}")
        except UnsupportedModuleError as exc:  # an error when (if) that relation runs
            convs[key] = Unsupported(f"{exc}\n(the conv of edge type {edge_type} in HeteroConv "
                                     f"{ctx.path or '(root)'})")
    return HeteroConv(convs, edge_types=tuple(tuple(e) for e in m.convs.keys()),
                      keys=tuple(m.convs._modules.keys()), aggr=m.aggr)
