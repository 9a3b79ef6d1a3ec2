"""The fast tier's marks (testkit/tiers.py) on stand-in test items: which tests
``make test-fast`` runs is a rule, and breaking the rule changes these marks."""
from __future__ import annotations

import ast
import pathlib
import types

from testkit.tiers import SLOW_MODULES, SLOW_TESTS, mark_tiers
from torch2jax_ops.parity._suite import Case

ROOT = pathlib.Path(__file__).resolve().parent.parent


class _Item:
    """The parts of a pytest item that mark_tiers reads."""

    def __init__(self, module: str, name: str, params: dict | None = None):
        self.module = types.SimpleNamespace(__name__=f"parity_tests.{module}")
        self.originalname = name
        self.name = name + (f"[{'-'.join(map(str, params.values()))}]" if params else "")
        if params is not None:
            self.callspec = types.SimpleNamespace(params=params)
        self.markers: list = []

    def add_marker(self, marker) -> None:
        self.markers.append(marker.name)

    @property
    def slow(self) -> bool:
        return "slow" in self.markers


def _case(op: str, dtype: str, label: str) -> Case:
    return Case(section="s", op=op, dtype=dtype, label=label, build=lambda: ())


def test_behaviour_tests_keep_their_first_variant_only():
    items = [_Item("test_a", "test_jit", {"v": i}) for i in range(3)]
    items += [_Item("test_b", "test_jit", {"v": 0}), _Item("test_a", "test_plain")]
    mark_tiers(items)
    assert [i.slow for i in items] == [False, True, True, False, False]


def test_one_parity_case_per_op_and_dtype_family():
    cases = [_case("max", "float32", "a"), _case("max", "float32", "b"),
             _case("max", "float64", "a"), _case("max", "float16", "a"),
             _case("max", "bfloat16", "a"), _case("min", "float32", "a")]
    items = [_Item("test_p", "test_case", {"case": c}) for c in cases]
    mark_tiers(items)
    # float32 / x64 / half families of max, and min's float32: the first case of each
    assert [i.slow for i in items] == [False, True, False, False, True, False]


def test_slow_modules_and_named_tests_are_slow_whatever_their_variant():
    items = [_Item("test_docs", "test_snippets_run", {"page": "a"}),
             _Item("test_other", "test_scatter_reduce_random"), _Item("test_other", "test_x")]
    mark_tiers(items)
    assert [i.slow for i in items] == [True, True, False]


def test_every_listed_name_exists():
    """A renamed test must not leave a stale name here (it would silently join the fast tier)."""
    modules = {p.stem: p for p in [*ROOT.glob("tests/test_*.py"), *ROOT.glob("parity_tests/test_*.py")]}
    assert SLOW_MODULES <= set(modules), SLOW_MODULES - set(modules)
    defined = {node.name for path in modules.values()
               for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.FunctionDef)}
    assert SLOW_TESTS <= defined, SLOW_TESTS - defined
