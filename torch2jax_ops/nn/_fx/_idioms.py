"""Torch idioms whose JAX form needs the trace's bookkeeping, one function per idiom.

The tracer (:mod:`._tracer`) asks these while it evaluates a node, handing them the
state they read and update (its node values and the tables below):

* in-place updates and views (``x.add_(y)``, ``x[i] = v``, ``F.relu(x, inplace=True)``):
  later uses of ``x`` see the new value (:func:`rebind`); a view updated in place
  leaves the tensor it looks into stale (:func:`mark_stale`);
* sorted ids: ``batch[1:] - batch[:-1]`` and its ``.nonzero()`` (where a graph starts)
  with a static count, and PyG's sortedness check decided as torch decides it
  (:func:`graph_boundaries`);
* width-dependent aggregations (LSTM, GRU, LCM) refused on a padded batch, whose
  width would not be PyG's (:func:`check_dense_width`);
* a pool's row counts (``out.size(0)`` after TopKPooling: :func:`note_pooled`,
  :func:`pooled_rows`);
* masks whose True count a function declares (to_dense_batch's), so ``h[mask]`` has a
  static row count under jit (:func:`note_counted_mask`, :func:`counted_getitem`).
"""
from __future__ import annotations

import builtins
import inspect
import operator
from typing import Any, Optional

import jax
import numpy as np

from ..._batch_vector import BatchVector
from ..._checking import is_array
from .. import _masked, _pooled
from .._convert import UnsupportedModuleError
from ._errors import user_frame

__all__ = ["check_dense_width", "rebind", "mark_stale", "graph_boundaries", "note_pooled",
           "pooled_rows", "note_counted_mask", "counted_getitem"]


#: PyG aggregations whose result depends on the dense width they run over (why)
_WIDTH_DEPENDENT = {
    "torch_geometric.nn.aggr.lstm.LSTMAggregation": "the LSTM's last step",
    "torch_geometric.nn.aggr.gru.GRUAggregation": "the GRU's last step",
    "torch_geometric.nn.aggr.lcm.LCMAggregation": "its tree's shape: the widest group, "
                                                  "which in a padded batch may be the "
                                                  "padding graph",
}
#: of those, the ports that leave a ``padded`` BatchVector's padding graph out of the width
_PADDING_AWARE = frozenset({"torch_geometric.nn.aggr.lcm.LCMAggregation"})

#: comparisons of ``ids[1:]`` with ``ids[:-1]`` (True: later first) that hold for sorted ids
_SORTED_COMPARISONS = {True: (operator.ge,), False: (operator.le,)}


def _shifted_pair(node: Any, values: dict) -> Optional[tuple]:
    """``(batch, later_first)`` when ``node`` combines ``batch[1:]`` and ``batch[:-1]`` of one
    BatchVector (``later_first``: ``batch[1:]`` is the first operand), else None."""
    import torch.fx as fx

    if node.op != "call_function" or len(node.args) != 2:
        return None
    first, second = node.args
    if not all(isinstance(n, fx.Node) and n.op == "call_function" and
               n.target is operator.getitem and len(n.args) == 2 for n in (first, second)):
        return None
    if first.args[0] is not second.args[0] or not isinstance(values.get(first.args[0]),
                                                              BatchVector):
        return None
    later, earlier = slice(1, None, None), slice(None, -1, None)
    if (first.args[1], second.args[1]) == (later, earlier):
        return values[first.args[0]], True
    if (first.args[1], second.args[1]) == (earlier, later):
        return values[first.args[0]], False
    return None


def _long_dtype() -> Any:
    from .._functions_base import long_dtype
    return long_dtype()


def _is_view(node: Any) -> bool:
    """An fx node whose torch result shares memory with its first argument."""
    return (node.op == "call_function" and node.target is operator.getitem) or (
        node.op == "call_method" and node.target in _VIEWS)


def _pooled_traced(value: Any) -> bool:
    return isinstance(value, jax.core.Tracer)


#: tensor methods whose result shares the input's memory in torch
_VIEWS = frozenset({"view", "view_as", "reshape", "transpose", "permute", "t", "expand",
                    "expand_as", "squeeze", "unsqueeze", "flatten", "narrow", "select",
                    "unflatten", "as_strided", "diagonal", "unbind", "split", "chunk"})


