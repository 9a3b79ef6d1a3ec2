"""The fx path of ``from_torch``: any torch module, its forward replayed in JAX.

How it works. A module with no converter of its own becomes a
:class:`TracedModule`: its registered submodules are converted (they stay
whole: ``call_module`` leaves), its other parameters and buffers become JAX
arrays under their torch names. Calling the port runs the module's own
``forward`` under a ``torch.fx`` tracer whose proxies carry JAX values
("lockstep" tracing): every ``call_function`` / ``call_method`` node is looked
up once in the mapping table (:mod:`._registry`) and evaluated in JAX on the
spot. So

* shapes are concrete while the forward runs: ``x.size(-1)``, ``x.dim() == 1``,
  ``isinstance(x, Tensor)``, loops over ``range(x.size(0))`` work as in torch;
* control flow on a tensor's *values* raises, naming your file and line
  (one compiled program serves every input, so it cannot branch on data);
* under ``jax.jit`` all of this happens once, while JAX traces: the compiled
  program is the JAX ops alone, as a hand-written port would be.

Arguments that are not arrays (``None``, ints, strings, flags) are seen by the
forward as they are; arrays and containers of them become proxies.
"""
from __future__ import annotations

import builtins
import contextlib
import functools
import importlib
import inspect
import operator
import os
from typing import Any, Callable, Iterator, Optional, cast

import jax
import numpy as np

from ..._batch_vector import BatchVector, declared_max, ids_of, plain_ids
from ..._checking import is_array
from ..._sharding import OutSharding, sharding_aware
from .. import _masked, _pooled
from .._convert import Converter, UnsupportedModuleError
from .._registry import (
    class_path,
    converter_for,
    functions,
    generation,
    methods,
    register_fallback,
)
from .._state import key_scope, next_key  # noqa: F401  (next_key: the table's random ops)

__all__ = ["TracedModule", "TorchCallable", "convert_traced", "resolve", "user_frame",
           "Unsupported", "trace_with"]

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# --------------------------------------------------------------------- the mapping

def resolve(path: str) -> Any:
    """The object at a dotted path (``"torch.nn.functional.relu"``), importing its module.

    ``None`` when the library or the name does not exist (a table entry for a
    library that is not installed is simply unused).
    """
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                obj = getattr(obj, name)
        except AttributeError:
            return None
        return obj
    return None


#: PyG aggregations whose result depends on the dense width they run over (why)
_WIDTH_DEPENDENT = {
    "torch_geometric.nn.aggr.lstm.LSTMAggregation": "the LSTM's last step",
    "torch_geometric.nn.aggr.gru.GRUAggregation": "the GRU's last step",
    "torch_geometric.nn.aggr.lcm.LCMAggregation": "its tree's shape: the widest group, "
                                                  "which in a padded batch may be the "
                                                  "padding graph",
}

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


def _torch_grad_signature(outputs: Any, inputs: Any, grad_outputs: Any = None,
                          retain_graph: Any = None, create_graph: bool = False,
                          only_inputs: bool = True, allow_unused: Any = None,
                          is_grads_batched: bool = False,
                          materialize_grads: bool = False) -> None:
    """torch.autograd.grad's parameters (read by the traced forward's replay)."""


def _ancestors(node: Any) -> set:
    """Every node ``node`` was computed from (itself included)."""
    seen, todo = set(), [node]
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(n.all_input_nodes)
    return seen


def _same_value(node: Any) -> set:
    """``node`` and the nodes that read the same value: a constant's other get_attr nodes."""
    if node.op != "get_attr":
        return {node}
    return {n for n in node.graph.nodes if n.op == "get_attr" and n.target == node.target}


def _subgraph(outs: list, ins: set) -> list:
    """The nodes between ``ins`` and ``outs``, in graph order: ancestors of an output that
    depend on an input (what to evaluate again as a function of the inputs)."""
    wanted = set().union(*(_ancestors(o) for o in outs)) - ins
    depends: set = set(ins)
    order = []
    for n in outs[0].graph.nodes:
        if n in wanted and any(a in depends for a in n.all_input_nodes):
            depends.add(n)
            order.append(n)
    return order


def _is_view(node: Any) -> bool:
    """An fx node whose torch result shares memory with its first argument."""
    return (node.op == "call_function" and node.target is operator.getitem) or (
        node.op == "call_method" and node.target in _VIEWS)


def _pooled_traced(value: Any) -> bool:
    return isinstance(value, jax.core.Tracer)


class _Table:
    """The registry resolved to objects: ``id(torch function) -> JAX implementation``."""

    def __init__(self) -> None:
        self.generation = -1
        self.by_id: dict[int, Callable] = {}
        self.keep: list = []  # the resolved objects, alive while their ids are keys
        self.autowrap: tuple = ()
        self.modules: list = []

    def refresh(self) -> _Table:
        """Re-resolve after any change to the registry (a new entry, a replaced one)."""
        if generation() == self.generation:
            return self
        table = functions()
        by_id: dict = {}
        keep: list = []
        wrap: list = []
        modules: list = []
        for path, impl in table.items():
            obj = resolve(path)
            if obj is None:
                continue
            by_id[id(obj)] = impl
            keep.append(obj)
            # Python functions of other libraries run their body on proxies unless fx
            # records them as one call (torch's own dispatch through __torch_function__;
            # this package's own entries are only ever called by the tracer itself)
            if inspect.isfunction(obj) and not obj.__module__.startswith(("torch.",
                                                                           "torch2jax_ops")):
                wrap.append(obj)
                home = importlib.import_module(path.rsplit(".", 1)[0])
                if home not in modules:
                    modules.append(home)
        # torch's C functions are called through fx's wrapper too: handed a proxy, torch's
        # argument parser takes it for a Tensor (its __class__) and, for an overload with a
        # Scalar slot (torch.pow(x, 2), torch.where(c, x, 0.)), reads it as one: a segfault.
        # Wrapped, they become call_function nodes (mapped, or a "no JAX mapping" error)
        for namespace in _TORCH_NAMESPACES:
            module = importlib.import_module(namespace)
            found = [v for k, v in vars(module).items() if inspect.isbuiltin(v)
                     and not k.startswith(("_", "has_torch_function"))]  # (torch's dispatch)
            wrap.extend(found)
            keep.extend(found)
            if module not in modules:
                modules.append(module)
        self.by_id, self.keep, self.autowrap, self.modules = by_id, keep, tuple(wrap), modules
        self.generation = generation()
        return self


_TABLE = _Table()

#: the torch namespaces whose C functions the tracer wraps (see _Table.refresh)
_TORCH_NAMESPACES = ("torch", "torch.nn.functional", "torch.special", "torch.linalg",
                     "torch.fft")


# ------------------------------------------------------------------- where it failed

