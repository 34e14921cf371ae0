"""Layouts that give way on a narrow window: tiles that re-flow, panes that stack. Each inside a page
that scrolls (as every page does), whose width they must never hold wider than its viewport."""

from __future__ import annotations

from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QVBoxLayout, QWidget

from app.ui.widgets.adaptive_splitter import AdaptiveSplitter
from app.ui.widgets.tile_grid import TileGrid


def _page(qtbot, content: QWidget, width: int, height: int = 400) -> QScrollArea:
    """`content` on a page in a scroll area, as MainWindow.add_page holds it."""
    page = QWidget()
    QVBoxLayout(page).addWidget(content)
    holder = QScrollArea()
    holder.setWidgetResizable(True)
    holder.setWidget(page)
    qtbot.addWidget(holder)
    holder.resize(width, height)
    holder.show()
    qtbot.waitExposed(holder)
    return holder


def _tile(width: int) -> QFrame:
    tile = QFrame()
    tile.setMinimumWidth(width)
    tile.setFixedHeight(60)
    return tile


def test_tiles_take_more_rows_rather_than_scroll_sideways_and_one_row_again_when_wide(qtbot) -> None:
    grid = TileGrid([_tile(200) for _ in range(4)], spacing=10)
    holder = _page(qtbot, grid, 1000)
    qtbot.waitUntil(lambda: grid.columns == 4)
    holder.resize(560, 400)  # two tiles and a half: two rows of two, not 3 + 1
    qtbot.waitUntil(lambda: grid.columns == 2)
    assert holder.horizontalScrollBar().maximum() == 0
    assert grid.height() >= 2 * 60 + 10
    holder.resize(300, 400)  # one column; narrower than a tile scrolls at last
    qtbot.waitUntil(lambda: grid.columns == 1)
    assert grid.minimumSizeHint().width() == 200
    holder.resize(1000, 400)
    qtbot.waitUntil(lambda: grid.columns == 4 and len({t.y() for t in grid.tiles}) == 1)  # one row


def test_eight_tiles_at_most_four_a_row_make_even_rows() -> None:
    grid = TileGrid([_tile(150) for _ in range(8)], max_columns=4, spacing=8)
    assert [grid.columns_for(w) for w in (2000, 630, 500, 320, 100)] == [4, 4, 3, 2, 1]


def _pane(min_width: int, text_lines: int) -> QScrollArea:
    content = QLabel("\n".join(f"line {i}" for i in range(text_lines)))
    area = QScrollArea()
    area.setWidgetResizable(True)
    area.setWidget(content)
    area.setMinimumWidth(min_width)
    return area


def test_panes_stack_with_the_lead_on_top_at_full_height_where_they_do_not_fit_side_by_side(qtbot) -> None:
    form, actions = _pane(300, 60), _pane(250, 5)
    split = AdaptiveSplitter(lead=1)
    split.addWidget(form)
    split.addWidget(actions)
    holder = _page(qtbot, split, 900)
    qtbot.waitUntil(lambda: not split.stacked and split.width() > 0)
    assert split.widget(0) is form and form.x() < actions.x()
    holder.resize(480, 400)  # 300 + 250 do not fit: stacked, the actions first
    qtbot.waitUntil(lambda: split.stacked)
    assert split.widget(0) is actions and actions.y() < form.y()
    assert holder.horizontalScrollBar().maximum() == 0  # never sideways
    qtbot.waitUntil(lambda: form.height() >= form.widget().sizeHint().height())  # whole: the page scrolls down
    assert form.verticalScrollBar().maximum() == 0 and holder.verticalScrollBar().maximum() > 0
    holder.resize(900, 400)  # and back, in their order, at their own heights
    qtbot.waitUntil(lambda: not split.stacked)
    assert split.widget(0) is form and form.verticalScrollBar().maximum() > 0  # it scrolls on its own again
