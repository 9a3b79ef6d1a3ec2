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

from .._batch_vector import declared_max, ids_of, plain_ids
from .._checking import is_array
from .._sharding import OutSharding, sharding_aware
from . import _masked
from ._convert import Converter, UnsupportedModuleError
from ._registry import (
    class_path,
    converter_for,
    functions,
    generation,
    methods,
    register_fallback,
)
from ._state import key_scope, next_key  # noqa: F401  (next_key: the table's random ops)

__all__ = ["TracedModule", "TorchCallable", "convert_traced", "resolve", "user_frame",
           "Unsupported", "trace_with"]

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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

        # -- structure
        def is_leaf_module(self, m: Any, qualname: str) -> bool:
            return self.program.is_leaf(m)

        def proxy(self, node: Any) -> Any:
            return _Value(node, self)

        def getattr(self, attr: str, attr_val: Any, parameter_proxy_cache: dict) -> Any:
            if isinstance(attr_val, torch.Tensor) and not isinstance(
                    attr_val, torch.nn.Parameter):
                # a parameter swapped for a plain tensor (torch.func.functional_call,
                # compare_modules' reparametrization): fx proxies Parameters only, so
                # `self.lin.weight.t()` would run in torch on a constant, without gradient
                name = next((n for n, t in self.root.named_parameters() if t is attr_val),
                            None)
                if name is not None:
                    if name not in parameter_proxy_cache:
                        parameter_proxy_cache[name] = self.create_proxy("get_attr", name, (), {})
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
            if _mutates(kind, target) and node.args and isinstance(node.args[0], fx.Node):
                # x.add_(y), x[i] = v: later uses of x see the new value
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
            if target.op == "call_function" and target.target is operator.getitem or (
                    target.op == "call_method" and target.target in _VIEWS):
                raise _error(node, f"{self.program.name}: an in-place update of a view "
                                   f"({target.target} of another tensor) would have to write "
                                   f"through to that tensor; JAX arrays are immutable. Write "
                                   f"it out of place (x = x.index_put(...) / torch.where)")
            self.values[target] = value
            if _mutates(target.op, target.target) and target.args and isinstance(
                    target.args[0], fx.Node):
                # a chain, out.mul_(a).add_(b): the result of mul_ *is* out, so add_ updates
                # out too (the forward goes on using `out`)
                self._rebind(target.args[0], value, node)

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
                    from ._naming import named_arrays
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
                return self.values[n]

            # fx's immutable_dict / immutable_list as the plain containers the forward built:
            # a converted leaf (HANConv's x_dict) or a table entry gets a JAX pytree
            args = _plain(fx.node.map_arg(node.args, value))
            kwargs = _plain(fx.node.map_arg(node.kwargs, value))
            if _masked.holds(args, kwargs):  # rows of x[mask] under jit: row-wise or an error
                return self._masked(node, args, kwargs)
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
                return _call(module, args, kwargs, node)
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
            return _call(impl, args, kwargs, node)

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
            _refuse_autograd_functions():
        graph = tracer.trace(root)
    output = next(n for n in reversed(graph.nodes) if n.op == "output")
    out = _plain(fx.node.map_arg(output.args[0], lambda n: tracer.values[n]))
    _masked.check_output(out)
    return out


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
            from ..dlpack import to_jax
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