def user_frame(stack_trace: Optional[str]) -> str:
    """``file:line (function): code`` of the innermost frame outside torch and this package."""
    if not stack_trace:
        return "an unknown line"
    lines = stack_trace.strip().splitlines()
    found = None
    for i, line in enumerate(lines):
        text = line.strip()
        if not text.startswith("File "):
            continue
        path = text.split('"')[1] if '"' in text else ""
        inside = (f"{os.sep}torch{os.sep}" in path or path.startswith(_PACKAGE_DIR)
                  or f"{os.sep}torch_geometric{os.sep}" in path)
        if not inside:
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            where = text[len("File "):].replace('"', "").replace(", line ", ":")
            found = f"{where}: {code}" if code else where
    return found or lines[0].strip()


def _error(node: Any, message: str) -> UnsupportedModuleError:
    return UnsupportedModuleError(f"{message} -- at {user_frame(node.meta.get('stack_trace'))}")


def _target_name(target: Any) -> str:
    if isinstance(target, str):
        return target
    if inspect.isbuiltin(target):  # torch's C functions: the public path the user wrote
        short = target.__name__.split("_", 1)[-1]  # torch.special.xlog1py: special_xlog1py
        for home in _TORCH_NAMESPACES:
            for name in (target.__name__, short):
                public = getattr(importlib.import_module(home), name, None)
                # (while tracing, the name holds fx's wrapper of the function)
                if target in (public, getattr(public, "__wrapped__", None)):
                    return f"{home}.{name}"
    module = getattr(target, "__module__", None) or ""
    module = {"_operator": "operator"}.get(module, module)
    name = cast(str, getattr(target, "__qualname__", None)
                or getattr(target, "__name__", repr(target)))
    if module == "builtins" or not module:
        return name if module == "" else f"builtins.{name}"
    return f"{module}.{name}"


# --------------------------------------------------------------------- the tracer

#: Tensor attributes that are data, not methods: read them on the spot.
_DATA_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim", "T", "mT", "is_cuda",
                              "requires_grad", "layout", "is_sparse", "data", "real", "imag"})


