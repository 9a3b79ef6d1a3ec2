"""Parity cases of torch.nn's layers ported in ``torch2jax_ops.nn`` (section "torch_nn").

The recurrent layers and cells, ``MultiheadAttention``, the convolutions,
the pools and ``PReLU``: each a torch module (parameters perturbed away from
their initial values, in ``eval()`` mode) against ``from_torch(module)``,
through :func:`~torch2jax_ops.parity.compare_modules` (outputs, the gradient
of every parameter by name and of the floating inputs), float32 and float64.
Option variants as the layers have them; edge cases: sequence length 1,
unbatched inputs, a fully masked attention row (NaN with weights, zero
attention without, as torch), windows hanging over the edge (``ceil_mode``).
"""
from __future__ import annotations

from typing import Callable, Iterable

import numpy as np

from torch2jax_ops.parity.cases.norms import _perturb_buffers
from torch2jax_ops import dtypes
from torch2jax_ops.parity._suite import Case, register

WIDE = ("float32", "float64")


def _t(shape: tuple, seed: int, dtype: str, scale: float = 1.0):
    import torch

    rng = np.random.default_rng(seed)
    return torch.tensor(scale * rng.standard_normal(shape)).to(dtypes.torch_dtype(dtype))


def _perturb(module, seed: int):
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return module


def _rnn_cases() -> dict:
    import torch.nn as nn

    T, B, F, H = 4, 3, 5, 6

    def seq(T=T, B=B, first=False, batched=True):
        def make(dtype):
            shape = ((B, T, F) if first else (T, B, F)) if batched else (T, F)
            return (_t(shape, 1, dtype),), {}
        return make

    def with_state(layers, h, c=None, T=T, batched=True, first=False):
        def make(dtype):
            shape = ((B, T, F) if first else (T, B, F)) if batched else (T, F)
            hs = (layers, B, h) if batched else (layers, h)
            h0 = _t(hs, 2, dtype, 0.5)
            if c is None:
                return (_t(shape, 1, dtype), h0), {}
            cs = (layers, B, c) if batched else (layers, c)
            return (_t(shape, 1, dtype), (h0, _t(cs, 3, dtype, 0.5))), {}
        return make

    def cell(batched=True, state=None):
        def make(dtype):
            x = _t((B, F) if batched else (F,), 1, dtype)
            shape = (B, H) if batched else (H,)
            if state is None:
                return (x,), {}
            if state == "h":
                return (x, _t(shape, 2, dtype, 0.5)), {}
            return (x, (_t(shape, 2, dtype, 0.5), _t(shape, 3, dtype, 0.5))), {}
        return make

    return {
        "LSTM": (lambda: nn.LSTM(F, H), seq()),
        "LSTM-2layer-bidirectional": (lambda: nn.LSTM(F, H, num_layers=2, bidirectional=True),
                                      seq()),
        "LSTM-batch-first-h0c0": (lambda: nn.LSTM(F, H, num_layers=2, batch_first=True),
                                  with_state(2, H, H, first=True)),
        "LSTM-proj": (lambda: nn.LSTM(F, H, num_layers=2, proj_size=3, bidirectional=True),
                      with_state(4, 3, H)),
        "LSTM-unbatched": (lambda: nn.LSTM(F, H), with_state(1, H, H, batched=False)),
        "LSTM-seq1": (lambda: nn.LSTM(F, H, num_layers=2), seq(T=1)),
        "LSTM-no-bias-dropout-eval": (lambda: nn.LSTM(F, H, num_layers=3, bias=False,
                                                      dropout=0.4), seq()),
        "GRU": (lambda: nn.GRU(F, H), seq()),
        "GRU-2layer-bidirectional-h0": (lambda: nn.GRU(F, H, num_layers=2, bidirectional=True),
                                        with_state(4, H)),
        "GRU-batch-first": (lambda: nn.GRU(F, H, batch_first=True), seq(first=True)),
        "GRU-unbatched-no-bias": (lambda: nn.GRU(F, H, bias=False), seq(batched=False)),
        "GRU-seq1": (lambda: nn.GRU(F, H, bidirectional=True), seq(T=1)),
        "RNN-tanh": (lambda: nn.RNN(F, H, num_layers=2), seq()),
        "RNN-relu-bidirectional": (lambda: nn.RNN(F, H, nonlinearity="relu",
                                                  bidirectional=True), seq()),
        "RNN-unbatched-h0": (lambda: nn.RNN(F, H, batch_first=True), with_state(1, H,
                                                                                batched=False)),
        "RNNCell": (lambda: nn.RNNCell(F, H), cell(state="h")),
        "RNNCell-relu-no-state": (lambda: nn.RNNCell(F, H, nonlinearity="relu"), cell()),
        "RNNCell-unbatched-no-bias": (lambda: nn.RNNCell(F, H, bias=False),
                                      cell(False, "h")),
        "LSTMCell": (lambda: nn.LSTMCell(F, H), cell(state="hc")),
        "LSTMCell-no-state": (lambda: nn.LSTMCell(F, H), cell()),
        "LSTMCell-unbatched": (lambda: nn.LSTMCell(F, H, bias=False), cell(False, "hc")),
        "GRUCell": (lambda: nn.GRUCell(F, H), cell(state="h")),
        "GRUCell-no-state": (lambda: nn.GRUCell(F, H), cell()),
        "GRUCell-unbatched-no-bias": (lambda: nn.GRUCell(F, H, bias=False), cell(False, "h")),
    }


