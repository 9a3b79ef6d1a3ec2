"""PyG's ``RGATConv``: traced on the MessagePassing base, its within-relation softmax under jit.

``RGATConv`` converts like any ``MessagePassing`` layer: its ``forward`` and
``message`` run on JAX values through the fx mapping table. One branch of its
``message`` cannot run that way under ``jax.jit``: with
``attention_mechanism="within-relation"`` it normalises the attention scores
of each relation on its own, in a Python loop over relations that selects
``alpha[edge_type == r]`` -- a boolean mask, whose result has a data-dependent
length. The port runs PyG's ``message`` with the across-relation branch instead
(``softmax(alpha, index, ptr, size_i)``) and gives that ``softmax`` the groups
of the loop: one group per (target node, relation), id ``index * R +
edge_type``. That is the loop's result exactly: each edge's score normalised
over the edges of its relation into its target. Every other line of
``message`` (the degree scaling of the ``f-*`` modes, which keeps PyG's
``index``) runs as PyG wrote it.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator

import jax.numpy as jnp

from ....nn import Converter, register_converter
from .._message_passing import TracedMessagePassing, _convert_message_passing

__all__ = ["TracedRGATConv"]


class _Overlay:
    """The tracer's function table with a few entries replaced (for one call)."""

    def __init__(self, table: Any, overrides: dict):
        self.by_id = {**table.by_id, **overrides}


class TracedRGATConv(TracedMessagePassing):
    """The port of ``torch_geometric.nn.RGATConv`` (see the module docstring)."""
    __slots__ = ()

    def _patches(self) -> Callable:
        base = super()._patches()
        module = self._program.torch_module
        if module.attention_mechanism != "within-relation":
            return base

        @contextlib.contextmanager
        def patched(tracer: Any) -> Iterator[None]:
            with base(tracer):
                module.__dict__["message"] = _within_relation(tracer, module)
                try:
                    yield
                finally:
                    module.__dict__.pop("message", None)
        return patched


def _within_relation(tracer: Any, module: Any) -> Callable:
    """``module.message`` with its per-relation softmax loop as one grouped softmax."""
    import torch.fx as fx
    from torch_geometric.utils import softmax as pyg_softmax

    message = type(module).message.__get__(module)
    relations = int(module.num_relations)

    def value(p: Any) -> Any:
        return tracer.values[p.node] if isinstance(p, fx.Proxy) else p

    @functools.wraps(message)
    def within(**kwargs: Any) -> Any:
        impl = tracer.table.by_id[id(pyg_softmax)]
        edge_type = value(kwargs["edge_type"])

        def grouped(src: Any, index: Any, ptr: Any = None, num_nodes: Any = None,
                    dim: int = 0) -> Any:
            n = int(num_nodes)
            ok = (edge_type >= 0) & (edge_type < relations)
            # an edge of no relation belongs to no group (PyG's loop leaves it 0)
            group = jnp.where(ok, index * relations + edge_type, n * relations)
            out = impl(src, group, None, n * relations + 1, dim)
            return jnp.where(ok.reshape((-1,) + (1,) * (out.ndim - 1)), out, 0)

        table = tracer.table
        tracer.table = _Overlay(table, {id(pyg_softmax): grouped})
        module.attention_mechanism = "across-relation"
        try:
            return message(**kwargs)
        finally:
            module.attention_mechanism = "within-relation"
            tracer.table = table
    return within


@register_converter("torch_geometric.nn.conv.rgat_conv.RGATConv")
def _rgat(m: Any, ctx: Converter) -> TracedRGATConv:
    port = _convert_message_passing(m, ctx)  # the family's checks and children
    return TracedRGATConv(port._children, port._program)
