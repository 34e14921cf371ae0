"""The benchmark history in a real SQLite file: kept across restarts, atomic per point and per run,
intact after a writer is killed mid-transaction, and honest about runs a dead process left behind."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from app.adapters.storage.history import SCHEMA_VERSION, BenchHistory, HistoryError
from app.core.bench.stats import LatencyTargets, RequestRecord, summarize
from app.core.bench.workload import LoadPlan
from app.core.server.settings import ServerSettings
from app.core.bench.outcome import FailureKind, PointStatus, RunStatus
from app.core.bench.sweep import Fingerprint, GpuFigures, PointResult, SweepAxes, SweepSpec
from app.core.bench.run import SweepRun

PROJECT_ROOT = Path(__file__).resolve().parents[3]
TARGETS = LatencyTargets(1000, 100)


def make_run(points: int = 3, records: int = 4) -> SweepRun:
    spec = SweepSpec(ServerSettings(backend="ollama"), SweepAxes(parallel=tuple(2 ** i for i in range(points))),
                     LoadPlan("qwen3:14b", requests=records), TARGETS)
    plan = spec.plan()
    results = []
    for p in plan.points[:-1]:
        recs = tuple(RequestRecord(i, 0.0, 0.0, 1.0 + p.index * 0.1, first_token_s=0.1, output_tokens=20,
                                   output_chunks=20, itl_s=(0.05,) * 19) for i in range(records))
        results.append(PointResult(p, PointStatus.OK, stats=summarize(recs, TARGETS), records=recs,
                                   gpu=GpuFigures(server_peak_mib=10_000.0 + p.index)))
    results.append(PointResult(plan.points[-1], PointStatus.FAILED, "out of memory at load", detail="cudaMalloc failed",
                               failure=FailureKind.OUT_OF_MEMORY))
    run = SweepRun(spec, Fingerprint(gpu_name="NVIDIA GeForce RTX 4090", server_version="0.12.6", model="qwen3:14b",
                                     backend_kind="ollama"),
                   plan.points, plan.varying, tuple(results), started_at="2026-08-01T12:00:00+02:00")
    return run.finished(RunStatus.FINISHED, "2026-08-01T12:05:00+02:00")


def test_a_run_is_kept_across_restarts_with_every_request(tmp_path):
    path = tmp_path / "data" / "benchmarks.sqlite3"
    run = make_run()
    run_id = BenchHistory(path).save(run)
    again = BenchHistory(path)  # a fresh object, as after the app restarted
    [summary] = again.list_runs()
    assert (summary.run_id, summary.status, summary.points_planned, summary.points_done) == (run_id, "finished", 3, 3)
    assert summary.model == "qwen3:14b" and summary.recommended == "parallel 1"
    assert summary.best_tokens_per_s == pytest.approx(run.recommendation.output_tokens_per_s)
    loaded = again.load(run_id)
    assert loaded.run_id == run_id
    assert [r.status for r in loaded.results] == [PointStatus.OK, PointStatus.OK, PointStatus.FAILED]
    assert loaded.results[0].records == run.results[0].records
    assert loaded.results[1].stats == run.results[1].stats
    assert loaded.results[2].detail == "cudaMalloc failed"
    assert loaded.recommendation == run.recommendation and loaded.fingerprint == run.fingerprint
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_points_are_stored_as_they_finish(tmp_path):
    history = BenchHistory(tmp_path / "h.sqlite3")
    run = make_run()
    started = SweepRun(run.spec, run.fingerprint, run.points, run.varying, started_at=run.started_at)
    run_id = history.begin(started)
    history.add_point(run_id, run.results[0])
    [summary] = history.list_runs()
    assert summary.status == "running" and summary.points_done == 1  # this process is alive: still running
    assert history.load(run_id).results[0].records == run.results[0].records
    for result in run.results[1:]:
        history.add_point(run_id, result)
    history.finish(run_id, run)
    assert history.list_runs()[0].status == "finished"


def test_delete_removes_a_run_and_its_points(tmp_path):
    history = BenchHistory(tmp_path / "h.sqlite3")
    first, second = history.save(make_run()), history.save(make_run(points=2))
    history.delete(first)
    assert [s.run_id for s in history.list_runs()] == [second]
    with sqlite3.connect(tmp_path / "h.sqlite3") as conn:
        assert conn.execute("SELECT COUNT(*) FROM points WHERE run_id = ?", (first,)).fetchone()[0] == 0
    with pytest.raises(HistoryError, match="no run"):
        history.load(first)


WRITER = r"""
import sys
sys.path.insert(0, sys.argv[2])
from pathlib import Path
from tests.adapters.storage.test_history import make_run
from app.adapters.storage.history import BenchHistory
history = BenchHistory(Path(sys.argv[1]))
mode = sys.argv[3]
if mode == "forever":
    n = 0
    while True:
        history.save(make_run(points=6, records=40))
        n += 1
        print(n, flush=True)
