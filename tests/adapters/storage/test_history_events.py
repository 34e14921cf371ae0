"""Each point's events in the benchmark history: kept in the points' own events column (format 3) and given
back with the run; a format-2 file the previous release wrote is read as it is (its points saw no events)
and brought to format 3 by its first write, its runs unchanged; a damaged events cell costs that point its
events, not the run."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from app.adapters.storage.history import SCHEMA_VERSION, BenchHistory
from app.core.bench.outcome import FailureKind, PointStatus
from tests.adapters.storage.unwritable import reachable_folder, read_only, run_unprivileged
from tests.core.bench.test_point_events import CUT, SPILL, UNLOADED, make_run

PREVIOUS = Path(__file__).parents[2] / "data" / "previous_release" / "benchmarks.sqlite3"


def _columns(path: Path) -> tuple[int, set[str]]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        columns = {row[1] for row in db.execute("PRAGMA table_info(points)")}
    db.close()
    return version, columns


def test_a_points_events_come_back_from_the_history(tmp_path: Path) -> None:
    path = tmp_path / "benchmarks.sqlite3"
    run = make_run((UNLOADED,), (SPILL, CUT))
    run_id = BenchHistory(path).save(run)
    loaded = BenchHistory(path).load(run_id)
    assert [r.events for r in loaded.results] == [(UNLOADED,), (SPILL, CUT)]
    assert loaded.results[1].failure is FailureKind.SPOILED and loaded.results[1].status is PointStatus.UNSTABLE
    assert loaded.recommendation == run.recommendation and loaded.recommendation.spoiled == (1,)
    [summary] = BenchHistory(path).list_runs()
    assert (summary.events, summary.spoiled_points) == (3, 1)  # the list says so without loading the run
    assert _columns(path) == (SCHEMA_VERSION, {"run_id", "idx", "status", "output_tokens_per_s", "doc", "events",
                                               "server_peak_mib", "card_peak_mib"})
    with sqlite3.connect(path) as db:
        kinds = [row[0] for row in db.execute("SELECT json_extract(e.value, '$.kind') FROM points, "
                                              "json_each(points.events) e WHERE run_id = ? ORDER BY idx", (run_id,))]
    db.close()
    assert kinds == ["model_unloaded", "layers_on_cpu", "prompt_truncated"]  # in its own column, as plain JSON


def test_a_format_2_file_is_read_as_it_is_and_converted_by_its_first_write(tmp_path: Path) -> None:
    path = tmp_path / "benchmarks.sqlite3"
    shutil.copyfile(PREVIOUS, path)
    before = path.read_bytes()
    assert _columns(path) == (2, {"run_id", "idx", "status", "output_tokens_per_s", "doc"})
    history = BenchHistory(path)
    assert history.open() == []
    old = {run_id: history.load(run_id) for run_id in (1, 2)}
    assert all(r.events == () for run in old.values() for r in run.results)
    assert path.read_bytes() == before  # reading does not write (an older build can still open it)

    new_id = history.save(make_run((), (SPILL,)))
    assert _columns(path)[0] == SCHEMA_VERSION == 4 and "events" in _columns(path)[1]
    assert [(s.events, s.spoiled_points) for s in history.list_runs()] == [(1, 1), (0, 0), (0, 0)]
    again = BenchHistory(path)
    assert again.problems == [] and [s.run_id for s in again.list_runs()] == [new_id, 2, 1]
    assert [r.events for r in again.load(new_id).results] == [(), (SPILL,)]
    for run_id, run in old.items():  # the old runs read back as they were
        reread = again.load(run_id)
        assert [(r.status, r.reason, r.records, r.events) for r in reread.results] == [
            (r.status, r.reason, r.records, ()) for r in run.results]


def test_a_damaged_events_cell_costs_that_point_its_events_only(tmp_path: Path) -> None:
    path = tmp_path / "benchmarks.sqlite3"
    run_id = BenchHistory(path).save(make_run((SPILL,), (CUT,)))
    with sqlite3.connect(path) as db:
        db.execute("UPDATE points SET events = '[{\"kind\": \"prompt_trunc' WHERE idx = 0")
        db.execute("UPDATE points SET events = json_insert(events, '$[#]', json('{\"kind\": \"later\"}'), "
                   "'$[#]', 'not an event') WHERE idx = 1")
    db.close()
    loaded = BenchHistory(path).load(run_id)
    assert [r.events for r in loaded.results] == [(), (CUT,)]
    [summary] = BenchHistory(path).list_runs()  # the list still reads, and counts what the run shows
    assert (summary.events, summary.spoiled_points) == (1, 1)
    assert [len(r.records) for r in loaded.results] == [4, 4]


def _read_only_load(path: str) -> list[object]:
    history = BenchHistory(Path(path), busy_timeout_s=0.5)
    history.open()
    run = history.load(1)
    return [history.read_only, len(run.results), [len(r.events) for r in run.results]]


def test_a_read_only_format_2_file_shows_its_runs_without_events(tmp_path: Path) -> None:
    with reachable_folder() as folder:
        path = folder / "benchmarks.sqlite3"
        shutil.copyfile(PREVIOUS, path)
        before = path.read_bytes()
        read_only(path)
        found = run_unprivileged(_read_only_load, str(path))
        assert path.read_bytes() == before
    assert found == [True, 4, [0, 0, 0, 0]]
