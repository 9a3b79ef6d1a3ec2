"""The parity report: run the suite, aggregate per (section, op, dtype), write Markdown/JSON."""
from __future__ import annotations

import json
import math
import pathlib
import platform
from typing import Callable, Optional

from .deviations import DEVIATIONS, for_op
from .suite import Case, run_case

__all__ = ["run_suite", "summarize", "to_markdown", "write_report"]


def run_suite(cases: list[Case], progress: Optional[Callable[[Case], None]] = None) -> list:
    runs = []
    for case in cases:
        runs.append(run_case(case))
        if progress:
            progress(case)
    return runs


def summarize(runs: list) -> list[dict]:
    """One row per (section, op, dtype): cases, failures, worst error, deviations."""
    rows: dict = {}
    for run in runs:
        case, result = run["case"], run["result"]
        row = rows.setdefault((case.section, case.op, case.dtype), {
            "section": case.section, "op": case.op, "dtype": case.dtype, "cases": 0,
            "failed": 0, "max_abs_err": 0.0, "worst_err_over_tol": 0.0, "failures": [],
            "deviations": [d.id for d in for_op(case.op.split("-")[0])]})
        row["cases"] += 1
        if run["error"] or not result.passed:
            row["failed"] += 1
            row["failures"].append({"case": case.id, "error": run["error"],
                                    "detail": None if result is None else str(result)})
        if result is not None:
            finite = [l.max_abs for l in result.leaves if math.isfinite(l.max_abs)]
            row["max_abs_err"] = max([row["max_abs_err"], *finite])
            ratio = result.tol_ratio
            row["worst_err_over_tol"] = max(row["worst_err_over_tol"],
                                            ratio if math.isfinite(ratio) else 1e300)
    return list(rows.values())


def to_markdown(rows: list[dict], versions: dict) -> str:
    lines = ["# torch2jax_ops parity report", "",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()), ""]
    total = sum(r["cases"] for r in rows)
    failed = sum(r["failed"] for r in rows)
    lines += [f"**{total - failed} of {total} cases pass** ({failed} failed).", ""]
    for section in dict.fromkeys(r["section"] for r in rows):
        lines += [f"## {section}", "",
                  "| op | dtype | cases | max abs err | worst err/tol | result | deviations |",
                  "|---|---|---:|---:|---:|---|---|"]
        for r in (r for r in rows if r["section"] == section):
            lines.append(f"| {r['op']} | {r['dtype']} | {r['cases']} | {r['max_abs_err']:.3g} | "
                         f"{r['worst_err_over_tol']:.3g} | "
                         f"{'pass' if not r['failed'] else 'FAIL (%d)' % r['failed']} | "
                         f"{', '.join(r['deviations']) or '-'} |")
        lines.append("")
    lines += ["## Documented deviations", "",
              "Where the original is wrong or unsafe, we differ on purpose; each has a proof.", "",
              "| id | ops | original | torch2jax_ops | proof |", "|---|---|---|---|---|"]
    for d in DEVIATIONS:
        lines.append(f"| {d.id} | {', '.join(d.ops)} | {d.original} | {d.ours} | `{d.proof}` |")
    failures = [f for r in rows for f in r["failures"]]
    if failures:
        lines += ["", "## Failures", ""]
        for f in failures:
            lines += [f"### {f['case']}", "", "```", f["error"] or f["detail"], "```", ""]
    return "\n".join(lines) + "\n"


def versions() -> dict:
    import jax

    found = {"python": platform.python_version(), "jax": jax.__version__}
    for name in ("torch", "torch_scatter", "torch_geometric"):
        try:
            found[name] = __import__(name).__version__
        except ImportError:
            found[name] = "not installed"
    return found


def write_report(rows: list[dict], directory: str) -> dict:
    """Write report.md and report.json into ``directory``; returns their paths."""
    folder = pathlib.Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    info = versions()
    md, js = folder / "report.md", folder / "report.json"
    md.write_text(to_markdown(rows, info))
    js.write_text(json.dumps({"versions": info, "rows": rows,
                              "deviations": [d.to_dict() for d in DEVIATIONS]}, indent=1))
    return {"markdown": str(md), "json": str(js)}
