"""The ports of the fx path, and how calling one runs the torch forward.

:class:`TracedModule` is the port of a torch module without a converter of its own,
:class:`TorchCallable` that of a Python function of torch code, :class:`Unsupported`
a submodule without a port (it raises when called); all are pytrees. Calling one runs
:func:`trace_with`: the program's torch forward under the tracer (:mod:`._tracer`) on
JAX values, with custom autograd Functions refused and converted leaves' torch methods
answered by their ports.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator, Optional

import jax

from ..._checking import is_array
from ..._sharding import OutSharding, sharding_aware
from .. import _masked
from .._convert import UnsupportedModuleError
from .._state import key_scope
from ._autograd import _refuse_autograd_functions
from ._errors import _error
from ._program import _Program, _torch_attribute
from ._tracer import _make_tracer_class, _plain

__all__ = ["TracedModule", "TorchCallable", "Unsupported", "trace_with"]


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


_TRACER: list = []


def _tracer_class() -> type:
    if not _TRACER:
        _TRACER.append(_make_tracer_class(TorchCallable))
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
