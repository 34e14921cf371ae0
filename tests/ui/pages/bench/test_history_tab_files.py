"""The History tab over a real SQLite file in a bad state: what opening it found stays as a notice
in the tab (and goes to the window's banner), a damaged run is listed as unreadable and opening it
says so, while the other runs open as usual; a sweep whose history another program holds locked
still shows its results and says who holds the file."""

from __future__ import annotations

import sqlite3

import pytest
from PySide6.QtCore import Qt

from app.adapters.storage.history import BenchHistory
from app.core.bench.outcome import RunStatus
from app.core.server.state import ServerState
from app.ui.pages.bench.history_view import HistoryView
from app.ui.pages.bench.worker import Background
from tests.adapters.storage.test_history import make_run
from tests.adapters.storage.test_history_safety import Holder
from tests.ui.pages.bench import test_bench_page as bench_page_tests
from tests.ui.pages.bench.test_bench_page import WAIT_MS as SWEEP_WAIT_MS, fill
from tests.ui.page_context import run_documents
from tests.ui.pages.bench.measured import measured

WAIT_MS = 10_000
page_factory = bench_page_tests.page_factory  # the Benchmark page around a real supervisor and stand-in server


@pytest.fixture
def history_tab(qtbot, supervisor_loop):
    def make(history: BenchHistory) -> HistoryView:
        view = HistoryView(history, Background(supervisor_loop), **run_documents())
        qtbot.addWidget(view)
        view.show()
        return view

    return make


def test_a_garbage_history_is_named_in_the_tab_and_reported_for_the_banner(qtbot, tmp_path, history_tab):
    path = tmp_path / "benchmarks.sqlite3"
    path.write_bytes(b"not a database at all " * 100)
    view = history_tab(BenchHistory(path))
    qtbot.waitUntil(lambda: bool(view.found_problems), timeout=WAIT_MS)  # checked off the GUI thread at once
    [kept] = _moved(tmp_path)
    assert str(kept) in view.found_problems[0]
    assert view.notice.severity == "warning" and str(kept) in view.notice.message
    with qtbot.waitSignal(view.problems_found, timeout=WAIT_MS) as emitted:  # what the window's banner listens to
        view.check()
    assert emitted.args[0] == view.found_problems and len(_moved(tmp_path)) == 1  # said again, not moved again
    view.refresh()
    qtbot.waitUntil(lambda: view.table.rowCount() == 0 and not view.message.message, timeout=WAIT_MS)
    assert view.notice.isVisible()  # it stays while the tab is used


def _moved(folder):
    return [p for p in folder.iterdir() if ".corrupt-" in p.name and not p.name.endswith(("-wal", "-shm"))]


def test_a_damaged_run_is_listed_as_unreadable_and_the_others_open(qtbot, tmp_path, history_tab):
    path = tmp_path / "benchmarks.sqlite3"
    history = BenchHistory(path)
    good, bad_row, bad_point = (history.save(make_run()) for _ in range(3))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE runs SET points_planned = 'three' WHERE id = ?", (bad_row,))
        conn.execute("UPDATE points SET doc = x'00ff00' WHERE run_id = ? AND idx = 0", (bad_point,))
    view = history_tab(BenchHistory(path))
    view.refresh()
    qtbot.waitUntil(lambda: view.table.rowCount() == 3, timeout=WAIT_MS)
    statuses = {s.run_id: s.status for s in view.summaries}
    assert statuses == {bad_point: "finished", bad_row: RunStatus.UNREADABLE, good: "finished"}
    assert view.table.item(1, 8).text() == RunStatus.UNREADABLE and "damaged" in view.table.item(1, 8).toolTip()
    view.open_run(bad_point)
    qtbot.waitUntil(lambda: view.message.severity == "error", timeout=WAIT_MS)
    assert f"Run {bad_point} in the benchmark history {path} is damaged" in view.message.message
    with qtbot.waitSignal(view.loaded, timeout=WAIT_MS) as shown:
        view.open_run(good)
    assert shown.args[0].run_id == good and len(shown.args[0].results) == 3
    assert not view.notice.isVisible()  # a healthy file: nothing to say about it


def test_a_sweep_whose_history_is_locked_still_shows_its_results_and_says_who_holds_the_file(
        qtbot, page_factory, tmp_path):
    path = tmp_path / "benchmarks.sqlite3"
    earlier = BenchHistory(path).save(make_run())
    holder = Holder(path)  # another program writing to the file for the whole sweep
    try:
        controller, page, _store = page_factory(history=BenchHistory(path, busy_timeout_s=0.3))
        controller.probe()
        qtbot.waitUntil(lambda: controller.status.state is ServerState.STOPPED, timeout=SWEEP_WAIT_MS)
        fill(page, parallel="1", requests=2)
        with qtbot.waitSignal(page.sweeps.finished, timeout=SWEEP_WAIT_MS) as finished:
            qtbot.mouseClick(page.editor.start_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: "is locked by" in page.message.message, timeout=SWEEP_WAIT_MS)
    finally:
        holder.release()
    assert f"pid {holder.proc.pid}" in page.message.message and page.message.severity == "warning"
    assert [measured(r) for r in finished.args[0].results] == [True] and page.run_view.table.rowCount() == 1
    assert [s.run_id for s in BenchHistory(path).list_runs()] == [earlier]  # nothing half-written, nothing moved
    assert not _moved(tmp_path)


def test_a_history_locked_at_start_is_said_in_the_tab_until_it_can_be_read(qtbot, tmp_path, history_tab):
    path = tmp_path / "benchmarks.sqlite3"
    run_id = BenchHistory(path).save(make_run())
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")  # so that the lock keeps readers out too
    holder = Holder(path)
    try:
        view = history_tab(BenchHistory(path, busy_timeout_s=0.3))
        qtbot.waitUntil(lambda: view.notice.severity == "error", timeout=WAIT_MS)
    finally:
        holder.release()
    assert f"is locked by {holder.name} (pid {holder.proc.pid})" in view.notice.message
    assert view.found_problems == [view.notice.message]
    view.refresh()
    qtbot.waitUntil(lambda: [s.run_id for s in view.summaries] == [run_id], timeout=WAIT_MS)
    assert not view.notice.isVisible() and not _moved(tmp_path)
