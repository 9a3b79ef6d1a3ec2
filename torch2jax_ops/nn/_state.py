"""What a training-mode call needs besides its inputs: random keys, and buffers it updates.

* Random ops (dropout) draw subkeys from the innermost :func:`key_scope`, a
  counter folded into the port call's ``key=``: the same key gives the same
  masks in the same order, and no two ops share one.
* Inside :func:`replay_scope` they take the draws a torch run recorded instead,
  in the same order (:func:`random_draw`): ``compare_modules`` checks a model
  that draws random numbers (DGI's ``randperm`` corruption, a dropout left
  in training mode) draw for draw against torch.
* Batch norm in training mode normalises with the batch's statistics and
  updates its running statistics, as torch does in place. JAX modules are
  immutable, so :func:`stateful_call` returns the updated module beside the
  output: ``out, port = stateful_call(port, x, edge_index, key=key)``.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Callable, Iterator, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["key_scope", "next_key", "record_update", "stateful_call", "Draw", "replay_scope",
           "random_draw", "RANDOM_KINDS"]

_KEY: contextvars.ContextVar = contextvars.ContextVar("torch2jax_ops_key", default=None)
_UPDATES: contextvars.ContextVar = contextvars.ContextVar("torch2jax_ops_updates", default=None)
_REPLAY: contextvars.ContextVar = contextvars.ContextVar("torch2jax_ops_replay", default=None)

# What a random op draws, by kind: the array both sides exchange in a replay. Each op draws
# its primitive and computes the rest itself (``normal_(m, s)`` is ``m + s * z``), so a
# recorded draw means the same on both sides.
RANDOM_KINDS = {
    "uniform": "floats on [0, 1) (rand, rand_like, uniform_: from + (to - from) * u)",
    "normal": "standard normal floats (randn, randn_like, normal, normal_: mean + std * z)",
    "randint": "the integers themselves (randint, randint_like)",
    "randperm": "the permutation itself",
    "bernoulli": "the 0/1 draws (bernoulli, bernoulli_)",
    "keep": "dropout's keep mask (True: kept and scaled by 1 / (1 - p))",
}


class Draw(NamedTuple):
    """One recorded random draw: its kind (:data:`RANDOM_KINDS`), the op that drew it, the
    values (a NumPy array)."""
    kind: str
    op: str
    value: np.ndarray


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
            f"{op}: the port draws random numbers here, so it needs a PRNG key: call the "
            f"port with key=jax.random.key(seed) (a new key per step). Dropout draws only "
            f"in training mode (convert after model.eval(), or pass training=self.training); "
            f"torch2jax_ops.parity.compare_modules replays torch's own draws")
    state[1] += 1
    return jax.random.fold_in(state[0], state[1])


@contextlib.contextmanager
def replay_scope(draws: Sequence[Draw]) -> Iterator[list]:
    """Within the block, random ops return ``draws`` in order instead of drawing.

    Yields the list of draws taken so far. An op that asks for a draw of another kind or
    shape than the next recorded one, or for a draw past the last, raises
    ``ValueError`` naming both sides: a port that draws in another order than the
    original cannot be checked draw for draw."""
    taken: list = []
    token = _REPLAY.set((tuple(draws), taken))
    try:
        yield taken
    finally:
        _REPLAY.reset(token)


def random_draw(op: str, kind: str, shape: tuple, dtype: Any,
                sample: Callable[[jax.Array], jax.Array], key: Optional[jax.Array] = None
                ) -> jax.Array:
    """The random array of a random op: ``sample(key)`` (by default a subkey from
    :func:`next_key`), or inside :func:`replay_scope` the next recorded draw, which must be
    of the same ``kind`` and ``shape``."""
    state = _REPLAY.get()
    if state is None:
        return sample(next_key(op) if key is None else key)
    draws, taken = state
    shape = tuple(int(d) for d in shape)
    if len(taken) >= len(draws):
        raise ValueError(
            f"{op}: the port draws random numbers ({kind}, shape {shape}) after the "
            f"{len(draws)} draw(s) the torch run made: the two do not draw in the same way. "
            f"torch's draws: {[(d.op, d.value.shape) for d in draws]}")
    draw = draws[len(taken)]
    if draw.kind != kind or tuple(draw.value.shape) != shape:
        raise ValueError(
            f"{op}: the port's random draw #{len(taken) + 1} is {kind} of shape {shape}, "
            f"but torch's was {draw.kind} of shape {tuple(draw.value.shape)} (from "
            f"{draw.op}): the two do not draw in the same order, so they cannot be compared "
            f"draw for draw")
    taken.append(draw)
    return jnp.asarray(draw.value, dtype)


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
