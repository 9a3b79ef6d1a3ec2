"""The torch.nn coverage table: every class of ``torch.nn.modules.__all__`` and its status here.

Generated, never typed in, like the PyG table (:mod:`._coverage`): a class is
*ported* when the converter registry holds a converter for its exact class;
its *parity cases* are the suite's cases whose op is the class name. A class
that is not ported says why (:func:`reason`). ``torch2jax-ops tables --write``
refreshes the table in ``migration_guide/torch_nn.md``;
``parity_tests/test_torch_nn_coverage.py`` asserts it matches the registry.
"""
from __future__ import annotations

import re
from collections import Counter

__all__ = ["torch_nn_rows", "torch_nn_coverage_table", "REASONS", "reason"]

_LOSS = ("a loss: compute it in the JAX training step (the torch.nn.functional losses are "
         "in the fx mapping table, or use optax)")
_LAZY = ("lazy: run one forward in torch first; the module then becomes its non-lazy class, "
         "which converts")
_BASE = "a base class / container protocol, not a layer: its subclasses convert"
_IMAGE = "an image-model layer, rarely in GNN code: not ported yet"
_TODO = "not ported yet: register a converter (porting.md) or ask for it"
_RANDOM = ("random in training mode with its own noise (not torch's random stream); "
           "not ported yet")

#: (regex over the class name, why it is not ported), first match wins
REASONS: tuple[tuple[str, str], ...] = (
    (r"^Lazy", _LAZY),
    (r"Loss$|^NLLLoss2d$|^AdaptiveLogSoftmaxWithLoss$|^LinearCrossEntropyOptions$", _LOSS),
    (r"^(Module|Container|RNNBase|RNNCellBase)$", _BASE),
    (r"^(ModuleDict|ParameterList|ParameterDict)$",
     "a container without a forward: convert the model that uses it (its modules convert "
     "one by one through the fx path)"),
    (r"^SyncBatchNorm$", "multi-process batch statistics: use BatchNorm in a single process, "
                         "or see distributed.md"),
    (r"^Transformer", "not ported yet: its encoder/decoder layers combine ported parts "
                      "(MultiheadAttention, Linear, LayerNorm, Dropout); write the layer "
                      "as a torch module of those and convert that"),
    (r"^(RReLU|FractionalMaxPool[23]d)$", _RANDOM),
    (r"^(PixelShuffle|PixelUnshuffle|ChannelShuffle|Upsample\w*|Fold|Unfold|"
     r"MaxUnpool[123]d|LPPool[123]d|CrossMapLRN2d|LocalResponseNorm|Softmax2d)$", _IMAGE),
)


def reason(name: str) -> str:
    """Why ``name`` (a class of torch.nn.modules) is not ported."""
    for pattern, why in REASONS:
        if re.search(pattern, name):
            return why
    return _TODO


def torch_nn_rows(case_counts: Counter[str] | None = None) -> list[tuple[str, bool, int, str]]:
    """``(name, ported, parity_cases, note)`` for every name of ``torch.nn.modules.__all__``."""
    import torch.nn.modules as modules

    import torch2jax_ops.nn  # noqa: F401  (registers the converters)

    from ..nn import _registry

    if case_counts is None:
        from ._suite import cases
        case_counts = Counter(c.op for c in cases())
    converters = _registry.converters()
    rows = []
    for name in modules.__all__:
        obj = getattr(modules, name)
        ported = isinstance(obj, type) and _registry.class_path(obj) in converters
        rows.append((name, ported, case_counts.get(name, 0), "" if ported else reason(name)))
    return rows


def torch_nn_coverage_table() -> str:
    """The table as Markdown (what ``migration_guide/torch_nn.md`` shows)."""
    rows = torch_nn_rows()
    done = sum(r[1] for r in rows)
    lines = [f"**`torch.nn`**: {done} of {len(rows)} classes ported\n",
             "| class | status | parity cases | note |", "|---|---|---:|---|"]
    for name, ported, n, note in rows:
        lines.append(f"| `{name}` | {'ported' if ported else 'not ported'} | {n} | {note} |")
    return "\n".join(lines)
