"""The ``torch2jax-ops`` command line (also ``python -m torch2jax_ops``).

    torch2jax-ops parity [--report DIR] [--only PATTERN] [--section NAME]
                         [--x64 | --no-x64] [--quick] [--quiet] [--jobs N] [--no-cache]
                         [--no-reuse]
    torch2jax-ops tables [--write] [FILE ...]
    torch2jax-ops build-kernels [--force] [--optional]

runs the parity suite against the installed torch / torch_scatter /
torch_geometric, prints a table per op and dtype plus the documented
deviations, writes report.md, report.json, heatmap.png and a self-contained
report.html to DIR, and exits 1 when any case fails (2 when nothing matches). The cases
run in one worker process per core, each held under a memory bound, with JAX's persistent
compilation cache (``parity/_runner.py``).
build-kernels compiles the CPU kernel of the message-passing sum (a C++17 compiler,
``$CXX`` or ``c++``) into the per-user cache (``~/.cache/torch2jax_ops/kernels``);
``make`` runs it with ``--optional`` (no compiler: a warning, and the XLA forms). An
installed package without it builds it on first use.
"""
from __future__ import annotations

import argparse
import functools
import re
import sys
import time
from typing import Optional, Sequence


def _parity(args: argparse.Namespace) -> int:
    try:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.table import Table

        from .parity import DEVIATIONS
        from .parity import _report as report
        from .parity import _suite as suite
    except ImportError as exc:
        print(f"torch2jax-ops parity needs the parity extras ({exc.name} is missing): "
              f"pip install 'torch2jax_ops[parity]' (or run `make parity`)", file=sys.stderr)
        return 2

    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    try:
        cases = suite.cases(args.section, args.only, args.x64)
    except ValueError as exc:
        console.print(str(exc))
        return 2
    if args.quick:  # float32, one case per op
        cases = suite.representatives([c for c in cases if not c.x64], families=False)
    if not cases:
        console.print(f"no parity case matches --only {args.only!r}, --section {args.section!r}, "
                      f"--x64 {args.x64!r}")
        return 2
    from .parity import _runner as runner
    from .parity._memory import Limits

    jobs = args.jobs if args.jobs > 0 else runner.default_jobs()
    default = Limits.default(jobs)
    limits = Limits(maps=args.max_maps or default.maps,
                    rss=(args.max_rss_mb << 20) if args.max_rss_mb else default.rss)
    stats: dict = {}
    start = time.monotonic()
    run = functools.partial(runner.run_cases, cases, jobs=jobs, cache=args.cache,
                            limits=limits, stats=stats, fast_compile=args.fast_compile,
                            reuse=args.reuse)
    if sys.stdout.isatty() or args.quiet:
        with Progress(TextColumn("[bold]parity"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                      TextColumn("{task.description}"), console=console,
                      disable=args.quiet, transient=True) as progress:
            task = progress.add_task("", total=len(cases))
            runs = run(progress=lambda case: progress.update(task, advance=1,
                                                             description=case.id))
    else:  # a log (CI, `make parity > log`): a plain line every few seconds
        runs = run(progress=_progress_lines(len(cases), args.progress_every))
    elapsed = time.monotonic() - start
    rows = report.summarize(runs)

    table = Table(title="torch2jax_ops vs " + ", ".join(
        f"{k} {v}" for k, v in report.versions().items() if k != "python"))
    for column in ("section", "op", "dtype", "cases", "max abs err", "err/tol", "result",
                   "deviations"):
        table.add_column(column, justify="right" if column in ("cases", "max abs err",
                                                               "err/tol") else "left")
    for r in rows:
        table.add_row(r["section"], r["op"], r["dtype"], str(r["cases"]),
                      f"{r['max_abs_err']:.3g}", f"{r['worst_err_over_tol']:.3g}",
                      "[green]pass" if not r["failed"] else f"[red]FAIL ({r['failed']})",
                      ", ".join(r["deviations"]) or "-")
    console.print(table)
    console.print("\n[bold]Documented deviations[/bold] (the original is wrong or unsafe here):")
    for d in DEVIATIONS:
        console.print(f"  - {d.id} ({', '.join(d.ops)}): torch: {d.original}; "
                      f"ours: {d.ours}. Proof: {d.proof}")
    failed = [f for r in rows for f in r["failures"]]
    for f in failed[:20]:
        console.print(f"\n[red]FAILED {f['case']}[/red]\n{f['error'] or f['detail']}")
    if args.report:
        paths = report.write_report(rows, args.report, reused=stats.get("reused", 0))
        console.print("\nreport written: " + ", ".join(paths.values()))
    total = sum(r["cases"] for r in rows)
    console.print(f"\n{total - len(failed)} passed, {len(failed)} failed in {elapsed:.0f} s "
                  f"({jobs} worker{'s' if jobs > 1 else ''}; {stats['workers']} started, "
                  f"{stats['releases']} releases of compiled programs, at most "
                  f"{stats['peak_maps']} memory maps and {stats['peak_rss'] >> 20} MB a worker; "
                  f"compilation cache: {runner.cache_dir() if args.cache else 'off'})")
    if stats.get("reused"):
        console.print(f"{stats['reused']} of {total} results reused from an earlier run with "
                      f"the same code, libraries, machine and options (--no-reuse runs "
                      f"them again)")
    return 1 if failed else 0


#: generated sections of the guide: name -> function returning the Markdown
def _generators() -> dict:
    from .nn._registry import mapping_table
    from .parity._coverage import coverage_table
    from .parity._torch_nn_coverage import torch_nn_coverage_table
    return {"mapping-table": mapping_table, "coverage-table": coverage_table,
            "torch-nn-coverage-table": torch_nn_coverage_table}


_GENERATED = re.compile(r"(<!-- generated: ([\w-]+) -->\n)(.*?)(<!-- end generated -->)", re.S)


def _tables(args: argparse.Namespace) -> int:
    """Check (or with --write, refresh) the generated tables of the guide pages."""
    import pathlib

    generators = _generators()
    files = args.files or sorted(str(p) for p in pathlib.Path("migration_guide").glob("*.md"))
    stale = []
    for name in files:
        path = pathlib.Path(name)
        text = path.read_text()

        def fill(match: re.Match, path: pathlib.Path = path) -> str:
            table = generators[match.group(2)]()
            if match.group(3).strip() != table.strip():
                stale.append(f"{path}: {match.group(2)}")
            return f"{match.group(1)}{table}\n{match.group(4)}"

        new = _GENERATED.sub(fill, text)
        if args.write and new != text:
            path.write_text(new)
    if stale and not args.write:
        print("out of date (run `torch2jax-ops tables --write`): " + ", ".join(stale))
        return 1
    print(("refreshed: " if args.write else "up to date: ") + (", ".join(stale) or "all"))
    return 0


def _progress_lines(total: int, every: float):
    """A callback printing ``parity: done/total (pct) elapsed, current case`` every ``every`` s."""
    import time

    start = last = time.monotonic()
    done = [0]

    def tick(case) -> None:
        nonlocal last
        done[0] += 1
        now = time.monotonic()
        if now - last >= every or done[0] == total:
            last = now
            left = (now - start) / done[0] * (total - done[0])
            print(f"parity: {done[0]}/{total} ({100 * done[0] // max(total, 1)}%) "
                  f"{now - start:.0f}s elapsed, ETA {left:.0f}s, {case.id}", flush=True)
    return tick


def _build_kernels(args: argparse.Namespace) -> int:
    from .geometric._core import _cpu_kernel
    try:
        path = _cpu_kernel.build(force=args.force)
    except RuntimeError as exc:
        if args.optional:  # set-up goes on: the callers keep their XLA forms
            print(f"torch2jax-ops build-kernels: warning: {exc}\nThe CPU kernel is not "
                  f"built: the message-passing sums use their XLA forms (the same values, "
                  f"slower on the CPU).", file=sys.stderr)
            return 0
        print(f"torch2jax-ops build-kernels: {exc}", file=sys.stderr)
        return 1
    print(f"CPU kernel: {path}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="torch2jax-ops", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    parity = commands.add_parser("parity", help="compare every op with the real torch libraries")
    parity.add_argument("--report", metavar="DIR",
                        help="write report.md, report.json, heatmap.png and report.html here")
    parity.add_argument("--only", metavar="PATTERN",
                        help="run the cases whose id contains PATTERN (or matches it as a glob)")
    parity.add_argument("--section", help="run one section of the suite (scatter, segment, "
                        "composite, bridge, autograd, geometric, models, convs, ...)")
    parity.add_argument("--x64", action=argparse.BooleanOptionalAction, default=None,
                        help="--x64: only the cases run in JAX's 64-bit mode (float64, int64); "
                             "--no-x64: only the others (default: both)")
    parity.add_argument("--quiet", action="store_true", help="no progress bar")
    parity.add_argument("--jobs", "-j", type=int, default=0, metavar="N",
                        help="worker processes (default: one per core); the report is the "
                             "same for any N")
    parity.add_argument("--max-maps", type=int, default=0, metavar="N",
                        help="memory maps a worker may hold before it drops its compiled "
                             "programs (default: a quarter of vm.max_map_count)")
    parity.add_argument("--max-rss-mb", type=int, default=0, metavar="MB",
                        help="resident MB a worker may hold before it drops its compiled "
                             "programs (default: the smaller of 3 GiB and half the memory over "
                             "the workers)")
    parity.add_argument("--fast-compile", action=argparse.BooleanOptionalAction, default=True,
                        help="compile with XLA:CPU's cheap settings (LLVM unoptimised, the "
                             "classic emitters): half the compile time, results equal to the "
                             "last bits (default: on; --no-fast-compile: XLA's defaults)")
    parity.add_argument("--cache", action=argparse.BooleanOptionalAction, default=True,
                        help="JAX's persistent compilation cache in a per-user folder "
                             "($TORCH2JAX_OPS_CACHE_DIR, else ~/.cache/torch2jax_ops/jax), so "
                             "a second run recompiles nothing (default: on; --no-cache: off)")
    parity.add_argument("--reuse", action=argparse.BooleanOptionalAction, default=True,
                        help="take a case's result from an earlier run whose code, "
                             "libraries, machine and options were the same (a hash of all "
                             "of them, ~/.cache/torch2jax_ops/parity-results): a repeat run "
                             "recomputes nothing (default: on; --no-reuse: run every case)")
    parity.add_argument("--quick", action="store_true",
                        help="float32, one case per op (about a minute): a smoke test")
    parity.add_argument("--progress-every", type=float, default=5.0, metavar="SECONDS",
                        help="when the output is not a terminal, print a progress line this "
                             "often (default 5)")
    tables = commands.add_parser("tables", help="check or refresh the guide's generated tables "
                                                "(the fx mapping table, the PyG coverage table)")
    tables.add_argument("files", nargs="*", help="pages to check (default: migration_guide/*.md)")
    tables.add_argument("--write", action="store_true", help="rewrite the stale tables")
    kernels = commands.add_parser("build-kernels", help="compile the CPU kernel of the "
                                  "message-passing sum (make runs it)")
    kernels.add_argument("--force", action="store_true", help="rebuild even when it is built")
    kernels.add_argument("--optional", action="store_true",
                         help="without a working C++ compiler, warn and exit 0 (set-up goes "
                              "on; the XLA forms are used)")
    args = parser.parse_args(argv)
    if args.command == "build-kernels":
        return _build_kernels(args)
    return _tables(args) if args.command == "tables" else _parity(args)


if __name__ == "__main__":
    sys.exit(main())