def _make_tracer_class() -> type:
    import torch
    import torch.fx as fx

    class _Value(fx.Proxy):
        """A proxy carrying its JAX value: shapes and Python scalars behave concretely."""

        tracer: Any  # always this module's tracer (it has ``values``), not any TracerBase

        @property
        def value(self) -> Any:
            return self.tracer.values[self.node]

        # the read-only override is the point: mypy cannot model a __class__ property
        @property  # type: ignore[misc]
        def __class__(self):  # isinstance(x, torch.Tensor) holds for array values
            value = self.tracer.values.get(self.node)
            if is_array(value) or isinstance(value, _masked.MaskedRows):
                return torch.Tensor
            if isinstance(value, tuple):  # torch.max(x, dim=0) is a tuple (of proxies)
                return type(value)
            return type(self)

        def __getattr__(self, k: str) -> Any:
            if k.startswith("_"):  # torch's private flags (Parameter's _is_param ...)
                raise AttributeError(k)
            if k in _DATA_ATTRIBUTES:
                return self.tracer.create_proxy("call_function", builtins.getattr, (self, k), {})
            return super().__getattr__(k)

        def _scalar(self, kind: type) -> Any:
            v = self.value
            if isinstance(v, (bool, int, float, np.integer, np.floating, np.bool_)):
                return kind(v)
            if isinstance(v, jax.Array) and not isinstance(v, jax.core.Tracer) and v.size == 1:
                return kind(v.item())  # a known value (every call traces afresh)
            raise _error(self.node, f"a tensor's value is used as a Python {kind.__name__} "
                                    f"(.item(), int(x), range(x) ...): under JAX the value is "
                                    f"not known while the program is built"
                                    f"{self.tracer.traced_origin(self.node)}")

        def __index__(self) -> int:
            return self._scalar(int)

        def __int__(self) -> int:
            return self._scalar(int)

        def __float__(self) -> float:
            return self._scalar(float)

        def __setitem__(self, index: Any, value: Any) -> None:
            self.tracer.create_proxy("call_function", operator.setitem, (self, index, value), {})

        def __len__(self) -> int:
            v = self.value
            if isinstance(v, (tuple, list, dict)):
                return len(v)
            if is_array(v) and v.ndim:
                return int(v.shape[0])
            if isinstance(v, _masked.MaskedRows):
                raise ValueError(_masked.unsupported("len()", user_frame(
                    self.node.meta.get("stack_trace")), v.origin))
            raise _error(self.node, f"len() of a {type(v).__name__}")

    class _Tracer(fx.Tracer):
        def __init__(self, program: _Program, arrays: dict, submodules: dict):
            table = _TABLE.refresh()
            super().__init__(autowrap_functions=table.autowrap)
            self._autowrap_search.extend(table.modules)
            self.record_stack_traces = True
            self.program, self.arrays, self.submodules = program, arrays, submodules
            self.table = table
            self.values: dict = {}
            self.inputs: list = []
            self.grad_enabled = torch.is_grad_enabled()  # as the port is called
            self.named_tensors: dict = {}
            # masks whose number of True entries a function declares (to_dense_batch's):
            # id -> (mask, rows), so `h[mask]` under jit has a static row count
            self.counted_masks: dict = {}
            # a pool's row-aligned outputs: id -> (array, kept rows), for .size(0) (_pooled)
            self.pooled: dict = {}
            # batch[1:] - batch[:-1] of a BatchVector: nonzero where a graph starts, one
            # entry per graph after the first: id -> (array, count) for .nonzero()
            self.boundaries: dict = {}
            # tensors an in-place update of one of their views left behind: node -> message
            self.stale: dict = {}

        # -- structure
        def is_leaf_module(self, m: Any, qualname: str) -> bool:
            return self.program.is_leaf(m)

        def call_module(self, m: Any, forward: Any, args: Any, kwargs: Any) -> Any:
            if not any(m is sub for sub in self.root.modules()):
                # a module built inside the forward (PyG's MemPooling.kl_loss calls
                # KLDivLoss(...)(a, b)): not in the port's tree, so its forward runs in this
                # trace, each op from the table (a parameter of its own raises: it would
                # be a constant of the port, without gradient)
                return forward(*args, **kwargs)
            self._check_dense_width(m, args, kwargs)
            return super().call_module(m, forward, args, kwargs)

        def _check_dense_width(self, m: Any, args: Any, kwargs: Any) -> None:
            """An aggregation whose result depends on the dense width (a recurrent cell or
            LCM's tree run over the padded neighbourhoods; PyG's width is the largest
            group) with a padded batch's BatchVector under jit: that width is the budget
            N, not PyG's, and the numbers would differ. An error, not another number."""
            name = f"{type(m).__module__}.{type(m).__qualname__}"
            if name not in _WIDTH_DEPENDENT:
                return
            index = args[1] if len(args) > 1 else kwargs.get("index")
            value = self.values.get(getattr(index, "node", None))
            if isinstance(value, BatchVector) and value.max_num_nodes is None \
                    and _pooled_traced(value.ids) and kwargs.get("max_num_nodes") is None:
                raise UnsupportedModuleError(
                    f"{self.program.name}: {type(m).__name__} runs over each group padded to "
                    f"the dense width, and its result depends on that width (PyG: the "
                    f"largest group of the batch, {_WIDTH_DEPENDENT[name]}). The padded "
                    f"batch's BatchVector gives the node budget N instead, so the numbers "
                    f"would differ from PyG's: call it with a from_pyg batch (it carries "
                    f"PyG's largest graph as max_num_nodes), or with the batch's ids as a "
                    f"constant, or eagerly")

        def port_method(self, fn: Callable, label: str, *args: Any, **kwargs: Any) -> Any:
            """A call of a converted leaf's method (``conv.histogram(x, batch)``) as a node
            of this trace: the port's own method runs on the JAX values."""
            node = self.create_node("get_attr", f"_port_{label}_{id(fn):x}", (), {})
            self.values[node] = _PortMethod(fn)
            return self.create_proxy("call_method", "__call__", (self.proxy(node), *args),
                                     kwargs)

        def proxy(self, node: Any) -> Any:
            return _Value(node, self)

        def getattr(self, attr: str, attr_val: Any, parameter_proxy_cache: dict) -> Any:
            # fx proxies only Parameter instances: any other tensor the forward reads is
            # computed with in torch (self.weight * self.alpha[0]) and the result frozen.
            # A parameter slot holding a plain tensor (torch.func.functional_call's and
            # compare_modules' reparametrisation) would lose its gradient; a floating
            # buffer (LightGCN's alpha) would ignore the port's own array (functional_call,
            # a loaded checkpoint). Both are read as the port's arrays. Integer and bool
            # buffers (indices, masks, counters) stay constants: sizes are read off them.
            if isinstance(attr_val, torch.Tensor) and \
                    not isinstance(attr_val, torch.nn.Parameter):
                named: list = list(self.root.named_parameters())
                if attr_val.is_floating_point() or attr_val.is_complex():
                    named += list(self.root.named_buffers())
                name = next((n for n, p in named if p is attr_val), None)
                if name is not None:
                    if name not in parameter_proxy_cache:
                        parameter_proxy_cache[name] = self.create_proxy("get_attr", name,
                                                                        (), {})
                    return parameter_proxy_cache[name]
            return super().getattr(attr, attr_val, parameter_proxy_cache)

        # -- values
        def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None,
                         proxy_factory_fn=None):
            proxy = super().create_proxy(kind, target, args, kwargs, name, type_expr,
                                         proxy_factory_fn)
            node = proxy.node
            if kind == "placeholder":
                self.values[node] = self.inputs.pop(0)
                return proxy
            result = self.evaluate(node)
            if self.grad_enabled and not torch.is_grad_enabled():
                # under torch.no_grad() in the forward (LabelPropagation's decorator): torch's
                # result has no gradient, nor has the port's. Only traced values: a constant
                # has none, and stop_gradient would stage it out (under jit its value, e.g.
                # one_hot's `int(y.max()) + 1`, would no longer be known)
                result = jax.tree_util.tree_map(
                    lambda v: jax.lax.stop_gradient(v) if isinstance(v, jax.core.Tracer)
                    else v, result)
            self.values[node] = result
            if isinstance(result, _masked.MaskedRows) and result.origin is None:
                result.origin = user_frame(node.meta.get("stack_trace"))  # x[mask] under jit
            if (_mutates(kind, target) or _inplace_call(kind, target, node.args,
                                                        node.kwargs)) \
                    and node.args and isinstance(node.args[0], fx.Node):
                # x.add_(y), x[i] = v, F.dropout(x, inplace=True): later uses of x see the
                # new value
                self._rebind(node.args[0], result, node)
            if kind in ("call_module", "call_function") and type(result) is dict:
                # a leaf returning a dict (HeteroConv, HeteroDictLinear: {node_type: x}):
                # the forward gets a real dict of proxies, so `.items()`, `in`, iteration
                # and a dict comprehension over it behave as in torch
                return {k: self.create_proxy("call_function", operator.getitem, (proxy, k), {})
                        for k in result}
            if result is None:
                # torch's None (`edge_index, edge_weight = add_self_loops(ei, None)`): the
                # forward's `edge_weight is None` must hold, as it does in torch
                return None
            return proxy

        def _rebind(self, target: Any, value: Any, node: Any) -> None:
            if _is_view(target):
                # in torch the update writes through to the viewed tensor (and its other
                # views); here the view alone gets the new value, which is the same as long
                # as nothing reads those afterwards: reading one then is the error
                message = (f"{self.program.name}: an in-place update of a view "
                           f"({target.target} of another tensor, {user_frame(node.meta.get('stack_trace'))}) "
                           f"writes through to that tensor in torch, which is read "
                           f"afterwards; JAX arrays are immutable. Write it out of place "
                           f"(x = x.index_put(...) / torch.where)")
                self._mark_stale(target, message)
            self.values[target] = value
            if _mutates(target.op, target.target) and target.args and isinstance(
                    target.args[0], fx.Node):
                # a chain, out.mul_(a).add_(b): the result of mul_ *is* out, so add_ updates
                # out too (the forward goes on using `out`)
                self._rebind(target.args[0], value, node)

        def _mark_stale(self, view: Any, message: str) -> None:
            """The tensor ``view`` looks into, and its other views, no longer hold torch's
            values (an in-place update of ``view`` went to ``view`` alone)."""
            base = view.args[0]
            while isinstance(base, fx.Node) and is_array(self.values.get(base)):
                # (an item of a tuple or list, out[0], shares nothing with the container)
                self.stale.setdefault(base, message)
                for user in base.users:
                    if user is not view and _is_view(user):
                        self.stale.setdefault(user, message)
                base = base.args[0] if _is_view(base) and base.args else None

        def create_arg(self, a: Any) -> Any:
            if isinstance(a, fx.Proxy):  # before fx's Tensor branch: our proxies pass as tensors
                outer = getattr(a.tracer, "values", {})
                if a.tracer is not self and a.node in outer:
                    # a value of an enclosing trace (an attribute the outer forward set on a
                    # submodule, e.g. to_hetero_with_bases' conv._edge_type): a constant here
                    node = self.create_node("get_attr", f"_outer_{id(a):x}", (), {})
                    self.values[node] = outer[a.node]
                    return node
                return a.node
            if _is_function(a):
                # a callable handed to a submodule (post_step=lambda y: ..., act=F.relu): the
                # port gets it as a callable on JAX arrays, its torch code run by the table
                node = self.create_node("get_attr", f"_callable_{id(a):x}", (), {})
                self.values[node] = a if isinstance(a, TorchCallable) else TorchCallable(
                    a, self.program.device)
                return node
            if isinstance(a, torch.Tensor):
                if isinstance(a, torch.nn.Parameter) and a.requires_grad and \
                        self._tensor_name(a).startswith("_constant_"):
                    # another module's parameter (one a function handed to a submodule
                    # closes over): as a constant of this port it would lose its gradient
                    raise UnsupportedModuleError(
                        f"{self.program.name} reads a parameter of shape {tuple(a.shape)} "
                        f"that is not its own (a function passed to a submodule closing over "
                        f"self.<param>, or another module's weight): in the port it would be "
                        f"a constant, without gradient. Pass it as an argument, or freeze it "
                        f"(requires_grad_(False)) if it is a constant")
                node = self.create_node("get_attr", self._tensor_name(a), (), {})
                self.values[node] = self._tensor_value(node, a)
                return node
            if isinstance(a, torch.nn.Module):  # a submodule handed to a function (set_masks)
                made = super().create_arg(a)
                self.values.setdefault(made, a)  # the function's table entry sees the module
                return made
            return super().create_arg(a)

        def _tensor_name(self, a: Any) -> str:
            if not self.named_tensors:
                root = self.root
                self.named_tensors = {id(t): n for n, t in
                                      list(root.named_parameters()) + list(root.named_buffers())}
            return self.named_tensors.get(id(a), f"_constant_{id(a):x}")

        def _tensor_value(self, node: Any, tensor: Any) -> Any:
            found = self._named_array(node.target)
            return self.program.constant(tensor) if found is None else found

        def _named_array(self, target: str) -> Any:
            """The port's array under a torch name: the forward's own parameters, or one of
            a converted submodule's (``lin.weight``, ``lins.0.bias``, ``embedding.weight``),
            so gradients reach the port's array and it keeps its state_dict name."""
            if target in self.arrays:
                return self.arrays[target]
            prefix, _, rest = target.rpartition(".")
            while prefix:
                if prefix in self.submodules:
                    from .._naming import named_arrays
                    found = dict(named_arrays(self.submodules[prefix])).get(rest)
                    if found is None:  # never the torch tensor: its gradient would be lost
                        raise UnsupportedModuleError(
                            f"{self.program.name}: the forward reads `{target}`, but the port "
                            f"of `{prefix}` ({type(self.submodules[prefix]).__name__}) has no "
                            f"array named `{rest}`")
                    return found
                prefix, _, head = prefix.rpartition(".")
                rest = f"{head}.{rest}"
            return None

        def evaluate(self, node: Any) -> Any:
            import torch.fx as fx

            def value(n: Any) -> Any:
                if n in self.stale:
                    raise _error(node, self.stale[n])
                return self.values[n]

            # fx's immutable_dict / immutable_list as the plain containers the forward built:
            # a converted leaf (HANConv's x_dict) or a table entry gets a JAX pytree
            args = _plain(fx.node.map_arg(node.args, value))
            kwargs = _plain(fx.node.map_arg(node.kwargs, value))
            if _masked.holds(args, kwargs):  # rows of x[mask] under jit: row-wise or an error
                return self._masked(node, args, kwargs)
            pooled = self._pooled_rows(node, args, kwargs)
            if pooled is not None:
                return pooled[0]
            boundary = self._graph_boundaries(node, args, kwargs)
            if boundary is not None:
                return boundary[0]
            if node.op == "call_function" and node.target is operator.getitem \
                    and len(args) == 2 and id(args[1]) in self.counted_masks:
                mask, rows = self.counted_masks[id(args[1])]
                if mask is args[1]:
                    return _masked.counted_rows(args[0], mask, rows)
            if node.op == "call_function" and node.target is torch.autograd.grad:
                return self._autograd_grad(node, kwargs)
            if node.op == "get_attr":
                found = self._named_array(node.target)
                if found is not None:
                    return found
                # not getattr: fx patches Module.__getattr__ while tracing, and reading a
                # parameter through it makes another get_attr node (endless recursion)
                attr = _torch_attribute(self.root, node.target)
                return self.program.constant(attr) if isinstance(attr, torch.Tensor) else attr
            if node.op == "call_module":
                module = self.submodules.get(node.target)
                if module is None:
                    raise _error(node, f"{self.program.name}: the submodule `{node.target}` "
                                       f"has no port")
                out = _call(module, args, kwargs, node)
                self._note_pooled(module, out, args[0] if args else kwargs.get("x"))
                return out
            if node.op == "call_method":
                # a JAX object that answers torch's methods itself (geometric.SparseTensor:
                # adj.t(), adj.set_value(...)) lists them in _TORCH_METHODS
                if args and node.target in getattr(type(args[0]), "_TORCH_METHODS", ()):
                    return _call(getattr(args[0], node.target), args[1:], kwargs, node)
                impl = self.program.methods.get(node.target)
                if impl is None:
                    raise _error(node, f"{self.program.name}: no JAX mapping for the tensor "
                                       f"method `.{node.target}()`. Add one with "
                                       f"torch2jax_ops.nn.register_method('{node.target}')")
                declared = declared_max(node.target, args, kwargs)  # batch.max()
                if declared is not None:
                    return declared
                return _call(impl, *plain_ids(args, kwargs), node)
            impl = self.table.by_id.get(id(node.target))
            if impl is None:
                name = _target_name(node.target)
                raise _error(node, f"{self.program.name}: no JAX mapping for `{name}`. Add "
                                   f"one with @torch2jax_ops.nn.register_function('{name}') on "
                                   f"a JAX function with the same signature, or port this "
                                   f"module by hand (register_converter)")
            home = getattr(node.target, "__module__", "").split(".")[0]
            if home == "torch":
                declared = declared_max(getattr(node.target, "__name__", ""), args, kwargs)
                if declared is not None:  # torch.max(batch)
                    return declared
                args, kwargs = plain_ids(args, kwargs)  # torch's own ops count nothing
            elif home in ("_operator", "operator"):  # x[batch], x + batch; not out[3]
                args = tuple(ids_of(a) for a in args)
            out = _call(impl, args, kwargs, node)
            counted = getattr(impl, "mask_row_count", None)  # (out, mask): mask's True count
            if counted is not None and isinstance(out, tuple) and len(out) == 2:
                rows = counted(args, kwargs)
                if rows is not None:
                    self.counted_masks[id(out[1])] = (out[1], rows)
            return out

        def _autograd_grad(self, node: Any, kwargs: dict) -> Any:
            """``torch.autograd.grad(outputs, inputs, grad_outputs=None, ...)`` in a forward
            (EquilibriumAggregation's inner optimiser, forces as ``-d energy / d pos``).

            The graph recorded so far holds how ``outputs`` were computed from ``inputs``:
            those nodes are evaluated again as a function of the inputs, and ``jax.vjp``
            of it gives the gradients (differentiable further, as with
            ``create_graph=True``; without it they are constants, as torch detaches
            them). An input the outputs do not depend on gets None with
            ``allow_unused=True`` (torch's answer) and is an error otherwise."""
            import torch.fx as fx

            bound = inspect.signature(_torch_grad_signature).bind(*node.args, **node.kwargs)
            bound.apply_defaults()
            given = bound.arguments
            outs = given["outputs"]
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            ins = given["inputs"]
            ins = list(ins) if isinstance(ins, (list, tuple)) else [ins]
            if not all(isinstance(n, fx.Node) for n in outs + ins):
                raise _error(node, f"{self.program.name}: torch.autograd.grad: `outputs` and "
                                   f"`inputs` must be tensors computed in this forward")
            # a tensor made outside the graph (torch.zeros(..., requires_grad=True) with
            # constant arguments) is a constant, read through one get_attr node per use
            groups = [_same_value(n) for n in ins]
            order = _subgraph(outs, set().union(*groups))
            reached = set().union(*(_ancestors(o) for o in outs))
            used = {n for n, group in zip(ins, groups) if group & reached}
            for n in ins:
                if n not in used and not given["allow_unused"]:
                    raise _error(node, f"{self.program.name}: torch.autograd.grad: one of the "
                                       f"differentiated tensors ({n.name}) was not used to "
                                       f"compute the outputs (torch: set allow_unused=True)")

            def replay(*values: Any) -> list:
                saved: dict = {}

                def put(n: Any, v: Any) -> None:
                    saved.setdefault(n, self.values[n])
                    self.values[n] = v

                try:
                    for group, v in zip(groups, values):
                        for n in group:
                            put(n, v)
                    for n in order:
                        result = self.evaluate(n)
                        put(n, result)
                        if _mutates(n.op, n.target) and n.args and isinstance(n.args[0],
                                                                               fx.Node):
                            put(n.args[0], result)
                    return [self.values[o] for o in outs]
                finally:
                    self.values.update(saved)

            primals = [self.values[n] for n in ins]
            values, pullback = jax.vjp(replay, *primals)
            cots = given["grad_outputs"]
            if cots is None:
                cots = [None] * len(outs)
            elif not isinstance(cots, (list, tuple)):
                cots = [cots]
            cots = [jax.numpy.ones_like(v) if c is None else self.values[c]
                    if isinstance(c, fx.Node) else jax.numpy.asarray(c, v.dtype)
                    for v, c in zip(values, cots)]
            grads = pullback(cots)
            if not given["create_graph"]:
                grads = [jax.lax.stop_gradient(g) for g in grads]
            return tuple(g if n in used else None for n, g in zip(ins, grads))

        def _graph_boundaries(self, node: Any, args: tuple, kwargs: dict) -> Optional[tuple]:
            """UPFD's root nodes: ``(batch[1:] - batch[:-1]).nonzero()`` is one entry per graph
            after the first (a graph starts where the sorted ids change), a static count
            under jit when ``batch`` is a BatchVector (``num_graphs - 1``; should a graph be
            empty -- a padded batch's padding graph -- the last entries hold the last
            position, rows the padding masks)."""
            shifted = _shifted_pair(node, self.values)  # (batch, later-first?) or None
            if shifted is not None and node.target is operator.sub and shifted[1]:
                count = shifted[0].num_graphs - 1
                out = args[0] - args[1]
                self.boundaries[id(out)] = (out, max(count, 0))
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
            entry = self.boundaries.get(id(args[0])) if nonzero and args else None
            if entry is None or entry[0] is not args[0] or not _pooled_traced(args[0]):
                return None
            last = args[0].shape[0] - 1
            (found,) = jax.numpy.nonzero(args[0], size=entry[1], fill_value=max(last, 0))
            found = found.astype(_long_dtype())
            return ((found,),) if kwargs.get("as_tuple") else (found[:, None],)

        def _note_pooled(self, module: Any, out: Any, x: Any) -> None:
            """Remember a pool's row-aligned outputs when its kept count is not their rows."""
            kept_rows = getattr(module, "kept_rows", None)
            if kept_rows is None or not isinstance(out, tuple) or not is_array(x):
                return
            kept = kept_rows(out, x)
            for i in module.row_outputs:
                if is_array(out[i]) and (_pooled_traced(kept) or int(kept) != out[i].shape[0]):
                    self.pooled[id(out[i])] = (out[i], kept)

        def _pooled_rows(self, node: Any, args: tuple, kwargs: dict) -> Optional[tuple]:
            """(value,) for a row count of a pool's output, or arithmetic on one; else None."""
            if node.op == "call_function" and node.target in _pooled.ARITHMETIC:
                kept = _pooled.kept_operands(args)
                return None if kept is None else (node.target(*kept),)
            subject = args[0] if args else None
            entry = self.pooled.get(id(subject))
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

        def _masked(self, node: Any, args: tuple, kwargs: dict) -> Any:
            op, target = node.op, node.target
            impl = (self.submodules.get(target) if op == "call_module" else
                    self.program.methods.get(target) if op == "call_method" else
                    self.table.by_id.get(id(target)))
            module = self.root.get_submodule(target) if op == "call_module" else None
            return _masked.evaluate(node, impl, args, kwargs,
                                    user_frame(node.meta.get("stack_trace")), module)

        # -- Python protocols on proxies
        def to_bool(self, obj: Any) -> bool:
            v = self.values[obj.node]
            if isinstance(v, (bool, int, np.bool_, np.integer)):
                return bool(v)
            if isinstance(v, jax.Array) and not isinstance(v, jax.core.Tracer) and v.size == 1:
                # a known value: a test on constant indices (PyG's sortedness check of a
                # constant `batch`) is decided as torch decides it
                return bool(v)
            raise _error(obj.node, f"{self.program.name}: control flow on a tensor's values "
                                   f"(an `if`/`while`/`and` on a comparison of tensors). One "
                                   f"compiled JAX program serves every input, so it cannot "
                                   f"branch on data: use torch.where in the model, or port "
                                   f"this module by hand (register_converter)"
                                   f"{self.traced_origin(obj.node)}")

        def traced_origin(self, node: Any) -> str:
            """Which traced arguments of the forward ``node``'s value comes from, and the fix
            ("" when none: a traced parameter, say)."""
            seen, stack, names = set(), [node], []
            while stack:
                n = stack.pop()
                if n in seen:
                    continue
                seen.add(n)
                if n.op == "placeholder":
                    if any(isinstance(leaf, jax.core.Tracer)
                           for leaf in jax.tree_util.tree_leaves(self.values.get(n))):
                        names.append(f"`{n.target}`")
                    continue
                stack.extend(n.all_input_nodes)
            if not names:
                return ""
            return (f". The value comes from {self.program.name}'s argument "
                    f"{', '.join(sorted(names))}, traced (an argument of jax.jit or of a "
                    f"transformation): make it a constant (close over it, "
                    f"`jax.jit(lambda x: port(x, index))`; compare_modules does so for "
                    f"integer inputs), or pass what the forward computes from it")

        def iter(self, obj: Any) -> Iterator:
            v = self.values[obj.node]
            if isinstance(v, (tuple, list)) and all(not is_array(e) for e in v):
                return iter(v)
            return iter([obj[i] for i in range(len(obj))])

        def keys(self, obj: Any) -> Any:
            v = self.values[obj.node]
            if isinstance(v, dict):
                return list(v.keys())
            return super().keys(obj)

        # -- the root's arguments: our values, not fx's signature rules
        def create_args_for_root(self, root_fn, is_module, concrete_args=None):
            bound = self.program.bind(self.call_args, self.call_kwargs)
            args = [self.root]
            positional, keywords = [], {}
            for param, arg in bound:
                built = self._build(param.name, arg)
                if param.kind == param.KEYWORD_ONLY:
                    keywords[param.name] = built
                elif param.kind == param.VAR_POSITIONAL:
                    positional.extend(built)
                elif param.kind == param.VAR_KEYWORD:
                    keywords.update(built)
                else:
                    positional.append(built)

            def fn(root: Any, *a: Any) -> Any:
                return root_fn(root, *a, **keywords)
            return fn, args + positional

        def _build(self, name: str, arg: Any) -> Any:
            if is_array(arg):
                self.inputs.append(arg)
                return self.create_proxy("placeholder", name, (), {})
            if isinstance(arg, (tuple, list)) and not hasattr(arg, "_fields") and \
                    any(_holds_array(a) for a in arg):  # (a named tuple is a Data-like object)
                return type(arg)(self._build(f"{name}_{i}", a) for i, a in enumerate(arg))
            if isinstance(arg, dict) and any(_holds_array(a) for a in arg.values()):
                return {k: self._build(f"{name}_{k}", a) for k, a in arg.items()}
            if _holds_array(arg):  # an object with array attributes (a Data-like batch)
                self.inputs.append(arg)
                return self.create_proxy("placeholder", name, (), {})
            return arg

    return _Tracer


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


