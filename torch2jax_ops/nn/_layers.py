"""JAX versions of the torch.nn building blocks PyG models use, as equinox modules.

Each module's arrays carry the names torch gives them (``weight``, ``bias``,
``running_mean`` ...), so :func:`torch2jax_ops.nn.state_dict` of a port has the
torch module's ``state_dict`` keys. Every module computes what its torch
counterpart computes in ``eval()`` mode. Shapes follow torch: features last,
``[*, in_features]`` -> ``[*, out_features]``.
"""
from __future__ import annotations

from typing import Any, Callable, ClassVar, Optional

import equinox as eqx
import jax
import jax.numpy as jnp

from .._checking import check_bounds, check_index
from .._sharding import OutSharding, sharding_aware
from ._state import random_draw, record_update

__all__ = ["Linear", "Embedding", "Identity", "Activation", "Dropout", "LayerNorm", "BatchNorm1d",
           "BatchNorm2d", "BatchNorm3d",
           "Sequential", "ModuleList", "ACTIVATIONS", "dropout"]


class Linear(eqx.Module):
    """``torch.nn.Linear``: ``x [*, in] -> x @ weight.T + bias [*, out]``; ``weight [out, in]``."""
    weight: jax.Array
    bias: Optional[jax.Array] = None

    def __call__(self, x: jax.Array) -> jax.Array:
        y = x @ self.weight.T
        return y if self.bias is None else y + self.bias


class Embedding(eqx.Module):
    """``torch.nn.Embedding``: ``input [*] (integer ids) -> weight[input] [*, embedding_dim]``.

    ``weight [num_embeddings, embedding_dim]``. As torch: the ``padding_idx``
    row gets no gradient; ``scale_grad_by_freq`` divides each row's gradient
    by how often its id occurs in ``input``. Ids outside ``[0, num_embeddings)``
    raise ``IndexError`` on concrete input (under jit they give zero rows).
    """
    weight: jax.Array
    padding_idx: Optional[int] = eqx.field(static=True, default=None)
    scale_grad_by_freq: bool = eqx.field(static=True, default=False)

    # multi-device: a ShardedGraph's edge arrays route this call to shard_map (see _sharding)
    @sharding_aware
    def __call__(self, input: jax.Array, *, out_sharding: OutSharding = None) -> jax.Array:
        op = "Embedding"
        ids = jnp.asarray(input)
        check_index(ids, "input", op=op)
        num = self.weight.shape[0]
        check_bounds(ids, num, "input", target=f"the embedding table (num_embeddings={num})",
                     fix="an id must name a row of `weight`", op=op)
        rows = jnp.take(self.weight, jnp.where(ids < 0, num, ids), axis=0, mode="fill",
                        fill_value=0)
        if self.scale_grad_by_freq:
            freq = jnp.zeros((num + 1,), rows.dtype).at[jnp.clip(ids, 0, num)].add(1)
            scale = 1 / jnp.maximum(freq[jnp.clip(ids, 0, num)], 1)
            rows = jax.lax.stop_gradient(rows) + \
                (rows - jax.lax.stop_gradient(rows)) * scale[..., None]
        if self.padding_idx is not None:
            rows = jnp.where((ids == self.padding_idx)[..., None], jax.lax.stop_gradient(rows),
                             rows)
        return rows


class Identity(eqx.Module):
    """``torch.nn.Identity``."""

    def __call__(self, x: jax.Array, *args: Any, **kwargs: Any) -> jax.Array:
        return x


def _glu(x: jax.Array, dim: int) -> jax.Array:
    """``torch.nn.GLU``: ``a * sigmoid(b)`` of the two halves along ``dim``."""
    a, b = jnp.split(x, 2, axis=dim)
    return a * jax.nn.sigmoid(b)


def _softmax_dim(x: jax.Array, dim: Optional[int]) -> int:
    """torch's implicit softmax dim (``dim=None``): 0 for 0-, 1- and 3-D inputs, else 1."""
    if dim is not None:
        return dim
    return 0 if x.ndim in (0, 1, 3) else 1


