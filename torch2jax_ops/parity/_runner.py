"""The parity runner: every case of a selection, in worker processes, in bounded memory.

JAX keeps every program it compiles for the life of the process, and on the CPU every
program maps code sections of its own. One process running the whole suite (7,600 cases)
grew past Linux's default ``vm.max_map_count`` (65,530 maps) about halfway and aborted
("LLVM ERROR: Unable to allocate section memory"). The runner therefore:

* **bounds each worker** (:mod:`._memory`): after every case it reads the worker's memory
  maps and resident set; past ``Limits`` it drops JAX's compiled programs
  (``jax.clear_caches``), and a worker still above three quarters of a limit after that
  is replaced by a fresh one;
* **uses every core**: ``jobs`` spawned workers take contiguous chunks of the selection (the
  cases of one op share compiled programs); results come back in the selection's order, so
  the report is the one a single worker writes;
* **compiles nothing twice**: JAX's persistent compilation cache (:func:`cache_dir`) is on
  by default, so a program compiled by one worker, or by an earlier run, is read from disk;
* **survives a crashing case**: a worker that dies (a segfault in a case) fails that case
  with its exit code, and a fresh worker runs the rest.

Every worker runs torch on one thread, so the numbers do not depend on how many workers
there are. ``jobs=0`` runs the cases in the calling process (the API's default, for a
handful of cases; the command line always uses workers).
"""
from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import pathlib
import shutil
import traceback
from typing import Any, Callable, Optional, Sequence

from . import _results
from ._memory import Limits, _Guard
from ._suite import Case

__all__ = ["run_cases", "cache_dir", "default_jobs", "prepare_cache", "CACHE_LIMIT"]

#: XLA:CPU settings that halve the compile time of the suite's thousands of small programs
#: (LLVM unoptimised, its expensive passes off, the classic elemental emitters, one codegen
#: thread). They change how a program is compiled, not what it computes, except that an
#: unoptimised reduction is not vectorised: it sums in plain order, so long float sums round
#: differently in their last bits (54 of 363 sampled cases differ somewhere, all inside
#: tolerance; the make test suite compiles the same way). ``fast_compile=False``
#: (``--no-fast-compile``) runs the workers with XLA's defaults: about twice the first run.
FAST_COMPILE_FLAGS = ("--xla_backend_optimization_level=0",
                      "--xla_llvm_disable_expensive_passes=true",
                      "--xla_cpu_use_fusion_emitters=false",
                      "--xla_cpu_parallel_codegen_split_count=1")
#: cases a worker is handed at a time (contiguous: the cases of one op share programs)
CHUNK = 16
#: a cache folder past this size is emptied before a run (entries of older code and JAX
#: releases pile up: JAX's own eviction re-reads the whole folder on every write)
CACHE_LIMIT = 2 << 30


def default_jobs() -> int:
    """One worker per core this process may use."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # pragma: no cover - not Linux
        return max(os.cpu_count() or 1, 1)


def cache_dir() -> pathlib.Path:
    """The runner's persistent compilation cache: ``$TORCH2JAX_OPS_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/torch2jax_ops/jax`` (``~/.cache/torch2jax_ops/jax``)."""
    explicit = os.environ.get("TORCH2JAX_OPS_CACHE_DIR")
    if explicit:
        return pathlib.Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "torch2jax_ops" / "jax"


