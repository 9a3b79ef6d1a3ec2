"""The public API is typed (PEP 561): every public function annotates every parameter and
its return, and the package ships ``py.typed`` so type checkers read those annotations.

Torch-free: it only imports torch2jax_ops' modules (none imports torch at import time).
"""
import ast
import importlib
import inspect
import os
import pathlib
import re

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


# ------------------------------------------------------------------ one function per public op

#: the public modules whose functions are the sharding-aware ops (``out_sharding=``)
OP_MODULES = ("torch2jax_ops", "torch2jax_ops.torch_scatter", "torch2jax_ops.torch",
              "torch2jax_ops.geometric", "torch2jax_ops.geometric.utils")
#: functions of OP_MODULES' ``__all__`` that are not array ops (conversion, debug mode)
NOT_OPS = {"checked", "to_jax", "to_torch", "shares_memory", "tree_to_jax", "tree_to_torch",
           "as_torch", "as_jax"}


def _public_names():
    """(public module, name) of every function in a public ``__all__``."""
    found = []
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        found += [(name, attr) for attr in getattr(module, "__all__", [])
                  if inspect.isfunction(getattr(module, attr))]
    return found


def _ops():
    return [(m, n) for m, n in _public_names() if m in OP_MODULES and n not in NOT_OPS]


def test_the_op_list_is_complete():
    # guard against the parametrised checks below passing vacuously
    ops = _ops()
    assert len(ops) == 25 + 25 + 7 + 34 + 31
    assert ("torch2jax_ops", "scatter") in ops and ("torch2jax_ops.geometric.utils", "spmm") in ops


@pytest.mark.parametrize("module,name", _public_names())
def test_a_public_function_is_the_function_of_its_module(module, name):
    """No import-time rebinding: the public name is the object its defining module holds."""
    obj = getattr(importlib.import_module(module), name)
    home = importlib.import_module(obj.__module__)
    assert getattr(home, obj.__name__) is obj, f"{module}.{name} is not {obj.__module__}.{name}"


def test_scatter_is_the_function_in_its_module():
    import torch2jax_ops
    from torch2jax_ops.geometric.utils import _softmax
    from torch2jax_ops.torch_scatter import _scatter

    assert torch2jax_ops.scatter is torch2jax_ops.torch_scatter.scatter is _scatter.scatter
    assert torch2jax_ops.geometric.softmax is torch2jax_ops.geometric.utils.softmax \
        is _softmax.softmax


@pytest.mark.parametrize("module,name", _ops())
def test_each_op_declares_out_sharding_where_it_is_defined(module, name):
    fn = getattr(importlib.import_module(module), name)
    assert getattr(fn, "__sharding_aware__", False), f"{module}.{name} is not sharding_aware"
    body = inspect.signature(inspect.unwrap(fn))  # the function as written in its module
    param = body.parameters.get("out_sharding")
    assert param is not None, f"{module}.{name}: no out_sharding parameter"
    assert param.kind is inspect.Parameter.KEYWORD_ONLY and param.default is None
    assert param.annotation == "OutSharding"


def _decorated_and_called():
    """Every ``sharding_aware`` in the package's sources: (module, line, how it is used)."""
    uses = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_sharding.py":
            continue
        tree = ast.parse(path.read_text())
        decorators = {id(d) for node in ast.walk(tree)
                      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                      for d in node.decorator_list}
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id.endswith("sharding_aware"):
                how = "decorator" if id(node) in decorators else "other"
                uses.append((path.relative_to(PACKAGE).as_posix(), node.lineno, how))
    return uses


def test_sharding_aware_is_only_ever_a_decorator():
    """No ``__init__`` loop, no ``name = sharding_aware(name)``: applied once, where defined."""
    uses = _decorated_and_called()
    assert sum(how == "decorator" for *_, how in uses) == 70 + 53  # ops + layer methods
    assert [u for u in uses if u[2] != "decorator"] == []
    assert not any(path.endswith("__init__.py") for path, *_ in uses)


# ------------------------------------------------------------------ what mypy sees