else:
    run = make_run()
    started = type(run)(run.spec, run.fingerprint, run.points, run.varying, started_at=run.started_at)
    run_id = history.begin(started)
    history.add_point(run_id, run.results[0])
    print("begun", flush=True)
    sys.stdin.read()
"""


def writer(path: Path, mode: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(PROJECT_ROOT), mode],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def test_a_writer_killed_mid_write_leaves_whole_runs_only(tmp_path):
    path = tmp_path / "h.sqlite3"
    child = writer(path, "forever")
    assert child.stdout is not None
    for _ in range(3):  # three runs committed; it is writing the fourth now
        assert child.stdout.readline().strip()
    child.send_signal(signal.SIGKILL)
    child.wait(10)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    runs = BenchHistory(path).list_runs()
    assert len(runs) >= 3
    for summary in runs:  # each run was one transaction: all six points, or absent
        assert summary.points_done == summary.points_planned == 6 and summary.status == "finished"
        assert len(BenchHistory(path).load(summary.run_id).results) == 6


def test_a_run_whose_process_died_is_listed_as_interrupted_with_its_points(tmp_path):
    path = tmp_path / "h.sqlite3"
    child = writer(path, "begin")
    assert child.stdout is not None and child.stdout.readline().strip() == "begun"
    os.kill(child.pid, signal.SIGKILL)
    child.wait(10)
    [summary] = BenchHistory(path).list_runs()
    assert summary.status == "interrupted" and summary.points_done == 1
    run = BenchHistory(path).load(summary.run_id)
    assert run.status == "interrupted" and len(run.results) == 1 and run.results[0].stats.requests_ok == 4


def test_a_file_that_is_not_a_database_is_moved_aside_and_reported(tmp_path):
    path = tmp_path / "h.sqlite3"
    path.write_bytes(b"this is not a database, it is a grocery list" * 100)
    history = BenchHistory(path)
    assert history.list_runs() == []
    assert "could not be read" in history.problems[0]
    kept = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert kept and kept[0].read_bytes().startswith(b"this is not a database")
    history.save(make_run())
    assert len(history.list_runs()) == 1


def test_a_newer_format_is_refused_with_a_reason(tmp_path):
    path = tmp_path / "h.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(HistoryError, match="newer ollama-deck"):
        BenchHistory(path).list_runs()


def test_a_folder_that_cannot_be_created_is_reported(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(HistoryError, match="Cannot create the folder"):
        BenchHistory(blocker / "sub" / "h.sqlite3").list_runs()


def test_a_contended_point_is_kept_and_points_stored_before_contention_was_measured_still_load(tmp_path):
    import json
    import sqlite3
    import zlib
    from dataclasses import replace

    from app.core.bench.contention import Competitor, ContentionKind, CpuUse, judge
    from app.core.bench.outcome import PointStatus

    path = tmp_path / "benchmarks.sqlite3"
    run = make_run()
    contention = judge(CpuUse(10.0, 2, 20.0, 13.0, 0.8, (Competitor("stress", 4242, 0.31),)), None)
    first = replace(run.results[0], status=PointStatus.UNSTABLE, reason=contention.short_text(), contention=contention)
    run = replace(run, results=(first, *run.results[1:]), status="running").finished("finished", run.finished_at)
    assert run.recommendation is not None and run.recommendation.contended == (0,)
    history = BenchHistory(path)
    run_id = history.save(run)
    loaded = history.load(run_id)
    assert loaded.results[0].contention == contention and loaded.results[0].status == PointStatus.UNSTABLE
    assert loaded.recommendation == run.recommendation
    assert history.list_runs()[0].recommended == "parallel 2"  # the point measured alone
    # A point as the previous format wrote it: the same document without the contention field.
    with sqlite3.connect(path) as conn:
        blob = conn.execute("SELECT doc FROM points WHERE run_id = ? AND idx = 1", (run_id,)).fetchone()[0]
        doc = json.loads(zlib.decompress(blob))
        del doc["contention"]
        conn.execute("UPDATE points SET doc = ? WHERE run_id = ? AND idx = 1",
                     (zlib.compress(json.dumps(doc).encode()), run_id))
    older = BenchHistory(path).load(run_id).results[1]
    assert older.contention.kind is ContentionKind.UNMEASURED and older.status == PointStatus.OK
    assert older.records == run.results[1].records
