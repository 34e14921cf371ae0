"""The results table of a run whose points saw server events: an Events column with the count and the worst
severity (the list in its tooltip), the not-stable reason in Stable?, and no Events column for a run without
any. The events carry the figures real servers gave (see tests/core/bench/test_point_events.py)."""

from __future__ import annotations

from PySide6.QtGui import QColor

from app.ui.pages.bench.results import RunView, SEVERITY_COLOURS
from app.core.watch.events import Severity
from tests.core.bench.test_point_events import CUT, SPILL, UNLOADED, make_run
from tests.ui.page_context import run_documents


def _column(view: RunView, name: str) -> int | None:
    table = view.table
    for col in range(table.columnCount()):
        item = table.horizontalHeaderItem(col)
        if item is not None and item.text() == name:
            return col
    return None


def test_a_point_with_events_shows_a_mark_and_the_list_in_its_tooltip(qtbot) -> None:
    view = RunView(**run_documents())
    qtbot.addWidget(view)
    view.resize(1280, 720)
    view.show()
    qtbot.waitExposed(view)
    view.set_run(make_run((UNLOADED,), (SPILL, CUT), ()))
    table = view.table
    events, stable = _column(view, "Events"), _column(view, "Stable?")
    assert events is not None and stable == events + 1
    cells = [table.item(row, events).text() for row in range(3)]
    assert cells == ["1 · info", "2 · severe", ""]
    spoiled = table.item(1, events)
    assert spoiled.foreground().color() == QColor(SEVERITY_COLOURS[Severity.SEVERE])
    tip = spoiled.toolTip()
    assert "Not stable: layers on the CPU, prompt cut short." in tip
    assert "<b>prompt cut short</b>: The server used 514 of the 5012 prompt tokens sent" in tip
    assert "loaded models: qwen3:14b: size 26403534848 B, size_vram 13728960512 B" in tip
    assert "Seen while it ran (its figures are still its own)." in table.item(0, events).toolTip()
    assert [table.item(row, stable).text() for row in range(3)] == ["✓", "⚠ layers on the CPU +1", "✓"]
    assert "not stable: layers on the CPU, prompt cut short" in table.item(1, stable).toolTip()
    header = table.horizontalHeaderItem(events)
    assert header is not None and "never recommended" in header.toolTip()
    # The row fits the view: the table needs no horizontal scrolling at 1280 wide.
    assert table.horizontalScrollBar().maximum() == 0


def test_a_run_without_events_has_no_events_column(qtbot) -> None:
    view = RunView(**run_documents())
    qtbot.addWidget(view)
    view.set_run(make_run((), ()))
    assert _column(view, "Events") is None and _column(view, "Stable?") is not None
