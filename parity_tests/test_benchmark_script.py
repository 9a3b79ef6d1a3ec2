"""The benchmark script runs end to end (tiny sizes; no timing is asserted)."""
import subprocess
import sys
from pathlib import Path

import jax
import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_benchmark_script_writes_a_table(tmp_path):
    out, png = tmp_path / "RESULTS.md", tmp_path / "scaling.png"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--edges", "2000",
                    "--features", "4", "--nodes", "50", "--repeat", "1", "--out", str(out),
                    "--plot", str(png), "--sweep", "200,400", "--exchange-bytes", "1048576",
                    "--model-nodes", "300", "--model-edges", "1500", "--quick"],
                   check=True, capture_output=True, text=True, timeout=900)
    text = out.read_text()
    for op in ("sum", "mean", "max", "mul"):
        assert f"| {op} | sorted |" in text and f"| {op} | unsorted |" in text
    for op in ("segment_csr sum", "segment_coo max", "gather_csr", "gather_coo", "scatter_std",
               "scatter_logsumexp", "scatter_softmax", "scatter_log_softmax"):
        assert f"| {op} |" in text
    assert "| 400 | softmax |" in text and "![time vs E](scaling.png)" in text
    assert png.read_bytes().startswith(b"\x89PNG")
    assert "| GCN | " in text and "| GAT | " in text
    assert "| to_jax | " in text and "| to_torch | " in text and "| as_torch(f) + backward |" in text
    assert "converted / hand" in text and "Converting a 10-layer model" in text
    assert "| GATv2Conv x2 |" in text and "| PNAConv x2 |" in text  # part "layers"
    assert "| GCN 16 | " in text and "| GAT 8x8 | " in text  # part "matrix"
    assert "| HeteroConv(SAGEConv) x2 |" in text  # part "hetero"
    assert "| GIN epoch: JaxLoader + jit vs DataLoader + eager |" in text  # part "loader"
    assert "Edge arrays of E = " in text and "shard_map" in text  # part "scale"


@pytest.mark.skipif(jax.default_backend() != "cpu",
                    reason="checks the refusal on a machine without a GPU")
def test_gpu_benchmark_refuses_without_a_gpu_and_dry_runs_on_the_cpu(tmp_path):
    out = tmp_path / "RESULTS.md"
    out.write_text("# Benchmarks\n\n## other\n\nkept\n")
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "no GPU visible" in done.stdout
    assert out.read_text() == "# Benchmarks\n\n## other\n\nkept\n"  # untouched
    log = tmp_path / "rows.jsonl"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--allow-cpu",
                    "--edges", "2000", "--features", "4", "--nodes", "50", "--sizes", "10k",
                    "--families", "GCN,GAT,HeteroConv(SAGE)", "--widths", "16", "--repeat", "1",
                    "--matrix-repeat", "1", "--log", str(log), "--out", str(out)],
                   check=True, capture_output=True, text=True, timeout=600)
    text = out.read_text()
    assert "kept" in text and "## GPU" in text and "| scatter_max (values, argmax) |" in text
    for name in ("GCN 16", "GAT 8x8", "HeteroConv(SAGE) 16"):
        assert f"| {name} | " in text and f"| {name} | error" not in text
    # the log renders the same section again, with nothing measured
    again = tmp_path / "again.md"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--from-log", str(log),
                    "--out", str(again)], check=True, capture_output=True, text=True, timeout=600)
    assert again.read_text().split("## GPU")[1] == text.split("## GPU")[1]


def test_known_bad_jaxlib_releases_are_named():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from gpu import known_bad_jaxlib
    assert [known_bad_jaxlib(v) for v in ("0.10.1", "0.10.2", "0.10.3", "0.11.0", "0.11.1",
                                          "0.11.2", "0.9.2")] == \
        [False, True, True, True, False, False, False]
