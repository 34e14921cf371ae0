"""Statuses and failure kinds of runs the format-1 release saved: read back as the enums, and written
again with the same words."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from app.adapters.storage.history import BenchHistory
from app.core.bench.outcome import FailureKind, PointStatus, RunStatus
from tests.adapters.storage.test_history_migration import _v1_database


def test_saved_statuses_read_as_enums_and_the_failed_point_as_out_of_memory(tmp_path: Path) -> None:
    path = tmp_path / "benchmarks.sqlite3"
    _v1_database(path)
    history = BenchHistory(path)
    statuses = {s.run_id: s.status for s in history.list_runs()}
    assert statuses == {1: RunStatus.FINISHED, 2: RunStatus.CANCELLED}
    assert all(type(s) is RunStatus for s in statuses.values())
    first, second = history.load(1), history.load(2)
    assert first.status is RunStatus.FINISHED and second.status is RunStatus.CANCELLED
    assert [r.status for r in first.results] == [PointStatus.OK, PointStatus.OK, PointStatus.FAILED]
    assert all(type(r.status) is PointStatus for r in first.results + second.results)
    failed = first.results[-1]
    assert failed.reason == "out of memory at load" and failed.failure is FailureKind.OUT_OF_MEMORY
    assert [r.failure for r in first.results[:2]] == [None, None]

    # Saved again, the rows carry the words they were read from.
    again = BenchHistory(tmp_path / "again.sqlite3")
    run_id = again.save(first)
    conn = sqlite3.connect(again.path)
    try:
        assert conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone() == ("finished",)
        assert [row[0] for row in conn.execute("SELECT status FROM points WHERE run_id = ? ORDER BY idx",
                                               (run_id,))] == ["ok", "ok", "failed"]
    finally:
        conn.close()
