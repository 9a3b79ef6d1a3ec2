"""The one registry of ports (torch2jax_ops/nn/_registry.py): one registrant per key,
replacement only on request, a table that does not depend on import order, and a
generation that tells resolved caches the table changed."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from torch2jax_ops.nn import _registry
from torch2jax_ops.nn._registry import (
    RegistryConflict,
    entries,
    generation,
    register_function,
    register_method,
    unregister,
)

ROOT = Path(__file__).resolve().parent.parent
KEY = "tests_registry.fake_op"


@pytest.fixture
def clean():
    yield
    unregister("function", KEY)
    unregister("method", "tests_registry_method")


def first(x):
    return x + 1


def second(x):
    return x + 2


def test_a_taken_key_raises_naming_both_registrants(clean):
    register_function(KEY)(first)
    with pytest.raises(RegistryConflict) as info:
        register_function(KEY)(second)
    message = str(info.value)
    assert f"{__name__}.first" in message and f"{__name__}.second" in message
    assert "replace=True" in message
    assert _registry.functions()[KEY] is first  # the failed registration changed nothing


def test_a_conflict_among_several_keys_registers_none_of_them(clean):
    register_function(KEY)(first)
    other = KEY + "_other"
    with pytest.raises(RegistryConflict):
        register_function(other, KEY)(second)
    assert other not in _registry.functions()


def test_replace_is_explicit_and_bumps_the_generation(clean):
    register_function(KEY)(first)
    before = generation()
    register_function(KEY, replace=True)(second)
    assert _registry.functions()[KEY] is second
    assert generation() > before


def test_the_same_function_again_is_a_no_op(clean):
    register_function(KEY)(first)
    before = generation()
    register_function(KEY)(first)  # a module imported twice
    assert generation() == before


def test_unregister_bumps_the_generation_and_a_missing_key_is_ignored(clean):
    register_method("tests_registry_method")(first)
    before = generation()
    unregister("method", "tests_registry_method")
    assert "tests_registry_method" not in _registry.methods()
    assert generation() == before + 1
    unregister("method", "tests_registry_method")
    assert generation() == before + 1


def test_kinds_are_separate_tables(clean):
    register_function(KEY)(first)
    register_method("tests_registry_method")(second)
    assert _registry.functions()[KEY] is first and _registry.methods()[
        "tests_registry_method"] is second


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="kind must be one of"):
        _registry.register("functions", "torch.x")
    with pytest.raises(TypeError, match="non-empty strings"):
        register_method()
    with pytest.raises(ValueError, match="dotted path"):
        register_function("relu")
    with pytest.raises(TypeError, match="expected a callable"):
        register_function(KEY)(3)


def test_the_package_never_replaces_its_own_entries():
    """Every key has one registrant inside the package: no entry of the package replaced
    another (a replacement would make the table depend on which module loaded last)."""
    import torch2jax_ops  # noqa: F401  (every layer registers)

    ours = [e for e in entries() if e.registrant.startswith("torch2jax_ops.")]
    assert len(ours) > 800
    kinds = {e.kind for e in ours}
    assert kinds == {"module", "family", "function", "method", "fallback"}, kinds


#: a fresh interpreter: import the package's modules in a shuffled order, then print the
#: table. The package is entered through a stub, so its __init__ does not fix the order.
_SHUFFLED = r"""
import importlib, importlib.util, json, pathlib, random, sys, types
seed = int(sys.argv[1])
spec = importlib.util.find_spec("torch2jax_ops")
top = pathlib.Path(spec.origin).parent
names = sorted("torch2jax_ops." + ".".join(p.relative_to(top).with_suffix("").parts).replace(
    ".__init__", "") for p in top.rglob("*.py") if p.name != "__init__.py" or p.parent != top)
names = [n for n in names if not n.startswith(("torch2jax_ops.parity", "torch2jax_ops.cli",
                                               "torch2jax_ops.__main__"))]
if seed >= 0:
    stub = types.ModuleType("torch2jax_ops")
    stub.__path__ = list(spec.submodule_search_locations)
    stub.__spec__ = spec
    sys.modules["torch2jax_ops"] = stub
    random.Random(seed).shuffle(names)
    for name in names:
        importlib.import_module(name)
    del sys.modules["torch2jax_ops"]
import torch2jax_ops
from torch2jax_ops.nn import _registry
print(json.dumps(sorted([e.kind, e.key, e.registrant] for e in _registry.entries())))
"""


def _table(seed: int) -> list:
    done = subprocess.run([sys.executable, "-c", _SHUFFLED, str(seed)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_table_does_not_depend_on_import_order():
    normal = _table(-1)
    assert len(normal) > 800
    for seed in (0, 1, 2):
        assert _table(seed) == normal, f"import order {seed} changed the table"