def _holds_array(x: Any) -> bool:
    return any(is_array(leaf) for leaf in jax.tree_util.tree_leaves(x))


def _constant(args: tuple, kwargs: dict) -> bool:
    """No argument is traced: a function of constants (an index the caller holds fixed, a
    buffer) is computed while the program is built, so its value stays known -- as torch's
    is, e.g. PyG's ``int(index.max()) + 1`` on a constant ``batch``."""
    return not any(isinstance(leaf, jax.core.Tracer)
                   for leaf in jax.tree_util.tree_leaves((args, kwargs)))


def _is_function(a: Any) -> bool:
    """A Python or torch function (not a module, class or proxy): torch code to replay."""
    return isinstance(a, (TorchCallable, functools.partial)) or inspect.isfunction(a) or \
        inspect.ismethod(a) or inspect.isbuiltin(a)


def _torch_attribute(root: Any, target: str) -> Any:
    """``root``'s attribute at a dotted path, read past fx's patched ``Module.__getattr__``."""
    attr = root
    for part in target.split("."):
        if hasattr(attr, "_parameters") and hasattr(attr, "_modules"):  # a torch Module
            for store in ("_parameters", "_buffers", "_modules"):
                if part in attr.__dict__.get(store, {}):
                    attr = attr.__dict__[store][part]
                    break
            else:
                attr = object.__getattribute__(attr, part)
        else:
            attr = getattr(attr, part)
    return attr


