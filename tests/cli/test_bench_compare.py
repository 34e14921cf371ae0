"""`ollama-deck bench --compare` as a user runs it: a real process, the stand-in `ollama` (managed) and the
embedded engine, real files and the real history. The server's own default settings are measured as a point
and reported against the recommended one; on a server ollama-deck did not start that is refused (status 2)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.adapters.storage.history import BenchHistory
from tests.fakes.ollama.server_fixtures import free_port

PROJECT_ROOT = Path(__file__).resolve().parents[2]
FAST = {"FAKE_OLLAMA_TOKENS_PER_S": "1000", "FAKE_OLLAMA_PROMPT_TOKENS_PER_S": "100000",
        "FAKE_OLLAMA_ANSWER_TOKENS": "10"}
SCENARIO = """
name = "two-kinds"

[[classes]]
name = "questions"
prompt_tokens = 20
output_tokens = 6
arrival = { kind = "closed", concurrency = 2 }

[[classes]]
name = "documents"
prompt_tokens = 60
output_tokens = 8
arrival = { kind = "closed", concurrency = 1 }
"""
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def bench(tmp_path: Path, *args: str, timeout: float = 180, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT), **FAST, **env)
    return subprocess.run([sys.executable, "-m", "app", "bench", "--config-dir", str(tmp_path / "cfg"), *args],
                          env=full_env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args, words", [
    (["--compare"], "--compare measures the server's own default settings, which means restarting the server"),
    (["--compare"], "Add --managed (ollama-deck starts its own server) or use --demo"),
    (["--compare-report", "x.md"], "--compare-report writes the before/after report of --compare; add --compare"),
    (["--managed", "--compare", "--compare-report", "report.txt"], "name a file ending in .md, .csv, .json, .png"),
    (["--managed", "--compare", "--compare-report", "-"], "name a file ending in .md, .csv, .json, .png"),
    (["--managed", "--compare", "--compare-report", "same.md", "--markdown", "same.md"],
     "name the same file; give each its own"),
])
def test_compare_input_problems_are_refused_with_status_2(tmp_path, monkeypatch, args, words):
    monkeypatch.chdir(tmp_path)
    result = bench(tmp_path, "--model", "m", "--url", f"http://127.0.0.1:{free_port()}", "--no-history", *args)
    assert result.returncode == 2, result.stderr
    assert words in result.stderr
    assert "Traceback" not in result.stderr


def test_compare_on_a_managed_server_measures_the_default_and_keeps_the_report(tmp_path, standin_ollama):
    scenario = tmp_path / "two.toml"
    scenario.write_text(SCENARIO)
    md, out, report, png = (tmp_path / n for n in ("run.md", "run.json", "compare.csv", "compare.png"))
    history = tmp_path / "history.sqlite3"
    result = bench(tmp_path, "--model", "qwen3:0.6b", "--url", f"http://127.0.0.1:{free_port()}", "--managed",
                   "--parallel", "2,4", "--context", "2048", "--scenario", str(scenario), "--requests", "6",
                   "--compare", "--compare-report", str(report), "--markdown", str(md), "--json", str(out),
                   "--history", str(history), "--quiet")
    assert result.returncode == 0, result.stderr
    # The table marks the default point (Ollama's parallel 1, its own context), measured first.
    rows = [line for line in result.stdout.splitlines() if "(default)" in line]
    assert len(rows) == 1 and rows[0].split()[0] == "1", result.stdout
    assert "## Before/after" in result.stdout and "OLLAMA_NUM_PARALLEL 1 (Ollama's default since 0.10.0)" in \
        result.stdout
    data = json.loads(out.read_text())
    default_points = [p for p in data["points"] if p.get("default")]
    assert [(p["index"], p["parallel"], p["context_length"]) for p in default_points] == [(0, 1, None)]
    comparison = data["comparison"]
    recommended = data["recommendation"]["index"]
    assert comparison["default"]["index"] == 0
    if recommended == 0:
        assert comparison["outcome"] == "default_recommended"
    elif recommended is None:
        assert comparison["outcome"] == "no_recommendation" and comparison["why"]
    else:
        assert comparison["outcome"] == "compared" and comparison["recommended"]["index"] == recommended
    assert [c["class"] for c in comparison["classes"]] == ["questions", "documents"]
    # Consistent with the per-point figures: the overall request counts are the points' own.
    assert comparison["overall"]["default"]["requests"] == data["points"][0]["requests"] == 6
    assert comparison["overall"]["default"]["requests_ok"] == data["points"][0]["requests_ok"]
    text = md.read_text()
    assert "## Before/after" in text and "| questions |" in text and "| all requests |" in text
    assert "Requests/day (capacity) | — |" in text  # no capacity measured: said, not invented
    rows_csv = list(csv.DictReader(report.open()))
    assert {r["scope"] for r in rows_csv} == {"questions", "documents", "all requests", "point"}
    e2e = next(r for r in rows_csv if r["scope"] == "all requests" and r["figure"] == "e2e_mean_ms")
    assert float(e2e["default"]) == pytest.approx(comparison["overall"]["default"]["e2e_mean_ms"], rel=1e-3)
    # The history keeps the run with its comparison.
    store = BenchHistory(history)
    (summary,) = store.list_runs()
    kept = store.load(summary.run_id)
    assert kept.comparison is not None and kept.comparison.default.index == 0
    assert kept.comparison.outcome.value == comparison["outcome"]
    # The same report as a chart.
    again = bench(tmp_path, "--model", "qwen3:0.6b", "--url", f"http://127.0.0.1:{free_port()}", "--managed",
                  "--parallel", "2", "--scenario", str(scenario), "--requests", "4", "--compare",
                  "--compare-report", str(png), "--no-history", "--quiet")
    assert again.returncode == 0, again.stderr
    assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 10_000


@pytest.mark.engine
def test_compare_on_the_embedded_engine(tmp_path, llama_server_binary, bundled_model):
    report, out = tmp_path / "compare.json", tmp_path / "run.json"
    result = bench(tmp_path, "--demo", "--url", f"http://127.0.0.1:{free_port()}", "--scenario", "customer-qa",
                   "--scale-lengths", "0.05", "--parallel", "1,2", "--requests", "3", "--warmup", "1", "--compare",
                   "--compare-report", str(report), "--json", str(out), "--no-history", "--quiet", timeout=600)
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    # llama-server's own default (-np auto: 4 slots sharing a unified KV cache, the model's context) is a point
    # of its own, measured first; the sweep's points follow.
    assert [(p["parallel"], p.get("default", False)) for p in data["points"]] == [(4, True), (1, False), (2, False)]
    assert data["spec"]["default_settings"]["context_length"] is None
    assert "--kv-unified" in data["spec"]["default_settings"]["extra_settings"]
    assert any("-np auto" in w for w in data["spec"]["default_words"])
    comparison = json.loads(report.read_text())
    assert comparison["default"]["index"] == 0 and comparison["default"]["label"].endswith("server default")
    assert comparison["overall"]["default"]["requests"] == 3
    assert [c["class"] for c in comparison["classes"]] == ["customer-qa"]
    recommended = data["recommendation"]["index"]
    expected = {0: "default_recommended", None: "no_recommendation"}.get(recommended, "compared")
    assert comparison["outcome"] == expected
    if expected == "compared":
        rec = next(p for p in data["points"] if p["index"] == recommended)
        assert comparison["recommended"]["index"] == recommended
        assert comparison["overall"]["recommended"]["requests_ok"] == rec["requests_ok"]
        for change in comparison["changes"]:
            # A change is a win or a loss only between two clean sides.
            if change["change"] in ("better", "worse"):
                assert comparison["default"]["state"] == comparison["recommended"]["state"] == "clean"
    assert "Before/after" in result.stdout