def _folder_size(folder: pathlib.Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*") if p.is_file())


def prepare_cache(folder: pathlib.Path, limit: int = CACHE_LIMIT) -> pathlib.Path:
    """Create the cache folder; empty it first when it holds more than ``limit`` bytes."""
    if folder.is_dir() and _folder_size(folder) > limit:
        shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# ----------------------------------------------------------------------------- one worker

def _set_up(cache: Optional[str], fast_compile: bool = False) -> None:
    """What every worker (and an in-process run) does before its first case. The XLA flags
    take effect only where JAX has not started its backend yet (a fresh worker)."""
    if fast_compile:  # the caller's own XLA_FLAGS come last, so they win
        os.environ["XLA_FLAGS"] = " ".join(FAST_COMPILE_FLAGS + (os.environ.get("XLA_FLAGS", ""),))
    import torch

    torch.set_num_threads(1)
    import jax

    if cache:
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def _outcome(run: dict) -> dict:
    """What crosses the process boundary: everything but the Case (it holds closures)."""
    return {k: v for k, v in run.items() if k != "case"}


def _worker(conn: Any, cache: Optional[str], limits: Limits, fast_compile: bool) -> None:
    """A worker process: load the suite, then run the chunks the parent sends."""
    try:
        _set_up(cache, fast_compile)
        from . import _suite

        everything = _suite.cases()
        conn.send(("ready", os.getpid()))
        guard = _Guard(limits)
        while True:
            message = conn.recv()
            if message[0] == "stop":
                return
            replace = False
            for index, case_id in message[1]:
                case = everything[index] if index < len(everything) else None
                if case is None or case.id != case_id:
                    conn.send(("fatal", f"the worker's case {index} is "
                               f"{None if case is None else case.id!r}, not {case_id!r}: the "
                               f"case generators must give the same list in every process"))
                    return
                conn.send(("start", index))
                outcome = _outcome(_suite.run_case(case))
                replace = guard.check() or replace
                conn.send(("done", index, outcome, guard.report()))
            conn.send(("chunk", replace))
            if replace:
                return
    except (EOFError, KeyboardInterrupt, BrokenPipeError):
        return
    except BaseException:  # noqa: BLE001 - the parent reports it
        try:
            conn.send(("fatal", traceback.format_exc()))
        except (OSError, BrokenPipeError):
            pass


# ----------------------------------------------------------------------------- the parent

class _Worker:
    def __init__(self, context: Any, cache: Optional[str], limits: Limits,
                 fast_compile: bool) -> None:
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_worker, args=(child, cache, limits, fast_compile),
                                       daemon=True)
        self.process.start()
        child.close()
        self.chunk: list = []        # (index, id) pairs handed to it, not yet done
        self.running: Optional[int] = None
        self.seen: dict = {"releases": 0}  # the worker's last guard report
        self.ready = False
        self.busy = False

    def give(self, chunk: list) -> None:
        self.chunk, self.busy = list(chunk), True
        self.conn.send(("run", chunk))

    def stop(self) -> None:
        try:
            self.conn.send(("stop",))
        except (OSError, BrokenPipeError):
            pass
        self.process.join(timeout=10)
        if self.process.is_alive():  # pragma: no cover - a hung worker
            self.process.kill()
            self.process.join()
        self.conn.close()


def _crash_outcome(exitcode: Optional[int]) -> dict:
    return {"result": None, "seconds": 0.0,
            "error": f"WorkerCrash: the worker process running this case died (exit code "
                     f"{exitcode}); the other cases ran in a fresh worker"}


def run_cases(cases: Sequence[Case], *, jobs: int = 0, cache: bool = True,
              limits: Optional[Limits] = None,
              progress: Optional[Callable[[Case], None]] = None,
              stats: Optional[dict] = None, fast_compile: bool = True,
              reuse: bool = False) -> list[dict]:
    """Run ``cases``; the runs (``run_case``'s dicts) come back in the order of ``cases``.

    Args:
      cases: a selection of :func:`torch2jax_ops.parity._suite.cases` (each knows its
        index in the full list, which is how a worker finds it).
      jobs: worker processes; ``0`` runs the cases in this process (no bound beyond
        releasing compiled programs, and a crashing case ends the process).
      cache: use JAX's persistent compilation cache (:func:`cache_dir`).
      limits: the memory bound of each worker (:meth:`Limits.default`).
      progress: called with each case as it finishes (in the order they finish).
      stats: if given, filled with ``workers`` started, ``releases`` (of compiled programs),
        ``crashes``, and ``peak_maps`` / ``peak_rss`` (the most any worker held after a case).
      fast_compile: compile with :data:`FAST_COMPILE_FLAGS` (in this process only when JAX
        has not started its backend yet).
      reuse: take the outcome of a case that an earlier run with the same code, libraries,
        machine and options computed (:mod:`torch2jax_ops.parity._results`) instead of
        running it again, and store this run's outcomes for the next; ``stats["reused"]``
        counts them.
    """
    jobs = max(int(jobs), 0)
    limits = limits or Limits.default(max(jobs, 1))
    folder = str(prepare_cache(cache_dir())) if cache else None
    stats = stats if stats is not None else {}
    stats.update(workers=0, releases=0, crashes=0, peak_maps=0, peak_rss=0, reused=0)
    key = (_results.fingerprint({"fast_compile": fast_compile}, tuple(FAST_COMPILE_FLAGS))
           if reuse else None)
    earlier = _results.load(key) if key else {}
    known = {c.id: dict(earlier[c.id], case=c) for c in cases if c.id in earlier}
    todo = [c for c in cases if c.id not in known]
    for case in cases:
        if case.id in known and progress:
            progress(case)
    if not todo:
        runs: list = []
    elif jobs == 0:
        runs = _run_here(todo, folder, limits, progress, stats, fast_compile)
    else:
        runs = _run_workers(todo, jobs, folder, limits, progress, stats, fast_compile)
    if key and runs:
        _results.store(key, {r["case"].id: _outcome(r) for r in runs})
    stats["reused"] = len(known)
    fresh = {r["case"].id: r for r in runs}
    return [known[c.id] if c.id in known else fresh[c.id] for c in cases]