def _call(fn: Callable, args: tuple, kwargs: dict, node: Any) -> Any:
    try:
        if node.op != "call_module" and _constant(args, kwargs):
            with jax.ensure_compile_time_eval():
                return fn(*args, **kwargs)
        return fn(*args, **kwargs)
    except UnsupportedModuleError:
        raise
    except Exception as exc:  # noqa: BLE001 - re-raised with the user's line attached
        note = f"while running {_target_name(node.target)} at " \
               f"{user_frame(node.meta.get('stack_trace'))}"
        if hasattr(exc, "add_note") and note not in getattr(exc, "__notes__", ()):
            exc.add_note(note)
        raise


_TRACER: list = []


def _tracer_class() -> type:
    if not _TRACER:
        _TRACER.append(_make_tracer_class())
    return _TRACER[0]


def trace_with(program: _Program, arrays: dict, submodules: dict, args: tuple,
               kwargs: dict, patches: Optional[Callable] = None) -> Any:
    """Run ``program``'s torch forward on JAX values; returns the output (JAX values)."""
    import torch.fx as fx

    tracer = _tracer_class()(program, arrays, submodules)
    tracer.call_args, tracer.call_kwargs = args, kwargs
    root = program.torch_module
    tracer.traced_func_name = program.method
    with (patches(tracer) if patches is not None else contextlib.nullcontext()), \
            _refuse_autograd_functions(), _leaf_methods(tracer, root, submodules):
        graph = tracer.trace(root)
    output = next(n for n in reversed(graph.nodes) if n.op == "output")

    def value(n: Any) -> Any:
        if n in tracer.stale:  # returned after a view of it was updated in place
            raise _error(output, tracer.stale[n])
        return tracer.values[n]

    out = _plain(fx.node.map_arg(output.args[0], value))
    _masked.check_output(out)
    return out


