"""`ollama-deck bench` as a user runs it: a real process, the stand-in `ollama` on PATH, real files."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

from app.adapters.storage.history import BenchHistory
from tests.fakes.ollama.server_fixtures import free_port
from tests.fakes.ollama.recorded import real_version

PROJECT_ROOT = Path(__file__).resolve().parents[2]
FAST = {"FAKE_OLLAMA_TOKENS_PER_S": "1000", "FAKE_OLLAMA_PROMPT_TOKENS_PER_S": "100000",
        "FAKE_OLLAMA_ANSWER_TOKENS": "10", "FAKE_OLLAMA_DECODE_SLOWDOWN": "0.5"}


def bench(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT), **FAST, **env)
    return subprocess.run([sys.executable, "-m", "app", "bench", "--config-dir", str(tmp_path / "cfg"),
                           "--history", str(tmp_path / "history.sqlite3"), *args],
                          env=full_env, capture_output=True, text=True, timeout=120)


def test_managed_sweep_prints_the_table_writes_json_and_csv_and_keeps_history(tmp_path, standin_ollama):
    out, table = tmp_path / "out.json", tmp_path / "out.csv"
    result = bench(tmp_path, "--model", "qwen3:0.6b", "--url", f"http://127.0.0.1:{free_port()}", "--managed",
                   "--parallel", "1,2,4", "--requests", "4", "--num-predict", "8", "--no-think",
                   "--json", str(out), "--csv", str(table), FAKE_OLLAMA_OOM_ABOVE_MIB="2200")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "Parallel" in lines[2] and "Tokens/s" in lines[2] and "Stable?" in lines[2]
    assert any(line.lstrip().startswith("4") and "✖ OOM at load" in line for line in lines)
    assert "Recommended: parallel 2" in result.stdout
    assert "restarting" in result.stderr and "measuring" in result.stderr  # progress goes to stderr
    data = json.loads(out.read_text())
    points = data["points"]
    assert [p["parallel"] for p in points] == [1, 2, 4] and [p["concurrency"] for p in points] == [1, 2, 4]
    for key in ("requests_ok", "requests_failed", "output_tokens_per_s", "ttft_ms_mean", "ttft_ms_p50", "ttft_ms_p95",
                "tpot_ms_p50", "tpot_ms_p95", "e2e_ms_p95", "vram_peak_mib", "status"):
        assert key in points[0]
    assert points[0]["requests_ok"] == 4 and points[0]["vram_peak_mib"] is None  # no NVML here: null, not 0
    assert points[2]["status"] == "failed" and points[2]["output_tokens_per_s"] is None
    assert data["recommendation"]["point"]["parallel"] == 2
    assert data["fingerprint"]["ollama_version"] == real_version()
    rows = list(csv.DictReader(table.open()))
    assert [r["status"] for r in rows] == ["ok", "ok", "failed"]
    runs = BenchHistory(tmp_path / "history.sqlite3").list_runs()
    assert len(runs) == 1 and runs[0].points_done == 3 and runs[0].status == "finished"


def test_client_concurrency_on_an_attached_server(tmp_path, external_standin):
    # Two decode slots, so a second client really adds throughput rather than a timing coin-toss.
    server = external_standin(OLLAMA_NUM_PARALLEL="2", **FAST)
    result = bench(tmp_path, "--model", "qwen3:0.6b", "--url", f"http://127.0.0.1:{server.port}",
                   "--concurrency", "1,2", "--requests", "4", "--json", "-", "--quiet", "--no-history")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)  # the JSON alone on stdout; the table went to stderr
    assert [(p["parallel"], p["concurrency"]) for p in data["points"]] == [(None, 1), (None, 2)]
    assert "Clients" in result.stderr and "Recommended: 2 clients" in result.stderr
    assert not (tmp_path / "history.sqlite3").exists()


def test_bad_input_says_what_to_do(tmp_path):
    result = bench(tmp_path, "--model", "m", "--parallel", "1,2")
    assert result.returncode == 2 and "need --managed" in result.stderr
    result = bench(tmp_path, "--model", "m", "--managed", "--parallel", "1,x")
    assert result.returncode == 2 and "'x' is not a whole number" in result.stderr
    result = bench(tmp_path, "--model", "m", "--prompt-file", str(tmp_path / "missing.txt"))
    assert result.returncode == 2 and "cannot read --prompt-file" in result.stderr


def test_a_server_that_is_not_there(tmp_path):
    result = bench(tmp_path, "--model", "qwen3:0.6b", "--url", f"http://127.0.0.1:{free_port()}", "--quiet")
    assert result.returncode == 1
    assert "Cannot connect to Ollama" in result.stderr and "Is the server running?" in result.stderr