def _gelu(x, approximate="none"):
    return jax.nn.gelu(x, approximate=approximate == "tanh")


#: torch activation class name -> (function, the constructor arguments it takes)
ACTIVATIONS: dict[str, tuple[Callable, tuple]] = {
    "ReLU": (jax.nn.relu, ()),
    "LeakyReLU": (lambda x, negative_slope=0.01: jax.nn.leaky_relu(x, negative_slope),
                  ("negative_slope",)),
    "ELU": (lambda x, alpha=1.0: jax.nn.elu(x, alpha), ("alpha",)),
    "GELU": (_gelu, ("approximate",)),
    "SiLU": (jax.nn.silu, ()),
    "Tanh": (jnp.tanh, ()),
    "Sigmoid": (jax.nn.sigmoid, ()),
    "Softplus": (lambda x, beta=1.0, threshold=20.0: jnp.where(
        x * beta > threshold, x, jax.nn.softplus(x * beta) / beta), ("beta", "threshold")),
    "ReLU6": (lambda x: jnp.clip(x, 0, 6), ()),
    "Hardtanh": (lambda x, min_val=-1.0, max_val=1.0: jnp.clip(x, min_val, max_val),
                 ("min_val", "max_val")),
    "SELU": (jax.nn.selu, ()),
    "CELU": (lambda x, alpha=1.0: jnp.maximum(x, 0) + jnp.minimum(
        0, alpha * jnp.expm1(x / alpha)), ("alpha",)),
    "Mish": (lambda x: x * jnp.tanh(jax.nn.softplus(x)), ()),
    "Hardswish": (lambda x: x * jnp.clip(x + 3, 0, 6) / 6, ()),
    "Hardsigmoid": (lambda x: jnp.clip(x + 3, 0, 6) / 6, ()),
    "LogSigmoid": (jax.nn.log_sigmoid, ()),
    "Softsign": (lambda x: x / (1 + jnp.abs(x)), ()),
    "Tanhshrink": (lambda x: x - jnp.tanh(x), ()),
    "Softshrink": (lambda x, lambd=0.5: jnp.where(
        x > lambd, x - lambd, jnp.where(x < -lambd, x + lambd, jnp.zeros((), x.dtype))),
        ("lambd",)),
    "Hardshrink": (lambda x, lambd=0.5: jnp.where(jnp.abs(x) > lambd, x,
                                                  jnp.zeros((), x.dtype)), ("lambd",)),
    "Threshold": (lambda x, threshold=0.0, value=0.0: jnp.where(
        x > threshold, x, jnp.asarray(value, x.dtype)), ("threshold", "value")),
    "GLU": (lambda x, dim=-1: _glu(x, dim), ("dim",)),
    "Softmax": (lambda x, dim=None: jax.nn.softmax(x, axis=_softmax_dim(x, dim)), ("dim",)),
    "LogSoftmax": (lambda x, dim=None: jax.nn.log_softmax(x, axis=_softmax_dim(x, dim)),
                   ("dim",)),
    "Softmin": (lambda x, dim=None: jax.nn.softmax(-x, axis=_softmax_dim(x, dim)), ("dim",)),
}


class Activation(eqx.Module):
    """An elementwise torch activation (``ReLU``, ``LeakyReLU``, ``ELU``, ``GELU``, ...).

    ``Activation("LeakyReLU", negative_slope=0.2)`` is ``torch.nn.LeakyReLU(0.2)``.
    """
    name: str = eqx.field(static=True)
    options: tuple = eqx.field(static=True, default=())

    def __init__(self, name: str, **options: Any):
        if name not in ACTIVATIONS:
            raise ValueError(f"Activation: unknown activation {name!r}; supported: "
                             f"{sorted(ACTIVATIONS)}")
        allowed = ACTIVATIONS[name][1]
        extra = sorted(set(options) - set(allowed))
        if extra:
            raise TypeError(f"Activation({name!r}): unexpected options {extra}; it takes {allowed}")
        self.name = name
        self.options = tuple(sorted(options.items()))

    def __call__(self, x: jax.Array) -> jax.Array:
        return ACTIVATIONS[self.name][0](x, **dict(self.options))