def _mutates(kind: str, target: Any) -> bool:
    """An in-place torch op: ``x.add_(...)`` and friends, ``x[i] = v``."""
    if kind == "call_method":
        return isinstance(target, str) and target.endswith("_") and not target.startswith("_")
    return kind == "call_function" and target is operator.setitem


def _inplace_call(kind: str, target: Any, args: tuple, kwargs: dict) -> bool:
    """A torch function told to write into its input: ``F.relu(x, inplace=True)``,
    ``F.dropout(h, p, training, True)`` (the ``inplace`` parameter, by name or position)."""
    if kind != "call_function" or not callable(target):
        return False
    if kwargs.get("inplace") is True:
        return True
    try:
        names = list(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        return False
    return "inplace" in names and len(args) > names.index("inplace") \
        and args[names.index("inplace")] is True


def check_dense_width(values: dict, port: str, m: Any, args: Any, kwargs: Any) -> None:
    """An aggregation whose result depends on the dense width (a recurrent cell or
    LCM's tree run over the padded neighbourhoods; PyG's width is the largest
    group) with a padded batch's BatchVector under jit: that width is the budget
    N, not PyG's, and the numbers would differ. An error, not another number; except
    for the ports in ``_PADDING_AWARE``, which take PyG's width from the real groups of
    a BatchVector marked ``padded`` (a PaddedGraph's)."""
    name = f"{type(m).__module__}.{type(m).__qualname__}"
    if name not in _WIDTH_DEPENDENT:
        return
    index = args[1] if len(args) > 1 else kwargs.get("index")
    value = values.get(getattr(index, "node", None))
    if name in _PADDING_AWARE and isinstance(value, BatchVector) and value.padded:
        return  # the port leaves the padding graph out of the width, as PyG never sees it
    if isinstance(value, BatchVector) and value.max_num_nodes is None \
            and _pooled_traced(value.ids) and kwargs.get("max_num_nodes") is None:
        raise UnsupportedModuleError(
            f"{port}: {type(m).__name__} runs over each group padded to "
            f"the dense width, and its result depends on that width (PyG: the "
            f"largest group of the batch, {_WIDTH_DEPENDENT[name]}). The padded "
            f"batch's BatchVector gives the node budget N instead, so the numbers "
            f"would differ from PyG's: call it with a from_pyg batch (it carries "
            f"PyG's largest graph as max_num_nodes), or with the batch's ids as a "
            f"constant, or eagerly")


def rebind(values: dict, stale: dict, port: str, target: Any, value: Any, node: Any) -> None:
    """The node ``target`` holds ``value`` from now on: the result of ``node``, an in-place
    update of it (and, through a chain of in-place calls, of what they started from)."""
    import torch.fx as fx

    if _is_view(target):
        # in torch the update writes through to the viewed tensor (and its other
        # views); here the view alone gets the new value, which is the same as long
        # as nothing reads those afterwards: reading one then is the error
        message = (f"{port}: an in-place update of a view "
                   f"({target.target} of another tensor, {user_frame(node.meta.get('stack_trace'))}) "
                   f"writes through to that tensor in torch, which is read "
                   f"afterwards; JAX arrays are immutable. Write it out of place "
                   f"(x = x.index_put(...) / torch.where)")
        mark_stale(values, stale, target, message)
    values[target] = value
    if _mutates(target.op, target.target) and target.args and isinstance(
            target.args[0], fx.Node):
        # a chain, out.mul_(a).add_(b): the result of mul_ *is* out, so add_ updates
        # out too (the forward goes on using `out`)
        rebind(values, stale, port, target.args[0], value, node)


def mark_stale(values: dict, stale: dict, view: Any, message: str) -> None:
    """The tensor ``view`` looks into, and its other views, no longer hold torch's
    values (an in-place update of ``view`` went to ``view`` alone)."""
    import torch.fx as fx

    base = view.args[0]
    while isinstance(base, fx.Node) and is_array(values.get(base)):
        # (an item of a tuple or list, out[0], shares nothing with the container)
        stale.setdefault(base, message)
        for user in base.users:
            if user is not view and _is_view(user):
                stale.setdefault(user, message)
        base = base.args[0] if _is_view(base) and base.args else None


def graph_boundaries(values: dict, boundaries: dict, node: Any, args: tuple,
                     kwargs: dict) -> Optional[tuple]:
    """UPFD's root nodes: ``(batch[1:] - batch[:-1]).nonzero()`` is one entry per graph
    after the first (a graph starts where the sorted ids change), a static count
    under jit when ``batch`` is a BatchVector (``num_graphs - 1``; should a graph be
    empty -- a padded batch's padding graph -- the last entries hold the last
    position, rows the padding masks). ``boundaries``: ``id -> (array, count)`` of the
    differences seen so far, for their ``.nonzero()``."""
    import torch

    shifted = _shifted_pair(node, values)  # (batch, later-first?) or None
    if shifted is not None and node.target is operator.sub and shifted[1]:
        count = shifted[0].num_graphs - 1
        out = args[0] - args[1]
        boundaries[id(out)] = (out, max(count, 0))
        return (out,)
    if shifted is not None and node.target in _SORTED_COMPARISONS[shifted[1]]:
        # PyG's Aggregation.assert_sorted_index: `index[:-1] <= index[1:]`. A
        # BatchVector's ids are sorted (a mini-batch keeps each graph's nodes
        # together; pools keep the order): known True, decided as torch decides it
        return (np.ones(max(shifted[0].ids.shape[0] - 1, 0), bool),)
    if node.op == "call_function" and node.target is operator.sub:
        return None
    nonzero = (node.op == "call_method" and node.target == "nonzero") or (
        node.op == "call_function" and node.target is torch.nonzero)
    entry = boundaries.get(id(args[0])) if nonzero and args else None
    if entry is None or entry[0] is not args[0] or not _pooled_traced(args[0]):
        return None
    last = args[0].shape[0] - 1
    (found,) = jax.numpy.nonzero(args[0], size=entry[1], fill_value=max(last, 0))
    found = found.astype(_long_dtype())
    return ((found,),) if kwargs.get("as_tuple") else (found[:, None],)


def note_pooled(pooled: dict, module: Any, out: Any, x: Any) -> None:
    """Remember a pool's row-aligned outputs when its kept count is not their rows
    (``pooled``: ``id -> (array, kept rows)``)."""
    kept_rows = getattr(module, "kept_rows", None)
    if kept_rows is None or not isinstance(out, tuple) or not is_array(x):
        return
    kept = kept_rows(out, x)
    for i in module.row_outputs:
        if is_array(out[i]) and (_pooled_traced(kept) or int(kept) != out[i].shape[0]):
            pooled[id(out[i])] = (out[i], kept)


def pooled_rows(pooled: dict, node: Any, args: tuple, kwargs: dict) -> Optional[tuple]:
    """(value,) for a row count of a pool's output, or arithmetic on one; else None."""
    if node.op == "call_function" and node.target in _pooled.ARITHMETIC:
        kept = _pooled.kept_operands(args)
        return None if kept is None else (node.target(*kept),)
    subject = args[0] if args else None
    entry = pooled.get(id(subject))
    if entry is None or entry[0] is not subject:
        return None
    if node.op == "call_method" and node.target == "size":
        shape = _pooled.row_count(subject.shape, entry[1])
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        return (shape if dim is None else shape[dim],)
    if node.op == "call_function" and node.target is builtins.getattr \
            and args[1:] == ("shape",):
        return (_pooled.row_count(subject.shape, entry[1]),)
    return None


def note_counted_mask(counted_masks: dict, impl: Any, args: tuple, kwargs: dict,
                      out: Any) -> None:
    """A table entry that declares its mask's True count (``mask_row_count``: to_dense_batch's
    ``(out, mask)``): remember it (``counted_masks``: ``id -> (mask, rows)``)."""
    counted = getattr(impl, "mask_row_count", None)  # (out, mask): mask's True count
    if counted is not None and isinstance(out, tuple) and len(out) == 2:
        rows = counted(args, kwargs)
        if rows is not None:
            counted_masks[id(out[1])] = (out[1], rows)


def counted_getitem(counted_masks: dict, node: Any, args: tuple) -> Optional[tuple]:
    """(rows,) for ``h[mask]`` with a mask whose True count is declared, a static row count
    under jit; else None."""
    if node.op == "call_function" and node.target is operator.getitem \
            and len(args) == 2 and id(args[1]) in counted_masks:
        mask, rows = counted_masks[id(args[1])]
        if mask is args[1]:
            return (_masked.counted_rows(args[0], mask, rows),)
    return None
