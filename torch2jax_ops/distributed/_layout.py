"""How a layer runs on a sharded graph: each device computes its own node rows.

The layout (:class:`GraphLayout`, made by :func:`shard_graph`)
--------------------------------------------------------------
The ``n`` node rows are cut into ``k`` equal ranges, one per device of the
edge axes (``block = ceil(n / k)`` rows each). Device ``d`` *owns* rows
``[d * block, (d + 1) * block)`` and holds exactly the edges whose **target**
it owns (``e_block`` slots per device, padded with dropped edges). So every
aggregation at a target node (PyG's ``flow="source_to_target"``) is complete
on its owner: the device's partial aggregate is exact on its own rows.

The run (:meth:`GraphLayout.call`)
----------------------------------
A layer's unchanged ``__call__`` is traced once per device inside one
``jax.shard_map`` (local edges, replicated node features and parameters) and
its jaxpr is replayed with one rule added: right after every scatter (a
segment sum / max / min / product, a degree, a softmax denominator) that
reads the local edges into ``n`` node rows, each device keeps its own rows
and an ``all_gather`` brings the others' (the sum over devices of the masked
partials, at half a psum's wire bytes; its transpose in the backward pass is
a ``psum_scatter``). Every node-level value is then exact on every device, so
what follows -- a degree normalisation read at the *source* of an edge, a
second layer -- is exact too. Communication per aggregation: ``n * F``
values, whatever the number of edges.

What the rule assumes, and checks: aggregations are keyed by the edge
*target* (every PyG layer with the default flow). The replay follows where
each scatter's ids come from -- ``edge_index[1]`` (and ``arange`` node ids,
through casts, reshapes, ``where`` with constants, concatenation); a scatter
keyed by anything else (an out-degree at ``edge_index[0]``, a layer with
``flow="target_to_source"``) sends the call to the GSPMD path with a warning,
never to a wrong sum. Per-edge values are never reduced over the edges
outside a scatter either (such a value reaching an output also falls back).
Outputs with ``n`` rows come back replicated (or split over ``node_axis``);
a layer that returns per-edge values runs on the GSPMD path.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import math
import warnings
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jcore
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .._sharding import array_tag, plain_call, sharding_mode

__all__ = ["GraphLayout", "EdgeTag"]

_CLEAN, _EDGE, _PARTIAL = 0, 1, 2
#: primitives whose jaxpr is inlined (their scatters get the rule)
_INLINE = {"pjit": "jaxpr", "jit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr"}
#: custom-derivative calls: bound as they are; their node-row outputs get the rule
_CUSTOM = {"custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr", "custom_lin"}
_REDUCTIONS = {"reduce_sum": "axes", "reduce_max": "axes", "reduce_min": "axes",
               "reduce_prod": "axes", "reduce_and": "axes", "reduce_or": "axes",
               "reduce_xor": "axes", "argmax": "axes", "argmin": "axes", "reduce": "dimensions",
               "cumsum": "axis", "cumprod": "axis", "cummax": "axis", "cummin": "axis",
               "cumlogsumexp": "axis", "sort": "dimension"}


class _Unsupported(Exception):
    """The layer does something the owner rule cannot make exact: use the GSPMD path."""


@dataclasses.dataclass(frozen=True)
class EdgeTag:
    """What :func:`torch2jax_ops._sharding.tag_array` remembers for a sharded graph's edge array."""
    layout: GraphLayout
    role: str  # "edge_index" ([2, E]) or "edge" ([E, ...])

    def call(self, fn: Callable, args: tuple, kwargs: dict, out_sharding: Any) -> Any:
        return self.layout.call(fn, args, kwargs, out_sharding)


