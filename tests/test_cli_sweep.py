"""``kvbudget sweep`` (CSV, values, row errors, plots) and ``kvbudget ratio`` as a subprocess."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import A40, ENV, GIB, REF1, gemma_eagle3_cfg, run


# ----------------------------------------------------------------------------- sweep


def _read_csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_sweep_ratio_writes_csv(tmp_path: Path) -> None:
    out = tmp_path / "results.csv"
    r = run(
        "sweep",
        *REF1,  # REFERENCE section 5, example 1
        "--vary",
        "ratio",
        "--start",
        "0.2",
        "--stop",
        "0.8",
        "--steps",
        "4",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    rows = _read_csv(out.read_text())
    assert [float(row["value"]) for row in rows] == pytest.approx([0.2, 0.4, 0.6, 0.8])
    for row in rows:
        assert row["error"] == ""
        ratio = float(row["value"])
        cfg = gemma_eagle3_cfg(swa_full_tokens_ratio=ratio)
        plan = cfg.plan(A40, fit="exact")
        sizes = cfg.calculate_pool_sizes(A40)
        assert int(row["full_tokens"]) == plan.pool("full").tokens  # type: ignore[union-attr]
        assert int(row["swa_tokens"]) == plan.pool("swa").tokens  # type: ignore[union-attr]
        assert int(row["draft_tokens"]) == plan.pool("draft").tokens  # type: ignore[union-attr]
        assert int(row["total_bytes"]) == plan.total_bytes
        assert int(row["sglang_full_tokens"]) == sizes.full_max_total_num_tokens
        assert int(row["sglang_swa_tokens"]) == sizes.swa_max_total_num_tokens
        assert int(row["available_bytes"]) == A40
    assert rows[-1]["sglang_full_tokens"] == "99674"
    assert "sweep" in r.stderr  # the progress bar goes to stderr
    assert "wrote 4 rows" in r.stderr


def test_sweep_values_tp_and_page_size_to_stdout() -> None:
    r = run(
        "sweep",
        *REF1,
        "--vary",
        "tp",
        "--values",
        "1,2,4",
        "8",
        "--page-size",
        "64",
        "--out",
        "-",
        "--no-progress",
    )
    assert r.returncode == 0, r.stderr
    rows = _read_csv(r.stdout)
    assert [int(row["tp_size"]) for row in rows] == [1, 2, 4, 8]
    assert rows[0]["sglang_full_tokens"] == "99648"  # REFERENCE example 1 at p 64
    tokens = [int(row["full_tokens"]) for row in rows]
    assert tokens == sorted(tokens)

    r = run(
        "sweep",
        "llama-3.1-8b",
        "--available",
        "20GiB",
        "--vary",
        "page-size",
        "--values",
        "1",
        "16",
        "64",
        "--out",
        "-",
        "--no-progress",
    )
    assert r.returncode == 0, r.stderr
    rows = _read_csv(r.stdout)
    assert [int(row["page_size"]) for row in rows] == [1, 16, 64]
    assert all(int(row["full_tokens"]) % int(row["page_size"]) == 0 for row in rows)


def test_sweep_available_with_units() -> None:
    r = run(
        "sweep",
        *REF1[:3],
        "--vary",
        "available",
        "--values",
        "10GiB",
        "40GiB",
        "80GB",
        "--out",
        "-",
        "--no-progress",
    )
    assert r.returncode == 0, r.stderr
    rows = _read_csv(r.stdout)
    assert [int(row["available_bytes"]) for row in rows] == [10 * GIB, A40, 80 * 10**9]
    full = [int(row["full_tokens"]) for row in rows]
    assert full == sorted(full)  # INV-3: more budget never gives fewer tokens
    assert full[1] == 99_673


def test_sweep_records_planning_errors_per_row(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    r = run(
        "sweep",
        *REF1[:3],
        "--vary",
        "ratio",
        "--values",
        "0.01",
        "0.5",
        "--available",
        "2GiB",
        "--out",
        str(out),
        "--no-progress",
    )
    assert r.returncode == 0, r.stderr
    rows = _read_csv(out.read_text())
    assert "SWAPoolTooSmallError" in rows[0]["error"]
    assert rows[1]["error"] == "" and int(rows[1]["full_tokens"]) > 0
    # every value failing is a planning error
    r = run("sweep", *REF1[:3], "--vary", "ratio", "--values", "0.01", "--available", "2GiB", "--no-progress")
    assert r.returncode == 1


def test_sweep_plot_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "out.png"
    csv_path = tmp_path / "out.csv"
    r = run(
        "sweep",
        "--vary",
        "ratio",
        "--values",
        "0.01",
        "0.2",
        "0.4",
        "0.6",
        "0.8",
        "--available",
        "8GiB",
        "--page-size",
        "64",
        "--out",
        str(csv_path),
        "--plot",
        str(png),
        "--no-progress",
    )
    assert r.returncode == 0, r.stderr
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 10_000


def test_sweep_plot_without_matplotlib_is_a_clear_error(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.modules['matplotlib'] = None\n"
        "from kvbudget.cli import main\n"
        f"raise SystemExit(main(['sweep', '--vary', 'ratio', '--values', '0.5', '--plot', {str(tmp_path / 'x.png')!r}]))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=120
    )
    assert r.returncode == 1
    assert "matplotlib" in r.stderr and "pip install" in r.stderr
    assert not (tmp_path / "x.png").exists()


# --------------------------------------------------------------------------- ratio


def test_ratio_json_matches_the_api() -> None:
    r = run("ratio", *REF1[:3], "--context-lengths", "512,4096", "32000", "--chunked-prefill-size", "8192",
            "--available", "30GiB", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    from kvbudget.workload import suggest_swa_ratio

    cfg = gemma_eagle3_cfg(chunked_prefill_size=8192)
    want = suggest_swa_ratio(cfg, [512, 4096, 32000], 30 << 30)
    assert doc["ratio"] == want.ratio
    assert doc["concurrency"] == want.concurrency >= doc["baseline_concurrency"]
    assert doc["context_lengths"] == [512, 4096, 32000]


def test_ratio_table_and_errors() -> None:
    r = run("ratio", "--context-lengths", "100000", "--available", "30GiB")
    assert r.returncode == 0, r.stderr
    assert "suggested" in r.stdout and "--swa-full-tokens-ratio" in r.stdout
    bad = run("ratio", "--context-lengths", "x", "--available", "30GiB")
    assert bad.returncode == 2 and "not an integer" in bad.stderr
    missing = run("ratio", "--available", "30GiB")
    assert missing.returncode == 2
    full_only = run("ratio", "llama-3.1-8b", "--context-lengths", "1000", "--available", "30GiB")
    assert full_only.returncode == 1 and "HybridSWAPoolConfigurator" in full_only.stderr
