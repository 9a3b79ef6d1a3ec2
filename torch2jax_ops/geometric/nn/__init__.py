"""``torch_geometric.nn`` on JAX: layers as equinox modules, with PyG's math and parameter names.

Convolutions (:mod:`.conv`), aggregations (:mod:`.aggr`), norms (:mod:`.norm`)
and pooling (:mod:`.pool`) compute what the PyG layers of the same names
compute, with their call signatures and parameter names; ``MLP`` and the
:class:`MessagePassing` base class for your own layers are here too. Importing
this package registers every converter, so :func:`torch2jax_ops.nn.from_torch`
turns a trained PyG layer (or a whole model) into its port, weights shared
zero-copy over DLPack. Older PyG checkpoints load with
``GCNConv.from_state_dict`` / ``GATConv.from_state_dict``.
"""
from . import aggr, conv, norm, pool
from ._hetero_linear import HeteroDictLinear, HeteroLinear
from ._message_passing import MessagePassing
from ._models import MLP
from .aggr import *  # noqa: F401,F403  (as torch_geometric.nn exports them)
from .conv import *  # noqa: F401,F403
from .norm import *  # noqa: F401,F403
from .pool import *  # noqa: F401,F403

__all__ = (["aggr", "conv", "norm", "pool", "MessagePassing", "MLP", "HeteroLinear",
            "HeteroDictLinear"] + conv.__all__
           + aggr.__all__ + norm.__all__ + pool.__all__)