@dataclasses.dataclass(frozen=True)
class GraphLayout:
    """Static description of a graph placed by :func:`shard_graph` (hashable: jit's cache key).

    ``axes``: the mesh axes the edges are split over (``k`` devices, major
    first); ``node_axis``: None (node rows replicated) or the first of
    ``axes`` (rows split by range); ``n``: rows of ``x`` (``num_nodes``, or
    padded to a multiple of ``k`` with ``node_axis``); ``block``: rows owned
    per device; ``e_block``: edge slots per device.
    """
    mesh: Mesh
    axes: tuple
    node_axis: Optional[str]
    num_nodes: int
    num_edges: int
    n: int
    block: int
    e_block: int

    @property
    def k(self) -> int:
        return math.prod(self.mesh.shape[a] for a in self.axes)

    @property
    def e_total(self) -> int:
        return self.k * self.e_block

    @property
    def edge_spec(self) -> P:
        return P(self.axes if len(self.axes) > 1 else self.axes[0])

    # -------------------------------------------------------------- the collective
    def own_rows(self, value: jax.Array) -> jax.Array:
        """In the shard_map: ``value`` [n, ...], exact on this device's rows -> exact everywhere."""
        rows = self.k * self.block
        axes = self.axes if len(self.axes) > 1 else self.axes[0]
        padded = value
        if rows != self.n:
            padded = jnp.concatenate(
                [value, jnp.zeros((rows - self.n,) + value.shape[1:], value.dtype)])
        mine = jax.lax.dynamic_slice_in_dim(padded, jax.lax.axis_index(axes) * self.block,
                                            self.block, 0)
        full = jax.lax.all_gather(mine, axes, axis=0, tiled=True)
        return full if rows == self.n else full[:self.n]

    # -------------------------------------------------------------- the run
    def _role(self, leaf: Any) -> str:
        tag = array_tag(leaf)
        if isinstance(tag, EdgeTag) and tag.layout == self:
            return tag.role
        shape = tuple(leaf.shape)
        if shape == (2, self.e_total):
            return "edge_index"
        if len(shape) >= 1 and shape[0] == self.e_total:
            return "edge"
        return "node"

    def call(self, fn: Callable, args: tuple, kwargs: dict, out_sharding: Any = None) -> Any:
        """``fn(*args, **kwargs)`` (a layer's ``__call__``) run per device as described above."""
        module = args[0] if args else None
        if self.k == 1:  # one device: nothing to split
            return plain_call(fn, args, kwargs, out_sharding)
        flows = _other_flows(module)
        if flows:
            return self._fallback(fn, args, kwargs, out_sharding,
                                  f"flow={flows[0]!r} aggregates at the sources")
        leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
        where = [i for i, leaf in enumerate(leaves)
                 if isinstance(leaf, (jax.Array, jax.core.Tracer))]
        edge = self.edge_spec[0]
        specs, dirty = [], []
        for i in where:
            role = self._role(leaves[i])
            specs.append({"edge_index": P(None, edge), "edge": P(edge)}.get(role, P()))
            dirty.append(role != "node")
        structure: list = []

        def body(*local: jax.Array) -> list:
            def inner(*arrays: jax.Array) -> list:
                values = list(leaves)
                for i, a in zip(where, arrays):
                    values[i] = a
                a, k = jax.tree_util.tree_unflatten(tree, values)
                out_leaves, out_tree = jax.tree_util.tree_flatten(fn(*a, **k))
                structure.append(out_tree)
                return out_leaves

            closed = jax.make_jaxpr(inner)(*local)
            seeds = ["ei" if self._role(leaves[i]) == "edge_index" else None for i in where]
            outs, states, _ = _replay(closed.jaxpr, closed.consts, list(local), dirty, self,
                                      seeds)
            result = []
            for value, state in zip(outs, states):
                if state == _PARTIAL:
                    raise _Unsupported("an output depends on a reduction over the edges "
                                       "outside an aggregation")
                if state == _EDGE:
                    if not (value.ndim and value.shape[0] == self.n):
                        raise _Unsupported(f"an output of shape {tuple(value.shape)} holds "
                                           f"per-edge values")
                    value = self.own_rows(value)
                result.append(value)
            return result

        arrays = [self._placed(leaves[i], s) for i, s in zip(where, specs)]
        # jit: an eager shard_map would run the body op by op
        mapped = jax.jit(jax.shard_map(body, mesh=self.mesh, in_specs=tuple(specs),
                                       out_specs=P(), check_vma=False))
        try:
            outs = mapped(*arrays)
        except _Unsupported as why:
            return self._fallback(fn, args, kwargs, out_sharding, str(why))
        out = jax.tree_util.tree_unflatten(structure[-1], outs)
        return self._place_out(out, out_sharding, leaves)

    def _fallback(self, fn: Callable, args: tuple, kwargs: dict, out_sharding: Any,
                  why: str) -> Any:
        name = getattr(fn, "__qualname__", "the layer")
        warnings.warn(f"{name} on a ShardedGraph: {why}; it runs on JAX's automatic "
                      f"partitioning (GSPMD) instead of the shard_map path (same values, "
                      f"possibly O(E) bytes communicated)", stacklevel=4)
        return plain_call(fn, args, kwargs, out_sharding)

    def _placed(self, array: Any, spec: P) -> Any:
        """Explicit mode: shard_map wants the arguments' types to match ``in_specs``."""
        if sharding_mode([array]) != "explicit":
            return array
        have = tuple(jax.typeof(array).sharding.spec)
        have = (have + (None,) * array.ndim)[:array.ndim]
        want = (tuple(spec) + (None,) * array.ndim)[:array.ndim]
        if have == want:
            return array
        return jax.sharding.reshard(array, NamedSharding(self.mesh, spec))

    def _place_out(self, out: Any, out_sharding: Any, leaves: list) -> Any:
        """Replicated node rows -> ``out_sharding``, or split over ``node_axis`` (a local slice)."""
        if out_sharding is None and self.node_axis is None:
            return out
        if out_sharding is None:
            out_sharding = jax.tree_util.tree_map(
                lambda o: NamedSharding(self.mesh, P(self.node_axis))
                if getattr(o, "ndim", 0) and o.shape[0] == self.n else None, out)
        return plain_call(lambda o: o, (out,), {}, out_sharding)


