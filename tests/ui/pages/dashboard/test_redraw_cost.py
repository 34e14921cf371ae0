"""What the cheap redraw must not lose: a one-sample VRAM spike in a 15-minute window reaches the
drawn curve and its pixels, plots scrolled out of view skip frames but catch up when shown, and a
tile that repaints only itself leaves no old text behind."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPointF
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QHBoxLayout, QScrollArea, QWidget

from app.core.telemetry_buffers import Channel, TelemetryBuffers
from app.ui.pages.dashboard.page import DashboardPage
from app.ui.pages.dashboard.tiles import TILE_BACKGROUND, TILE_STYLE, StatTile
from app.ui.widgets import plots
from tests.fakes.scripted_gpu import RTX_4090, gpu_with

SPIKE_MIB = 23_900.0
STEP_S = 0.25


def serving_buffers(spike_at: int | None, samples: int = 3601) -> TelemetryBuffers:
    """15 minutes at 4 Hz of a loaded model (VRAM wobbling around 15 GB), with one spike sample."""
    buffers = TelemetryBuffers(history_s=900, interval_s=STEP_S)
    row = np.full(Channel.COUNT, np.nan)
    row[[Channel.GPU_MEM_TOTAL_MIB, Channel.RAM_USED_MIB, Channel.RAM_TOTAL_MIB]] = 24_564.0, 9_000.0, 65_536.0
    row[[Channel.TOKENS_PER_S, Channel.IN_FLIGHT, Channel.GPU_UTIL_PCT]] = 70.0, 1, 97.0
    for i in range(samples):
        row[Channel.GPU_MEM_USED_MIB] = SPIKE_MIB if i == spike_at else 15_000.0 + 40.0 * np.sin(i * 0.37)
        buffers.append_row(1_000.0 + i * STEP_S, row)
    return buffers


def shown_page(qtbot, page_context, buffers: TelemetryBuffers, window_s: int) -> DashboardPage:
    page = DashboardPage(page_context(samples=buffers, gpu=gpu_with(RTX_4090)))
    qtbot.addWidget(page)
    page.resize(1600, 1000)
    page.show()
    qtbot.waitExposed(page)
    page.set_window_s(window_s)
    page.redraw_now()
    return page


def topmost_row_of(color: str, image, left: int, top: int, right: int, bottom: int) -> int | None:
    """The smallest y inside the box holding a pixel of exactly `color`."""
    wanted = QColor(color).rgb()
    for y in range(top, bottom):
        if any(image.pixel(x, y) == wanted for x in range(left, right)):
            return y
    return None


@pytest.mark.parametrize(("window_s", "spike_at"), [(900, 1800), (900, 7), (900, 3600), (300, 3000)])
def test_a_one_sample_vram_spike_reaches_the_drawn_curve(qtbot, page_context, window_s: int, spike_at: int) -> None:
    buffers = serving_buffers(spike_at)
    page = shown_page(qtbot, page_context, buffers, window_s)
    plot = page.time_plots["vram"]
    curve = plot.series[0].curve
    visible = int(window_s / STEP_S) + 1
    assert len(curve.xData) < visible / 1.5  # decimated for the plot's width, so the check means something
    assert np.nanmax(curve.yData) == SPIKE_MIB / 1024  # the data's maximum, not a bin average
    newest_t = 1_000.0 + 3600 * STEP_S
    assert curve.xData[int(np.nanargmax(curve.yData))] == (1_000.0 + spike_at * STEP_S) - newest_t

    # What the screen shows: the curve's colour reaches the spike's height, in the spike's column.
    image = plot.widget.grab().toImage()
    view = plot.item.getViewBox()
    spike = plot.widget.mapFromScene(view.mapViewToScene(QPointF(curve.xData[int(np.nanargmax(curve.yData))],
                                                                 SPIKE_MIB / 1024)))
    box = plot.widget.mapFromScene(view.sceneBoundingRect()).boundingRect()
    top = topmost_row_of(plots.VRAM_USED_COLOR, image, box.left(), box.top(), box.right(), box.bottom())
    assert top is not None and abs(top - spike.y()) <= 2
    column = range(max(box.left(), spike.x() - 3), min(box.right(), spike.x() + 4))
    assert any(image.pixel(x, top) == QColor(plots.VRAM_USED_COLOR).rgb() for x in column)

    baseline = shown_page(qtbot, page_context, serving_buffers(None), window_s)
    plain = baseline.time_plots["vram"].widget.grab().toImage()
    plain_top = topmost_row_of(plots.VRAM_USED_COLOR, plain, box.left(), box.top(), box.right(), box.bottom())
    assert plain_top is not None and plain_top > top + 40  # without the spike nothing is drawn that high


def test_plots_scrolled_out_of_view_skip_frames_and_catch_up_when_shown(qtbot, page_context) -> None:
    buffers = serving_buffers(None, samples=400)
    page = DashboardPage(page_context(samples=buffers, gpu=gpu_with(RTX_4090)))
    holder = QScrollArea()
    holder.setWidgetResizable(True)
    holder.setWidget(page)
    qtbot.addWidget(holder)
    page.setMinimumHeight(1400)  # taller than the window: the last row of plots starts out of view
    holder.resize(1600, 700)
    holder.show()
    qtbot.waitExposed(holder)
    page.redraw_now()
    below = page.time_plots["server_cpu"]
    above = page.time_plots["vram"]
    assert above.series[0].curve.xData[0] == -399 * STEP_S  # 400 samples, the newest at 0 s
    assert len(below.series[0].curve.xData) == 0  # out of view from the start: not drawn
    t, row = buffers.last()
    for i in range(1, 41):
        buffers.append_row(t + i * STEP_S, row)
    page.redraw_now()
    assert above.series[0].curve.xData[0] == -439 * STEP_S  # on screen: drawn
    assert len(below.series[0].curve.xData) == 0  # still out of view: skipped
    holder.verticalScrollBar().setValue(holder.verticalScrollBar().maximum())
    qtbot.waitUntil(lambda: len(below.series[0].curve.xData) > 0, timeout=3000)  # the redraw timer catches up
    assert below.series[0].curve.xData[0] == -439 * STEP_S and below.series[0].curve.xData[-1] == 0.0


def test_a_tile_repaints_its_own_background_under_shorter_text(qtbot) -> None:
    holder = QWidget()
    holder.setStyleSheet(TILE_STYLE)
    tile = StatTile("VRAM used", plots.VRAM_USED_COLOR)
    QHBoxLayout(holder).addWidget(tile)
    qtbot.addWidget(holder)
    holder.resize(400, 150)
    holder.show()
    qtbot.waitExposed(holder)
    box = tile.value_label.geometry().translated(tile.pos())
    background = QColor(TILE_BACKGROUND).rgb()

    def inked(image, left: int, right: int) -> int:  # pixels of text on the value line's middle row
        return sum(image.pixel(x, box.center().y()) != background for x in range(left, right))

    tile.set_text("14.8 / 24.0 GiB", "server 14.2 GiB")
    qtbot.waitUntil(lambda: inked(holder.screen().grabWindow(holder.winId()).toImage(), box.left() + 120,
                                  box.right()) > 0, timeout=2000)
    tile.set_text("1 GiB", "server 1 GiB")
    # What the window shows (its backing store): the old, longer text is gone right of the new one.
    qtbot.waitUntil(lambda: inked(holder.screen().grabWindow(holder.winId()).toImage(), box.left() + 120,
                                  box.right()) == 0, timeout=2000)
    assert inked(holder.screen().grabWindow(holder.winId()).toImage(), box.left(), box.left() + 120) > 0
    assert tile.value == "1 GiB" and tile.detail == "server 1 GiB"