def _mha_cases() -> dict:
    import torch
    import torch.nn as nn

    L, S, N, E = 3, 5, 2, 8

    def inputs(batch_first=False, kdim=E, vdim=E, batched=True, **masks):
        def make(dtype):
            def shape(n, f):
                if not batched:
                    return (n, f)
                return (N, n, f) if batch_first else (n, N, f)
            q = _t(shape(L, E), 1, dtype)
            k = _t(shape(S, kdim), 2, dtype)
            v = _t(shape(S, vdim), 3, dtype)
            kwargs = {}
            for name, spec in masks.items():
                if callable(spec):
                    kwargs[name] = spec(dtype)
                else:
                    kwargs[name] = spec
            return (q, k, v), kwargs
        return make

    kpm = torch.tensor([[False, False, True, False, True], [False, True, False, False, False]])
    kpm_full = torch.tensor([[False, False, True, False, True], [True, True, True, True, True]])
    rng = np.random.default_rng(7)
    causal = torch.triu(torch.ones(L, S, dtype=torch.bool), diagonal=1)
    bool3 = torch.tensor(rng.random((N * 2, L, S)) > 0.7)
    bool3[:, :, 0] = False  # every row keeps one key

    def float_mask(shape, seed):
        return lambda dtype: _t(shape, seed, dtype)

    return {
        "MHA-self": (lambda: nn.MultiheadAttention(E, 2), inputs()),
        "MHA-key-padding-bool": (lambda: nn.MultiheadAttention(E, 2),
                                 inputs(key_padding_mask=kpm)),
        "MHA-key-padding-float": (lambda: nn.MultiheadAttention(E, 4),
                                  inputs(key_padding_mask=float_mask((N, S), 4))),
        "MHA-attn-mask-2d-bool": (lambda: nn.MultiheadAttention(E, 2),
                                  inputs(attn_mask=causal)),
        "MHA-attn-mask-3d-bool-per-head": (lambda: nn.MultiheadAttention(E, 2),
                                           inputs(attn_mask=bool3, average_attn_weights=False)),
        "MHA-attn-mask-3d-float": (lambda: nn.MultiheadAttention(E, 2),
                                   inputs(attn_mask=float_mask((N * 2, L, S), 5))),
        "MHA-both-masks-float": (lambda: nn.MultiheadAttention(E, 2),
                                 inputs(attn_mask=float_mask((L, S), 5),
                                        key_padding_mask=float_mask((N, S), 6))),
        "MHA-no-weights": (lambda: nn.MultiheadAttention(E, 2),
                           inputs(key_padding_mask=kpm, attn_mask=causal, need_weights=False)),
        "MHA-kdim-vdim-bias-kv-zero-attn": (
            lambda: nn.MultiheadAttention(E, 2, kdim=3, vdim=6, add_bias_kv=True,
                                          add_zero_attn=True),
            inputs(kdim=3, vdim=6, key_padding_mask=kpm, attn_mask=causal)),
        "MHA-batch-first-no-bias": (lambda: nn.MultiheadAttention(E, 4, bias=False,
                                                                  batch_first=True),
                                    inputs(batch_first=True, key_padding_mask=kpm)),
        "MHA-unbatched": (lambda: nn.MultiheadAttention(E, 2, add_bias_kv=True),
                          inputs(batched=False, key_padding_mask=kpm[0], attn_mask=causal)),
        "MHA-dropout-eval": (lambda: nn.MultiheadAttention(E, 2, dropout=0.5),
                             inputs(average_attn_weights=False)),
        "MHA-fully-masked-row": (lambda: nn.MultiheadAttention(E, 2),
                                 inputs(key_padding_mask=kpm_full)),
        "MHA-fully-masked-row-no-weights": (lambda: nn.MultiheadAttention(E, 2),
                                            inputs(key_padding_mask=kpm_full,
                                                   need_weights=False)),
    }


