"""The bench history recorder on the real SQLite history: a lock held by another process at the start, gone by
the end, costs the history nothing; one held to the end is reported with what the history kept."""

from __future__ import annotations

from app.adapters.storage.history import BenchHistory
from app.core.bench.run import SweepRun
from app.services.bench.recording import QueuedRecorder
from tests.adapters.storage.test_history import make_run
from tests.adapters.storage.test_history_safety import Holder


def _started(run: SweepRun) -> SweepRun:
    return SweepRun(run.spec, run.fingerprint, run.points, run.varying, started_at=run.started_at)


def test_a_lock_gone_before_the_end_costs_nothing(tmp_path):
    path = tmp_path / "benchmarks.sqlite3"
    BenchHistory(path).open()
    history = BenchHistory(path, busy_timeout_s=0.3)
    run = make_run()
    recorder = QueuedRecorder(history)
    holder = Holder(path)
    try:
        recorder.started(_started(run))
        for result in run.results:
            recorder.point_done(run, result)
        recorder.drain()  # every write so far met the lock
    finally:
        holder.release()
    kept = recorder.close(run)
    assert kept.saved and kept.error == "" and kept.points_kept == kept.points == 3
    [summary] = history.list_runs()
    assert (summary.run_id, summary.status, summary.points_done) == (kept.run_id, "finished", 3)


def test_a_lock_held_to_the_end_is_reported_with_what_was_kept(tmp_path):
    path = tmp_path / "benchmarks.sqlite3"
    history = BenchHistory(path, busy_timeout_s=0.3)
    run = make_run()
    recorder = QueuedRecorder(history)
    recorder.started(_started(run))
    recorder.point_done(run, run.results[0])
    recorder.drain()  # the start and the first point are stored
    holder = Holder(path)
    try:
        for result in run.results[1:]:
            recorder.point_done(run, result)
        kept = recorder.close(run)
    finally:
        holder.release()
    assert not kept.saved and "is locked by" in kept.error and f"pid {holder.proc.pid}" in kept.error
    assert (kept.points_kept, kept.points) == (1, 3) and kept.run_id is not None
    [summary] = history.list_runs()
    assert summary.status == "running" and summary.points_done == 1  # never "finished" without its points


class _BrokenAtTheEnd(BenchHistory):
    """The real SQLite history whose end fails with an error that is not the storage's own (a bug, say)."""

    def finish(self, run_id, run):
        raise TypeError("Object of type bytes is not JSON serializable")


def test_an_unexpected_failure_on_the_writer_thread_is_reported_not_taken_for_saved(tmp_path):
    history = _BrokenAtTheEnd(tmp_path / "benchmarks.sqlite3")
    run = make_run()
    recorder = QueuedRecorder(history)
    recorder.started(_started(run))
    for result in run.results:
        recorder.point_done(run, result)
    kept = recorder.close(run)
    assert not kept.saved and "TypeError: Object of type bytes is not JSON serializable" in kept.error
    [summary] = history.list_runs()
    assert summary.status == "running"  # the end was not stored, and the run does not claim it was


def test_each_failed_write_is_passed_on_as_it_happens(tmp_path):
    path = tmp_path / "benchmarks.sqlite3"
    BenchHistory(path).open()
    history = BenchHistory(path, busy_timeout_s=0.3)
    run = make_run()
    problems: list[str] = []
    recorder = QueuedRecorder(history, on_problem=problems.append)
    holder = Holder(path)
    try:
        recorder.started(_started(run))
        recorder.drain()
        assert len(problems) == 1 and "is locked by" in problems[0]  # said before the run ends
    finally:
        holder.release()
    for result in run.results:
        recorder.point_done(run, result)
    kept = recorder.close(run)
    assert kept.saved and len(problems) == 1  # the end stored the whole run; nothing more to say
