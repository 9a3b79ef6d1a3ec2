"""What a training-mode call needs besides its inputs: random keys, and buffers it updates.

* Random ops (dropout) draw subkeys from the innermost :func:`key_scope`, a
  counter folded into the port call's ``key=``: the same key gives the same
  masks in the same order, and no two ops share one.
* Batch norm in training mode normalises with the batch's statistics and
  updates its running statistics, as torch does in place. JAX modules are
  immutable, so :func:`stateful_call` returns the updated module beside the
  output: ``out, port = stateful_call(port, x, edge_index, key=key)``.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Callable, Iterator

import jax

__all__ = ["key_scope", "next_key", "record_update", "stateful_call"]

_KEY: contextvars.ContextVar = contextvars.ContextVar("torch2jax_ops_key", default=None)
_UPDATES: contextvars.ContextVar = contextvars.ContextVar("torch2jax_ops_updates", default=None)


@contextlib.contextmanager
def key_scope(key: Any) -> Iterator[None]:
    """Within the block, random ops (dropout in training mode) draw subkeys of ``key``."""
    token = _KEY.set(None if key is None else [key, 0])
    try:
        yield
    finally:
        _KEY.reset(token)


def next_key(op: str) -> jax.Array:
    """A fresh subkey for a random op, from the innermost :func:`key_scope`."""
    state = _KEY.get()
    if state is None:
        raise ValueError(
            f"{op}: this module is in training mode and draws random numbers (dropout), so it "
            f"needs a PRNG key: call the port with key=jax.random.key(seed) (a new key per "
            f"step), or convert the torch module after model.eval()")
    state[1] += 1
    return jax.random.fold_in(state[0], state[1])


def record_update(module: Any, update: Callable[[Any], Any]) -> None:
    """Called by a module whose buffers change in this call (batch norm in training mode).

    ``update(latest) -> new module``: applied to the module's latest version,
    so a module called twice in one forward updates twice, as in torch.
    Without an active :func:`stateful_call` the update is dropped (the output
    is the same either way).
    """
    updates = _UPDATES.get()
    if updates is not None:
        latest = updates.get(id(module), (module, module))[1]
        updates[id(module)] = (module, update(latest))


def stateful_call(module: Any, *args: Any, key: Any = None, **kwargs: Any) -> tuple[Any, Any]:
    """``module(*args, **kwargs)`` and ``module`` with the buffers the call updated.

    The training-mode counterpart of torch's in-place buffer updates (batch
    norm's ``running_mean``, ``running_var``, ``num_batches_tracked``)::

        def step(port, opt_state, x, edge_index, y, key):
            def loss(p):
                out, new = stateful_call(p, x, edge_index, key=key)
                return cross_entropy(out, y), new
            (value, port), grads = jax.value_and_grad(loss, has_aux=True)(port)
            ...

    Works under ``jax.jit``; ``key`` feeds dropout.
    """
    updates: dict = {}
    token = _UPDATES.set(updates)
    try:
        with key_scope(key) if key is not None else contextlib.nullcontext():
            out = module(*args, **kwargs)
    finally:
        _UPDATES.reset(token)
    if not updates:
        return out, module
    new = jax.tree_util.tree_map(lambda m: updates[id(m)][1] if id(m) in updates else m,
                                 module, is_leaf=lambda m: id(m) in updates)
    return out, new
