"""The parity report: run the suite, aggregate per (section, op, dtype), write it out.

``write_report`` writes ``report.md``, ``report.json``, ``heatmap.png`` (op x
dtype, coloured by the worst error relative to its tolerance) and
``report.html``, one self-contained page with the heat-map inlined.
"""
from __future__ import annotations

import base64
import html
import io
import json
import math
import pathlib
import platform
from typing import Callable, Optional

from .. import _dtypes
from ._deviations import DEVIATIONS, deviations_of
from ._runner import run_cases
from ._suite import Case

__all__ = ["run_suite", "summarize", "to_markdown", "to_html", "heatmap_png", "write_report"]


def run_suite(cases: list[Case], progress: Optional[Callable[[Case], None]] = None, *,
              jobs: int = 0, cache: bool = False) -> list:
    """Run the cases (:func:`._runner.run_cases`; by default here, without the disk cache)."""
    return run_cases(cases, jobs=jobs, cache=cache, progress=progress)


def summarize(runs: list) -> list[dict]:
    """One row per (section, op, dtype): cases, failures, worst error, deviations."""
    rows: dict = {}
    for run in runs:
        if run.get("skipped"):  # not verifiable on the installed torch (Case.min_torch)
            continue
        case, result = run["case"], run["result"]
        row = rows.setdefault((case.section, case.op, case.dtype), {
            "section": case.section, "op": case.op, "dtype": case.dtype, "cases": 0,
            "failed": 0, "max_abs_err": 0.0, "worst_err_over_tol": 0.0, "failures": [],
            "deviations": [d.id for d in deviations_of(case.op.split("-")[0])]})
        row["cases"] += 1
        if run["error"] or not result.passed:
            row["failed"] += 1
            row["failures"].append({"case": case.id, "error": run["error"],
                                    "detail": None if result is None else str(result)})
        if result is not None:
            finite = [leaf.max_abs for leaf in result.leaves if math.isfinite(leaf.max_abs)]
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
    lines += [f"**{total - failed} of {total} cases pass** ({failed} failed).", "",
              "![worst error / tolerance per op and dtype](heatmap.png)", ""]
    for section, section_rows in _section_rows(rows).items():
        lines += [f"## {section}", "",
                  "| op | dtype | cases | max abs err | worst err/tol | result | deviations |",
                  "|---|---|---:|---:|---:|---|---|"]
        for r in section_rows:
            lines.append(f"| {r['op']} | {r['dtype']} | {r['cases']} | {r['max_abs_err']:.3g} | "
                         f"{r['worst_err_over_tol']:.3g} | "
                         f"{'pass' if not r['failed'] else 'FAIL ({})'.format(r['failed'])} | "
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
    found["devices"] = ", ".join(sorted({d.platform for d in jax.devices()}))
    found["matmul precision"] = "highest (no TF32 on either side)"
    return found


def _section_rows(rows: list[dict]) -> dict:
    return {section: [r for r in rows if r["section"] == section]
            for section in dict.fromkeys(r["section"] for r in rows)}


def _dtype_columns(rows: list[dict]) -> list[str]:
    present = {r["dtype"] for r in rows}
    known = [name for name in _dtypes.ALL_NAMES if name in present]
    return known + sorted(present - set(known))


def heatmap_png(rows: list[dict]) -> bytes:
    """The heat-map as PNG bytes: one row per (section, op), one column per dtype.

    Colour: worst |error| / allowed error over the cases of the cell, on a log
    scale from 1e-4 (green, far inside tolerance) to 10 (red); a cell with a
    failing case is hatched and marked FAIL; grey: not run.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import LogNorm

    labels = [(r["section"], r["op"]) for r in rows]
    ops = list(dict.fromkeys(labels))
    columns = _dtype_columns(rows)
    grid = np.full((len(ops), len(columns)), np.nan)
    failed = np.zeros(grid.shape, bool)
    for r in rows:
        i, j = ops.index((r["section"], r["op"])), columns.index(r["dtype"])
        grid[i, j] = min(max(r["worst_err_over_tol"], 1e-4), 10.0)
        failed[i, j] = bool(r["failed"])
    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * len(columns), 1.2 + 0.22 * len(ops)))
    cmap = plt.get_cmap("RdYlGn_r").with_extremes(bad="#dddddd")
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, aspect="auto",
                      norm=LogNorm(vmin=1e-4, vmax=10.0), interpolation="nearest")
    for i, j in zip(*np.nonzero(failed)):
        ax.text(j, i, "FAIL", ha="center", va="center", fontsize=7, fontweight="bold")
    ax.set_xticks(range(len(columns)), columns, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(ops)), [f"{s}: {o}" for s, o in ops], fontsize=7)
    ax.set_title("worst error / tolerance (<= 1 passes)", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:80em}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.2em .6em}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
.pass{color:#176117}.fail{color:#b00020;font-weight:bold}pre{background:#f7f7f7;padding:.6em;
overflow:auto;font-size:85%}"""


def to_html(rows: list[dict], versions: dict, heatmap: Optional[bytes] = None) -> str:
    """One self-contained HTML page: summary, heat-map (inlined), a table per section,
    the documented deviations and every failure's table."""
    e = html.escape
    total = sum(r["cases"] for r in rows)
    failed = sum(r["failed"] for r in rows)
    out = ["<!doctype html><html><head><meta charset='utf-8'>",
           "<title>torch2jax_ops parity report</title>", f"<style>{_STYLE}</style></head><body>",
           "<h1>torch2jax_ops parity report</h1>",
           "<p>" + e(", ".join(f"{k} {v}" for k, v in versions.items())) + "</p>",
           f"<p class='{'pass' if not failed else 'fail'}'>{total - failed} of {total} cases "
           f"pass ({failed} failed).</p>"]
    if heatmap:
        out.append("<img alt='worst error / tolerance per op and dtype' src='data:image/png;"
                   "base64," + base64.b64encode(heatmap).decode() + "'>")
    for section, section_rows in _section_rows(rows).items():
        out += [f"<h2>{e(section)}</h2><table><tr><th>op</th><th>dtype</th><th>cases</th>"
                "<th>max abs err</th><th>worst err/tol</th><th>result</th><th>deviations</th></tr>"]
        for r in section_rows:
            result = ("<td class='pass'>pass</td>" if not r["failed"]
                      else f"<td class='fail'>FAIL ({r['failed']})</td>")
            out.append(f"<tr><td>{e(r['op'])}</td><td>{e(r['dtype'])}</td>"
                       f"<td class='num'>{r['cases']}</td><td class='num'>{r['max_abs_err']:.3g}</td>"
                       f"<td class='num'>{r['worst_err_over_tol']:.3g}</td>{result}"
                       f"<td>{e(', '.join(r['deviations']) or '-')}</td></tr>")
        out.append("</table>")
    out += ["<h2>Documented deviations</h2><p>Where the original is wrong or unsafe, we differ "
            "on purpose; each has a proof.</p><table><tr><th>id</th><th>ops</th><th>original</th>"
            "<th>torch2jax_ops</th><th>proof</th></tr>"]
    for d in DEVIATIONS:
        out.append(f"<tr><td>{e(d.id)}</td><td>{e(', '.join(d.ops))}</td><td>{e(d.original)}</td>"
                   f"<td>{e(d.ours)}</td><td><code>{e(d.proof)}</code></td></tr>")
    out.append("</table>")
    failures = [f for r in rows for f in r["failures"]]
    if failures:
        out.append("<h2>Failures</h2>")
        for f in failures:
            out.append(f"<h3>{e(f['case'])}</h3><pre>{e(f['error'] or f['detail'])}</pre>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write_report(rows: list[dict], directory: str, reused: int = 0) -> dict:
    """Write report.md, report.json, heatmap.png and report.html into ``directory``.

    ``reused``: how many results an earlier run with the same code, libraries, machine
    and options computed (said in the versions block). Returns the paths by format
    ("markdown", "json", "heatmap", "html").
    """
    folder = pathlib.Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    info = versions()
    if reused:
        info["results reused"] = (f"{reused} from an earlier run with the same code, "
                                  f"libraries, machine and options")
    paths = {"markdown": folder / "report.md", "json": folder / "report.json",
             "heatmap": folder / "heatmap.png", "html": folder / "report.html"}
    picture = heatmap_png(rows)
    paths["markdown"].write_text(to_markdown(rows, info))
    paths["json"].write_text(json.dumps({"versions": info, "rows": rows,
                                         "deviations": [d.to_dict() for d in DEVIATIONS]},
                                        indent=1))
    paths["heatmap"].write_bytes(picture)
    paths["html"].write_text(to_html(rows, info, picture))
    return {k: str(v) for k, v in paths.items()}
