"""A healthy history is never moved aside: a file another process holds locked is waited for and
reported with who holds it, a read-only file or folder is read but not written, a folder or a path
under a file is refused untouched. Only a damaged file is moved aside, with its bytes."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from app.adapters.storage.apply_history import ApplyHistory
from app.adapters.storage.history import BenchHistory, HistoryError, HistoryLocationError
from app.core.bench.run import SweepRun
from tests.adapters.storage.test_history import make_run
from tests.adapters.storage.unwritable import reachable_folder, read_only, run_unprivileged

# Another program: opens the file, takes the write lock and keeps it until its stdin closes.
HOLDER = r"""
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("held", flush=True)
sys.stdin.read()
conn.execute("ROLLBACK")
"""
RECORD = {"at": 1.0, "kept": True, "reason": "Kept: predicted 14.2 GiB, measured 13.9 GiB.",
          "tried": {"backend": "ollama"}}


class Holder:
    """A real second process holding BEGIN EXCLUSIVE on a database."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "held"
        self.name = psutil.Process(self.proc.pid).name()

    def release(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(10) == 0


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if not p.name.endswith(("-wal", "-shm")))


def _rollback_journal_history(path: Path) -> int:
    """A healthy history in rollback-journal mode (as a copy from another tool may be): a lock blocks readers."""
    run_id = BenchHistory(path).save(make_run())
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    return run_id


def test_a_history_another_process_writes_is_read_and_a_write_waits_then_names_that_process(tmp_path):
    path = tmp_path / "benchmarks.sqlite3"
    run_id = BenchHistory(path).save(make_run())
    holder = Holder(path)
    try:
        history = BenchHistory(path, busy_timeout_s=0.5)  # a second window opening while a sweep writes
        assert [s.run_id for s in history.list_runs()] == [run_id] and history.problems == []
        started = time.monotonic()
        with pytest.raises(HistoryError) as caught:
            history.save(make_run())
        waited = time.monotonic() - started
    finally:
        holder.release()
    text = caught.value.message
    assert "is locked by" in text and f"{holder.name} (pid {holder.proc.pid})" in text and "0.5 s" in text
    assert 0.45 <= waited < 8.0  # the configured wait (and the look for who holds it), not the default 10 s
    assert _listing(tmp_path) == ["benchmarks.sqlite3"]  # nothing moved aside
    history.save(make_run())
    assert len(history.list_runs()) == 2


def test_a_lock_that_blocks_reading_too_is_reported_and_nothing_moves(tmp_path):
    path = tmp_path / "benchmarks.sqlite3"
    run_id = _rollback_journal_history(path)
    before = path.read_bytes()
    holder = Holder(path)
    try:
        history = BenchHistory(path, busy_timeout_s=0.5)
        with pytest.raises(HistoryError, match="is locked by") as caught:
            history.list_runs()
    finally:
        holder.release()
    assert f"pid {holder.proc.pid}" in caught.value.message and "nothing was changed" in caught.value.message
    assert _listing(tmp_path) == ["benchmarks.sqlite3"] and path.read_bytes() == before
    assert [s.run_id for s in history.list_runs()] == [run_id]  # once the lock is gone it opens as usual
    assert history.problems == []


def test_a_lock_held_by_this_process_says_another_program(tmp_path):
    path = tmp_path / "benchmarks.sqlite3"
    _rollback_journal_history(path)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(HistoryError, match=r"locked by another program \(which one could not be seen\)"):
            BenchHistory(path, busy_timeout_s=0.2).list_runs()
    finally:
        conn.execute("ROLLBACK")
        conn.close()
    assert _listing(tmp_path) == ["benchmarks.sqlite3"]


def test_a_locked_apply_check_log_keeps_records_in_memory_and_says_who_holds_it(tmp_path):
    path = tmp_path / "apply-checks.sqlite3"
    ApplyHistory(path).add(RECORD)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    holder = Holder(path)
    try:
        log = ApplyHistory(path, busy_timeout_s=0.3)
        assert log.add({**RECORD, "reason": "during the lock"}) < 0 and not log.saving
    finally:
        holder.release()
    [problem] = log.problems
    assert "is locked by" in problem and f"pid {holder.proc.pid}" in problem and "kept in memory" in problem
    assert [r["reason"] for r in log.recent()] == ["during the lock"]
    assert _listing(tmp_path) == ["apply-checks.sqlite3"]
    assert [r["reason"] for r in ApplyHistory(path).recent()] == [RECORD["reason"]]  # the file is as it was