def _conv_pool_cases() -> dict:
    import torch.nn as nn

    def x(shape):
        return lambda dtype: ((_t(shape, 1, dtype),), {})

    x1, x2, x3 = (2, 4, 9), (2, 4, 7, 8), (1, 4, 5, 6, 5)
    return {
        "Conv1d": (lambda: nn.Conv1d(4, 6, 3), x(x1)),
        "Conv1d-stride-pad-dilation-groups": (
            lambda: nn.Conv1d(4, 6, 4, stride=2, padding=2, dilation=2, groups=2), x(x1)),
        "Conv1d-same-reflect": (lambda: nn.Conv1d(4, 6, 4, padding="same",
                                                  padding_mode="reflect"), x(x1)),
        "Conv1d-circular-unbatched-no-bias": (
            lambda: nn.Conv1d(4, 6, 3, padding=2, padding_mode="circular", bias=False),
            x(x1[1:])),
        "Conv1d-valid-kernel-equals-length": (lambda: nn.Conv1d(4, 3, 9, padding="valid"),
                                              x(x1)),
        "Conv2d": (lambda: nn.Conv2d(4, 6, 3, padding=1), x(x2)),
        "Conv2d-tuple-replicate": (
            lambda: nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 2),
                              padding_mode="replicate"), x(x2)),
        "Conv2d-depthwise-same-dilated": (
            lambda: nn.Conv2d(4, 8, 3, padding="same", dilation=2, groups=4), x(x2)),
        "Conv2d-unbatched": (lambda: nn.Conv2d(4, 2, 2), x(x2[1:])),
        "Conv3d": (lambda: nn.Conv3d(4, 2, 2, padding=1, stride=(1, 2, 1)), x(x3)),
        "ConvTranspose1d": (lambda: nn.ConvTranspose1d(4, 6, 3), x(x1)),
        "ConvTranspose1d-stride-pad-outpad-dilation-groups": (
            lambda: nn.ConvTranspose1d(4, 6, 4, stride=3, padding=2, output_padding=1,
                                       dilation=2, groups=2), x(x1)),
        "ConvTranspose1d-crop-unbatched": (lambda: nn.ConvTranspose1d(4, 2, 2, padding=3),
                                           x(x1[1:])),
        "ConvTranspose2d": (lambda: nn.ConvTranspose2d(4, 3, (3, 2), stride=(2, 1),
                                                       padding=(1, 0), bias=False), x(x2)),
        "ConvTranspose2d-output-size": (
            lambda: nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1),
            lambda dtype: ((_t(x2, 1, dtype),), {"output_size": [14, 16]})),
        "ConvTranspose3d": (lambda: nn.ConvTranspose3d(4, 2, 2, stride=2), x(x3)),
        "PReLU": (lambda: nn.PReLU(), x(x2)),
        "PReLU-channels": (lambda: nn.PReLU(4, init=0.1), x(x1)),
        "PReLU-2d-input": (lambda: nn.PReLU(4), x((5, 4))),
        "MaxPool1d": (lambda: nn.MaxPool1d(3), x(x1)),
        "MaxPool1d-options-indices": (
            lambda: nn.MaxPool1d(3, 2, 1, dilation=2, ceil_mode=True, return_indices=True),
            x(x1)),
        "MaxPool1d-unbatched-stride1": (lambda: nn.MaxPool1d(2, stride=1), x(x1[1:])),
        "MaxPool2d": (lambda: nn.MaxPool2d(2), x(x2)),
        "MaxPool2d-ceil-indices": (
            lambda: nn.MaxPool2d((3, 2), (2, 3), (1, 1), ceil_mode=True, return_indices=True),
            x(x2)),
        "AvgPool1d": (lambda: nn.AvgPool1d(3), x(x1)),
        "AvgPool1d-ceil-pad": (lambda: nn.AvgPool1d(3, 2, 1, ceil_mode=True), x(x1)),
        "AvgPool1d-exclude-pad": (
            lambda: nn.AvgPool1d(3, 2, 1, ceil_mode=True, count_include_pad=False), x(x1)),
        "AvgPool2d-exclude-pad": (
            lambda: nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False), x(x2)),
        "AvgPool2d-divisor-override": (lambda: nn.AvgPool2d(3, 2, 1, divisor_override=5),
                                       x(x2)),
        "AvgPool2d-unbatched": (lambda: nn.AvgPool2d((2, 3)), x(x2[1:])),
        "AdaptiveAvgPool1d": (lambda: nn.AdaptiveAvgPool1d(4), x(x1)),
        "AdaptiveAvgPool1d-to-1": (lambda: nn.AdaptiveAvgPool1d(1), x(x1)),
        "AdaptiveAvgPool2d-none": (lambda: nn.AdaptiveAvgPool2d((3, None)), x(x2)),
        "AdaptiveAvgPool2d-upsample": (lambda: nn.AdaptiveAvgPool2d(10), x(x2)),
        "AdaptiveMaxPool1d-indices": (lambda: nn.AdaptiveMaxPool1d(4, return_indices=True),
                                      x(x1)),
        "AdaptiveMaxPool2d": (lambda: nn.AdaptiveMaxPool2d((3, 5)), x(x2)),
        "AdaptiveMaxPool2d-unbatched-upsample": (lambda: nn.AdaptiveMaxPool2d(10), x(x2[1:])),
    }


