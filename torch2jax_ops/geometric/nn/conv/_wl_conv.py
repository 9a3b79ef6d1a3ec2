"""PyG's ``WLConv``: one round of Weisfeiler-Lehman colour refinement, on concrete values.

Each node's new colour is the id of the tuple ``(colour, *sorted(neighbour colours))``
in a table that grows as new tuples appear -- a Python dict lookup per node, so
the computation depends on the data by nature and cannot be a compiled program.
The port runs it on the host, on concrete integer arrays: eagerly, or inside
``jax.jit`` when the colours and edges are compile-time constants (closed over,
as ``compare_modules`` passes integer inputs). Traced inputs raise, naming the fix.

The colour table. PyG keys its dict by ``hash(tuple)`` and gives a new tuple the
next id, ``len(hashmap)``; the port does the same, starting from a copy of the
PyG module's dict as it is at conversion, so a model whose WLConv has already
coloured graphs keeps those ids. Like PyG's dict, the port's table grows in place
with every call (it is the one mutable part of the otherwise immutable module),
so colour ids stay consistent across calls -- graphs coloured in separate calls
(training and test batches of a WL kernel) get comparable histograms, exactly as
with PyG. Copies of the port (``functional_call``, ``eqx.tree_at``) share the
table; the torch module's dict is never touched. ``port.hashmap`` is a copy of
the table, ``port.reset_parameters()`` clears it (PyG's ``reset_parameters``).
Under ``jax.jit`` the colours are computed while JAX traces: a cached compiled
function replays the colours (and histogram width) of its trace.
"""
from __future__ import annotations

from typing import Any, Optional

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ...._checking import is_traced
from ...._dtypes import canonical_jax_dtype
from ....nn import Converter, register_converter

__all__ = ["WLConv"]

_FIX = ("WLConv looks every node's neighbourhood up in a Python dict, so it runs on concrete "
        "integer arrays only: call the port outside jax.jit, or make the colours and edges "
        "compile-time constants (close over them: jax.jit(lambda: port(x, edge_index)))")


class _ColourTable:
    """The mutable ``{hash(tuple): colour id}`` dict (compared and hashed by identity, so it
    can sit in a static field)."""

    __slots__ = ("ids",)

    def __init__(self, ids: Optional[dict] = None):
        self.ids: dict = dict(ids or {})

    def __repr__(self) -> str:
        return f"_ColourTable({len(self.ids)} colours)"


def _concrete(value: Any, name: str) -> np.ndarray:
    if is_traced(value) or any(is_traced(leaf) for leaf in jax.tree_util.tree_leaves(value)):
        raise ValueError(f"WLConv: `{name}` is traced (a jax.jit / vmap / grad argument). {_FIX}")
    return np.asarray(value)