def _other_flows(module: Any) -> list:
    """The ``flow`` of ``module`` or of any module inside it, where it is not PyG's default.

    Ports of PyG layers keep ``flow`` as an attribute; the fx port of a torch
    module keeps the torch module (``_program.torch_module``).
    """
    found: list = []

    def probe(node: Any) -> bool:
        try:
            program = getattr(node, "_program", None)
        except Exception:  # noqa: BLE001
            program = None
        for obj in (node, getattr(program, "torch_module", None)):
            if obj is None or isinstance(obj, (jax.Array, jax.core.Tracer)):
                continue
            try:
                flow = getattr(obj, "flow", "source_to_target")
            except Exception:  # noqa: BLE001  (modules with a strict __getattr__)
                continue
            if isinstance(flow, str) and flow != "source_to_target":
                found.append(flow)
        return False

    jax.tree_util.tree_leaves(module, is_leaf=probe)
    return found


# ------------------------------------------------------------------ replaying a jaxpr

def _read(env: dict, v: Any) -> Any:
    return v.val if isinstance(v, jcore.Literal) else env[v]


def _state(states: dict, v: Any) -> int:
    return _CLEAN if isinstance(v, jcore.Literal) else states.get(v, _CLEAN)


def _sub_jaxprs(params: dict) -> list:
    found = []
    for value in params.values():
        for item in (value if isinstance(value, (tuple, list)) else (value,)):
            if isinstance(item, jcore.ClosedJaxpr):
                found.append(item.jaxpr)
            elif isinstance(item, jcore.Jaxpr):
                found.append(item)
    return found


def _contains(jaxpr: Any, test: Callable[[Any], bool]) -> bool:
    for eqn in jaxpr.eqns:
        if test(eqn) or any(_contains(sub, test) for sub in _sub_jaxprs(eqn.params)):
            return True
    return False


def _is_scatter(eqn: Any) -> bool:
    return eqn.primitive.name.startswith("scatter")


def _reduces_edges(eqn: Any, layout: GraphLayout) -> bool:
    """A reduction whose reduced axis is as long as the local edge list (or longer)."""
    key = _REDUCTIONS.get(eqn.primitive.name)
    if key is None or not eqn.invars:
        return False
    shape = getattr(eqn.invars[0].aval, "shape", ())
    axes = eqn.params.get(key, ())
    axes = axes if isinstance(axes, (tuple, list)) else (axes,)
    return any(isinstance(a, int) and a < len(shape) and shape[a] >= layout.e_block
               for a in axes)


#: ops that keep what their (one non-constant) operand's values name: a target id stays one
_KEEPS_IDS = {"squeeze", "reshape", "broadcast_in_dim", "convert_element_type", "expand_dims",
              "copy", "copy_p", "select_n", "concatenate", "min", "max", "clamp", "add", "sub",
              "mul", "stop_gradient"}


#: the kinds of integer arrays the replay follows, and the marker row each is tested with
_ROWS = ("src", "tgt")


def _marker(kind: str, shape: tuple, dtype: Any) -> Optional[np.ndarray]:
    """A stand-in for a value of ``kind`` whose numbers say which row of the edge_index each
    element came from: sources ``1..E``, targets ``E+1..2E`` (``E``: the local edges)."""
    if kind == "ei":
        if len(shape) != 2 or shape[0] != 2:
            return None
        e = shape[1]
        return np.arange(1, 2 * e + 1).reshape(2, e).astype(dtype)
    size = math.prod(shape)
    start = 1 if kind == "src" else size + 1
    return np.arange(start, start + size).reshape(shape).astype(dtype)


