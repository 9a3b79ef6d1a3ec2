"""Whole functions across the torch/JAX boundary, with gradients both ways.

* :func:`as_torch` turns a JAX function into a torch function: tensors in,
  tensors out over DLPack (zero-copy), the JAX side jit-compiled and cached
  per input shape, and a ``torch.autograd.Function`` whose backward is
  ``jax.vjp``. It works under ``loss.backward()`` and under ``torch.func``
  (grad, vjp, jacrev, jacfwd, jvp, vmap, hessian). Swap one layer of a
  running torch model for its JAX port and keep training.
* :func:`as_jax` is the reverse: a torch function called from JAX through
  ``jax.pure_callback`` (so it works under ``jax.jit`` and ``jax.vmap``) with
  a custom VJP that runs torch autograd (``jax.grad``, ``jax.vjp``,
  ``jax.jacrev``; not forward mode).

Both are recursive: the backward of a bridged function is itself a bridged
function, so second derivatives (``torch.autograd.grad(create_graph=True)``,
``jax.grad(jax.grad(...))``) go through too.

Complex gradients: torch's convention is the conjugate of JAX's; the bridge
converts (torch's vjp of ``g`` = conj(JAX's vjp of conj(g))).
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from . import dtypes
from .dlpack import to_jax, to_torch

__all__ = ["as_torch", "as_jax", "InPlaceError"]


class _Array:
    """Marks where an array argument goes in a flattened argument list."""

    def __repr__(self) -> str:
        return "<array>"


_ARRAY = _Array()


def _split(args: tuple, kwargs: dict, is_array: Callable[[Any], bool], who: str):
    """Flatten (args, kwargs); arrays are traced inputs, other leaves are static."""
    leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
    arrays = [leaf for leaf in leaves if is_array(leaf)]
    statics = tuple(_ARRAY if is_array(leaf) else leaf for leaf in leaves)
    try:
        hash(statics)
    except TypeError as exc:
        raise TypeError(f"{who}: non-array arguments must be hashable (they are compile-time "
                        f"constants, one compiled version per value): {exc}") from exc
    return arrays, (treedef, statics)


def _join(key: tuple, arrays) -> tuple[tuple, dict]:
    treedef, statics = key
    it = iter(arrays)
    return jax.tree_util.tree_unflatten(treedef, [next(it) if s is _ARRAY else s
                                                  for s in statics])


def _inexact(x: Any) -> bool:
    return jnp.issubdtype(x.dtype, jnp.inexact)


def _conj_if_complex(x):
    return None if x is None else (jnp.conj(x) if jnp.iscomplexobj(x) else x)


# --------------------------------------------------------------------------- as_torch

class _Bridged:
    """A JAX function on a flat list of arrays, keyed by the static arguments."""

    def __init__(self, fn: Callable, key: tuple, allow_downcast: bool):
        self.fn, self.key, self.allow_downcast = fn, key, allow_downcast
        self.jitted = jax.jit(self.call)
        self.batched: dict[tuple, Callable] = {}
        self._vjp: Optional[Callable] = None
        self._vjp_jit: Optional[Callable] = None
        self._jvp: Optional[Callable] = None

    def call(self, *arrays):
        args, kwargs = _join(self.key, arrays)
        return self.fn(*args, **kwargs)

    def batched_call(self, axes: tuple) -> Callable:
        """The function under ``jax.vmap(in_axes=axes)``, as a torch function (bridged)."""
        if axes not in self.batched:
            self.batched[axes] = as_torch(jax.vmap(self.call, in_axes=axes),
                                          allow_downcast=self.allow_downcast)
        return self.batched[axes]

    def vjp_jax(self, primals: tuple, cts: tuple) -> tuple:
        """Gradients w.r.t. the inexact primals (None for the others), in torch's
        complex convention; ``cts`` holds one cotangent per inexact output."""
        outs, pullback = jax.vjp(self.call, *primals)
        leaves, tree = jax.tree_util.tree_flatten(outs)
        it = iter(cts)
        full = [_conj_if_complex(next(it)).astype(o.dtype) if _inexact(o)
                else np.zeros(o.shape, jax.dtypes.float0) for o in leaves]
        grads = pullback(jax.tree_util.tree_unflatten(tree, full))
        return tuple(_conj_if_complex(g) if _inexact(p) else None for g, p in zip(grads, primals))

    def vjp(self) -> Callable:
        """:meth:`vjp_jax` as a torch function, itself bridged (so it is differentiable)."""
        if self._vjp is None:
            self._vjp = as_torch(self.vjp_jax, allow_downcast=self.allow_downcast)
        return self._vjp

    def vjp_now(self, primals: tuple, cts: tuple) -> tuple:
        """First-order backward without a graph: :meth:`vjp_jax` jitted, on the JAX
        arrays the forward already imported (no second DLPack import, no nested
        autograd.Function)."""
        if self._vjp_jit is None:
            self._vjp_jit = jax.jit(self.vjp_jax)
        arrays = tuple(to_jax(c, allow_downcast=self.allow_downcast) for c in cts)
        box = _TreeBox()
        grads = _outputs(box, self._vjp_jit(primals, arrays), cts)
        return jax.tree_util.tree_unflatten(box.tree, grads)

    def jvp(self) -> Callable:
        """``(primals, tangents) -> output tangents`` as a torch function (itself bridged)."""
        if self._jvp is None:
            def jvp_jax(primals, tangents):
                full = [t.astype(p.dtype) if _inexact(p) else np.zeros(p.shape, jax.dtypes.float0)
                        for p, t in zip(primals, tangents)]
                outs, out_tangents = jax.jvp(self.call, tuple(primals), tuple(full))
                return tuple(t if _inexact(o) else None for o, t in
                             zip(jax.tree_util.tree_leaves(outs),
                                 jax.tree_util.tree_leaves(out_tangents)))
            self._jvp = as_torch(jvp_jax, allow_downcast=self.allow_downcast)
        return self._jvp


class _TreeBox:
    """Carries the output pytree structure out of ``Function.apply``, and the imported
    input arrays to ``setup_context`` (not a pytree itself, so torch.func passes this
    very object through)."""
    tree: Any = None
    arrays: Optional[tuple] = None


def _outputs(tree_box: _TreeBox, result: Any, inputs: tuple) -> tuple:
    """JAX results as torch tensors; the pytree structure goes into ``tree_box``."""
    leaves, tree_box.tree = jax.tree_util.tree_flatten(result)
    seen = {t.data_ptr() for t in inputs if t.numel()}
    out = []
    for leaf in leaves:
        tensor = to_torch(leaf if isinstance(leaf, jax.Array) else jnp.asarray(leaf))
        if tensor.numel() and tensor.data_ptr() in seen:  # never hand torch one buffer twice
            tensor = tensor.clone()
        seen.add(tensor.data_ptr())
        out.append(tensor)
    return tuple(out)


def _import_torch_function():
    import torch

    class _Call(torch.autograd.Function):
        """forward: the jitted JAX function; backward/jvp/vmap: JAX's vjp/jvp/vmap."""

        @staticmethod
        def forward(bridged, tree_box, *tensors):
            arrays = tuple(to_jax(t, allow_downcast=bridged.allow_downcast) for t in tensors)
            tree_box.arrays = arrays
            return _outputs(tree_box, bridged.jitted(*arrays), tensors)

        @staticmethod
        def setup_context(ctx, inputs, output):
            bridged, tree_box, *tensors = inputs
            ctx.bridged, ctx.arrays = bridged, tree_box.arrays
            ctx.save_for_backward(*tensors)
            ctx.save_for_forward(*tensors)
            ctx.mark_non_differentiable(*[o for o in output
                                          if not (o.is_floating_point() or o.is_complex())])

        @staticmethod
        def backward(ctx, *cts):
            tensors = ctx.saved_tensors  # torch checks here that no input changed in place
            float_cts = tuple(c for c in cts if c.is_floating_point() or c.is_complex())
            if torch.is_grad_enabled() or ctx.arrays is None:  # create_graph / torch.func
                grads = ctx.bridged.vjp()(tuple(tensors), float_cts)
            else:
                grads = ctx.bridged.vjp_now(ctx.arrays, float_cts)
            return (None, None, *grads)

        @staticmethod
        def jvp(ctx, _bridged_t, _box_t, *tangents):
            tensors = ctx.saved_tensors
            full = tuple(torch.zeros_like(p) if t is None else t for p, t in zip(tensors, tangents))
            return tuple(ctx.bridged.jvp()(tuple(tensors), full))

        @staticmethod
        def vmap(info, in_dims, bridged, tree_box, *tensors):
            # The tensors may still be wrapped by outer torch.func levels, so the
            # batched call goes through a bridged function of its own.
            out = bridged.batched_call(tuple(in_dims[2:]))(*tensors)
            leaves, tree_box.tree = jax.tree_util.tree_flatten(out)
            return tuple(leaves), tuple(0 for _ in leaves)

    return _Call


