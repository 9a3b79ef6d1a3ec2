"""``as_jax``: a torch function as a JAX function under jit, vmap and grad (pure_callback)."""
from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from .. import _dtypes
from .._checking import is_inexact
from ..dlpack import to_jax, to_torch
from ._common import join_call, split_call

__all__ = ["as_jax", "InPlaceError"]


class InPlaceError(RuntimeError):
    """A torch function bridged with :func:`as_jax` wrote to one of its inputs."""


def _shape_struct(tensor, allow_downcast: bool, *, op: str) -> jax.ShapeDtypeStruct:
    name = _dtypes.name_of(tensor.dtype)
    if _dtypes.needs_x64(name) and not _dtypes.x64_enabled():
        if not allow_downcast:
            raise TypeError(f"{op}: the torch function returns {name}, which needs JAX's 64-bit "
                            f"mode (off). Enable it (jax.config.update('jax_enable_x64', True)), "
                            f"pass allow_downcast=True (values checked to fit), or give "
                            f"result_shape")
        name = _dtypes.X64_DOWNCAST[name]
    return jax.ShapeDtypeStruct(tuple(tensor.shape), _dtypes.jax_dtype(name))


class _AsJax:
    def __init__(self, torch_fn: Callable, result_shape: Any, vmap_method: str,
                 allow_downcast: bool):
        self.torch_fn, self.result_shape = torch_fn, result_shape
        self.vmap_method, self.allow_downcast = vmap_method, allow_downcast
        self.op = f"as_jax({getattr(torch_fn, '__name__', 'fn')})"
        self.functions: dict[tuple, Callable] = {}
        self.inferred: dict[tuple, tuple] = {}
        self.vjps: dict[tuple, _AsJax] = {}
        functools.update_wrapper(self, torch_fn)

    # -- the torch side, on concrete values --------------------------------------
    def run_torch(self, key: tuple, tensors: list, grad: bool = False):
        import torch

        versions = [t._version for t in tensors]
        args, kwargs = join_call(key, tensors)
        with torch.set_grad_enabled(grad):
            result = self.torch_fn(*args, **kwargs)
        if [t._version for t in tensors] != versions:
            raise InPlaceError(f"{self.op}: the torch function modified an input in place; its "
                               f"inputs share JAX's (immutable) buffers. Clone inside the "
                               f"function before writing")
        return result

    def infer(self, key: tuple, avals: tuple):
        """Output structure and ShapeDtypeStructs from a call on meta (else zero) tensors."""
        import torch

        sig = (key, avals)
        if sig not in self.inferred:
            def example(device):
                return [torch.zeros(shape, dtype=_dtypes.torch_dtype(dtype), device=device)
                        for shape, dtype in avals]
            try:
                result = self.run_torch(key, example("meta"))
            except InPlaceError:
                raise
            except Exception:  # noqa: BLE001 - not meta-capable: one real call on zeros
                result = self.run_torch(key, example("cpu"))
            leaves, tree = jax.tree_util.tree_flatten(result)
            if not all(isinstance(leaf, torch.Tensor) for leaf in leaves):
                raise TypeError(f"{self.op}: the torch function must return tensors (in any "
                                f"pytree), got {[type(leaf).__name__ for leaf in leaves]}")
            self.inferred[sig] = (tree, tuple(_shape_struct(leaf, self.allow_downcast, op=self.op)
                                              for leaf in leaves))
        return self.inferred[sig]

    def structure(self, key: tuple, arrays: list):
        """(output treedef, flat ShapeDtypeStructs) for these inputs."""
        if self.result_shape is None:
            avals = tuple((tuple(a.shape), _dtypes.name_of(a.dtype)) for a in arrays)
            return self.infer(key, avals)
        spec = self.result_shape
        if callable(spec):
            args, kwargs = join_call(key, [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in arrays])
            spec = spec(*args, **kwargs)
        leaves, tree = jax.tree_util.tree_flatten(spec)
        return tree, tuple(jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x)) for x in leaves)

    def host(self, key: tuple, structs: tuple):
        """The pure_callback body: JAX arrays -> torch -> JAX arrays of ``structs``."""
        def call(*arrays):
            tensors = [to_torch(a) for a in arrays]
            leaves = jax.tree_util.tree_leaves(self.run_torch(key, tensors))
            if len(leaves) != len(structs):
                raise ValueError(f"{self.op}: the torch function returned {len(leaves)} tensors, "
                                 f"result_shape says {len(structs)}")
            out = []
            for leaf, struct in zip(leaves, structs):
                if tuple(leaf.shape) != struct.shape:
                    raise ValueError(f"{self.op}: the torch function returned shape "
                                     f"{tuple(leaf.shape)} where {struct.shape} was expected")
                array = to_jax(leaf, allow_downcast=self.allow_downcast or
                               _dtypes.name_of(leaf.dtype) != _dtypes.name_of(struct.dtype))
                if array.dtype != struct.dtype:
                    raise TypeError(f"{self.op}: the torch function returned {leaf.dtype} "
                                    f"where {struct.dtype} was expected")
                out.append(array)
            return tuple(out)
        return call

    # -- the JAX side --------------------------------------------------------------
    def vjp(self, key: tuple) -> _AsJax:
        """``(primals, cts) -> grads`` by torch autograd, itself bridged (second order)."""
        if key not in self.vjps:
            def torch_vjp(primals, cts):
                import torch

                with torch.enable_grad():
                    xs = [p if p.requires_grad or not (p.is_floating_point() or p.is_complex())
                          else p.detach().requires_grad_() for p in primals]
                    outs = [o for o in jax.tree_util.tree_leaves(self.run_torch(key, xs, True))
                            if o.is_floating_point() or o.is_complex()]
                    wanted = [x for x in xs if x.requires_grad]
                    pairs = [(o, c.conj() if c.is_complex() else c)
                             for o, c in zip(outs, cts) if o.requires_grad]
                    higher = any(t.requires_grad for t in (*primals, *cts))
                    grads = torch.autograd.grad(
                        [o for o, _ in pairs], wanted, [c for _, c in pairs], allow_unused=True,
                        create_graph=higher) if pairs else [None] * len(wanted)
                return tuple((torch.zeros_like(x) if g is None else
                              g.conj() if g.is_complex() else g) for x, g in zip(wanted, grads))

            def shapes(primals, cts):
                return tuple(p for p in primals if jnp.issubdtype(p.dtype, jnp.inexact))

            vjp = _AsJax(torch_vjp, shapes, self.vmap_method, self.allow_downcast)
            vjp.op = f"{self.op}'s backward"
            self.vjps[key] = vjp
        return self.vjps[key]

    def function(self, key: tuple, arrays: list) -> Callable:
        tree, structs = self.structure(key, arrays)
        sig = (key, tuple((a.shape, a.dtype) for a in arrays))
        if sig in self.functions:
            return self.functions[sig]

        def forward(*xs):
            outs = jax.pure_callback(self.host(key, structs), structs, *xs,
                                     vmap_method=self.vmap_method)
            return jax.tree_util.tree_unflatten(tree, outs)

        fn = jax.custom_vjp(forward)

        def fwd(*xs):  # through fn, so that an outer grad differentiates it by its own rule
            return fn(*xs), xs

        def bwd(xs, cts):
            ct_leaves = [c for c, s in zip(jax.tree_util.tree_leaves(cts), structs)
                         if jnp.issubdtype(s.dtype, jnp.inexact)]
            grads = iter(self.vjp(key)(tuple(xs), tuple(ct_leaves)))
            return tuple(next(grads) if is_inexact(x) else None for x in xs)

        fn.defvjp(fwd, bwd)
        self.functions[sig] = fn
        return fn

    def __call__(self, *args, **kwargs):
        import torch

        if any(isinstance(leaf, torch.Tensor) for leaf in jax.tree_util.tree_leaves((args, kwargs))):
            raise TypeError(f"{self.op}: got a torch.Tensor; call the wrapped function with JAX "
                            f"arrays (torch2jax_ops.dlpack.to_jax converts)")
        arrays, key = split_call(args, kwargs, lambda x: isinstance(x, (jax.Array, np.ndarray)),
                             op=self.op)
        arrays = [jnp.asarray(a) for a in arrays]
        return self.function(key, arrays)(*arrays)