def _invertible_forward(fn: Callable, fn_inverse: Callable, num_bwd_passes: int,
                        num_inputs: int, *inputs_and_weights: Any) -> Any:
    """PyG's ``InvertibleFunction.apply``: the forward ``fn`` on the inputs. Its backward
    rebuilds the inputs with ``fn_inverse`` (to save memory) and differentiates ``fn``:
    the forward's own gradient, up to the rounding of the rebuilt inputs."""
    return fn(*inputs_and_weights[:num_inputs])


#: custom torch.autograd.Functions whose backward is the gradient of their forward (a
#: memory-saving recomputation): the fx path traces the forward, and JAX differentiates it
_PLAIN_GRADIENT_FUNCTIONS = {
    "torch_geometric.nn.models.rev_gnn.InvertibleFunction": _invertible_forward,
}


class _PortMethod:
    """A converted leaf's method as a value of a trace (see ``_Tracer.port_method``)."""

    __slots__ = ("fn",)
    _TORCH_METHODS = frozenset({"__call__"})

    def __init__(self, fn: Callable):
        self.fn = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


@contextlib.contextmanager
def _leaf_methods(tracer: Any, root: Any, submodules: dict) -> Iterator[None]:
    """While the forward runs, ``leaf.<name>(...)`` calls the port's ``<name>``.

    A converted leaf lists the torch methods it answers in ``_TORCH_METHODS``
    (``WLConv``'s ``histogram``): the torch submodule gets an instance attribute of that
    name for the duration of the trace, which records the call and runs the port's method
    (fx would otherwise run the torch method's code on the proxies, reading the torch
    module's state, not the port's).
    """
    patched: list = []
    try:
        for path, port in submodules.items():
            names = getattr(type(port), "_TORCH_METHODS", ())
            if not names or isinstance(port, (TracedModule, Unsupported)):
                continue
            module = _torch_attribute(root, path)
            for name in names:
                if name in module.__dict__:
                    continue
                module.__dict__[name] = functools.partial(
                    tracer.port_method, getattr(port, name), f"{path}.{name}".replace(".", "_"))
                patched.append((module, name))
        yield
    finally:
        for module, name in patched:
            module.__dict__.pop(name, None)