@functools.lru_cache(maxsize=None)
def _call_class():
    return _import_torch_function()


class _AsTorch:
    def __init__(self, jax_fn: Callable, allow_downcast: bool):
        self.jax_fn, self.allow_downcast = jax_fn, allow_downcast
        self.cache: dict[tuple, _Bridged] = {}
        functools.update_wrapper(self, jax_fn)

    def __call__(self, *args, **kwargs):
        import torch

        who = f"as_torch({getattr(self.jax_fn, '__name__', 'fn')})"
        tensors, key = _split(args, kwargs, lambda x: isinstance(x, torch.Tensor), who)
        if not (self.allow_downcast or jax.config.jax_enable_x64):
            wide = [f"{i} ({dtypes.name_of(t.dtype)})" for i, t in enumerate(tensors)
                    if dtypes.name_of(t.dtype) in dtypes.X64_NAMES]
            if wide:
                raise TypeError(f"{who}: tensor argument(s) {', '.join(wide)} need JAX's 64-bit "
                                f"mode, which is off (JAX would silently downcast). Enable it "
                                f"(jax.config.update('jax_enable_x64', True)), or wrap with "
                                f"as_torch(fn, allow_downcast=True) to pass them as 32-bit "
                                f"(integers that do not fit raise)")
        bridged = self.cache.get(key)
        if bridged is None:
            bridged = self.cache[key] = _Bridged(self.jax_fn, key, self.allow_downcast)
        tree_box = _TreeBox()
        outs = _call_class().apply(bridged, tree_box, *tensors)
        return jax.tree_util.tree_unflatten(tree_box.tree, outs)


