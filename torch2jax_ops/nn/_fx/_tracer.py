"""The tracer: a ``torch.fx`` tracer whose proxies carry JAX values ("lockstep" tracing).

Its control flow: every node the forward records is evaluated on the spot
(:meth:`evaluate`): a ``call_function`` / ``call_method`` node through the mapping
table (:mod:`._table`), a ``call_module`` node by the converted leaf, a ``get_attr``
node as the port's array; the torch idioms that need the trace's bookkeeping are
handed to :mod:`._idioms`, ``torch.autograd.grad`` to :mod:`._autograd`, rows of
``x[mask]`` under jit to :mod:`.._masked`. The Python protocols fx asks the tracer
about (``bool(x)``, iteration, ``keys()``) and the forward's arguments are answered
from the values.
"""
from __future__ import annotations

import functools
import inspect
import operator
from typing import Any, Callable, Iterator

import jax
import numpy as np

from ..._batch_vector import declared_max, ids_of, plain_ids
from ..._checking import is_array
from .. import _masked
from .._convert import UnsupportedModuleError
from ._autograd import autograd_grad
from ._errors import _error, _target_name, traced_origin, user_frame
from ._idioms import (
    _inplace_call,
    _mutates,
    check_dense_width,
    counted_getitem,
    graph_boundaries,
    note_counted_mask,
    note_pooled,
    pooled_rows,
    rebind,
)
from ._program import _Program, _torch_attribute, named_array, root_arguments
from ._proxy import _make_value_class
from ._table import _TABLE

__all__: list = []


def _make_tracer_class(torch_callable: type) -> type:
    """The tracer class (made on first use: torch is imported lazily). ``torch_callable``:
    the class that wraps a function handed to a submodule (:class:`~._port.TorchCallable`,
    which runs this tracer: given here, so that neither module imports the other)."""
    import torch
    import torch.fx as fx

    _Value = _make_value_class()

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
            check_dense_width(self.values, self.program.name, m, args, kwargs)
            return super().call_module(m, forward, args, kwargs)

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
                rebind(self.values, self.stale, self.program.name, node.args[0], result,
                       node)
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
            if _is_function(a, torch_callable):
                # a callable handed to a submodule (post_step=lambda y: ..., act=F.relu): the
                # port gets it as a callable on JAX arrays, its torch code run by the table
                node = self.create_node("get_attr", f"_callable_{id(a):x}", (), {})
                self.values[node] = a if isinstance(a, torch_callable) else torch_callable(
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
            found = named_array(self.arrays, self.submodules, self.program.name,
                                node.target)
            return self.program.constant(tensor) if found is None else found

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
            pooled = pooled_rows(self.pooled, node, args, kwargs)
            if pooled is not None:
                return pooled[0]
            boundary = graph_boundaries(self.values, self.boundaries, node, args, kwargs)
            if boundary is not None:
                return boundary[0]
            counted = counted_getitem(self.counted_masks, node, args)
            if counted is not None:
                return counted[0]
            if node.op == "call_function" and node.target is torch.autograd.grad:
                return autograd_grad(self, node)
            if node.op == "get_attr":
                found = named_array(self.arrays, self.submodules, self.program.name,
                                    node.target)
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
                note_pooled(self.pooled, module, out, args[0] if args else kwargs.get("x"))
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
            note_counted_mask(self.counted_masks, impl, args, kwargs, out)
            return out

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
            origin = traced_origin(self.values, self.program.name, obj.node)
            raise _error(obj.node, f"{self.program.name}: control flow on a tensor's values "
                                   f"(an `if`/`while`/`and` on a comparison of tensors). One "
                                   f"compiled JAX program serves every input, so it cannot "
                                   f"branch on data: use torch.where in the model, or port "
                                   f"this module by hand (register_converter){origin}")

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
            positional, keywords = root_arguments(
                self.program.bind(self.call_args, self.call_kwargs), self._placeholder)

            def fn(root: Any, *a: Any) -> Any:
                return root_fn(root, *a, **keywords)
            return fn, [self.root] + positional

        def _placeholder(self, name: str, arg: Any) -> Any:
            self.inputs.append(arg)
            return self.create_proxy("placeholder", name, (), {})

    return _Tracer


def _constant(args: tuple, kwargs: dict) -> bool:
    """No argument is traced: a function of constants (an index the caller holds fixed, a
    buffer) is computed while the program is built, so its value stays known -- as torch's
    is, e.g. PyG's ``int(index.max()) + 1`` on a constant ``batch``."""
    return not any(isinstance(leaf, jax.core.Tracer)
                   for leaf in jax.tree_util.tree_leaves((args, kwargs)))


def _is_function(a: Any, torch_callable: type) -> bool:
    """A Python or torch function (not a module, class or proxy): torch code to replay
    (``torch_callable``: :class:`~._port.TorchCallable`, such a function already wrapped)."""
    return isinstance(a, (torch_callable, functools.partial)) or inspect.isfunction(a) or \
        inspect.ismethod(a) or inspect.isbuiltin(a)


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


class _PortMethod:
    """A converted leaf's method as a value of a trace (see ``_Tracer.port_method``)."""

    __slots__ = ("fn",)
    _TORCH_METHODS = frozenset({"__call__"})

    def __init__(self, fn: Callable):
        self.fn = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


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
