"""The History list at a 1280x720 window: several whole runs in view, the opened run below it."""

from __future__ import annotations

from dataclasses import replace

from app.adapters.storage.history import BenchHistory
from app.ui.pages.bench.history_view import VISIBLE_ROWS, HistoryView
from app.ui.pages.bench.worker import Background
from tests.adapters.storage.test_history import make_run
from tests.ui.page_context import run_documents

WAIT_MS = 10_000


def test_the_list_shows_whole_runs_at_1280x720_with_a_run_open(qtbot, tmp_path, supervisor_loop):
    history = BenchHistory(tmp_path / "benchmarks.sqlite3")
    history.open()
    for day in range(1, 7):
        history.save(replace(make_run(points=3), started_at=f"2026-08-0{day}T12:00:00+02:00"))
    view = HistoryView(history, Background(supervisor_loop), **run_documents())
    qtbot.addWidget(view)
    view.resize(1090, 560)  # the History tab's share of a 1280x720 window
    view.show()
    view.refresh()
    qtbot.waitUntil(lambda: view.table.rowCount() == 6, timeout=WAIT_MS)
    view.table.selectRow(0)
    view.open_selected()
    qtbot.waitUntil(lambda: view.stack.currentIndex() == 1, timeout=WAIT_MS)
    rows_in_view = view.table.viewport().height() / view.table.rowHeight(0)
    assert rows_in_view >= VISIBLE_ROWS >= 4
