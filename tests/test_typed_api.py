"""The public API is typed (PEP 561): every public function annotates every parameter and
its return, and the package ships ``py.typed`` so type checkers read those annotations.

Torch-free: it only imports torch2jax_ops' modules (none imports torch at import time).
"""
import importlib
import inspect
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "torch2jax_ops"

#: the public modules whose ``__all__`` functions must be fully annotated
PUBLIC_MODULES = (
    "torch2jax_ops", "torch2jax_ops.torch_scatter", "torch2jax_ops.torch",
    "torch2jax_ops.geometric", "torch2jax_ops.geometric.utils", "torch2jax_ops.dlpack",
    "torch2jax_ops.bridge", "torch2jax_ops.func", "torch2jax_ops.autograd", "torch2jax_ops.nn",
    "torch2jax_ops.distributed", "torch2jax_ops.parity", "torch2jax_ops.tree",
)


def _public_functions():
    """(qualified name, unwrapped function) of every function in a public ``__all__``."""
    seen = {}
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        for attr in getattr(module, "__all__", []):
            obj = getattr(module, attr)
            if inspect.isfunction(obj):
                fn = inspect.unwrap(obj)
                seen[f"{fn.__module__}.{fn.__qualname__}"] = fn
    return seen


def _unannotated(fn):
    """The names of ``fn``'s parameters without an annotation, plus "return" if it has none."""
    sig = inspect.signature(fn)
    missing = [p for p, v in sig.parameters.items()
               if p != "self" and v.annotation is inspect.Parameter.empty]
    if sig.return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


def test_public_functions_are_found():
    # guard against the check below passing vacuously
    functions = _public_functions()
    assert len(functions) > 50
    assert "torch2jax_ops.torch_scatter._scatter.scatter" in functions


def test_public_signatures_are_fully_annotated():
    bad = {name: missing for name, fn in sorted(_public_functions().items())
           if (missing := _unannotated(fn))}
    assert not bad, f"public functions with unannotated parameters/returns: {bad}"


@pytest.mark.parametrize("name", ["scatter", "segment_coo", "segment_csr"])
def test_reduce_is_a_literal(name):
    from torch2jax_ops import torch_scatter

    sig = inspect.signature(getattr(torch_scatter, name))
    assert sig.parameters["reduce"].annotation == "Reduction"
    assert sig.parameters["reduce"].default == "sum"


def test_py_typed_marker_exists():
    assert (PACKAGE / "py.typed").is_file()