def dropout(x: jax.Array, p: float, training: bool, key: Any = None, *,
            op: str = "dropout", mask_shape: Optional[tuple] = None) -> jax.Array:
    """torch's dropout: in training, zero each entry with probability ``p`` and scale the
    rest by ``1 / (1 - p)``; the identity otherwise (or with ``p == 0``). ``mask_shape``
    (broadcast against ``x``): one draw per feature map (feature dropout)."""
    if not 0 <= p <= 1:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0:
        return x
    if p == 1:
        return jnp.zeros_like(x)
    shape = x.shape if mask_shape is None else tuple(mask_shape)
    keep = random_draw(op, "keep", shape, bool,
                       lambda k: jax.random.bernoulli(k, 1 - p, shape), key)
    scale = jnp.asarray(1.0 / (1.0 - p), x.dtype)
    return jnp.where(keep, x * scale, jnp.zeros((), x.dtype))


class Dropout(eqx.Module):
    """``torch.nn.Dropout``: the identity in eval mode; in training mode, :func:`dropout`.

    In training mode it needs a key: ``port(x, key=key)`` (or ``key=`` here,
    or an enclosing :func:`torch2jax_ops.nn.key_scope`).
    """
    p: float = eqx.field(static=True, default=0.5)
    training: bool = eqx.field(static=True, default=False)

    def __call__(self, x: jax.Array, *, key: Any = None) -> jax.Array:
        return dropout(x, self.p, self.training, key, op="Dropout")


class LayerNorm(eqx.Module):
    """``torch.nn.LayerNorm``: normalise over the last ``len(normalized_shape)`` axes.

    ``(x - mean) / sqrt(var + eps) * weight + bias`` with the biased variance.
    """
    normalized_shape: tuple = eqx.field(static=True)
    eps: float = eqx.field(static=True)
    weight: Optional[jax.Array] = None
    bias: Optional[jax.Array] = None

    def __call__(self, x: jax.Array) -> jax.Array:
        axes = tuple(range(x.ndim - len(self.normalized_shape), x.ndim))
        mean = jnp.mean(x, axis=axes, keepdims=True)
        var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
        y = (x - mean) * jax.lax.rsqrt(var + self.eps)
        if self.weight is not None:
            y = y * self.weight
        if self.bias is not None:
            y = y + self.bias
        return y


