"""The benchmark script runs end to end (tiny sizes; no timing is asserted)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_benchmark_script_writes_a_table(tmp_path):
    out = tmp_path / "RESULTS.md"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--edges", "2000",
                    "--features", "4", "--nodes", "50", "--repeat", "1", "--out", str(out)],
                   check=True, capture_output=True, text=True, timeout=300)
    text = out.read_text()
    for op in ("sum", "mean", "max", "mul"):
        assert f"| {op} | sorted |" in text and f"| {op} | unsorted |" in text
