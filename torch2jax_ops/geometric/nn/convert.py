"""from_torch converters for PyG's layers, and reading PyG state dicts of older versions."""
from __future__ import annotations

from typing import Optional

from ...nn.convert import Converter, register_converter
from ...nn.layers import Linear
from .conv import GCNConv, GINConv, GINEConv, GraphConv, SAGEConv
from .gat import GATConv
from .models import MLP, BatchNorm

__all__ = ["state_arrays", "gcn_from_state_dict"]

_PYG = "torch_geometric.nn"


def state_arrays(state: dict, copy: Optional[bool] = None, renames: Optional[dict] = None) -> dict:
    """A state dict's tensors as JAX arrays (:func:`tree_to_jax`), old key names translated."""
    from ...dlpack import tree_to_jax

    renames = renames or {}
    return tree_to_jax({renames.get(key, key): value for key, value in state.items()}, copy=copy)


def gcn_from_state_dict(state: dict, *, improved: bool = False, add_self_loops: bool = True,
                        normalize: bool = True, copy: Optional[bool] = None) -> GCNConv:
    """A GCNConv from a PyG ``state_dict``: ``lin.weight [out, in]`` (PyG >= 2.0) or the
    pre-2.0 ``weight [in, out]`` (used as ``x @ weight``), plus ``bias``."""
    s = state_arrays(state, copy)
    if "lin.weight" in s:
        weight = s["lin.weight"]
    elif "weight" in s:
        weight = s["weight"].T  # PyG < 2.0: x @ weight with weight [in, out]
    else:
        raise KeyError(f"GCNConv.from_state_dict: no lin.weight (PyG >= 2.0) or weight "
                       f"(PyG < 2.0) in the state dict; its keys: {sorted(state)}")
    if add_self_loops and not normalize:
        raise ValueError("GCNConv: add_self_loops=True needs normalize=True (as in PyG)")
    return GCNConv(Linear(weight), s.get("bias"), improved=improved,
                   add_self_loops=add_self_loops, normalize=normalize)


GCNConv.from_state_dict = staticmethod(gcn_from_state_dict)


def _flow(m, ctx: Converter) -> None:
    if getattr(m, "flow", "source_to_target") != "source_to_target":
        raise ctx.unsupported(m, f"flow={m.flow!r}; only 'source_to_target' (PyG's default) "
                                 f"is ported")
    if getattr(m, "explain", False):
        raise ctx.unsupported(m, "explain mode is on")


def _aggr(m, ctx: Converter, allowed: tuple) -> str:
    aggr = m.aggr
    if not isinstance(aggr, str) or aggr not in allowed:
        raise ctx.unsupported(m, f"aggr={aggr!r}; ported: {allowed}")
    return aggr


@register_converter(f"{_PYG}.conv.gcn_conv.GCNConv")
def _gcn(m, ctx: Converter):
    _flow(m, ctx)
    if m.cached and m._cached_edge_index is not None:
        raise ctx.unsupported(m, "cached=True with a cached normalisation; the port recomputes "
                                 "it each call (pass cached=False, or reset_cache())")
    return GCNConv(ctx.child(m.lin, "lin"), ctx.array(m.bias), improved=m.improved,
                   add_self_loops=bool(m.add_self_loops), normalize=m.normalize)


@register_converter(f"{_PYG}.conv.graph_conv.GraphConv")
def _graph(m, ctx: Converter):
    _flow(m, ctx)
    return GraphConv(ctx.child(m.lin_rel, "lin_rel"), ctx.child(m.lin_root, "lin_root"),
                     aggr=_aggr(m, ctx, ("add", "sum", "mean", "max", "min", "mul")))


@register_converter(f"{_PYG}.conv.sage_conv.SAGEConv")
def _sage(m, ctx: Converter):
    _flow(m, ctx)
    return SAGEConv(ctx.child(m.lin_l, "lin_l"),
                    ctx.child(m.lin_r, "lin_r") if m.root_weight else None,
                    ctx.child(m.lin, "lin") if m.project else None,
                    aggr=_aggr(m, ctx, ("add", "sum", "mean", "max", "min", "mul")),
                    normalize=m.normalize)


@register_converter(f"{_PYG}.conv.gin_conv.GINConv")
def _gin(m, ctx: Converter):
    _flow(m, ctx)
    return GINConv(ctx.child(m.nn, "nn"), ctx.array(m.eps), train_eps=m.eps.requires_grad)


@register_converter(f"{_PYG}.conv.gin_conv.GINEConv")
def _gine(m, ctx: Converter):
    _flow(m, ctx)
    lin = ctx.child(m.lin, "lin") if getattr(m, "lin", None) is not None else None
    return GINEConv(ctx.child(m.nn, "nn"), ctx.array(m.eps), train_eps=m.eps.requires_grad,
                    lin=lin)


@register_converter(f"{_PYG}.conv.gat_conv.GATConv")
def _gat(m, ctx: Converter):
    _flow(m, ctx)
    if m.dropout > 0:
        ctx.eval_only(m, f"attention coefficients are dropped at random (dropout={m.dropout})")
    fill = m.fill_value
    if hasattr(fill, "numel"):
        if fill.numel() != 1:
            raise ctx.unsupported(m, "fill_value is a tensor with several entries; pass a "
                                     "number or a reduction name")
        fill = float(fill)
    state = {k: v for k, v in m.state_dict().items()}
    return GATConv.from_state_dict(state, heads=m.heads, concat=m.concat,
                                   negative_slope=m.negative_slope,
                                   add_self_loops=m.add_self_loops, fill_value=fill,
                                   copy=ctx.copy)


@register_converter(f"{_PYG}.norm.batch_norm.BatchNorm")
def _pyg_batch_norm(m, ctx: Converter):
    if getattr(m, "mode", "node") != "node":
        raise ctx.unsupported(m, f"mode={m.mode!r}; only mode='node' is ported")
    return BatchNorm(ctx.child(m.module, "module"))


@register_converter(f"{_PYG}.models.mlp.MLP")
def _mlp(m, ctx: Converter):
    if any(p > 0 for p in m.dropout):
        ctx.eval_only(m, f"dropout={m.dropout} zeroes activations at random")
    act = None if m.act is None else ctx.child(m.act, "act")
    if m.act is not None and not hasattr(m.act, "forward"):
        raise ctx.unsupported(m, "its activation is a plain function, not a module")
    return MLP(ctx.child(m.lins, "lins"), ctx.child(m.norms, "norms"), act,
               act_first=m.act_first, plain_last=m.plain_last)