class BatchNorm1d(eqx.Module):
    """``torch.nn.BatchNorm1d``: ``x [N, C]`` or ``[N, C, L]``.

    Eval mode: ``(x - running_mean) / sqrt(running_var + eps) * weight + bias``;
    the running statistics are buffers (no gradient flows into them).
    Training mode (or ``track_running_stats=False``): the batch's own biased
    statistics, as torch; in training mode the running statistics move by
    ``momentum`` (``None``: the cumulative average over ``num_batches_tracked``)
    with the unbiased batch variance -- collect the updated module with
    :func:`torch2jax_ops.nn.stateful_call`.
    """
    eps: float = eqx.field(static=True)
    weight: Optional[jax.Array] = None
    bias: Optional[jax.Array] = None
    running_mean: Optional[jax.Array] = None
    running_var: Optional[jax.Array] = None
    num_batches_tracked: Optional[jax.Array] = None
    momentum: Optional[float] = eqx.field(static=True, default=0.1)
    training: bool = eqx.field(static=True, default=False)

    #: the input ranks accepted, and how the error names them
    _ndims: ClassVar[tuple[int, ...]] = (2, 3)
    _layouts = "a 2-D [N, C] or 3-D [N, C, L]"

    def __call__(self, x: jax.Array) -> jax.Array:
        op = type(self).__name__
        if x.ndim not in self._ndims:
            raise ValueError(f"{op}: expected {self._layouts} input, got shape "
                             f"{tuple(x.shape)}")
        shape = (1, -1) + (1,) * (x.ndim - 2)
        if self.training or self.running_mean is None:
            axes = (0,) + tuple(range(2, x.ndim))
            count = x.size // x.shape[1]
            if self.training and count <= 1:
                raise ValueError(f"{op}: expected more than 1 value per channel when "
                                 f"training, got input size {tuple(x.shape)}")
            mean = jnp.mean(x, axis=axes, keepdims=True)
            var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
            if self.training and self.running_mean is not None:
                unbiased = var.reshape(-1) * (count / max(count - 1, 1))
                record_update(self, lambda m: m._moved(mean.reshape(-1), unbiased))
        else:
            assert self.running_var is not None  # tracked together with running_mean
            mean = jax.lax.stop_gradient(self.running_mean).reshape(shape)
            var = jax.lax.stop_gradient(self.running_var).reshape(shape)
        y = (x - mean) * jax.lax.rsqrt(var + self.eps)
        if self.weight is not None:
            y = y * self.weight.reshape(shape)
        if self.bias is not None:
            y = y + self.bias.reshape(shape)
        return y

    def _moved(self, mean: jax.Array, var: jax.Array) -> BatchNorm1d:
        """This module after one training step's update of its running statistics."""
        tracked = self.num_batches_tracked
        tracked = None if tracked is None else tracked + 1
        if self.momentum is None:
            m = 1.0 / tracked.astype(mean.dtype) if tracked is not None else 0.0
        else:
            m = self.momentum
        mean, var = jax.lax.stop_gradient(mean), jax.lax.stop_gradient(var)
        # only called for a module that tracks running statistics (see __call__)
        assert self.running_mean is not None and self.running_var is not None
        rm = ((1 - m) * self.running_mean + m * mean).astype(self.running_mean.dtype)
        rv = ((1 - m) * self.running_var + m * var).astype(self.running_var.dtype)
        return eqx.tree_at(lambda b: (b.running_mean, b.running_var, b.num_batches_tracked),
                           self, (rm, rv, tracked), is_leaf=lambda v: v is None)


class BatchNorm2d(BatchNorm1d):
    """``torch.nn.BatchNorm2d``: :class:`BatchNorm1d` over ``x [N, C, H, W]``."""
    _ndims = (4,)
    _layouts = "a 4-D [N, C, H, W]"


class BatchNorm3d(BatchNorm1d):
    """``torch.nn.BatchNorm3d``: :class:`BatchNorm1d` over ``x [N, C, D, H, W]``."""
    _ndims = (5,)
    _layouts = "a 5-D [N, C, D, H, W]"


class _Indexed:
    """A tuple of modules whose pytree keys are bare positions, as torch names them.

    torch calls the first layer of a Sequential / ModuleList ``"0"``, not
    ``"layers.0"``: the children's key paths here are ``[0]``, ``[1]`` ...
    """
    __slots__ = ("_items",)

    def __init__(self, items: Any):
        self._items = tuple(items)

    def __getitem__(self, i: int) -> Any:
        return self._items[i]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self):
        return iter(self._items)

    def __repr__(self) -> str:
        inner = ", ".join(type(m).__name__ for m in self._items)
        return f"{type(self).__name__}({inner})"

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        jax.tree_util.register_pytree_with_keys(
            cls,
            lambda m: (tuple((jax.tree_util.SequenceKey(i), c) for i, c in enumerate(m._items)),
                       None),
            lambda _, children: cls(children),
            flatten_func=lambda m: (m._items, None))


class Sequential(_Indexed):
    """``torch.nn.Sequential``: the layers applied in order; ``seq[i]`` is torch's ``i``."""

    def __call__(self, x: Any) -> Any:
        for layer in self._items:
            x = layer(x)
        return x


class ModuleList(_Indexed):
    """``torch.nn.ModuleList``: a container of modules; ``modules[i]`` is torch's ``i``."""
