"""The Benchmark page's sweep carries the server's events: the page hands the server's log lines and statuses
to the running sweep, and a point whose model spilled to the CPU shows its event in the Events column.
The stand-in `ollama` under a real supervisor, as in test_bench_page.py."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.core.server.state import ServerState, ServerStatus
from tests.ui.pages.bench.test_bench_page import WAIT_MS, fill


def test_a_spilled_point_shows_its_event_and_the_page_feeds_the_servers_log(qtbot, page_factory) -> None:
    controller, page, _store = page_factory(FAKE_OLLAMA_GPU_MIB="1500")  # parallel 2 needs 1694 MiB
    lines: list[str] = []
    statuses: list[ServerStatus] = []
    page.server_feed.subscribe(lines.append, statuses.append)
    controller.probe()
    qtbot.waitUntil(lambda: controller.status.state is ServerState.STOPPED, timeout=WAIT_MS)
    fill(page, parallel="1, 2")
    with qtbot.waitSignal(page.sweeps.finished, timeout=WAIT_MS) as finished:
        qtbot.mouseClick(page.editor.start_button, Qt.MouseButton.LeftButton)
    run = finished.args[0]
    assert [len(r.events) for r in run.results] == [0, 1] and run.results[1].spoiled, "\n".join(repr(e) for r in run.results for e in r.events)
    table = page.run_view.table
    headers = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]
    events = headers.index("Events")
    assert [table.item(row, events).text() for row in range(2)] == ["", "1 · warning"]
    assert "layers on the CPU" in table.item(1, events).toolTip()
    # What the server logged and how its status went reached the sweep's watchdog through the page.
    qtbot.waitUntil(lambda: any("Listening on" in line for line in lines), timeout=WAIT_MS)
    assert ServerState.RUNNING_MANAGED in {s.state for s in statuses}
