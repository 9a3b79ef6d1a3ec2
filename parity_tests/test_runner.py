"""The parity runner (torch2jax_ops/parity/_runner.py, _memory.py): bounded memory, workers, the cache.

The bound test runs the report's command in a subprocess, samples the memory maps and the
resident set of every process it starts, and fails when they grow with the number of cases.
The same measurement of a run whose bound is lifted must see the growth (what the runner
did before it had a bound: the full report aborted halfway, out of memory maps).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torch2jax_ops.parity import _memory, _report, _runner
from torch2jax_ops.parity import _suite as suite

ROOT = Path(__file__).resolve().parent.parent
#: 345 cheap cases that compile many distinct programs (torch's native scatter_reduce over
#: shapes, float dtypes and reductions, each a jitted forward and backward): without a
#: bound a worker's maps grow 2.9x and its resident set 1.7x over them (2026-11-27)
BOUND_CASES = "scatter_reduce-*[float*"


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = [int(k) for k in f.read().split()]
    except OSError:
        return []
    return kids + [g for k in kids for g in _children(k)]


def _sample_run(args: list[str], tmp_path: Path, timeout: float = 900) -> list[tuple]:
    """Run ``torch2jax-ops parity ARGS``; every 0.25 s, the largest maps count and resident
    set among its processes (the parent and its worker). The compilation cache is a folder
    of the test's own, so programs dropped at the bound are read back, not recompiled."""
    env = dict(os.environ, TORCH2JAX_OPS_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.Popen([sys.executable, "-m", "torch2jax_ops", "parity", "--quiet",
                             "--no-reuse", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    samples, start = [], time.monotonic()
    while proc.poll() is None:
        pids = [proc.pid] + _children(proc.pid)
        samples.append((time.monotonic() - start,
                        max(_memory.maps_count(p) for p in pids),
                        max(_memory.rss_bytes(p) for p in pids)))
        if time.monotonic() - start > timeout:
            proc.kill()
            pytest.fail(f"the parity run took more than {timeout} s")
        time.sleep(0.25)
    output = proc.stdout.read()
    assert proc.returncode == 0, output[-3000:]
    return samples


def _growth(samples: list[tuple]) -> tuple[float, float]:
    """(maps, rss): the peak of the last third of the run over the peak of its first third
    (after the first 20 %: start-up)."""
    body = samples[len(samples) // 5:]
    third = max(len(body) // 3, 1)
    first, last = body[:third], body[-third:]
    return (max(s[1] for s in last) / max(s[1] for s in first),
            max(s[2] for s in last) / max(s[2] for s in first))


@pytest.mark.slow
def test_memory_stays_bounded_whatever_the_number_of_cases(tmp_path):
    selection = ["--only", BOUND_CASES, "--jobs", "1"]
    assert len(suite.cases(only=BOUND_CASES)) >= 300
    # the unbounded run first: it fills the cache the bounded run reads back after each release
    unbounded = _sample_run(selection + ["--max-rss-mb", "100000", "--max-maps", "10000000"],
                            tmp_path)
    bounded = _sample_run(selection + ["--max-rss-mb", "800", "--max-maps", "1400"], tmp_path)
    maps_b, rss_b = _growth(bounded)
    maps_u, rss_u = _growth(unbounded)
    # the measurement sees the growth of a run without a bound ...
    assert rss_u > 1.5, f"the unbounded run did not grow: {rss_u:.2f}x (the test lost its teeth)"
    # ... and the bounded run stays where it was
    assert rss_b < 1.25 and maps_b < 1.25, (maps_b, rss_b)
    assert max(s[2] for s in bounded) < 1.3 * (800 << 20)
    assert max(s[1] for s in bounded) < 1.3 * 1400


def _rows(path: Path) -> list:
    return json.loads((path / "report.json").read_text())["rows"]


@pytest.mark.slow
def test_workers_write_the_report_one_process_writes(tmp_path):
    """Two workers and one: the same rows, values and order (torch runs on one thread in
    every worker, so nothing depends on how the cases are shared out)."""
    selection = ["--only", "scatter_m*", "--x64"]
    for jobs in ("1", "2"):
        done = subprocess.run([sys.executable, "-m", "torch2jax_ops", "parity", "--quiet",
                               "--no-cache", "--no-reuse", "--jobs", jobs, "--report",
                               str(tmp_path / jobs), *selection], cwd=ROOT,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert f"({jobs} worker" in done.stdout
    one, two = _rows(tmp_path / "1"), _rows(tmp_path / "2")
    assert len(one) >= 8 and one == two


#: a case module of a suite of its own: three cases, the middle one kills its process
_CRASH_CASES = """
import jax.numpy as jnp
import torch

from torch2jax_ops.parity._suite import Case, register


def _ok():
    return torch.sin, jnp.sin, (torch.linspace(-1.0, 1.0, 5),), {}, {}


def _boom():
    import ctypes
    ctypes.string_at(0)  # a segfault, as a broken native extension would cause


@register("crash")
def _cases():
    yield Case("crash", "sin", "float32", "ok-1", _ok)
    yield Case("crash", "sin", "float32", "boom", _boom)
    yield Case("crash", "sin", "float32", "ok-2", _ok)
"""


def test_a_crashing_case_fails_alone_and_the_report_is_written(tmp_path):
    """A worker that dies fails the case it was running; a fresh worker runs the rest."""
    cases = tmp_path / "cases"
    cases.mkdir(parents=True)
    (cases / "crash.py").write_text(_CRASH_CASES)
    env = dict(os.environ, TORCH2JAX_OPS_CASES=str(cases),  # this checkout's package
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "torch2jax_ops", "parity", "--quiet",
                           "--no-cache", "--no-reuse", "--jobs", "1", "--report",
                           str(tmp_path / "report")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "2 passed, 1 failed" in done.stdout
    assert "WorkerCrash" in done.stdout and "exit code -11" in done.stdout
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    (row,) = report["rows"]
    assert row["cases"] == 3 and row["failed"] == 1
    assert row["failures"][0]["case"] == "sin[float32]-boom"


def test_run_cases_in_process_matches_the_suite():
    cases = suite.cases(only="scatter_sum[float32]-1d*")[:4]
    stats: dict = {}
    runs = _runner.run_cases(cases, jobs=0, cache=False, stats=stats)
    assert [r["case"] for r in runs] == cases
    assert all(r["result"].passed for r in runs)
    assert stats["workers"] == 0


def test_limits_and_cache_folder(tmp_path, monkeypatch):
    limits = _memory.Limits.default(2)
    assert 4096 <= limits.maps <= 65530 // 4 + 1 or limits.maps >= 4096
    assert 0 < limits.rss <= 3 << 30
    assert limits.over(limits.maps + 1, 0) and limits.over(0, limits.rss + 1)
    assert not limits.over(limits.maps, limits.rss)
    assert limits.over(int(limits.maps * 0.8), 0, 0.75)
    monkeypatch.setenv("TORCH2JAX_OPS_CACHE_DIR", str(tmp_path / "c"))
    assert _runner.cache_dir() == tmp_path / "c"
    monkeypatch.delenv("TORCH2JAX_OPS_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _runner.cache_dir() == tmp_path / "xdg" / "torch2jax_ops" / "jax"
    folder = tmp_path / "full"
    folder.mkdir()
    (folder / "a").write_bytes(b"x" * 100)
    _runner.prepare_cache(folder, limit=1000)
    assert (folder / "a").exists()  # under the limit: kept
    _runner.prepare_cache(folder, limit=10)
    assert folder.is_dir() and not any(folder.iterdir())  # over it: emptied


def test_report_run_suite_is_the_runner():
    cases = suite.cases(only="scatter_sum[float32]-1d*")[:2]
    rows = _report.summarize(_report.run_suite(cases))
    assert rows and all(not r["failed"] for r in rows)


def test_a_repeat_run_reuses_the_results_of_the_same_code_and_libraries(tmp_path, monkeypatch):
    """No work twice: a second run with the same code, libraries, machine and options
    takes the stored outcomes; a changed library version (any fingerprint input) runs
    every case again; a crashed worker's outcome is never stored."""
    from torch2jax_ops.parity import _results

    monkeypatch.setenv("TORCH2JAX_OPS_RESULTS_DIR", str(tmp_path / "results"))
    cases = suite.cases(only="scatter_sum[float32]-1d*")[:3]
    assert len(cases) >= 2
    first, second, third = {}, {}, {}
    runs = _runner.run_cases(cases, jobs=0, cache=False, stats=first, reuse=True)
    again = _runner.run_cases(cases, jobs=0, cache=False, stats=second, reuse=True)
    assert first["reused"] == 0 and second["reused"] == len(cases)
    assert [r["case"] for r in again] == cases
    assert [r["result"].leaves[0].max_abs for r in again] == [
        r["result"].leaves[0].max_abs for r in runs]
    real = _results._version
    monkeypatch.setattr(_results, "_version",
                        lambda name: "0.0-other" if name == "jax" else real(name))
    _runner.run_cases(cases, jobs=0, cache=False, stats=third, reuse=True)
    assert third["reused"] == 0
    key = _results.fingerprint({"fast_compile": True}, tuple(_runner.FAST_COMPILE_FLAGS))
    _results.store(key, {"x": {"result": None, "error": "WorkerCrash: died", "seconds": 0.0}},
                   tmp_path / "results")
    assert "x" not in _results.load(key, tmp_path / "results")
