"""A benchmark history the format-1 release wrote, opened by this one: every run is still there,
with its Ollama version, recorded as measured on Ollama."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from app.adapters.storage.history import SCHEMA_VERSION, BenchHistory, HistoryError
from app.core.bench.run import run_from_json, run_to_json
from app.core.bench.sweep import Fingerprint
from app.adapters.storage.saved_format import SAVED_FORMAT
from tests.adapters.storage.test_history import make_run

# sqlite3's dump of a database the format-1 release's BenchHistory.save wrote (its CREATE TABLEs,
# its rows and points as written), ending with that release's PRAGMA user_version = 1.
V1_DUMP = Path(__file__).parents[2] / "data" / "storage" / "benchmarks-v1.sql"


def _v1_database(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.executescript(V1_DUMP.read_text("utf-8"))
    conn.close()


def test_every_format_1_run_is_kept_with_its_ollama_version_and_kind(tmp_path: Path) -> None:
    path = tmp_path / "benchmarks.sqlite3"
    _v1_database(path)
    before = sqlite3.connect(path)
    assert before.execute("PRAGMA user_version").fetchone()[0] == 1
    old_rows = before.execute("SELECT id, title, status, model, gpu_name, ollama_version, points_planned, "
                              "best_tokens_per_s, recommended, doc FROM runs ORDER BY id").fetchall()
    old_points = before.execute("SELECT run_id, idx, status, output_tokens_per_s, doc FROM points "
                                "ORDER BY run_id, idx").fetchall()
    before.close()
    assert [(row[0], row[5]) for row in old_rows] == [(1, "0.12.6"), (2, "0.11.4")]

    history = BenchHistory(path)
    summaries = {s.run_id: s for s in history.list_runs()}

    assert sorted(summaries) == [1, 2]
    for run_id, title, status, model, gpu, version, planned, best, recommended, doc in old_rows:
        s = summaries[run_id]
        assert (s.title, s.status, s.model, s.gpu_name, s.server_version, s.points_planned, s.best_tokens_per_s,
                s.recommended) == (title, status, model, gpu, version, planned, best, recommended)
        assert s.backend_kind == "ollama"
        run = history.load(run_id)
        assert run.fingerprint.backend_kind == "ollama" and run.fingerprint.server_version == version
        old_fingerprint = json.loads(doc)["fingerprint"]
        assert "backend_kind" not in old_fingerprint  # the old document never named its server
        assert {k: v for k, v in run.fingerprint.to_json(SAVED_FORMAT).items() if k != "backend_kind"} == old_fingerprint
        assert len(run.results) == sum(1 for p in old_points if p[0] == run_id)
    assert history.problems == [f"The benchmark history {path} was in format 1; converted it to format "
                                f"{SCHEMA_VERSION}: its 2 runs are recorded as measured on Ollama."]

    after = sqlite3.connect(path)
    assert after.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
    assert after.execute("SELECT run_id, idx, status, output_tokens_per_s, doc FROM points "
                         "ORDER BY run_id, idx").fetchall() == old_points
    after.close()

    # New runs go in beside the old ones, and opening again converts nothing twice.
    new_id = history.save(make_run())
    again = BenchHistory(path)
    assert [s.run_id for s in again.list_runs()] == [new_id, 2, 1] and again.problems == []


def test_a_run_document_without_a_backend_kind_reads_as_ollama() -> None:
    doc = run_to_json(make_run(), SAVED_FORMAT, with_records=True)
    del doc["fingerprint"]["backend_kind"]
    run = run_from_json(doc, SAVED_FORMAT)
    assert run.fingerprint.backend_kind == "ollama" and run.fingerprint.server_version == "0.12.6"
    # the version keeps its saved key, ollama_version, for every server
    assert Fingerprint(backend_kind="llama_server", server_version="b4567").to_json(SAVED_FORMAT)["ollama_version"] \
        == "b4567"
    assert Fingerprint.from_json({"ollama_version": "b4567"}, SAVED_FORMAT).server_version == "b4567"
    assert run_to_json(make_run(), SAVED_FORMAT)["fingerprint"]["backend_kind"] == "ollama"


def test_a_locked_history_is_reported_and_not_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / "benchmarks.sqlite3"
    _v1_database(path)
    blocker = sqlite3.connect(path)
    blocker.execute("BEGIN EXCLUSIVE")  # another process holds the file
    try:
        history = BenchHistory(path)
        history._open = lambda: sqlite3.connect(path, timeout=0.2)  # fail fast instead of waiting 10 s
        with pytest.raises(HistoryError, match="locked"):
            history.list_runs()
    finally:
        blocker.rollback()
        blocker.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["benchmarks.sqlite3"]
    assert [s.backend_kind for s in BenchHistory(path).list_runs()] == ["ollama", "ollama"]


def test_a_conversion_that_fails_half_way_leaves_the_old_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "benchmarks.sqlite3"
    _v1_database(path)
    old = sqlite3.connect(path)
    # The columns get added, then filling them in fails: the transaction must take both back.
    old.execute("CREATE TRIGGER refuse BEFORE UPDATE ON runs BEGIN SELECT RAISE(ABORT, 'refused'); END")
    old.commit()
    old.close()

    history = BenchHistory(path)
    assert history.list_runs() == []  # a fresh history was started
    [problem] = history.problems
    assert "refused" in problem and "moved to" in problem
    [kept] = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name and not p.name.endswith(("-wal", "-shm"))]
    check = sqlite3.connect(kept)
    assert check.execute("PRAGMA user_version").fetchone()[0] == 1
    assert "backend_kind" not in {row[1] for row in check.execute("PRAGMA table_info(runs)")}
    assert check.execute("SELECT id, ollama_version FROM runs ORDER BY id").fetchall() == [(1, "0.12.6"), (2, "0.11.4")]
    check.close()
