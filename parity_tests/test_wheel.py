"""The built wheel stands alone: installed outside any checkout, ``torch2jax-ops parity
--quick`` finds its cases in the package (torch2jax_ops/parity/cases) and runs them.

The wheel is built offline from a copy of the package (``pip wheel --no-deps
--no-build-isolation --no-index``: setuptools of this environment, nothing fetched),
installed with ``pip install --no-deps --target`` into a folder of its own, and run from an
empty folder with that folder first on ``PYTHONPATH`` (torch, PyG and JAX come from this
environment). The run is the quick tier of two sections: scatter (torch_scatter) and
models (user-style PyG models ported with one call, ``_user_models.py`` among the cases).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(command, **kwargs):
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, **kwargs)
    assert done.returncode == 0, f"{command}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(site folder, script) of the wheel installed outside the checkout."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    source.mkdir()
    shutil.copytree(ROOT / "torch2jax_ops", source / "torch2jax_ops",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "tmp*"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    _run([*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index", "-w",
          str(tmp / "dist"), str(source)], cwd=tmp)
    (wheel,) = (tmp / "dist").glob("torch2jax_ops-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "torch2jax_ops/parity/cases/scatter.py" in names
    assert "torch2jax_ops/parity/cases/_user_models.py" in names
    assert "torch2jax_ops/geometric/_core/_kernels/gather_scatter_add.cc" in names
    assert not any(n.startswith(("parity_tests/", "tests/", "testkit/")) for n in names)
    site = tmp / "site"
    _run([*pip, "install", "-q", "--no-deps", "--no-index", "--target", str(site), str(wheel)],
         cwd=tmp)
    script = site / "bin" / "torch2jax-ops"
    assert script.exists()
    return site, script


def _env(site, tmp):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TORCH2JAX"))}
    env["PYTHONPATH"] = str(site)  # the installed wheel, not the checkout
    env["TORCH2JAX_OPS_CACHE_DIR"] = str(tmp / "jax-cache")
    return env


def test_the_installed_wheel_is_what_runs_outside_the_checkout(installed, tmp_path):
    site, _ = installed
    done = _run([sys.executable, "-c", "import torch2jax_ops, torch2jax_ops.parity._suite as s; "
                 "print(torch2jax_ops.__file__); print(s.cases_root()); "
                 "print(len(s.cases(section='scatter')))"],
                cwd=tmp_path, env=_env(site, tmp_path))
    module, root, count = done.stdout.split()
    assert Path(module).is_relative_to(site) and Path(root) == site / "torch2jax_ops" / \
        "parity" / "cases"
    assert int(count) > 100  # the whole scatter section ships


def test_parity_quick_runs_from_the_installed_wheel(installed, tmp_path):
    site, script = installed
    work = tmp_path / "elsewhere"  # no checkout here or above it
    work.mkdir()
    report = tmp_path / "report"
    done = _run([str(script), "parity", "--quick", "--section", "scatter", "--jobs", "1",
                 "--quiet", "--report", str(report)], cwd=work, env=_env(site, tmp_path))
    passed = re.search(r"(\d+) passed, 0 failed", done.stdout)
    assert passed and int(passed.group(1)) >= 10, done.stdout[-3000:]
    rows = json.loads((report / "report.json").read_text())["rows"]
    assert rows and sum(r["cases"] for r in rows) >= 10
    assert all(r["failed"] == 0 for r in rows), [r for r in rows if r["failed"]]
    done = _run([str(script), "parity", "--quick", "--section", "models", "--jobs", "1",
                 "--quiet", "--no-cache"], cwd=work, env=_env(site, tmp_path))
    passed = re.search(r"(\d+) passed, 0 failed", done.stdout)
    assert passed and int(passed.group(1)) >= 3, done.stdout[-3000:]
