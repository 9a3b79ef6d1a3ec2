"""torch.autograd inside a traced forward.

``torch.autograd.grad`` in a forward (forces as ``-d energy / d pos``, an inner
optimiser) is replayed as ``jax.vjp`` of the part of the recorded graph between its
inputs and outputs (:func:`autograd_grad`). A custom ``torch.autograd.Function`` has a
backward of its own, which a replay of its forward would not give: it is refused,
naming the class and the user's line, unless its backward is the gradient of its
forward (:data:`_PLAIN_GRADIENT_FUNCTIONS`) (:func:`_refuse_autograd_functions`).
"""
from __future__ import annotations

import contextlib
import inspect
from typing import Any, Callable, Iterator

import jax

from .._convert import UnsupportedModuleError
from ._errors import _error, user_frame
from ._idioms import _mutates

__all__ = ["autograd_grad"]


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


def autograd_grad(tracer: Any, node: Any) -> Any:
    """``torch.autograd.grad(outputs, inputs, grad_outputs=None, ...)`` in a forward
    (EquilibriumAggregation's inner optimiser, forces as ``-d energy / d pos``).

    The graph recorded so far holds how ``outputs`` were computed from ``inputs``:
    those nodes are evaluated again as a function of the inputs, and ``jax.vjp``
    of it gives the gradients (differentiable further, as with
    ``create_graph=True``; without it they are constants, as torch detaches
    them). An input the outputs do not depend on gets None with
    ``allow_unused=True`` (torch's answer) and is an error otherwise. ``tracer``: the
    running trace (its ``values``, ``evaluate`` and ``program``)."""
    import torch.fx as fx

    bound = inspect.signature(_torch_grad_signature).bind(*node.args, **node.kwargs)
    bound.apply_defaults()
    given = bound.arguments
    outs = given["outputs"]
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    ins = given["inputs"]
    ins = list(ins) if isinstance(ins, (list, tuple)) else [ins]
    if not all(isinstance(n, fx.Node) for n in outs + ins):
        raise _error(node, f"{tracer.program.name}: torch.autograd.grad: `outputs` and "
                           f"`inputs` must be tensors computed in this forward")
    # a tensor made outside the graph (torch.zeros(..., requires_grad=True) with
    # constant arguments) is a constant, read through one get_attr node per use
    groups = [_same_value(n) for n in ins]
    order = _subgraph(outs, set().union(*groups))
    reached = set().union(*(_ancestors(o) for o in outs))
    used = {n for n, group in zip(ins, groups) if group & reached}
    for n in ins:
        if n not in used and not given["allow_unused"]:
            raise _error(node, f"{tracer.program.name}: torch.autograd.grad: one of the "
                               f"differentiated tensors ({n.name}) was not used to "
                               f"compute the outputs (torch: set allow_unused=True)")

    def replay(*values: Any) -> list:
        saved: dict = {}

        def put(n: Any, v: Any) -> None:
            saved.setdefault(n, tracer.values[n])
            tracer.values[n] = v

        try:
            for group, v in zip(groups, values):
                for n in group:
                    put(n, v)
            for n in order:
                result = tracer.evaluate(n)
                put(n, result)
                if _mutates(n.op, n.target) and n.args and isinstance(n.args[0],
                                                                       fx.Node):
                    put(n.args[0], result)
            return [tracer.values[o] for o in outs]
        finally:
            tracer.values.update(saved)

    primals = [tracer.values[n] for n in ins]
    values, pullback = jax.vjp(replay, *primals)
    cots = given["grad_outputs"]
    if cots is None:
        cots = [None] * len(outs)
    elif not isinstance(cots, (list, tuple)):
        cots = [cots]
    cots = [jax.numpy.ones_like(v) if c is None else tracer.values[c]
            if isinstance(c, fx.Node) else jax.numpy.asarray(c, v.dtype)
            for v, c in zip(values, cots)]
    grads = pullback(cots)
    if not given["create_graph"]:
        grads = [jax.lax.stop_gradient(g) for g in grads]
    return tuple(g if n in used else None for n, g in zip(ins, grads))


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