_GOOD = '''
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

import torch2jax_ops as t2j
from torch2jax_ops import geometric as G
from torch2jax_ops import torch as T
from torch2jax_ops.geometric.nn import GCNConv, GINConv


def run(mesh: jax.sharding.Mesh, conv: GCNConv, gin: GINConv) -> jax.Array:
    src = jnp.ones((6, 2))
    index = jnp.array([0, 0, 1, 1, 2, 2])
    a: jax.Array = t2j.scatter(src, index, 0, dim_size=3, out_sharding=P())
    b, arg = t2j.scatter_max(src, index, 0, dim_size=3, out_sharding=(P(), P()))
    c = T.scatter_reduce(src, 0, jnp.zeros((6, 2), int), src, "amax",
                         out_sharding=NamedSharding(mesh, P()))
    d = G.softmax(src, index, num_nodes=3, out_sharding=None)
    e = G.utils.degree(index, 3, out_sharding=P("e"))
    ei = jnp.array([[0, 1], [1, 2]])
    f = conv(src, ei, out_sharding=P())
    g = gin(src, ei, out_sharding=P())
    return a + b + c + d.sum() + e.sum() + f + g + arg
'''

_BAD = '''
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

import torch2jax_ops as t2j
from torch2jax_ops import geometric as G

src = jnp.ones((6, 2))
index = jnp.array([0, 0, 1, 1, 2, 2])
t2j.scatter(src, index, 0, out_shardings=P())  # line 10: a misspelt keyword
t2j.scatter_sum(src, index, 0, out_sharding="rows")  # line 11: not a sharding
G.softmax(src, index, out_sharding=3)  # line 12: not a sharding
t2j.scatter_mul(src, index, 0, None, 3, P())  # line 13: out_sharding is keyword-only
'''


def _reveal_all() -> str:
    """A file revealing the type of every public op (mypy prints each signature)."""
    lines = ["import importlib"]
    for module, name in _ops():
        lines.append(f"import {module}")
        lines.append(f"reveal_type({module}.{name})")
    return "\n".join(lines) + "\n"


def _guide_block() -> str:
    """The python block of migration_guide/distributed.md's section on the signature."""
    page = (PACKAGE.parent / "migration_guide" / "distributed.md").read_text()
    section = page.split("### `out_sharding=` is in every op's own signature", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


@pytest.fixture(scope="module")
def mypy_run(tmp_path_factory):
    api = pytest.importorskip("mypy.api")
    folder = tmp_path_factory.mktemp("mypy")
    (folder / "good.py").write_text(_GOOD)
    (folder / "bad.py").write_text(_BAD)
    (folder / "reveal.py").write_text(_reveal_all())
    (folder / "guide.py").write_text(_guide_block())
    # this checkout's package (MYPYPATH comes before site-packages), the project's config
    env_before = os.environ.get("MYPYPATH")
    os.environ["MYPYPATH"] = str(PACKAGE.parent)
    try:
        stdout, stderr, status = api.run([
            "--config-file", str(PACKAGE.parent / "pyproject.toml"),
            "--cache-dir", str(folder / "cache"), "--no-error-summary", "--show-error-codes",
            str(folder / "good.py"), str(folder / "bad.py"), str(folder / "reveal.py"),
            str(folder / "guide.py")])
    finally:
        if env_before is None:
            os.environ.pop("MYPYPATH", None)
        else:
            os.environ["MYPYPATH"] = env_before
    by_file: dict = {}
    for line in stdout.splitlines():
        match = re.match(r"(.*?(good|bad|reveal|guide)\.py):(\d+): (error|note): (.*)", line)
        if match:
            by_file.setdefault(match.group(2), []).append(
                (int(match.group(3)), match.group(4), match.group(5)))
    return by_file, stdout + stderr


def test_mypy_accepts_out_sharding_on_public_ops_and_layers(mypy_run):
    by_file, text = mypy_run
    assert by_file.get("good", []) == [], text


def test_the_guide_snippet_type_checks(mypy_run):
    by_file, text = mypy_run
    assert "out_sharding=NamedSharding" in _guide_block()
    assert by_file.get("guide", []) == [], text


def test_mypy_rejects_a_wrong_out_sharding(mypy_run):
    by_file, text = mypy_run
    errors = {line: message for line, kind, message in by_file.get("bad", []) if kind == "error"}
    assert sorted(errors) == [10, 11, 12, 13], text
    assert 'Unexpected keyword argument "out_shardings"' in errors[10]
    assert '"out_sharding"' in errors[11] and "incompatible type" in errors[11]
    assert '"out_sharding"' in errors[12] and "incompatible type" in errors[12]
    assert "scatter_mul" in errors[13] or "positional" in errors[13]


def test_mypy_sees_out_sharding_on_every_public_op(mypy_run):
    by_file, text = mypy_run
    revealed = [m for _, kind, m in by_file.get("reveal", []) if kind == "note"
                and m.startswith("Revealed type")]
    assert len(revealed) == len(_ops()), text
    missing = [(op, m) for op, m in zip(_ops(), revealed) if "out_sharding:" not in m]
    assert missing == [], missing[:3]