def _kind_of(value: Any, size: int) -> Any:
    """Which marker ``value`` (an output evaluated on a marker) holds: "ei", "src", "tgt"."""
    value = np.asarray(value)
    if not np.issubdtype(value.dtype, np.integer):
        return None
    if value.shape == (2, size) and np.array_equal(value.ravel(), np.arange(1, 2 * size + 1)):
        return "ei"
    if value.size != size:
        return None
    for kind, start in (("src", 1), ("tgt", size + 1)):
        if np.array_equal(value.ravel(), np.arange(start, start + size)):
            return kind
    return None


def _by_value(eqn: Any, prov: dict, env: dict) -> Optional[list]:
    """The kinds of ``eqn``'s outputs, found by running it on a marker edge_index.

    However a JAX version spells taking a row of the edge_index (``slice`` and
    ``squeeze``, ``unstack``, a ``gather``, a ``dynamic_slice``, a transpose and
    a column), the output's numbers tell which row it holds. Applies when one
    operand follows the edge_index and every other operand is a known constant;
    None otherwise (or when the primitive cannot run eagerly).
    """
    followed = [i for i, v in enumerate(eqn.invars)
                if not isinstance(v, jcore.Literal) and prov.get(v) in ("ei",) + _ROWS]
    if len(followed) != 1 or _sub_jaxprs(eqn.params):
        return None
    (position,) = followed
    var = eqn.invars[position]
    shape, dtype = tuple(var.aval.shape), var.aval.dtype
    kind = prov[var]
    marker = _marker(kind, shape, dtype)
    if marker is None:
        return None
    size = shape[1] if kind == "ei" else math.prod(shape)
    values = []
    for i, v in enumerate(eqn.invars):
        if i == position:
            values.append(marker)
            continue
        value = _read(env, v)
        if isinstance(value, jax.core.Tracer):
            return None  # an operand known only at run time
        values.append(value)
    try:
        return [_kind_of(o, size) for o in _eager(eqn, values)]
    except Exception:  # noqa: BLE001 - not evaluable eagerly: the name rules decide
        return None


def _provenance(eqn: Any, prov: dict, states: dict, env: dict) -> list:
    """What each output of ``eqn`` holds: "ei" (the edge_index), "tgt" (node ids that are
    edge targets, or node ids such as arange(n)), "src" (edge sources), or None."""
    name = eqn.primitive.name
    nothing = [None] * len(eqn.outvars)
    if name == "iota":
        return ["tgt"] + nothing[1:]
    found = _by_value(eqn, prov, env)
    if found is not None and any(k is not None for k in found):
        return found
    if name in _KEEPS_IDS:  # the operands' common kind passes through (constants aside)
        values = eqn.invars[1:] if name == "select_n" else eqn.invars  # select_n: case 0 = pred
        kinds = {prov.get(v) for v in values if not (isinstance(v, jcore.Literal) or
                                                     states.get(v, _CLEAN) == _CLEAN)}
        if len(kinds) == 1 and None not in kinds:
            return [kinds.pop()] + nothing[1:]
    return nothing


def _check_keys(eqn: Any, prov: dict, states: dict, indices: list) -> None:
    """A scatter over local edges must be keyed by the edge targets (see the module docstring)."""
    for v in indices:
        if isinstance(v, jcore.Literal) or states.get(v, _CLEAN) == _CLEAN:
            continue
        if prov.get(v) != "tgt":
            raise _Unsupported(
                "an aggregation is keyed by something other than the edge targets (an "
                "out-degree at edge_index[0], a reduction at the sources): each device holds "
                "only the edges into its own nodes, so such a sum would be incomplete")


def _folded(eqn: Any, invals: list) -> Optional[list]:
    """Integer arithmetic on constants (an index computed from literals), run eagerly so
    :func:`_by_value` can read it; None for everything else (traced as usual)."""
    known = not any(isinstance(v, jax.core.Tracer) for v in invals)
    ints = all(jnp.issubdtype(v.aval.dtype, jnp.integer) or v.aval.dtype == jnp.bool_
               for v in eqn.outvars if hasattr(v.aval, "dtype"))
    if not (known and ints and eqn.outvars):
        return None
    try:
        return _eager(eqn, invals)
    except Exception:  # noqa: BLE001 - not evaluable eagerly: traced as usual
        return None


