"""LiveCurve and TickGrid drawn offscreen: 2 px lines where the data is, gaps at NaN, dashes as thick
as solid lines, no repaint for data that did not change, grid lines at the axes' ticks."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QGraphicsItem

from app.ui.widgets import plots

COLOR = plots.CYAN


def shown_plot(qtbot, dashed: bool = False) -> tuple[object, plots.LiveCurve]:
    widget = plots.make_time_plot("test", "value (units)")
    widget.getPlotItem().setXRange(0.0, 100.0, padding=0.0)
    widget.getPlotItem().setYRange(0.0, 10.0, padding=0.0)
    curve = plots.add_series(widget, COLOR, dashed=dashed)
    qtbot.addWidget(widget)
    widget.resize(600, 300)
    widget.show()
    qtbot.waitExposed(widget)
    return widget, curve


def rows_with_color(image: QImage, x: int) -> list[int]:
    wanted = QColor(COLOR).rgb()
    return [y for y in range(image.height()) if image.pixel(x, y) == wanted]


def pixel(widget, curve: plots.LiveCurve, x: float, y: float) -> tuple[int, int]:
    view = widget.getPlotItem().getViewBox()
    p = widget.mapFromScene(view.mapViewToScene(QPointF(x, y)))
    return p.x(), p.y()


def test_a_level_line_is_two_pixels_thick_where_the_data_is_and_absent_at_a_gap(qtbot) -> None:
    widget, curve = shown_plot(qtbot)
    x = np.arange(0.0, 101.0)
    y = np.full(101, 5.0)
    y[40:45] = np.nan
    assert curve.setData(x, y)
    image = widget.grab().toImage()
    px, py = pixel(widget, curve, 20.0, 5.0)
    drawn = rows_with_color(image, px)
    assert len(drawn) == 2 and abs(drawn[0] - py) <= 1
    gap_x, _ = pixel(widget, curve, 42.0, 5.0)
    assert rows_with_color(image, gap_x) == []  # NaN breaks the line
    assert curve.getData()[1] is y and curve.opts["connect"] == "finite"


def test_dashes_are_as_thick_as_solid_lines_and_leave_holes(qtbot) -> None:
    widget, curve = shown_plot(qtbot, dashed=True)
    curve.setData(np.arange(0.0, 101.0), np.full(101, 5.0))
    image = widget.grab().toImage()
    left, _ = pixel(widget, curve, 10.0, 5.0)
    right, _ = pixel(widget, curve, 90.0, 5.0)
    thickness = [len(rows_with_color(image, x)) for x in range(left, right)]
    assert max(thickness) == 2 and thickness.count(0) > (right - left) / 5  # dashed, not solid


def test_unchanged_or_still_blank_data_is_not_redrawn(qtbot) -> None:
    _, curve = shown_plot(qtbot)
    x, y = np.arange(5.0), np.array([1.0, 2.0, np.nan, 4.0, 5.0])
    assert curve.setData(x, y)
    assert not curve.setData(x.copy(), y.copy())
    assert curve.setData(x, y + 1.0)
    blank = np.full(5, np.nan)
    assert curve.setData(x, blank)  # the old line must go
    assert not curve.setData(x - 1.0, blank)  # nothing drawn before or after
    assert list(curve.xData) == list(x - 1.0)


def test_grid_lines_sit_on_the_major_ticks_and_axes_are_cached(qtbot) -> None:
    widget, _ = shown_plot(qtbot)
    item = widget.getPlotItem()
    grid = plots.TickGrid(item)
    grid.refresh()
    xs, ys = grid.values
    view = item.getViewBox()
    assert xs == list(item.getAxis("bottom").tickValues(0.0, 100.0, view.width())[0][1])
    assert ys == list(item.getAxis("left").tickValues(0.0, 10.0, view.height())[0][1])
    assert item.getAxis("left").cacheMode() == QGraphicsItem.CacheMode.DeviceCoordinateCache
    image = widget.grab().toImage()
    gx, _ = pixel(widget, None, xs[1], 0.0)
    _, gy = pixel(widget, None, 0.0, ys[1])
    grid_rgb = QColor(plots.GRID_LINE).rgb()
    near = (-1, 0, 1)  # a line lands on one of the pixels around its value
    assert any(image.pixel(gx + d, gy - 7) == grid_rgb for d in near)  # vertical line
    assert any(image.pixel(gx + 9, gy + d) == grid_rgb for d in near)  # horizontal line
    assert image.pixel(gx + 9, gy - 7) != grid_rgb  # between the lines: background