def _more_cases() -> dict:
    """The cheaper layers: activations, norms, reshapes, Bilinear, eval-mode dropouts."""
    import torch.nn as nn

    def x(*shapes, scale=2.0):
        return lambda dtype: (tuple(_t(s, 1 + i, dtype, scale) for i, s in enumerate(shapes)),
                              {})

    act = (3, 4, 6)
    cases = {f"{name}-activation": (make, x(act)) for name, make in {
        "ReLU6": lambda: nn.ReLU6(), "Hardtanh": lambda: nn.Hardtanh(-2.0, 1.5),
        "SELU": lambda: nn.SELU(), "CELU": lambda: nn.CELU(0.7), "Mish": lambda: nn.Mish(),
        "Hardswish": lambda: nn.Hardswish(), "Hardsigmoid": lambda: nn.Hardsigmoid(),
        "LogSigmoid": lambda: nn.LogSigmoid(), "Softsign": lambda: nn.Softsign(),
        "Tanhshrink": lambda: nn.Tanhshrink(), "Softshrink": lambda: nn.Softshrink(0.3),
        "Hardshrink": lambda: nn.Hardshrink(0.7), "Threshold": lambda: nn.Threshold(0.2, -1.0),
        "GLU": lambda: nn.GLU(1), "Softmax": lambda: nn.Softmax(-1),
        "LogSoftmax": lambda: nn.LogSoftmax(1), "Softmin": lambda: nn.Softmin(0)}.items()}
    cases.update({
        "Softmax-implicit-dim-3d": (lambda: nn.Softmax(), x(act)),
        "BatchNorm2d": (lambda: nn.BatchNorm2d(4), x((3, 4, 5, 2))),
        "BatchNorm2d-train": (lambda: nn.BatchNorm2d(4).train(), x((3, 4, 5, 2))),
        "BatchNorm3d": (lambda: nn.BatchNorm3d(4, affine=False), x((2, 4, 3, 2, 2))),
        "InstanceNorm1d": (lambda: nn.InstanceNorm1d(4), x((3, 4, 7))),
        "InstanceNorm1d-affine-unbatched": (lambda: nn.InstanceNorm1d(4, affine=True),
                                            x((4, 7))),
        "InstanceNorm2d-affine": (lambda: nn.InstanceNorm2d(4, affine=True), x((2, 4, 3, 5))),
        "InstanceNorm2d-tracked-eval": (
            lambda: nn.InstanceNorm2d(4, affine=True, track_running_stats=True),
            x((2, 4, 3, 5))),
        "InstanceNorm3d": (lambda: nn.InstanceNorm3d(2), x((2, 2, 3, 2, 4))),
        "GroupNorm": (lambda: nn.GroupNorm(2, 6), x((3, 6, 5))),
        "GroupNorm-no-affine-2d": (lambda: nn.GroupNorm(3, 6, eps=1e-3, affine=False),
                                   x((2, 6, 2, 3))),
        "RMSNorm": (lambda: nn.RMSNorm(6), x((3, 4, 6))),
        "RMSNorm-eps-2d-shape": (lambda: nn.RMSNorm((4, 6), eps=1e-3), x((3, 4, 6))),
        "RMSNorm-no-affine": (lambda: nn.RMSNorm(6, elementwise_affine=False), x((5, 6))),
        "Flatten": (lambda: nn.Flatten(), x((2, 3, 4, 5))),
        "Flatten-range": (lambda: nn.Flatten(0, -2), x((2, 3, 4, 5))),
        "Unflatten": (lambda: nn.Unflatten(1, (2, -1)), x((3, 8, 2))),
        "Bilinear": (lambda: nn.Bilinear(3, 4, 5), x((6, 3), (6, 4))),
        "Bilinear-no-bias-batched": (lambda: nn.Bilinear(3, 4, 2, bias=False),
                                     x((2, 6, 3), (2, 6, 4))),
        "Dropout1d-eval": (lambda: nn.Dropout1d(0.5), x((2, 3, 4))),
        "Dropout2d-eval": (lambda: nn.Dropout2d(0.5), x((2, 3, 4, 2))),
        "AlphaDropout-eval": (lambda: nn.AlphaDropout(0.3), x((2, 3))),
        "FeatureAlphaDropout-eval": (lambda: nn.FeatureAlphaDropout(0.3), x((2, 3, 4))),
        "Dropout3d-eval": (lambda: nn.Dropout3d(0.5), x((2, 3, 2, 2, 2))),
        "ZeroPad2d": (lambda: nn.ZeroPad2d((1, 2, 0, 3)), x((2, 3, 5, 6))),
        "ConstantPad1d-crop-unbatched": (lambda: nn.ConstantPad1d((2, -1), 1.5), x((3, 6))),
        "ConstantPad3d": (lambda: nn.ConstantPad3d(1, -0.5), x((1, 2, 3, 2, 2))),
        "ReflectionPad1d": (lambda: nn.ReflectionPad1d((3, 1)), x((2, 3, 6))),
        "ReflectionPad2d": (lambda: nn.ReflectionPad2d(2), x((2, 3, 5, 6))),
        "ReplicationPad1d": (lambda: nn.ReplicationPad1d((0, 3)), x((2, 3, 6))),
        "ReplicationPad2d": (lambda: nn.ReplicationPad2d((1, 2, 3, 0)), x((2, 3, 5, 6))),
        "CircularPad2d": (lambda: nn.CircularPad2d((1, 0, 2, 1)), x((2, 3, 5, 6))),
        "CircularPad1d": (lambda: nn.CircularPad1d(2), x((2, 3, 6))),
        "CircularPad3d": (lambda: nn.CircularPad3d((1, 0, 0, 1, 1, 1)), x((1, 2, 3, 2, 2))),
        "ConstantPad2d": (lambda: nn.ConstantPad2d((1, 2, -1, 0), 2.0), x((2, 3, 5, 6))),
        "ReflectionPad3d": (lambda: nn.ReflectionPad3d(1), x((1, 2, 3, 2, 2))),
        "ReplicationPad3d": (lambda: nn.ReplicationPad3d((2, 0, 1, 1, 0, 1)),
                             x((1, 2, 3, 2, 2))),
        "ZeroPad1d": (lambda: nn.ZeroPad1d((1, 3)), x((3, 6))),
        "ZeroPad3d": (lambda: nn.ZeroPad3d(1), x((1, 2, 3, 2, 2))),
        "MaxPool3d-ceil-indices": (lambda: nn.MaxPool3d(2, ceil_mode=True, return_indices=True),
                                   x((1, 2, 4, 5, 3))),
        "AvgPool3d-pad": (lambda: nn.AvgPool3d(2, padding=1), x((1, 2, 4, 5, 3))),
        "AdaptiveAvgPool3d": (lambda: nn.AdaptiveAvgPool3d((2, 3, None)), x((1, 2, 4, 5, 3))),
        "AdaptiveMaxPool3d": (lambda: nn.AdaptiveMaxPool3d(2), x((1, 2, 4, 5, 3))),
        "CosineSimilarity": (lambda: nn.CosineSimilarity(), x((4, 5, 3), (4, 5, 3))),
        "CosineSimilarity-clamped-broadcast": (lambda: nn.CosineSimilarity(-1, eps=0.5),
                                               x((4, 5, 3), (1, 5, 3), scale=0.2)),
        "PairwiseDistance": (lambda: nn.PairwiseDistance(), x((4, 5), (4, 5))),
        "PairwiseDistance-p1.5-keepdim": (lambda: nn.PairwiseDistance(1.5, keepdim=True),
                                          x((4, 5), (4, 5))),
        "PairwiseDistance-inf": (lambda: nn.PairwiseDistance(float("inf")), x((4, 5), (1, 5))),
        "EmbeddingBag-mean-offsets": (lambda: nn.EmbeddingBag(10, 3), _bag(False)),
        "EmbeddingBag-sum-weighted": (lambda: nn.EmbeddingBag(10, 3, mode="sum"), _bag(True)),
        "EmbeddingBag-max": (lambda: nn.EmbeddingBag(10, 3, mode="max"), _bag(False)),
        "EmbeddingBag-mean-padding-last-offset": (
            lambda: nn.EmbeddingBag(10, 3, padding_idx=4, include_last_offset=True),
            _bag(False, last=True)),
        "EmbeddingBag-max-2d-padding": (lambda: nn.EmbeddingBag(10, 3, mode="max",
                                                                padding_idx=0), _bag(False, 2)),
        # the layers ported before this section existed, by their class names
        "ReLU-activation": (lambda: nn.ReLU(), x(act)),
        "LeakyReLU-activation": (lambda: nn.LeakyReLU(0.2), x(act)),
        "ELU-activation": (lambda: nn.ELU(0.8), x(act)),
        "GELU-activation": (lambda: nn.GELU(), x(act)),
        "GELU-tanh-activation": (lambda: nn.GELU(approximate="tanh"), x(act)),
        "SiLU-activation": (lambda: nn.SiLU(), x(act)),
        "Sigmoid-activation": (lambda: nn.Sigmoid(), x(act)),
        "Tanh-activation": (lambda: nn.Tanh(), x(act)),
        "Softplus-activation": (lambda: nn.Softplus(2.0, threshold=3.0), x(act)),
        "Identity": (lambda: nn.Identity(), x(act)),
        "Linear": (lambda: nn.Linear(6, 3), x(act)),
        "Dropout-eval": (lambda: nn.Dropout(0.5), x(act)),
        "BatchNorm1d": (lambda: nn.BatchNorm1d(4), x((5, 4, 3))),
        "BatchNorm1d-train": (lambda: nn.BatchNorm1d(4), x((5, 4))),
        "Sequential": (lambda: nn.Sequential(nn.Linear(6, 5), nn.PReLU(), nn.LayerNorm(5),
                                             nn.Linear(5, 2)), x(act)),
    })
    return cases