def test_a_folder_given_as_the_history_is_refused_and_left_alone(tmp_path):
    folder = tmp_path / "mybench"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(HistoryLocationError, match="is a folder, not a file for the benchmark history"):
        BenchHistory(folder).list_runs()
    log = ApplyHistory(folder)
    assert "is a folder" in log.problems[0] and not log.saving
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mybench"]
    assert [p.name for p in folder.iterdir()] == ["notes.txt"] and (folder / "notes.txt").read_text() == "mine"


def test_a_path_under_a_file_is_refused_for_both_histories(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(HistoryLocationError, match=f"{blocker} is a file, not a folder"):
        BenchHistory(blocker / "h.sqlite3").list_runs()
    log = ApplyHistory(blocker / "deeper" / "apply-checks.sqlite3")
    assert "Cannot create the folder" in log.problems[0] and str(blocker) in log.problems[0]
    assert log.add(RECORD) == -1 and log.recent()[0]["reason"] == RECORD["reason"]
    assert blocker.read_text() == "x"


def test_another_programs_database_is_refused_unchanged(tmp_path):
    path = tmp_path / "notes.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE recipes (name TEXT)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(HistoryError, match="not a benchmark history"):
        BenchHistory(path).list_runs()
    assert "not an apply-check log" in ApplyHistory(path).problems[0]
    assert path.read_bytes() == before and _listing(tmp_path) == ["notes.sqlite3"]


def test_a_newer_apply_check_log_is_left_as_it_is(tmp_path):
    path = tmp_path / "apply-checks.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 7")
    before = path.read_bytes()
    log = ApplyHistory(path)
    assert "newer ollama-deck (format 7)" in log.problems[0] and not log.saving
    assert path.read_bytes() == before


@pytest.mark.parametrize("cut", [0.5, 0.9])
def test_a_truncated_history_is_moved_aside_whole_and_a_new_one_started(tmp_path, cut):
    path = tmp_path / "benchmarks.sqlite3"
    history = BenchHistory(path)
    for _ in range(4):
        history.save(make_run(points=4, records=60))
    raw = path.read_bytes()
    path.write_bytes(raw[:int(len(raw) * cut)])
    again = BenchHistory(path)
    assert again.list_runs() == []
    [problem] = again.problems
    [kept] = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name and not p.name.endswith(("-wal", "-shm"))]
    assert "damaged" in problem and str(kept) in problem
    assert kept.read_bytes() == raw[:int(len(raw) * cut)]


# ---- read-only: real permissions (as root, in a child that dropped to nobody) -----------------------


def _read_only_checks(path: str, run: object) -> dict[str, object]:
    """Open a read-only history and log: their runs and records are there, nothing can be written."""
    where = Path(path)
    assert not os.access(where / "benchmarks.sqlite3", os.W_OK)  # the condition under test holds
    history = BenchHistory(where / "benchmarks.sqlite3", busy_timeout_s=0.5)
    summaries = history.list_runs()
    loaded = history.load(summaries[0].run_id)
    try:
        history.begin(run)  # type: ignore[arg-type]
        refused = ""
    except HistoryError as exc:
        refused = exc.message
    log = ApplyHistory(where / "apply-checks.sqlite3", busy_timeout_s=0.5)
    memory_id = log.add({**RECORD, "reason": "new"})
    return {"runs": [s.run_id for s in summaries], "points": len(loaded.results), "refused": refused,
            "problems": history.problems, "read_only": history.read_only, "log_problems": log.problems,
            "records": [r["reason"] for r in log.recent()], "memory_id": memory_id,
            "folder_writable": os.access(where, os.W_OK)}