def as_jax(torch_fn: Callable, result_shape: Any = None, *, vmap_method: str = "sequential",
           allow_downcast: bool = False) -> Callable:
    """A torch function as a JAX function that works under jit, vmap and grad.

    Args:
      torch_fn: a function of torch tensors (any pytree of them, plus hashable
        static arguments) returning a pytree of tensors. It receives the
        dtypes JAX has (int32 indices with 64-bit mode off: call ``.long()``
        inside if torch needs int64) and must not write to its inputs.
      result_shape: the output pytree as ``jax.ShapeDtypeStruct``s (or arrays),
        or a function taking the arguments (arrays replaced by their
        ``ShapeDtypeStruct``) and returning one. Give it when the output
        shape depends on values (``nonzero``, ``unique``). By default it is
        inferred once per input shape/dtype from a call on 'meta' tensors, or,
        when the function cannot run on 'meta', on zero-filled CPU tensors.
      vmap_method: how ``jax.vmap`` calls torch (``jax.pure_callback``'s
        option): "sequential" (one call per example, always right), or
        "expand_dims" / "broadcast_all" when the torch function handles a
        leading batch axis itself (much faster).
      allow_downcast: accept int64/float64 outputs with JAX's 64-bit mode off
        (converted to 32 bits; integers that do not fit raise).

    Returns:
      ``f(*args, **kwargs)`` with JAX arrays in place of the tensors. Reverse
      mode (``jax.grad``, ``vjp``, ``jacrev``, and second order) runs torch
      autograd in a callback; forward mode (``jax.jvp``, ``jacfwd``) is not
      available, as for every ``jax.custom_vjp`` function.
    """
    if not callable(torch_fn):
        raise TypeError(f"as_jax: expected a callable, got {type(torch_fn).__name__}")
    if vmap_method not in ("sequential", "expand_dims", "broadcast_all", "legacy_vectorized"):
        raise ValueError(f"as_jax: vmap_method must be 'sequential', 'expand_dims' or "
                         f"'broadcast_all', got {vmap_method!r}")
    return _AsJax(torch_fn, result_shape, vmap_method, allow_downcast)
