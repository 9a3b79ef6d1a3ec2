"""The package's layers import downwards only, with no cycles (shared/design/layers.md).

Every ``import`` in every module is read (top-level and inside functions: a
lazy import is still a dependency), mapped to its layer, and checked against
the table below; the module graph must be acyclic. Each public subpackage
also imports on its own in a fresh interpreter.
"""
import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "torch2jax_ops"

#: layer of each top-level part of the package, and the layers it may import
LAYERS = {
    "base": ("_dtypes", "dtypes", "_checking", "_dependence", "_sharding", "_batch_vector"),
    "ops": ("torch_scatter", "torch"),
    "exchange": ("dlpack", "tree", "bridge"),
    "autodiff": ("autograd", "func"),
    "convert": ("nn",),
    "graph": ("geometric",),
    "distributed": ("distributed",),
    "parity": ("parity",),
    "face": ("__init__", "__main__", "cli"),
}
MAY_IMPORT = {
    "base": {"base"},
    "ops": {"base", "ops"},
    "exchange": {"base", "exchange"},
    "autodiff": {"base", "exchange", "autodiff"},
    "convert": {"base", "exchange", "convert"},
    "graph": {"base", "ops", "exchange", "convert", "graph"},
    "distributed": {"base", "ops", "graph", "distributed"},
    "parity": set(LAYERS) - {"face"},
    "face": set(LAYERS),
}


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _layer(module: str) -> str:
    top = module.split(".")[1] if "." in module else "__init__"
    for layer, names in LAYERS.items():
        if top in names:
            return layer
    raise AssertionError(f"{module}: not assigned to a layer in tests/test_layering.py")


def _imports(path: pathlib.Path) -> set:
    """Absolute names of the package modules ``path`` imports (any nesting level)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("torch2jax_ops")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("torch2jax_ops"):
                continue
            for alias in node.names:  # `from . import x` may name a submodule
                candidate = f"{target}.{alias.name}"
                found.add(candidate if _exists(candidate) else target)
    return found


def _exists(module: str) -> bool:
    relative = pathlib.Path(*module.split("."))
    return (ROOT / relative).with_suffix(".py").exists() or (ROOT / relative / "__init__.py").exists()


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def test_every_import_goes_down_the_layers():
    wrong = []
    for name, path in sorted(MODULES.items()):
        mine = _layer(name)
        for target in sorted(_imports(path)):
            theirs = _layer(target)
            if theirs not in MAY_IMPORT[mine]:
                wrong.append(f"{name} ({mine}) imports {target} ({theirs})")
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_the_module_graph_has_no_cycle():
    graph = {name: {t for t in _imports(path) if t in MODULES and t != name}
             for name, path in MODULES.items()}
    # A package's __init__ re-exporting its own private modules is not a cycle of
    # code: drop the edges from a private module to its own package's face.
    for name in graph:
        graph[name] = {t for t in graph[name] if not name.startswith(t + ".")}
    state: dict = {}
    stack: list = []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycle = stack[stack.index(nxt):] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_package_code_never_imports_parity_or_the_cases():
    for name, path in MODULES.items():
        if _layer(name) in ("parity", "face"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert not any(n.startswith("parity_tests") for n in names), name
        assert not any(t.startswith("torch2jax_ops.parity") for t in _imports(path)), name


PUBLIC = ["torch2jax_ops.torch_scatter", "torch2jax_ops.dlpack", "torch2jax_ops.bridge",
          "torch2jax_ops.func", "torch2jax_ops.autograd", "torch2jax_ops.nn",
          "torch2jax_ops.geometric", "torch2jax_ops.geometric.nn", "torch2jax_ops.tree",
          "torch2jax_ops.dtypes", "torch2jax_ops.distributed"]


@pytest.mark.parametrize("module", PUBLIC)
def test_each_subpackage_imports_on_its_own_first(module):
    done = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_every_all_lists_exactly_the_public_names():
    """``__all__`` of every public module: each name exists, none is private."""
    import importlib

    for module in PUBLIC + ["torch2jax_ops", "torch2jax_ops.geometric.utils"]:
        mod = importlib.import_module(module)
        names = getattr(mod, "__all__", None)
        assert names is not None, f"{module} has no __all__"
        assert len(names) == len(set(names)), f"{module}.__all__ repeats a name"
        for n in names:
            assert hasattr(mod, n), f"{module}.__all__ names {n!r}, which does not exist"
            assert not n.startswith("_"), f"{module}.__all__ exports the private {n!r}"
        public = {n for n, v in vars(mod).items() if not n.startswith("_")
                  and getattr(v, "__module__", "").startswith("torch2jax_ops")
                  and callable(v)}
        missing = sorted(public - set(names))
        assert not missing, f"{module} defines or re-exports {missing} without __all__"
