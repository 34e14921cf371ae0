"""`bench` keeps what it measured when the history cannot: a real lock held by another process, and a write
failure raised by SQLite's layer in the bench process itself. The results are printed and exported, the failure
is said beside them, and the history never calls the run finished without its points."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from app.adapters.storage.history import BenchHistory
from tests.adapters.storage.test_history_safety import Holder
from tests.adapters.storage.test_history import make_run
from tests.cli.test_bench_cli import FAST, PROJECT_ROOT
from tests.fakes.ollama.server_fixtures import free_port

# The bench command with every point write of the history failing as a full disk makes SQLite fail.
DISK_FULL_AFTER_BEGIN = r"""
import sqlite3, sys
from app.adapters.storage import history

def full(*_args):
    raise sqlite3.OperationalError("database or disk is full")

history.BenchHistory._insert_point = staticmethod(full)
from app.cli import main
raise SystemExit(main(sys.argv[1:]))
"""


def _bench(tmp_path: Path, *args: str, code: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT), **FAST)
    command = [sys.executable, "-c", code] if code else [sys.executable, "-m", "app"]
    return subprocess.run([*command, "bench", "--config-dir", str(tmp_path / "cfg"), "--history",
                           str(tmp_path / "history.sqlite3"), "--model", "qwen3:0.6b", "--url",
                           f"http://127.0.0.1:{free_port()}", "--managed", "--parallel", "1,2", "--requests", "2",
                           "--num-predict", "4", "--no-think", "--quiet", "--json", str(tmp_path / "out.json"), *args],
                          env=env, capture_output=True, text=True, timeout=180)


def test_a_history_locked_by_another_program_all_along_costs_the_results_nothing(tmp_path, standin_ollama):
    path = tmp_path / "history.sqlite3"
    earlier = BenchHistory(path).save(make_run())  # a history in use, which another program then locks
    holder = Holder(path)
    try:
        result = _bench(tmp_path)
    finally:
        holder.release()
    assert result.returncode == 0, result.stderr
    assert "Tokens/s" in result.stdout and "Recommended:" in result.stdout  # the table, as without the lock
    assert [p["parallel"] for p in json.loads((tmp_path / "out.json").read_text())["points"]] == [1, 2]
    said = result.stderr
    assert "the benchmark history could not keep this run" in said and "is locked by" in said
    assert f"pid {holder.proc.pid}" in said and "this run is not in it" in said
    assert f"written to {tmp_path / 'out.json'}" in said
    assert [r.run_id for r in BenchHistory(path).list_runs()] == [earlier]  # nothing half-kept


def test_point_writes_that_fail_leave_the_run_open_not_finished_with_no_points(tmp_path, standin_ollama):
    result = _bench(tmp_path, "--csv", str(tmp_path / "out.csv"), code=DISK_FULL_AFTER_BEGIN)
    assert result.returncode == 0, result.stderr
    assert "Recommended:" in result.stdout
    assert len(json.loads((tmp_path / "out.json").read_text())["points"]) == 2
    assert len((tmp_path / "out.csv").read_text().splitlines()) == 3
    assert "database or disk is full" in result.stderr and "with 0 of its 2 points" in result.stderr
    [run] = BenchHistory(tmp_path / "history.sqlite3").list_runs()
    assert (run.status, run.points_done) == ("interrupted", 0)  # its process is gone: never "finished"