class WLConv(eqx.Module):
    """``torch_geometric.nn.WLConv``: ``x'_i = id(x_i, sorted {x_j : j -> i})``.

    ``port(x, edge_index)``: ``x`` ``[N]`` integer colours or ``[N, C]`` one-hot rows,
    ``edge_index`` ``[2, E]`` (``row -> col``) -> ``[N]`` integer colours (int64, int32
    without JAX's 64-bit mode; an empty ``x`` gives an empty float32 array, as PyG's
    ``torch.tensor([])``). ``port.histogram(x, batch=None, norm=False)`` ->
    ``[num_graphs, num_colours]`` colour counts (float32, each row divided by its L2
    norm, with ``norm=True``). See the module docstring for the colour table.
    """

    table: _ColourTable = eqx.field(static=True)

    #: the torch methods a traced forward may call on the torch module (conv.histogram)
    _TORCH_METHODS = frozenset({"histogram"})

    def __init__(self, hashmap: Optional[dict] = None):
        self.table = _ColourTable(hashmap)

    @property
    def hashmap(self) -> dict:
        """A copy of the colour table: ``{hash(tuple): colour id}``, as PyG's ``hashmap``."""
        return dict(self.table.ids)

    def reset_parameters(self) -> None:
        """Forget every colour (PyG's ``reset_parameters``); shared copies forget too."""
        self.table.ids.clear()

    def __call__(self, x: Any, edge_index: Any) -> jax.Array:
        colours = _concrete(x, "x")
        edges = _concrete(edge_index, "edge_index")
        if colours.ndim == 2:
            if not (colours.sum(axis=-1) == 1).all():
                raise ValueError("WLConv: a 2-D `x` must be one-hot rows (each row sums to 1); "
                                 "pass integer colours [N] otherwise")
            colours = colours.argmax(axis=-1)
        elif colours.ndim != 1 or not np.issubdtype(colours.dtype, np.integer):
            raise TypeError(f"WLConv: `x` must be integer colours [N] or one-hot rows [N, C], "
                            f"got shape {colours.shape} of {colours.dtype}")
        n = colours.shape[0]
        if edges.ndim != 2 or edges.shape[0] != 2 or not np.issubdtype(edges.dtype, np.integer):
            raise ValueError(f"WLConv: `edge_index` must be integer [2, E], got shape "
                             f"{edges.shape} of {edges.dtype}")
        if edges.size and (edges.min() < 0 or edges.max() >= n):
            raise IndexError(f"WLConv: `edge_index` holds {int(edges.min())}..{int(edges.max())}"
                             f", out of range for {n} nodes (valid range [0, {n}))")
        row, col = edges
        order = np.argsort(col, kind="stable")
        starts = np.searchsorted(col[order], np.arange(n + 1))
        neighbours = colours[row[order]]
        ids, out = self.table.ids, []
        for node in range(n):
            group = np.sort(neighbours[starts[node]:starts[node + 1]])
            key = hash(tuple([int(colours[node])] + group.tolist()))
            if key not in ids:
                ids[key] = len(ids)
            out.append(ids[key])
        with jax.ensure_compile_time_eval():
            if not out:
                return jnp.zeros((0,), jnp.float32)
            return jnp.asarray(np.asarray(out), canonical_jax_dtype("int64"))

    def histogram(self, x: Any, batch: Any = None, norm: bool = False) -> jax.Array:
        """PyG's ``WLConv.histogram``: ``[num_graphs, num_colours]`` counts of each colour
        per graph (``batch`` None: one graph); ``num_colours`` is the table's size now,
        ``num_graphs`` is ``batch.max() + 1``, so ``batch`` must be concrete. ``norm``:
        float32 rows divided by their L2 norm (an empty graph's row is NaN, as in PyG)."""
        x = jnp.asarray(x)
        if x.ndim != 1 or not jnp.issubdtype(x.dtype, jnp.integer):
            raise TypeError(f"WLConv.histogram: `x` must be integer colours [N], got shape "
                            f"{x.shape} of {jnp.dtype(x.dtype).name}")
        num_colours = len(self.table.ids)
        if batch is None:
            batch_np = np.zeros(x.shape[0], np.int64)
        else:
            batch_np = np.asarray(_concrete(batch, "batch"))
        if batch_np.size == 0:
            raise ValueError("WLConv.histogram: `batch` is empty: the number of graphs "
                             "(batch.max() + 1) is undefined, as in PyG")
        batch_size = int(batch_np.max()) + 1
        size = num_colours * batch_size
        index = jnp.asarray(batch_np, x.dtype) * num_colours + x
        if not is_traced(x):
            lo, hi = int(jnp.min(index)), int(jnp.max(index))
            if lo < 0 or hi >= size:
                raise IndexError(f"WLConv.histogram: colours must lie in [0, {num_colours}) "
                                 f"(the table's size), got batch * {num_colours} + x in "
                                 f"[{lo}, {hi}]")
        out = jnp.zeros(size, canonical_jax_dtype("int64")).at[index].add(1)
        out = out.reshape(batch_size, num_colours)
        if norm:
            out = out.astype(jnp.float32)
            out = out / jnp.sqrt(jnp.sum(out * out, axis=-1, keepdims=True))
        return out


@register_converter("torch_geometric.nn.conv.wl_conv.WLConv")
def _wl_conv(m: Any, ctx: Converter) -> WLConv:
    return WLConv(dict(m.hashmap))