def _bag(weighted: bool, ndim: int = 1, last: bool = False) -> Callable:
    """EmbeddingBag inputs: ids with a repeated id, an empty bag and padding ids (4, 0)."""
    import torch

    def make(dtype):
        ids = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 0])
        if ndim == 2:
            return (ids.reshape(5, 2),), {}
        offsets = torch.tensor([0, 3, 3, 10] if last else [0, 2, 2, 6])
        kwargs = {"per_sample_weights": _t((10,), 5, dtype)} if weighted else {}
        return (ids, offsets), kwargs
    return make


#: labels whose module runs in training mode (batch statistics)
TRAIN = ("BatchNorm2d-train", "BatchNorm1d-train")


def all_layers() -> dict[str, tuple[Callable, Callable]]:
    """label -> (make the torch module, make (args, kwargs) for a dtype)."""
    return {**_rnn_cases(), **_mha_cases(), **_conv_pool_cases(), **_more_cases()}


def op_of(label: str) -> str:
    op = label.split("-")[0]
    return "MultiheadAttention" if op == "MHA" else op


@register("torch_nn")
def torch_nn_cases() -> Iterable[Case]:
    for label, (make, make_args) in all_layers().items():
        for dtype in WIDE:
            def build(make=make, make_args=make_args, dtype=dtype, label=label):
                import torch

                from torch2jax_ops.nn import from_torch

                torch.manual_seed(0)
                module = _perturb_buffers(_perturb(make(), sum(map(ord, label))), 3)
                module = module.to(dtypes.torch_dtype(dtype)).train(label in TRAIN)
                args, kwargs = make_args(dtype)
                return module, from_torch(module, copy=True), args, kwargs, {}
            yield Case("torch_nn", op_of(label), dtype, label, build)