def _run_here(cases: Sequence[Case], folder: Optional[str], limits: Limits,
              progress: Optional[Callable[[Case], None]], stats: dict,
              fast_compile: bool) -> list[dict]:
    import torch

    from ._suite import run_case

    threads = torch.get_num_threads()
    _set_up(folder, fast_compile)
    guard, runs = _Guard(limits), []
    try:
        for case in cases:
            runs.append(run_case(case))
            guard.check()  # no fresh process here: releasing is what one process can do
            if progress:
                progress(case)
    finally:
        torch.set_num_threads(threads)
    _merge(stats, {"releases": 0}, guard.report())
    return runs


def _merge(stats: dict, seen: dict, report: dict) -> None:
    """Fold a worker's guard report into ``stats`` (releases counted once; peaks as maxima)."""
    stats["releases"] = stats.get("releases", 0) + report["releases"] - seen["releases"]
    for key in ("peak_maps", "peak_rss"):
        stats[key] = max(stats.get(key, 0), report[key])
    seen.update(report)


def _run_workers(cases: Sequence[Case], jobs: int, folder: Optional[str], limits: Limits,
                 progress: Optional[Callable[[Case], None]], stats: dict,
                 fast_compile: bool) -> list[dict]:
    if any(c.index < 0 for c in cases):
        raise ValueError("run_cases with jobs > 1 needs cases from _suite.cases() (each "
                         "carries its index in the full list)")
    position = {c.index: i for i, c in enumerate(cases)}
    pending = [[(c.index, c.id) for c in cases[i:i + CHUNK]]
               for i in range(0, len(cases), CHUNK)]
    pending.reverse()  # pop() from the end takes the first chunk first
    outcomes: list[Optional[dict]] = [None] * len(cases)
    context = multiprocessing.get_context("spawn")
    workers: list[_Worker] = []

    def start() -> None:
        workers.append(_Worker(context, folder, limits, fast_compile))
        stats["workers"] += 1

    def finish(index: int, outcome: dict) -> None:
        i = position[index]
        outcomes[i] = dict(outcome, case=cases[i])
        if progress:
            progress(cases[i])

    try:
        for _ in range(min(jobs, len(pending))):
            start()
        while any(o is None for o in outcomes):
            for worker in list(workers):
                if worker.ready and not worker.busy and pending:
                    worker.give(pending.pop())
                elif worker.ready and not worker.busy:
                    worker.stop()
                    workers.remove(worker)
            if not workers:
                if pending or any(o is None for o in outcomes):  # pragma: no cover
                    raise RuntimeError("the parity workers stopped with cases left to run")
                break
            ready = multiprocessing.connection.wait(
                [w.conn for w in workers] + [w.process.sentinel for w in workers])
            for worker in list(workers):
                died = worker.process.sentinel in ready and not worker.conn.poll()
                while not died and worker.conn.poll():
                    try:
                        message = worker.conn.recv()
                    except EOFError:
                        died = True
                        break
                    kind = message[0]
                    if kind == "ready":
                        worker.ready = True
                    elif kind == "start":
                        worker.running = message[1]
                    elif kind == "done":
                        worker.running = None
                        _merge(stats, worker.seen, message[3])
                        worker.chunk = [p for p in worker.chunk if p[0] != message[1]]
                        finish(message[1], message[2])
                    elif kind == "chunk":
                        worker.busy = False
                        if message[1]:  # it asked to be replaced: its memory stayed high
                            worker.process.join(timeout=30)
                            worker.conn.close()
                            workers.remove(worker)
                            if pending:
                                start()
                            break
                    elif kind == "fatal":
                        raise RuntimeError(f"a parity worker failed:\n{message[1]}")
                if died:
                    worker.process.join(timeout=5)
                    exitcode = worker.process.exitcode
                    if not worker.ready:
                        raise RuntimeError(f"a parity worker died while loading the suite "
                                           f"(exit code {exitcode}); run with --jobs 1 to see "
                                           f"the error")
                    workers.remove(worker)
                    stats["crashes"] += 1
                    left = worker.chunk
                    if left:
                        crashed = worker.running if worker.running is not None else left[0][0]
                        finish(crashed, _crash_outcome(exitcode))
                        left = [p for p in left if p[0] != crashed]
                        if left:
                            pending.append(left)
                    if pending:
                        start()
    finally:
        for worker in workers:
            if worker.process.is_alive():
                worker.process.kill()
            worker.process.join()
    return [o for o in outcomes if o is not None]
