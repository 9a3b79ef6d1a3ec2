"""Every ```python block of README.md and migration_guide/*.md runs, in order, per file."""
import pathlib
import re
import sys
import types

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "migration_guide").glob("*.md"))]


def blocks(page: pathlib.Path) -> list:
    return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)


def test_every_guide_page_has_code():
    for page in PAGES:
        assert blocks(page), f"{page.name} has no python snippet"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_snippets_run(page, capsys, monkeypatch):
    # The page runs as a real module: libraries that look classes up by their module
    # (PyG's MessagePassing inspector) and dotted registry paths find it.
    module = types.ModuleType(f"doc_{page.stem}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    for number, code in enumerate(blocks(page), 1):
        try:
            exec(compile(code, f"{page.name}[block {number}]", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"{page.name}, block {number} failed: {exc!r}\n{code}") from exc


def test_generated_tables_are_current():
    """The guide's generated tables (the fx mapping table ...) match the registry now."""
    from torch2jax_ops import cli

    assert cli.main(["tables"]) == 0, "run `torch2jax-ops tables --write`"
