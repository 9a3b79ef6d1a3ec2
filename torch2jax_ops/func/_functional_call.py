"""``torch.func.functional_call``: call a module pytree with some arrays replaced by torch name."""
from __future__ import annotations

from typing import Any, Optional

import jax

from .._checking import is_array
from ..tree import leaf_name


def functional_call(module: Any, parameter_and_buffer_dicts: Any, args: Any = None,
                    kwargs: Optional[dict] = None, *, tie_weights: bool = True,
                    strict: bool = False) -> Any:
    """``torch.func.functional_call``: call ``module`` with some arrays replaced by name.

    ``module`` is a callable pytree (an equinox module, the modules of
    ``torch2jax_ops.nn`` / ``geometric.nn``); names are torch's dotted
    ``state_dict`` keys (see :func:`torch2jax_ops.nn.state_dict`).
    ``parameter_and_buffer_dicts`` is a dict or a sequence of dicts (keys may
    not repeat across them). ``args`` is a tuple, or a single argument.

    * ``strict=True``: every array of the module must be given.
    * ``tie_weights=True``: a leaf that is the same array object as a replaced
      one is replaced too (torch's tied weights); giving tied names different
      values raises.
    * Unlike torch, a name that matches no array raises ``KeyError`` even with
      ``strict=False`` (torch silently ignores it, so a typo runs the model
      with its old weights): documented deviation ``functional-call-unknown-key``.
    """
    dicts = ([parameter_and_buffer_dicts] if isinstance(parameter_and_buffer_dicts, dict)
             else list(parameter_and_buffer_dicts))
    params: dict = {}
    for d in dicts:
        if not isinstance(d, dict):
            raise TypeError(f"functional_call: expected a dict or a sequence of dicts of arrays, "
                            f"got {type(d).__name__}")
        repeated = sorted(set(params) & set(d))
        if repeated:
            raise ValueError(f"functional_call: {repeated} appeared in multiple dictionaries; "
                             f"behavior of functional call is ambiguous")
        params.update(d)
    flat, treedef = jax.tree_util.tree_flatten_with_path(module)
    names = [leaf_name(path) for path, _ in flat]
    arrays = {n for (n, (_, leaf)) in zip(names, flat) if is_array(leaf)}
    unknown = sorted(set(params) - arrays)
    if unknown:
        close = sorted(arrays)[:8]
        raise KeyError(f"functional_call: {unknown} name no array of {type(module).__name__} "
                       f"(its arrays: {close}{' ...' if len(arrays) > 8 else ''}). torch would "
                       f"ignore these keys silently and run with the old values.")
    if strict:
        missing = sorted(arrays - set(params))
        if missing:
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n\t"
                               f"Missing key(s): {', '.join(map(repr, missing))}.")
    new = []
    for name, (_, leaf) in zip(names, flat):
        value = params.get(name)
        if tie_weights and is_array(leaf):  # tied weights: the same array under several names
            tied = [n for n, (_, other) in zip(names, flat) if other is leaf and n in params]
            if len({id(params[n]) for n in tied}) > 1:
                raise ValueError(f"functional_call got multiple values for keys {tied}, which are "
                                 f"tied. Consider using tie_weights=False")
            value = params[tied[0]] if tied else None
        new.append(leaf if value is None else value)
    call_args = () if args is None else (args if isinstance(args, tuple) else (args,))
    return jax.tree_util.tree_unflatten(treedef, new)(*call_args, **(kwargs or {}))