@contextlib.contextmanager
def _refuse_autograd_functions() -> Iterator[None]:
    """``MyFunction.apply(proxy)`` raises, naming the class and your line.

    torch's ``Function.apply`` takes a proxy for a Tensor (its ``__class__``) and hands it
    to C++, which crashed the process. A custom Function's ``backward`` is its own
    derivative rule (a straight-through estimator, PyG's reversible recomputation in
    GroupAddRev), so replaying ``forward`` and differentiating it could give other
    gradients than torch's: the port is refused instead.
    """
    import torch
    import torch.fx as fx

    base = torch.autograd.Function
    original = base.__dict__["apply"]

    def apply(cls: Any, *args: Any, **kwargs: Any) -> Any:
        leaves = jax.tree_util.tree_leaves((args, kwargs))
        if any(isinstance(leaf, fx.Proxy) for leaf in leaves):
            plain = _PLAIN_GRADIENT_FUNCTIONS.get(f"{cls.__module__}.{cls.__qualname__}")
            if plain is not None:  # its backward is the forward's own gradient
                return plain(*args, **kwargs)
            import traceback

            where = user_frame("".join(traceback.format_stack()[:-1]))
            raise UnsupportedModuleError(
                f"{cls.__qualname__} ({cls.__module__}) is a custom torch.autograd.Function: "
                f"its backward is a derivative rule of its own, which the fx path cannot "
                f"replay on JAX arrays. Port the module that uses it by hand "
                f"(register_converter), with torch2jax_ops.autograd.Function for the "
                f"forward/backward pair -- at {where}")
        return original.__get__(None, cls)(*args, **kwargs)

    base.apply = classmethod(apply)  # type: ignore[method-assign, assignment]
    try:
        yield
    finally:
        base.apply = original  # type: ignore[method-assign]


def _plain(out: Any) -> Any:
    """fx's immutable containers (a forward returning a dict: ``{node_type: x}``) as the
    plain ``dict`` / ``list`` the torch forward built, so the output is a JAX pytree."""
    from torch.fx.immutable_collections import immutable_dict, immutable_list

    if isinstance(out, immutable_dict):
        return {k: _plain(v) for k, v in out.items()}
    if isinstance(out, immutable_list):
        return [_plain(v) for v in out]
    if isinstance(out, tuple) and not hasattr(out, "_fields"):
        return tuple(_plain(v) for v in out)
    return out


# ---------------------------------------------------------------------- the port

class _Program:
    """What a :class:`TracedModule` replays: the torch module's code, never its weights."""

    def __init__(self, torch_module: Any, path: str, device: Any, method: str = "forward"):
        self.torch_module, self.path, self.device, self.method = torch_module, path, device, method
        self.name = f"{type(torch_module).__name__}.{method}" + (f" (`{path}`)" if path else "")
        self.signature = inspect.signature(getattr(type(torch_module), method))
        self.constants: dict = {}
        self.methods = methods()

    def is_leaf(self, m: Any) -> bool:
        return is_leaf(m)

    def bind(self, args: tuple, kwargs: dict) -> list:
        """(parameter, value) for every parameter of the forward after ``self``."""
        params = list(self.signature.parameters.values())[1:]
        sig = self.signature.replace(parameters=params)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.name}{sig}: {exc} (the port takes the torch forward's "
                            f"arguments, as JAX arrays)") from None
        bound.apply_defaults()
        return [(sig.parameters[k], v) for k, v in bound.arguments.items()]

    def constant(self, tensor: Any) -> Any:
        """A tensor the forward reads from outside its parameters, as a JAX constant (cached)."""
        key = id(tensor)
        if key not in self.constants:
            from ...dlpack import to_jax
            # integer constants (offsets, type ids the forward builds with torch.tensor) are
            # int64 in torch: int32 without JAX's 64-bit mode, their range checked
            self.constants[key] = (tensor, to_jax(tensor, device=self.device,
                                                  allow_downcast=not tensor.is_floating_point()))
        return self.constants[key][1]