def as_torch(jax_fn: Callable, *, allow_downcast: bool = False) -> Callable:
    """A JAX function as a differentiable torch function.

    Args:
      jax_fn: a function of JAX arrays (any pytree of them, plus hashable
        static arguments: Python numbers, strings, None) returning a pytree
        of arrays. It must be traceable by ``jax.jit``.
      allow_downcast: with JAX's 64-bit mode off, pass int64/float64 tensors
        (a torch ``long`` index, say) as their 32-bit types, as
        :func:`~torch2jax_ops.dlpack.to_jax` does (integers that do not fit
        raise). Without it such tensors raise TypeError naming the argument.

    Returns:
      ``f(*args, **kwargs)`` taking the same arguments with torch tensors in
      place of the arrays, and returning the same pytree with torch tensors.
      Tensors cross over DLPack without a copy. Gradients (``backward``,
      ``torch.autograd.grad``, ``torch.func.grad/vjp/jacrev``) come from
      ``jax.vjp``, forward mode (``torch.func.jvp/jacfwd``) from ``jax.jvp``,
      and ``torch.func.vmap`` runs ``jax.vmap``. One jit compilation per
      input shape/dtype and per value of the static arguments. Integer
      outputs are non-differentiable; integer inputs get no gradient.

    float64 tensors need JAX's 64-bit mode (``to_jax`` explains). The backward
    recomputes the forward inside ``jax.vjp`` (like ``torch.utils.checkpoint``).
    """
    if not callable(jax_fn):
        raise TypeError(f"as_torch: expected a callable, got {type(jax_fn).__name__}")
    return _AsTorch(jax_fn, allow_downcast)


# --------------------------------------------------------------------------- as_jax

class InPlaceError(RuntimeError):
    """A torch function bridged with :func:`as_jax` wrote to one of its inputs."""


def _shape_struct(tensor, allow_downcast: bool, who: str) -> jax.ShapeDtypeStruct:
    name = dtypes.name_of(tensor.dtype)
    if dtypes.needs_x64(name) and not jax.config.jax_enable_x64:
        if not allow_downcast:
            raise TypeError(f"{who}: the torch function returns {name}, which needs JAX's 64-bit "
                            f"mode (off). Enable it (jax.config.update('jax_enable_x64', True)), "
                            f"pass allow_downcast=True (values checked to fit), or give "
                            f"result_shape")
        name = dtypes.X64_DOWNCAST[name]
    return jax.ShapeDtypeStruct(tuple(tensor.shape), dtypes.jax_dtype(name))


