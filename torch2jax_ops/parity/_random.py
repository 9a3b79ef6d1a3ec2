"""torch's random draws, recorded and replayed: a model that draws random numbers in its
forward (Deep Graph Infomax's ``x[torch.randperm(n)]`` corruption, ``F.dropout(x, p)``
left at torch's default ``training=True``) is compared draw for draw.

:func:`torch_draws` patches torch's random functions for the length of a block. Each one
draws its primitive (:data:`torch2jax_ops.nn._state.RANDOM_KINDS`: a uniform ``u``, a
standard normal ``z``, the integers, a permutation, 0/1 draws, dropout's keep mask) and
computes the rest from it by the same formula as the port's op (``uniform_(a, b)`` is
``a + (b - a) * u``, dropout is ``where(keep, x * (1 / (1 - p)), 0)``); recorded, the
primitives are what the port's ops take inside :func:`~torch2jax_ops.nn._state.replay_scope`.
Replayed (the float64 reference run), torch takes them back in order.

Only calls made through the ``torch`` / ``torch.nn.functional`` / ``Tensor`` attributes
are seen (``from torch.nn.functional import dropout`` at a module's import binds the
original); a draw torch makes unseen leaves the port asking for one more draw than torch
recorded, which is an error that says so, not a silent mismatch.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Optional, Sequence

from ..nn._state import Draw
from ._devices import device_of, tensor_like

__all__ = ["torch_draws"]


class _Stream:
    """The draws of one torch run: appended (recording) or taken in order (replaying)."""

    def __init__(self, replay: Optional[Sequence[Draw]]) -> None:
        self.replay = None if replay is None else list(replay)
        self.draws: list = []

    def take(self, kind: str, op: str, make: Callable[[], Any]) -> Any:
        import torch

        fresh = make()
        if self.replay is None:
            value = fresh.detach().cpu()
            if value.dtype in (torch.float16, torch.bfloat16):
                value = value.float()
            self.draws.append(Draw(kind, op, value.numpy().copy()))
            return fresh
        index = len(self.draws)
        if index >= len(self.replay) or self.replay[index].kind != kind \
                or self.replay[index].value.shape != tuple(fresh.shape):
            raise RuntimeError(
                f"torch {op}: draw #{index + 1} ({kind}, shape {tuple(fresh.shape)}) differs "
                f"from the recorded run's: the model does not draw the same way twice")
        draw = self.replay[index]
        self.draws.append(draw)
        return tensor_like(draw.value, fresh)  # the dtype and device asked for


def _patches(stream: _Stream) -> list:
    """(owner, name, replacement) for every random function seen."""
    import torch
    import torch.nn.functional as F

    orig = {name: getattr(torch, name) for name in (
        "rand", "randn", "rand_like", "randn_like", "randint", "randint_like", "randperm",
        "bernoulli", "normal", "dropout")}
    tensor = {name: getattr(torch.Tensor, name) for name in (
        "bernoulli_", "uniform_", "normal_")}
    functional = {name: getattr(F, name) for name in (
        "dropout", "dropout1d", "dropout2d", "dropout3d", "rrelu")}

    def factory(name: str, kind: str) -> Callable:
        def drawn(*args: Any, **kwargs: Any) -> Any:
            return stream.take(kind, name, lambda: orig[name](*args, **kwargs))
        return drawn

    # the draws for a tensor are made on its device (a CUDA model draws on the GPU)
    def uniform(shape: tuple, dtype: Any, device: Any, op: str) -> Any:
        return stream.take("uniform", op, lambda: orig["rand"](shape, dtype=dtype,
                                                               device=device))

    def standard_normal(shape: tuple, dtype: Any, device: Any, op: str) -> Any:
        return stream.take("normal", op, lambda: orig["randn"](shape, dtype=dtype,
                                                               device=device))

    def normal(mean: Any, std: Any = 1.0, size: Any = None, **kwargs: Any) -> Any:
        if size is not None:
            z = stream.take("normal", "normal", lambda: orig["randn"](size, **{
                k: v for k, v in kwargs.items() if k in ("dtype", "device")}))
            return mean + std * z
        m, s = torch.as_tensor(mean), torch.as_tensor(std)
        shape = torch.broadcast_shapes(m.shape, s.shape)
        like = m if isinstance(mean, torch.Tensor) else s  # the tensor argument
        return (m + s * standard_normal(shape, like.dtype, device_of(like), "normal")).detach()

    # the in-place fills overwrite `self`: torch's gradient to its old value is zero, which
    # copy_ of a detached value gives (a leaf that requires grad is refused, as by torch)
    def bernoulli_(self: Any, p: Any = 0.5, **kwargs: Any) -> Any:
        drawn = stream.take("bernoulli", "bernoulli_",
                            lambda: tensor["bernoulli_"](torch.empty_like(self), p, **kwargs))
        return self.copy_(drawn.detach())

    def uniform_(self: Any, *args: Any, **kwargs: Any) -> Any:
        lo = kwargs.get("from", args[0] if args else 0.0)
        hi = kwargs.get("to", args[1] if len(args) > 1 else 1.0)
        u = uniform(tuple(self.shape), self.dtype, device_of(self), "uniform_")
        return self.copy_((lo + (hi - lo) * u).detach())

    def normal_(self: Any, mean: float = 0.0, std: float = 1.0, **kwargs: Any) -> Any:
        z = standard_normal(tuple(self.shape), self.dtype, device_of(self), "normal_")
        return self.copy_((mean + std * z).detach())

    def written(input: Any, out: Any, inplace: bool) -> Any:
        return input.copy_(out) if inplace else out  # differentiable, as torch's in-place

    def masked(input: Any, p: float, training: bool, inplace: bool, mask_shape: tuple,
               op: str, original: Callable) -> Any:
        """Dropout with a keep mask of ``mask_shape`` (broadcast against ``input``)."""
        if not training or p == 0 or p == 1 or not 0 <= p <= 1:
            return original()  # no draw (or torch's own error for a bad p)
        device = device_of(input)  # the mask next to the input
        keep = stream.take("keep", op, lambda: tensor["bernoulli_"](
            torch.empty(mask_shape, device=device), 1 - p).bool())
        unbatched = len(mask_shape) > input.dim()  # dropout1d of [C, L]: the mask is [1, C, 1]
        keep = keep[0] if unbatched else keep
        out = torch.where(keep, input * (1.0 / (1.0 - p)),
                          torch.zeros((), dtype=input.dtype, device=device))
        return written(input, out, inplace)

    def dropout(input: Any, p: float = 0.5, training: bool = True,
                inplace: bool = False) -> Any:
        return masked(input, p, training, inplace, tuple(input.shape), "dropout",
                      lambda: functional["dropout"](input, p, training, inplace))

    def torch_dropout(input: Any, p: float, train: bool) -> Any:
        return masked(input, p, train, False, tuple(input.shape), "dropout",
                      lambda: orig["dropout"](input, p, train))

    def feature(name: str) -> Callable:
        """dropout1d/2d/3d: one draw per (batch, channel), as the port's feature dropout."""
        def drop(input: Any, p: float = 0.5, training: bool = True,
                 inplace: bool = False) -> Any:
            shape = tuple(input.shape)
            shape = (1,) + shape if name == "dropout1d" and input.dim() == 2 else shape
            return masked(input, p, training, inplace, shape[:2] + (1,) * (len(shape) - 2),
                          name, lambda: functional[name](input, p, training, inplace))
        return drop

    def rrelu(input: Any, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
              training: bool = False, inplace: bool = False) -> Any:
        if not training:
            return functional["rrelu"](input, lower, upper, training, inplace)
        u = uniform(tuple(input.shape), input.dtype, device_of(input), "rrelu")
        return written(input, torch.where(input > 0, input, input * (lower + (upper - lower) * u)),
                       inplace)

    return [
        (torch, "rand", factory("rand", "uniform")),
        (torch, "randn", factory("randn", "normal")),
        (torch, "rand_like", factory("rand_like", "uniform")),
        (torch, "randn_like", factory("randn_like", "normal")),
        (torch, "randint", factory("randint", "randint")),
        (torch, "randint_like", factory("randint_like", "randint")),
        (torch, "randperm", factory("randperm", "randperm")),
        (torch, "bernoulli", factory("bernoulli", "bernoulli")),
        (torch, "normal", normal),
        (torch, "dropout", torch_dropout),
        (torch.Tensor, "bernoulli_", bernoulli_),
        (torch.Tensor, "uniform_", uniform_),
        (torch.Tensor, "normal_", normal_),
        (F, "dropout", dropout),
        (F, "dropout1d", feature("dropout1d")),
        (F, "dropout2d", feature("dropout2d")),
        (F, "dropout3d", feature("dropout3d")),
        (F, "rrelu", rrelu),
    ]


@contextlib.contextmanager
def torch_draws(replay: Optional[Sequence[Draw]] = None) -> Iterator[list]:
    """Within the block, torch's random functions record their draws into the yielded
    list, or, given ``replay``, return those draws in order (cast to the dtype asked for)."""
    stream = _Stream(replay)
    patches = _patches(stream)
    # an inherited attribute (Tensor.normal_ lives on torch._C.TensorBase) is deleted again
    saved = [(owner, name, owner.__dict__.get(name, _INHERITED)) for owner, name, _ in patches]
    try:
        for owner, name, replacement in patches:
            setattr(owner, name, replacement)
        yield stream.draws
    finally:
        for owner, name, original in saved:
            if original is _INHERITED:
                delattr(owner, name)
            else:
                setattr(owner, name, original)


_INHERITED = object()
