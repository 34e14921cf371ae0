"""Where requests waited before their first token, per point: one stacked bar each (client queue, server wait,
prefill, rest; averages), the points named by their two axes as the CLI's table names them (front-end
concurrency cap × server parallel slots), and where each point's requests waited most under the chart."""

from __future__ import annotations

import html

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from app.core.bench.run import SweepRun, closed_loop
from app.core.bench.waiting import PARTS, PARTS_LEGEND, WaitBar, axes_title, wait_bars
from app.ui.pages.bench.charts import ChartFrame
from app.ui.widgets import plots, theme

PART_COLOURS = (plots.ORANGE, plots.MAGENTA, plots.CYAN, plots.LIMIT_GREY)
BAR_WIDTH = 0.6


class WaitsChart(ChartFrame):
    """The stacked bars; `bars` holds what was drawn (for checks)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("server parallel slots · front-end concurrency cap", "average (ms)", parent)
        self.setObjectName("WaitsChart")
        self.empty_label.setText("Each measured point's wait is drawn here.")
        self.bars: list[WaitBar] = []

    def set_bars(self, bars: list[WaitBar], title: str, closed: bool) -> None:
        """Redraw for these bars."""
        self.bars = bars
        item = self.plot.getPlotItem()
        item.clear()
        self.set_empty(not bars)
        axis_words = "server parallel slots · " + ("clients" if closed else "front-end concurrency cap")
        plots.style_axis(item.getAxis("bottom"), axis_words)
        self.set_title(html.escape(title), [(name, colour, False) for name, colour in zip(PARTS, PART_COLOURS,
                                                                                          strict=True)])
        if not bars:
            return
        xs = list(range(len(bars)))
        bottom = [0.0] * len(bars)
        for part, colour in enumerate(PART_COLOURS):
            heights = [b.means_ms[part] for b in bars]
            item.addItem(pg.BarGraphItem(x=xs, height=heights, y0=list(bottom), width=BAR_WIDTH,
                                         brush=QColor(colour), pen=plots.pen(plots.PLOT_BACKGROUND, 1.0)))
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        item.getAxis("bottom").setTicks([[(x, b.label) for x, b in zip(xs, bars, strict=True)]])
        pad = max(0.6, (4 - len(bars)) / 2)  # a bar or two stay bars, not walls
        item.setXRange(-pad, len(bars) - 1 + pad, padding=0)
        item.setYRange(0, max(max(bottom) * 1.15, 1.0), padding=0)


class WaitsView(QWidget):
    """The chart, where each point waited most, and what the parts mean."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("WaitsView")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(4)
        self.chart = WaitsChart()
        self.chart.setMinimumHeight(280)
        self.most = QLabel()
        self.most.setObjectName("WaitsMost")
        self.most.setWordWrap(True)
        self.most.setTextFormat(Qt.TextFormat.RichText)
        self.legend = QLabel(PARTS_LEGEND)
        self.legend.setObjectName("Dim")
        self.legend.setWordWrap(True)
        lay.addWidget(self.chart)
        lay.addWidget(self.most)
        lay.addWidget(self.legend)
        self.hide()

    def set_run(self, run: SweepRun | None) -> None:
        """Show a run's measured points (hidden while none is)."""
        closed = closed_loop(run) if run is not None else False
        bars = wait_bars(run.results, closed) if run is not None else []
        self.setVisible(bool(bars))
        title = axes_title(run.varying, closed) if run is not None else ""
        self.chart.set_bars(bars, title, closed)
        self.most.setText(f"<span style='color:{theme.DIM}'>Waited most in:</span> " + " &nbsp;·&nbsp; ".join(
            f"<span style='white-space:nowrap'><b>{html.escape(b.label)}</b> {html.escape(b.most_words)}</span>"
            for b in bars))


__all__ = ["PART_COLOURS", "WaitsChart", "WaitsView"]
