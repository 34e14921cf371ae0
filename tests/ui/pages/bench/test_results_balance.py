"""The results table of a sweep measured at a balancer: a compact "Behind the balancer" column with each backend's
share ("a 75% / b 25%"), the figures and their source in its tooltip, and an uneven spread marked as a warning; a
run measured at one server has no such column."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtGui import QColor

from app.ui.widgets import theme
from app.ui.pages.bench.results import BALANCE_COLUMN, RunView
from app.core.bench.balance import judge
from tests.core.bench.test_balance import llama
from tests.core.bench.test_point_events import make_run
from tests.ui.page_context import run_documents
from tests.ui.pages.bench.test_results_events import _column


def test_each_points_shares_show_with_their_figures_and_an_uneven_spread_warns(qtbot) -> None:
    view = RunView(**run_documents())
    qtbot.addWidget(view)
    view.resize(1280, 720)
    view.show()
    qtbot.waitExposed(view)
    run = make_run((), ())
    even, uneven = judge([llama("a", 64), llama("b", 64)]), judge([llama("a", 96), llama("b", 32)])
    view.set_run(replace(run, results=(replace(run.results[0], balance=even),
                                       replace(run.results[1], balance=uneven))))
    table = view.table
    col = _column(view, BALANCE_COLUMN)
    assert col is not None and _column(view, "Stable?") == col + 1
    assert [table.item(row, col).text() for row in range(2)] == ["a 50% / b 50%", "⚠ a 75% / b 25% (UNEVEN)"]
    warned = table.item(1, col)
    assert warned.foreground().color() == QColor(theme.WARNING)
    assert table.item(0, col).foreground().color() != QColor(theme.WARNING)
    tip = warned.toolTip()
    assert "a (http://a): requests: not counted by this server;" in tip
    assert "generated tokens 96 = 75% (from its counter)" in tip
    assert "Spread UNEVEN on generated tokens: 25 points off an even split, largest/smallest 3.00." in tip


def test_a_run_at_one_server_has_no_balancer_column(qtbot) -> None:
    view = RunView(**run_documents())
    qtbot.addWidget(view)
    view.set_run(make_run((), ()))
    assert _column(view, BALANCE_COLUMN) is None
