"""from_torch converters for torch.nn's building blocks (see :mod:`._layers`)."""
from __future__ import annotations

from ._convert import Converter
from ._layers import (ACTIVATIONS, Activation, BatchNorm1d, BatchNorm2d, BatchNorm3d, Dropout,
                      Embedding, Identity, LayerNorm, Linear, ModuleList, Sequential)
from ._registry import register_converter

__all__: list = []


@register_converter("torch.nn.modules.linear.Linear",
                    "torch_geometric.nn.dense.linear.Linear")
def _linear(m, ctx: Converter):
    if m.weight is None or type(m.weight).__name__ == "UninitializedParameter" \
            or getattr(m.weight, "is_meta", False) or m.weight.dim() != 2:
        raise ctx.unsupported(m, "its weight is not initialised (lazy in_channels=-1); run one "
                                 "forward pass in torch first to initialise the lazy Linear")
    return Linear(ctx.array(m.weight), ctx.array(m.bias))


@register_converter("torch.nn.modules.sparse.Embedding")
def _embedding(m, ctx: Converter):
    if m.max_norm is not None:
        raise ctx.unsupported(m, f"max_norm={m.max_norm} renormalises the weight rows in place "
                                 f"during the forward; not ported (drop max_norm, or renormalise "
                                 f"the weight yourself)")
    return Embedding(ctx.array(m.weight), padding_idx=m.padding_idx,
                     scale_grad_by_freq=bool(m.scale_grad_by_freq))


@register_converter("torch.nn.modules.linear.Identity")
def _identity(m, ctx):
    return Identity()


def _activation(m, ctx):
    name = type(m).__name__
    options = {k: getattr(m, k) for k in ACTIVATIONS[name][1]}
    return Activation(name, **options)


for _name in ACTIVATIONS:
    register_converter(f"torch.nn.modules.activation.{_name}")(_activation)


@register_converter("torch.nn.modules.dropout.Dropout")
def _dropout(m, ctx):
    return Dropout(float(m.p), training=m.training)


@register_converter("torch.nn.modules.normalization.LayerNorm")
def _layer_norm(m, ctx):
    return LayerNorm(tuple(m.normalized_shape), float(m.eps), ctx.array(m.weight),
                     ctx.array(m.bias))


@register_converter("torch.nn.modules.batchnorm.BatchNorm1d",
                    "torch.nn.modules.batchnorm.BatchNorm2d",
                    "torch.nn.modules.batchnorm.BatchNorm3d")
def _batch_norm(m, ctx):
    tracked = m.num_batches_tracked if m.track_running_stats else None
    cls = {"BatchNorm1d": BatchNorm1d, "BatchNorm2d": BatchNorm2d,
           "BatchNorm3d": BatchNorm3d}[type(m).__name__]
    return cls(float(m.eps), ctx.array(m.weight), ctx.array(m.bias),
                       ctx.array(m.running_mean), ctx.array(m.running_var),
                       ctx.array(tracked, allow_downcast=True), momentum=m.momentum,
                       training=m.training)


@register_converter("torch.nn.modules.container.Sequential")
def _sequential(m, ctx):
    return Sequential(ctx.child(sub, name) for name, sub in m.named_children())


@register_converter("torch.nn.modules.container.ModuleList")
def _module_list(m, ctx):
    return ModuleList(ctx.child(sub, name) for name, sub in m.named_children())