class _AsJax:
    def __init__(self, torch_fn: Callable, result_shape: Any, vmap_method: str,
                 allow_downcast: bool):
        self.torch_fn, self.result_shape = torch_fn, result_shape
        self.vmap_method, self.allow_downcast = vmap_method, allow_downcast
        self.who = f"as_jax({getattr(torch_fn, '__name__', 'fn')})"
        self.functions: dict[tuple, Callable] = {}
        self.inferred: dict[tuple, tuple] = {}
        self.vjps: dict[tuple, _AsJax] = {}
        functools.update_wrapper(self, torch_fn)

    # -- the torch side, on concrete values --------------------------------------
    def run_torch(self, key: tuple, tensors: list, grad: bool = False):
        import torch

        versions = [t._version for t in tensors]
        args, kwargs = _join(key, tensors)
        with torch.set_grad_enabled(grad):
            result = self.torch_fn(*args, **kwargs)
        if [t._version for t in tensors] != versions:
            raise InPlaceError(f"{self.who}: the torch function modified an input in place; its "
                               f"inputs share JAX's (immutable) buffers. Clone inside the "
                               f"function before writing")
        return result

    def infer(self, key: tuple, avals: tuple):
        """Output structure and ShapeDtypeStructs from a call on meta (else zero) tensors."""
        import torch

        sig = (key, avals)
        if sig not in self.inferred:
            def example(device):
                return [torch.zeros(shape, dtype=dtypes.torch_dtype(dtype), device=device)
                        for shape, dtype in avals]
            try:
                result = self.run_torch(key, example("meta"))
            except InPlaceError:
                raise
            except Exception:  # noqa: BLE001 - not meta-capable: one real call on zeros
                result = self.run_torch(key, example("cpu"))
            leaves, tree = jax.tree_util.tree_flatten(result)
            if not all(isinstance(leaf, torch.Tensor) for leaf in leaves):
                raise TypeError(f"{self.who}: the torch function must return tensors (in any "
                                f"pytree), got {[type(leaf).__name__ for leaf in leaves]}")
            self.inferred[sig] = (tree, tuple(_shape_struct(leaf, self.allow_downcast, self.who)
                                              for leaf in leaves))
        return self.inferred[sig]

    def structure(self, key: tuple, arrays: list):
        """(output treedef, flat ShapeDtypeStructs) for these inputs."""
        if self.result_shape is None:
            avals = tuple((tuple(a.shape), dtypes.name_of(a.dtype)) for a in arrays)
            return self.infer(key, avals)
        spec = self.result_shape
        if callable(spec):
            args, kwargs = _join(key, [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in arrays])
            spec = spec(*args, **kwargs)
        leaves, tree = jax.tree_util.tree_flatten(spec)
        return tree, tuple(jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x)) for x in leaves)

    def host(self, key: tuple, structs: tuple):
        """The pure_callback body: JAX arrays -> torch -> JAX arrays of ``structs``."""
        def call(*arrays):
            tensors = [to_torch(a) for a in arrays]
            leaves = jax.tree_util.tree_leaves(self.run_torch(key, tensors))
            if len(leaves) != len(structs):
                raise ValueError(f"{self.who}: the torch function returned {len(leaves)} tensors, "
                                 f"result_shape says {len(structs)}")
            out = []
            for leaf, struct in zip(leaves, structs):
                if tuple(leaf.shape) != struct.shape:
                    raise ValueError(f"{self.who}: the torch function returned shape "
                                     f"{tuple(leaf.shape)} where {struct.shape} was expected")
                array = to_jax(leaf, allow_downcast=self.allow_downcast or
                               dtypes.name_of(leaf.dtype) != dtypes.name_of(struct.dtype))
                if array.dtype != struct.dtype:
                    raise TypeError(f"{self.who}: the torch function returned {leaf.dtype} "
                                    f"where {struct.dtype} was expected")
                out.append(array)
            return tuple(out)
        return call

    # -- the JAX side --------------------------------------------------------------
    def vjp(self, key: tuple) -> "_AsJax":
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
            vjp.who = f"{self.who}'s backward"
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
            return tuple(next(grads) if _inexact(x) else None for x in xs)

        fn.defvjp(fwd, bwd)
        self.functions[sig] = fn
        return fn

    def __call__(self, *args, **kwargs):
        import torch

        if any(isinstance(leaf, torch.Tensor) for leaf in jax.tree_util.tree_leaves((args, kwargs))):
            raise TypeError(f"{self.who}: got a torch.Tensor; call the wrapped function with JAX "
                            f"arrays (torch2jax_ops.dlpack.to_jax converts)")
        arrays, key = _split(args, kwargs, lambda x: isinstance(x, (jax.Array, np.ndarray)),
                             self.who)
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
