"""torch's native scatter API on JAX: what PyG 2.x calls instead of torch_scatter.

Port ``torch.scatter_reduce(x, 0, index, src, "amax", include_self=False)``
(or ``x.scatter_reduce_(...)``) as
``torch2jax_ops.torch.scatter_reduce(x, 0, index, src, "amax", include_self=False)``:
same signatures, torch's index rules (no broadcasting; only the index-shaped
block of ``src`` is read), torch's CPU numerics and torch's gradient rules
(``include_self``, ties of ``amax``/``amin``, ``prod`` at zeros, ``mean``'s
count). The in-place methods (``scatter_reduce_``, ``index_add_`` ...) are
these functions: JAX arrays are immutable, so rebind the result.

* :func:`scatter_reduce`, :func:`scatter_add`, :func:`scatter` (``src`` or
  ``value``; ``reduce`` "add"/"multiply"), :func:`gather`;
* :func:`index_add`, :func:`index_reduce`, :func:`index_select`.

Out-of-range ids raise :class:`IndexError` on a concrete index; under
``jax.jit`` the bad elements are dropped (gathers read 0), and
:func:`torch2jax_ops.checked` raises instead. Private modules: ``_scatter``
and ``_index`` (the ops), ``_reduce`` (the one reduction core, on the
torch_scatter mirror's ``Groups`` planner), ``_validate`` (torch's rules).
"""
from ._index import index_add, index_reduce, index_select
from ._scatter import gather, scatter, scatter_add, scatter_reduce

__all__ = ["scatter_reduce", "scatter_add", "scatter", "gather",
           "index_add", "index_reduce", "index_select"]
