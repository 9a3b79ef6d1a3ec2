"""The fx path of ``from_torch``: any torch module, its forward replayed in JAX.

How it works. A module with no converter of its own becomes a
:class:`TracedModule`: its registered submodules are converted (they stay
whole: ``call_module`` leaves), its other parameters and buffers become JAX
arrays under their torch names. Calling the port runs the module's own
``forward`` under a ``torch.fx`` tracer whose proxies carry JAX values
("lockstep" tracing): every ``call_function`` / ``call_method`` node is looked
up once in the mapping table (:mod:`.._registry`) and evaluated in JAX on the
spot. So

* shapes are concrete while the forward runs: ``x.size(-1)``, ``x.dim() == 1``,
  ``isinstance(x, Tensor)``, loops over ``range(x.size(0))`` work as in torch;
* control flow on a tensor's *values* raises, naming your file and line
  (one compiled program serves every input, so it cannot branch on data);
* under ``jax.jit`` all of this happens once, while JAX traces: the compiled
  program is the JAX ops alone, as a hand-written port would be.

Arguments that are not arrays (``None``, ints, strings, flags) are seen by the
forward as they are; arrays and containers of them become proxies.

One private module per job, each importing only those listed before it:

* :mod:`._table` -- the mapping table resolved to objects (:func:`resolve`);
* :mod:`._errors` -- where a forward failed: the user's line in the messages;
* :mod:`._program` -- what a port replays: the torch forward, its arguments, the tensors
  it reads, where tracing stops (``is_leaf``);
* :mod:`._idioms` -- torch idioms that need the trace's bookkeeping (in-place updates
  and views, sorted ids, pooled row counts, counted masks, width-dependent aggregations);
* :mod:`._autograd` -- ``torch.autograd.grad`` in a forward, custom autograd Functions;
* :mod:`._proxy` -- the proxy class: a proxy carrying its JAX value;
* :mod:`._tracer` -- the tracer and its control flow;
* :mod:`._port` -- the ports (:class:`TracedModule`, :class:`TorchCallable`,
  :class:`Unsupported`) and ``trace_with``, which runs one;
* :mod:`._fallback` -- the converter of every module without one of its own
  (registered on import).

This package re-exports the names the rest of torch2jax_ops imports from it.
"""
from .._state import key_scope
from ._table import resolve
from ._port import TorchCallable, TracedModule, Unsupported
from ._program import _Program  # noqa: F401  (geometric's traced MessagePassing)
from ._fallback import _children  # noqa: F401  (registers the fallback converter; geometric)

__all__ = ["TracedModule", "TorchCallable", "Unsupported", "resolve", "key_scope"]