@pytest.mark.parametrize("folder_too", [False, True], ids=["read-only file", "read-only folder"])
def test_a_read_only_history_shows_its_runs_and_refuses_new_ones(folder_too):
    with reachable_folder() as folder:
        history_path, log_path = folder / "benchmarks.sqlite3", folder / "apply-checks.sqlite3"
        run_id = BenchHistory(history_path).save(make_run())
        ApplyHistory(log_path).add(RECORD)
        before = {p.name: p.read_bytes() for p in (history_path, log_path)}
        read_only(history_path, log_path, *([folder] if folder_too else []))
        found = run_unprivileged(_read_only_checks, str(folder), make_run())
        names = _listing(folder)
        now = {p.name: p.read_bytes() for p in (history_path, log_path)}
    assert found["folder_writable"] is (not folder_too)
    assert found["runs"] == [run_id] and found["points"] == 3 and found["read_only"] is True
    assert found["problems"] == [f"The benchmark history {history_path} is read-only; showing its runs, new results "
                                 "will not be saved to it."]
    assert "is read-only; this run is not saved to it" in found["refused"]
    assert found["records"] == ["new", RECORD["reason"]] and found["memory_id"] == -1
    assert "is read-only" in found["log_problems"][0] and str(log_path) in found["log_problems"][0]
    assert names == ["apply-checks.sqlite3", "benchmarks.sqlite3"] and now == before  # nothing moved or changed


def _cannot_create(folder: str) -> dict[str, object]:
    where = Path(folder) / "new" / "sub" / "benchmarks.sqlite3"
    assert not os.access(folder, os.W_OK)
    try:
        BenchHistory(where).list_runs()
        refused = ""
    except HistoryLocationError as exc:
        refused = exc.message
    return {"refused": refused, "log": ApplyHistory(where.with_name("apply-checks.sqlite3")).problems}


def test_a_folder_that_cannot_be_created_in_a_read_only_folder_is_reported():
    with reachable_folder() as folder:
        read_only(folder)
        found = run_unprivileged(_cannot_create, str(folder))
        assert list(folder.iterdir()) == []
    assert f"Cannot create the folder for the benchmark history ({folder / 'new' / 'sub'})" in found["refused"]
    assert "Permission denied" in found["refused"]
    assert "Cannot create the folder for the apply-check log" in found["log"][0]


def _legacy_read_only(path: str) -> list[list[object]]:
    assert not os.access(path, os.W_OK)
    history = BenchHistory(Path(path), busy_timeout_s=0.5)
    return [[s.run_id, s.backend_kind, s.server_version] for s in history.list_runs()]


def test_a_read_only_format_1_history_is_listed_without_being_converted():
    from tests.adapters.storage.test_history_migration import _v1_database

    with reachable_folder() as folder:
        path = folder / "benchmarks.sqlite3"
        _v1_database(path)
        before = path.read_bytes()
        read_only(path)
        found = run_unprivileged(_legacy_read_only, str(path))
        assert path.read_bytes() == before  # still format 1: nothing was written
    assert found == [[2, "ollama", "0.11.4"], [1, "ollama", "0.12.6"]]  # from the ollama_version column


def test_a_running_run_whose_stored_pid_is_no_process_is_interrupted(tmp_path):
    path = tmp_path / "benchmarks.sqlite3"
    run = make_run()
    started = type(run)(run.spec, run.fingerprint, run.points, run.varying, started_at=run.started_at)
    history = BenchHistory(path)
    run_ids = [history.begin(started) for _ in range(2)]
    with sqlite3.connect(path) as conn:  # as a flipped bit may leave them: beyond any pid, or negative
        conn.execute("UPDATE runs SET owner_pid = ? WHERE id = ?", (2 ** 62, run_ids[0]))
        conn.execute("UPDATE runs SET owner_pid = -7 WHERE id = ?", (run_ids[1],))
    assert [s.status for s in BenchHistory(path).list_runs()] == ["interrupted", "interrupted"]


def test_points_a_lock_kept_out_are_stored_with_the_finish_and_a_run_is_never_finished_without_them(tmp_path):
    path = tmp_path / "benchmarks.sqlite3"
    history = BenchHistory(path, busy_timeout_s=0.3)
    run = make_run()
    run_id = history.begin(SweepRun(run.spec, run.fingerprint, run.points, run.varying, started_at=run.started_at))
    holder = Holder(path)  # another program takes the write lock while the sweep measures
    try:
        for result in run.results:
            with pytest.raises(HistoryError, match="is locked by"):
                history.add_point(run_id, result)
        with pytest.raises(HistoryError, match="is locked by"):
            history.finish(run_id, run)  # still locked: the end is not written either
    finally:
        holder.release()
    [summary] = history.list_runs()
    assert summary.status == "running" and summary.points_done == 0  # not "finished" with no points
    history.finish(run_id, run)  # the lock is gone: the end brings the points the lock kept out
    [summary] = history.list_runs()
    assert (summary.status, summary.points_done) == ("finished", 3)
    assert history.load(run_id).results[0].records == run.results[0].records
