"""Calling a PyG layer so that it takes its fused path on a sparse adj_t
(parity_tests/test_sparse_convs.py, parity_tests/test_hetero_conv.py). Imports torch."""
import sys

import torch
import torch_geometric


def pyg(layer, *args, **kwargs):
    """``layer(*args)``, making sure PyG can take its fused path. PyG compiles one
    ``propagate`` per class from the class's *first* instance: a ``SAGEConv(aggr="mul")``
    built first in a process (another test file's) leaves no fused path in the class's
    ``propagate``, and a later ``SAGEConv`` then raises NotImplementedError on a sparse adj_t.
    Such a class gets its ``propagate`` compiled again from a fusing instance (its unfused
    instances never enter that branch). PyG's Python ``propagate`` is no way out: on a COO
    adj_t it flags the index coalesced in place, which breaks torch's backward."""
    for m in layer.modules():
        if not isinstance(m, torch_geometric.nn.MessagePassing) or not m.fuse:
            continue
        cls = type(m)
        compiled = cls.__dict__.get("propagate")
        if compiled is not None and hasattr(cls, "_jinja_propagate") and \
                "message_and_aggregate" not in compiled.__code__.co_names:
            del cls.propagate, cls.collect  # back to MessagePassing's, then compile again
            sys.modules.pop(f"{cls.__module__}_{cls.__name__}_propagate", None)
            m._set_jittable_templates(raise_on_error=True)
    return layer(*args, **kwargs)
