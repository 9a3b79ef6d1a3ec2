"""torch modules as JAX modules, and torch-style names for the arrays of a JAX module.

* :func:`from_torch` converts a torch module: registered layers (``Linear``,
  activations, ``Dropout``, ``LayerNorm``, ``BatchNorm1d``, ``Sequential``,
  ``ModuleList``, and PyG's layers from :mod:`torch2jax_ops.geometric.nn`)
  directly, any other module through ``torch.fx``;
* :func:`register_converter`, :func:`register_function`,
  :func:`register_method`: add your own ports to the one registry (a taken key
  raises :class:`RegistryConflict` unless ``replace=True``; :func:`unregister`);
* the equinox modules of the torch.nn layers (``Linear`` ..., the recurrent layers
  ``RNN``/``LSTM``/``GRU`` and their cells, ``MultiheadAttention``, convolutions,
  pools, padding, norms; ``migration_guide/torch_nn.md`` lists them all);
* naming: a JAX module's array leaves get the dotted names torch gives
  parameters and buffers (attribute names joined by dots, list positions as
  numbers), so an ``mlp.lins[0].weight`` leaf is ``"lins.0.weight"``, exactly
  the ``state_dict`` key of the torch module it was ported from.
"""
from . import _functions, _fx, _torch_modules  # noqa: F401  (register the table, fx, converters)
from ._attention import MultiheadAttention
from ._conv import (Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d,
                    PReLU)
from ._distance import CosineSimilarity, PairwiseDistance
from ._embedding_bag import EmbeddingBag
from ._pad import ConstantPad, Pad
from ._pool import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d,
                    AdaptiveMaxPool2d, AdaptiveMaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d,
                    MaxPool1d, MaxPool2d, MaxPool3d)
from ._rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from ._convert import Converter, UnsupportedModuleError, from_torch, supported_modules
from ._fx import TracedModule
from ._layers import (Activation, BatchNorm1d, BatchNorm2d, BatchNorm3d, Dropout, Embedding,
                      Identity, LayerNorm, Linear, ModuleList, Sequential)
from ._norms import GroupNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, RMSNorm
from ._reshape import Bilinear, FeatureDropout, Flatten, Unflatten
from ._naming import named_arrays, named_parameters, state_dict
from ._registry import (RegistryConflict, register_converter, register_function,
                        register_method, unregister)
from ._state import key_scope, stateful_call
from ..tree import leaf_name

__all__ = ["from_torch", "supported_modules", "register_converter", "register_function",
           "register_method", "unregister", "RegistryConflict", "Converter",
           "UnsupportedModuleError", "TracedModule", "key_scope",
           "stateful_call",
           "Linear", "Embedding", "Identity", "Activation", "Dropout", "LayerNorm", "BatchNorm1d",
           "Sequential", "ModuleList",
           "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell", "MultiheadAttention",
           "Conv1d", "Conv2d", "Conv3d", "PReLU", "MaxPool1d", "MaxPool2d", "AvgPool1d",
           "AvgPool2d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool1d",
           "AdaptiveMaxPool2d", "BatchNorm2d", "BatchNorm3d", "GroupNorm", "InstanceNorm1d",
           "InstanceNorm2d", "InstanceNorm3d", "RMSNorm", "Bilinear", "FeatureDropout", "Flatten",
           "Unflatten", "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d", "AdaptiveMaxPool3d",
           "Pad", "ConstantPad", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
           "EmbeddingBag", "CosineSimilarity", "PairwiseDistance",
           "leaf_name", "named_arrays", "named_parameters", "state_dict"]
