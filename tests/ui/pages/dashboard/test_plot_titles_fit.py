"""Every plot's title and legend, and every tile's title, stay whole at the window sizes people use: a
1280×720 window (and the same at --scale 1.5 on 1920×1080), where the dashboard page gets about 1100 px."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QRectF
from pytestqt.exceptions import TimeoutError as WaitTimeout

from app.core.telemetry_buffers import TelemetryBuffers
from app.backends.ollama.spec import OLLAMA
from app.core.server_telemetry import ServerTelemetryRing
from app.ui.pages.dashboard.page import DashboardPage
from app.ui.pages.dashboard.plots import TimePlot
from tests.backends.llama_server.recorded_samples import REPORTING_SPEC
from tests.fakes.scripted_gpu import gpu_with

WAIT_MS = 10_000  # a ceiling for a loaded machine: the layout settles in a few event-loop turns

# The dashboard page's size inside a 1280×720 window: the side bar and the scroll bar take the rest.
PAGE_WIDTHS_PX = (1096, 900)


def all_plots(page: DashboardPage) -> list[TimePlot]:
    plots = list(page.time_plots.values())
    plots += [p for p in (page.server.slots_plot, page.server.tokens_plot) if p is not None]
    return plots


def legend_line_rects(plot: TimePlot) -> list[QRectF]:
    """The scene rect of every laid-out line of the title's text (title, then legend entries)."""
    text_item = plot.item.titleLabel.item
    doc = text_item.document()
    layout = doc.documentLayout()
    rects = []
    block = doc.begin()
    while block.isValid():
        origin = layout.blockBoundingRect(block).topLeft()
        lines = block.layout()
        for i in range(lines.lineCount()):
            rects.append(text_item.mapRectToScene(lines.lineAt(i).naturalTextRect().translated(origin)))
        block = block.next()
    return rects


@pytest.mark.parametrize("spec", [OLLAMA, REPORTING_SPEC], ids=["ollama", "llama-server"])
@pytest.mark.parametrize("width", PAGE_WIDTHS_PX)
def test_no_legend_entry_or_tile_title_is_cut_in_a_1280_window(qtbot, page_context, spec, width) -> None:
    page = DashboardPage(page_context(backend=spec, samples=TelemetryBuffers(interval_s=0.5),
                                      server_ring=ServerTelemetryRing(interval_s=1.0), gpu=gpu_with(None, "no NVIDIA driver")))
    qtbot.addWidget(page)
    page.resize(width, 900)
    page.show()
    qtbot.waitExposed(page)
    plots = all_plots(page)
    assert len(plots) >= 2

    def legends_inside() -> bool:
        for plot in plots:
            inside = plot.item.sceneBoundingRect().adjusted(-0.5, -0.5, 0.5, 0.5)
            rects = legend_line_rects(plot)
            if not rects or not all(inside.contains(r) for r in rects):
                return False
        return True

    qtbot.waitUntil(lambda: all(p.item.geometry().width() > 0 for p in plots), timeout=WAIT_MS)
    try:
        qtbot.waitUntil(legends_inside, timeout=WAIT_MS)  # once the layout has settled
    except WaitTimeout:
        cut = {p.key: (p.item.sceneBoundingRect(), legend_line_rects(p)) for p in plots}
        raise AssertionError(f"a legend runs past its plot: {cut}") from None
    for plot in plots:
        text = plot.item.titleLabel.text
        for name, _color, _dashed in plot.legend:
            assert name.replace("&", "&amp;") in text or name in text  # every entry is in the title row
    def titles_whole_or_elided() -> list[tuple[str, str, int, str]]:
        wrong = []
        for key, tile in page.tiles.items():
            label, full = tile.title_label, tile.title.upper()
            shown = label.text()
            fits = label.fontMetrics().horizontalAdvance(shown) <= label.contentsRect().width()
            if not fits or not (shown == full or (shown.endswith("…") and label.toolTip() == full)):
                wrong.append((key, shown, label.contentsRect().width(), label.toolTip()))
        return wrong

    qtbot.waitUntil(lambda: page.tiles["ram"].width() < width // 3, timeout=WAIT_MS)  # one row of tiles
    try:
        qtbot.waitUntil(lambda: not titles_whole_or_elided(), timeout=WAIT_MS)
    except WaitTimeout:
        raise AssertionError(f"a tile title is cut: {titles_whole_or_elided()}") from None