def _eager(eqn: Any, values: list) -> list:
    """``eqn``'s primitive on concrete ``values``, outside the trace being built.

    JAX's trace state and mesh context belong to the thread: a fresh thread
    evaluates eagerly, on the default device, whatever is being traced here.
    """
    def run() -> list:
        params = eqn.primitive.get_bind_params(eqn.params)
        outs = eqn.primitive.bind(*values, **params)
        outs = list(outs) if eqn.primitive.multiple_results else [outs]
        return [np.asarray(o) for o in outs]

    return _EAGER.submit(run).result()


_EAGER = concurrent.futures.ThreadPoolExecutor(max_workers=1,
                                               thread_name_prefix="torch2jax_ops-layout")


def _replay(jaxpr: Any, consts: list, args: list, dirty: list, layout: GraphLayout,
            seeds: Optional[list] = None) -> tuple[list, list, list]:
    """Evaluate ``jaxpr`` on ``args`` with the owner rule; returns (outputs, states, provenance)."""
    env: dict = {}
    states: dict = {}
    prov: dict = {}
    for v, c in zip(jaxpr.constvars, consts):
        env[v] = c
    for v, a, d, seed in zip(jaxpr.invars, args, dirty, seeds or [None] * len(args)):
        env[v] = a
        states[v] = (_EDGE if d else _CLEAN) if isinstance(d, bool) else d
        if seed is not None:
            prov[v] = seed
    for eqn in jaxpr.eqns:
        invals = [_read(env, v) for v in eqn.invars]
        state = max((_state(states, v) for v in eqn.invars), default=_CLEAN)
        name = eqn.primitive.name
        out_prov = [None] * len(eqn.outvars)
        if state != _CLEAN and name in _INLINE and _INLINE[name] in eqn.params:
            inner = eqn.params[_INLINE[name]]
            inner_jaxpr, inner_consts = (inner.jaxpr, inner.consts) \
                if isinstance(inner, jcore.ClosedJaxpr) else (inner, [])
            outs, out_states, out_prov = _replay(
                inner_jaxpr, inner_consts, invals, [_state(states, v) for v in eqn.invars],
                layout, [None if isinstance(v, jcore.Literal) else prov.get(v)
                         for v in eqn.invars])
        else:
            folded = _folded(eqn, invals)
            if folded is not None:
                outs = folded
            else:
                params = eqn.primitive.get_bind_params(eqn.params)
                with eqn.ctx.manager:
                    bound = eqn.primitive.bind(*invals, **params)
                outs = list(bound) if eqn.primitive.multiple_results else [bound]
            out_states = [state] * len(outs)
            out_prov = _provenance(eqn, prov, states, env)
            if state == _EDGE:
                subs = _sub_jaxprs(eqn.params)
                if _is_scatter(eqn):
                    _check_keys(eqn, prov, states, eqn.invars[1:2])
                    outs, out_states = _fix(outs, out_states, layout)
                elif _reduces_edges(eqn, layout):
                    out_states = [_PARTIAL] * len(outs)
                elif subs and any(_contains(s, lambda e: _reduces_edges(e, layout))
                                  for s in subs):
                    out_states = [_PARTIAL] * len(outs)
                elif subs and any(_contains(s, _is_scatter) for s in subs):
                    if name not in _CUSTOM:  # a loop or a branch around a scatter
                        out_states = [_PARTIAL] * len(outs)
                    else:  # a custom-derivative reduction: its integer inputs are the keys
                        _check_keys(eqn, prov, states,
                                    [v for v in eqn.invars if not isinstance(v, jcore.Literal)
                                     and jnp.issubdtype(v.aval.dtype, jnp.integer)])
                        outs, out_states = _fix(outs, out_states, layout)
        for v, o, s, pr in zip(eqn.outvars, outs, out_states, out_prov):
            if isinstance(v, jcore.Var) and not isinstance(v, getattr(jcore, "DropVar", ())):
                env[v] = o
                states[v] = s
                if pr is not None:
                    prov[v] = pr
    return ([_read(env, v) for v in jaxpr.outvars], [_state(states, v) for v in jaxpr.outvars],
            [prov.get(v) if not isinstance(v, jcore.Literal) else None for v in jaxpr.outvars])


def _fix(outs: list, out_states: list, layout: GraphLayout) -> tuple[list, list]:
    """Node-row outputs of a scatter over local edges: own rows kept, the rest gathered."""
    fixed, fixed_states = [], []
    for o, s in zip(outs, out_states):
        if s == _EDGE and getattr(o, "ndim", 0) and o.shape[0] == layout.n:
            fixed.append(layout.own_rows(o))
            fixed_states.append(_CLEAN)
        else:
            fixed.append(o)
            fixed_states.append(s)
    return fixed, fixed_states