class TorchCallable:
    """A Python function of torch code as a function of JAX arrays (the fx path's table).

    What a traced forward hands to a submodule's port (``post_step=lambda y:
    y.clamp(0, 1)``) and what a converter does with an activation given as a
    function (``ARMAConv(..., act=lambda x: x)``). Called with JAX arrays it
    replays ``fn`` as a traced forward does (every torch call looked up in the
    table, under ``jax.jit`` once while JAX traces); called with the proxies of
    a running trace (a traced port calling it) it runs ``fn`` in that trace.
    A tensor ``fn`` closes over is a constant of the port; a parameter it
    reads from outside its arguments raises (its gradient would be lost).
    """

    __slots__ = ("fn", "_program")

    def __init__(self, fn: Callable, device: Any = None):
        import torch

        class _Function(torch.nn.Module):
            def forward(self, *args: Any, **kwargs: Any) -> Any:
                return fn(*args, **kwargs)

        self.fn = fn
        self._program = _Program(_Function(), "", device)
        self._program.name = getattr(fn, "__qualname__", None) or repr(fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import torch.fx as fx

        leaves = jax.tree_util.tree_leaves((args, kwargs))
        if any(isinstance(leaf, fx.Proxy) for leaf in leaves):
            return self.fn(*args, **kwargs)  # inside a running trace: its proxies
        return trace_with(self._program, {}, {}, args, kwargs)

    def __repr__(self) -> str:
        return f"TorchCallable({self._program.name})"


class Unsupported:
    """A submodule with no port, kept so that the error comes only if the forward uses it.

    It holds the submodule's parameters and buffers under their torch names (a
    pytree), so the port's state_dict keeps every key, and ``compare_modules``
    or ``functional_call`` find them and reach the call that raises the reason.
    """

    def __init__(self, message: str, arrays: Optional[dict] = None):
        self.message = message
        self.arrays = dict(arrays or {})

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedModuleError(self.message)

    def __repr__(self) -> str:
        return f"Unsupported({self.message.split(':')[0]})"


class TracedModule:
    """The port of a torch module without a converter of its own (the fx path).

    A pytree whose children carry the torch names: converted submodules (by
    their dotted path, ``"convs.0"``) and the other parameters and buffers
    (``"alpha"``, ``"block.scale"``), so ``nn.state_dict(port)`` has the torch
    ``state_dict``'s keys. Calling it runs the torch forward's code on JAX
    values (see the module docstring). ``key=`` feeds the random ops of
    training mode. ``port["convs.0"]`` (or ``port.conv1``) is a submodule.
    """

    __slots__ = ("_children", "_program")

    def __init__(self, children: dict, program: _Program):
        object.__setattr__(self, "_children", dict(children))
        object.__setattr__(self, "_program", program)

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        _register_pytree(cls)

    def __getitem__(self, name: str) -> Any:
        return self._children[name]

    def __getattr__(self, name: str) -> Any:
        children = object.__getattribute__(self, "_children")
        if name in children:
            return children[name]
        program = object.__getattribute__(self, "_program")
        if callable(getattr(type(program.torch_module), name, None)):
            raise AttributeError(
                f"{type(self).__name__} of {program.name} has no method {name!r}: a port runs "
                f"the torch module's forward only. Call {name} from the forward of a small "
                f"torch module holding this one (def forward(self, ...): return "
                f"self.model.{name}(...)) and convert that")
        raise AttributeError(f"{type(self).__name__} of {self._program.name} has no "
                             f"attribute {name!r}; its children are {sorted(children)}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable (a pytree): use "
                             f"equinox.tree_at or torch2jax_ops.func.functional_call")

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={type(v).__name__}" for k, v in self._children.items())
        return f"{type(self).__name__}[{self._program.name}]({inner})"

    def _split(self) -> tuple[dict, dict]:
        arrays = {k: v for k, v in self._children.items() if is_array(v)}
        submodules = {k: v for k, v in self._children.items() if not is_array(v)}
        return arrays, submodules

    def _patches(self) -> Optional[Callable]:
        return None

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, *args: Any, key: Any = None,
                 out_sharding: OutSharding = None, **kwargs: Any) -> Any:
        for leaf in jax.tree_util.tree_leaves((args, kwargs)):
            if type(leaf).__module__.split(".")[0] == "torch":  # (not torch2jax_ops' own)
                raise TypeError(f"{self._program.name}: got a torch.Tensor; the port takes JAX "
                                f"arrays (convert with torch2jax_ops.to_jax(tensor), zero-copy)")
        arrays, submodules = self._split()
        with (key_scope(key) if key is not None else contextlib.nullcontext()):
            return trace_with(self._program, arrays, submodules, args, kwargs,
                              self._patches())


def _register_pytree(cls: type) -> None:
    def flatten_with_keys(m):
        children = m._children
        return (tuple((jax.tree_util.GetAttrKey(k), v) for k, v in children.items()),
                (tuple(children), m._program))

    def unflatten(aux, values):
        names, program = aux
        return cls(dict(zip(names, values)), program)

    jax.tree_util.register_pytree_with_keys(
        cls, flatten_with_keys, unflatten,
        flatten_func=lambda m: (tuple(m._children.values()), (tuple(m._children), m._program)))


_register_pytree(TracedModule)

jax.tree_util.register_pytree_with_keys(
    Unsupported,
    lambda u: (tuple((jax.tree_util.GetAttrKey(k), v) for k, v in u.arrays.items()),
               (tuple(u.arrays), u.message)),
    lambda aux, values: Unsupported(aux[1], dict(zip(aux[0], values))),
    flatten_func=lambda u: (tuple(u.arrays.values()), (tuple(u.arrays), u.message)))


# ------------------------------------------------------------------ which modules

def is_leaf(m: Any) -> bool:
    """A ``call_module`` leaf: a registered class, or a torch.nn built-in; never a container.

    Modules of your own (and PyG models without a converter) are traced through.
    """
    import torch

    if isinstance(m, (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict,
                      torch.nn.ParameterList, torch.nn.ParameterDict)):
        return False  # containers: their children (or parameters) are the leaves
    if converter_for(type(m)) is not None:
        return True
    module = type(m).__module__
    return module.startswith("torch.nn.") or module.startswith("torch.ao.nn.")


def _example(cls: type) -> str:
    return (f"@torch2jax_ops.nn.register_converter('{class_path(cls)}')\n"
            f"def convert(module, ctx):  # ctx.array(tensor) -> JAX array, ctx.child(sub, name)\n"
            f"    return MyJaxPort(...)  # an equinox.Module computing {cls.__name__}.forward")


def _arrays(m: Any, ctx: Converter, recurse: bool = True) -> dict:
    """``m``'s parameters and buffers as JAX arrays by torch name (integer buffers are
    counters, num_batches_tracked: int32 without JAX's 64-bit mode)."""
    return {name: ctx.array(t, allow_downcast=not (t.is_floating_point() or t.is_complex()))
            for name, t in list(m.named_parameters(recurse=recurse)) +
            list(m.named_buffers(recurse=recurse)) if t is not None}


def _children(module: Any, ctx: Converter) -> dict:
    """Converted leaves by dotted path, and the arrays of the traced-through modules."""
    children: dict = {}

    def walk(m: Any, prefix: str) -> None:
        children.update({prefix + k: v for k, v in _arrays(m, ctx, recurse=False).items()})
        for name, sub in m.named_children():
            path = prefix + name
            if is_leaf(sub):
                child_ctx = Converter(ctx.copy, f"{ctx.path}.{path}" if ctx.path else path,
                                      ctx.device, ctx.memo)
                try:
                    children[path] = child_ctx.convert(sub)
                except UnsupportedModuleError as exc:
                    hint = "" if converter_for(type(sub)) is not None else \
                        f"\nRegister a port for {type(sub).__name__}:\n{_example(type(sub))}"
                    children[path] = Unsupported(f"{exc}{hint}", _arrays(sub, ctx))
            else:
                walk(sub, path + ".")
    walk(module, "")
    return children


@register_fallback
def convert_traced(module: Any, ctx: Converter) -> TracedModule:
    """The fx-path converter: every module with no converter of its own."""
    if is_leaf(module):  # a torch.nn built-in without a port
        raise UnsupportedModuleError(
            f"from_torch: no JAX port for {ctx.where(module)}. Register one:\n"
            f"{_example(type(module))}")
    return TracedModule(_children(module, ctx), _Program(module, ctx.path, ctx.device))
