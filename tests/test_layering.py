"""The package's layers import downwards only, with no cycles (shared/design/layers.md).

The parity suite's cases are part of the package (``torch2jax_ops/parity/cases``,
layer "parity"), loaded by name by the suite only; nothing in the package imports the
checkout's test trees (``tests/``, ``parity_tests/``) or their helpers (``testkit/``).

Every ``import`` in every module is read (top-level and inside functions: a
lazy import is still a dependency), mapped to its layer, and checked against
the table below; the module graph must be acyclic. Each public subpackage
also imports on its own in a fresh interpreter. The graph layer's folders
(``GEOMETRIC_PARTS``) are its parts: utilities, layers, data, loader and the
private graph core with the CPU kernel.
"""
import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "torch2jax_ops"

#: the parity suite's cases ship with the package (torch2jax_ops/parity/cases), as torch
#: ships its OpInfo database in torch.testing; only the suite's loader imports them
CASES = "torch2jax_ops.parity.cases"

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
    # the parity suite's cases: test data shipped in the package, written against its face
    "cases": set(LAYERS) | {"cases"},
}


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _layer(module: str) -> str:
    if module == CASES or module.startswith(CASES + "."):
        return "cases"
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


def _absolute_imports(path: pathlib.Path) -> set:
    """Every absolute module name ``path`` imports (any package, any nesting level)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module)
    return names


def test_package_code_never_imports_parity_or_the_cases():
    for name, path in MODULES.items():
        # nothing in the package imports the checkout's test trees or their helpers
        assert not any(n.split(".")[0] in ("parity_tests", "tests", "testkit")
                       for n in _absolute_imports(path)), name
        if not name.startswith(CASES):  # the loader imports the cases by name, at run time
            assert not any(t.startswith(CASES) for t in _imports(path)), name
        if _layer(name) in ("parity", "face", "cases"):
            continue
        assert not any(t.startswith("torch2jax_ops.parity") for t in _imports(path)), name


def test_the_cases_are_in_the_package_and_the_suite_loads_them_from_there():
    from torch2jax_ops.parity import _suite

    assert _suite.CASES_PACKAGE == CASES
    assert (PACKAGE / "parity" / "cases" / "__init__.py").exists()
    assert not (ROOT / "parity_tests" / "cases").exists()
    assert _suite.cases_root() == PACKAGE / "parity" / "cases"


#: geometric/ shows its parts: a folder each, and only the package face and the
#: fx-table registrations loose at its top
GEOMETRIC_PARTS = {
    "_core": "the private graph core: edge checks and aggregation, adjacency, EdgeIndex, "
             "SparseTensor, torch's sort order, the CPU kernel and its C++ source",
    "utils": "PyG's utilities (torch_geometric.utils), one module per family",
    "nn": "layers: conv/, aggr/, norm/, pool/ (torch_geometric.nn)",
    "data": "PyG's Data, HeteroData and batches; padding to size buckets",
    "loader": "loaders and their device plans",
}
GEOMETRIC_TOP_MODULES = {"__init__.py", "_table.py", "_table_torch.py"}


def test_geometric_shows_its_parts():
    top = PACKAGE / "geometric"
    folders = {p.name for p in top.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(GEOMETRIC_PARTS), sorted(folders ^ set(GEOMETRIC_PARTS))
    assert {p.name for p in top.glob("*.py")} == GEOMETRIC_TOP_MODULES
    layers = {p.name for p in (top / "nn").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert layers == {"conv", "aggr", "norm", "pool"}
    # the kernel sits beside its one caller, and the scatter core holds no graph code
    assert (top / "_core" / "_kernels" / "gather_scatter_add.cc").exists()
    assert not list((PACKAGE / "torch_scatter").rglob("*.cc"))
    callers = {name for name, path in MODULES.items()
               if "torch2jax_ops.geometric._core._cpu_kernel" in _imports(path)
               and name != "torch2jax_ops.geometric._core._cpu_kernel"}
    assert callers <= {"torch2jax_ops.geometric._core._edges", "torch2jax_ops.cli"}, callers
    # one meaning per name: "_native" once meant the kernel here, torch's API there
    assert not [name for name in MODULES if name.endswith("._native")]


TEST_FILES = sorted([*ROOT.glob("tests/*.py"), *ROOT.glob("parity_tests/*.py")])


@pytest.mark.parametrize("path", TEST_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_tests_import_helpers_never_another_test_module(path):
    """Shared test code lives in testkit/ (or the package); tests/ is torch-free and so
    never imports parity_tests."""
    names = _absolute_imports(path)
    wrong = {n for n in names if n.split(".")[-1].startswith("test_") or n == "conftest"
             or n.startswith("parity_tests.test_") or n.startswith("tests.")}
    if path.parent.name == "tests":
        wrong |= {n for n in names if n.split(".")[0] == "parity_tests"}
    assert not wrong, f"{path.name} imports {sorted(wrong)}"


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
