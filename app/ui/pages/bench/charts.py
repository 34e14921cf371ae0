"""The sweep's two charts: throughput against parallel (or clients), and TTFT p95 against throughput
with the Pareto front and the TTFT target. Failed points stay visible as red crosses on the axis."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QStackedWidget, QVBoxLayout, QWidget

from app.core.bench.outcome import FAILURE_WORDS
from app.core.bench.sweep import PointResult, varied_setting_parts
from app.core.bench.recommend import pareto_front
from app.ui.widgets import theme
from app.ui.widgets import plots
SERIES_COLOURS = (plots.CYAN, plots.ORANGE, plots.VIOLET, plots.MAGENTA, plots.GREEN, plots.YELLOW)
RECOMMENDED_COLOUR = plots.YELLOW
FAILED_COLOUR = plots.RED
LABEL_FONT_PT = 11
MARKER_PX = 13


def speed_latency(r: PointResult) -> tuple[float, float]:
    """(output tokens/s, TTFT p95 in ms) of a measured point; only measured points are plotted."""
    stats = r.stats
    if stats is None:
        raise ValueError(f"point {r.point.index} was not measured")
    return stats.output_tokens_per_s, stats.ttft_ms.p95


def axis_of(varying: Sequence[str]) -> str:
    """The x axis of the throughput chart: parallel when it varies, else client concurrency."""
    return "parallel" if "parallel" in varying else "concurrency"


def _axis_value(r: PointResult, axis: str) -> int:
    return (r.point.parallel or 0) if axis == "parallel" else r.point.concurrency


def series_key(r: PointResult, varying: Sequence[str]) -> str:
    """Which line a point belongs to: the varied settings other than the x axis."""
    axis = axis_of(varying)
    parts = varied_setting_parts(r.point.settings, varying)
    if axis == "parallel" and "concurrency" in varying and _independent_clients(r, varying):
        parts.append(f"{r.point.concurrency} clients")
    return " · ".join(parts)


def _independent_clients(r: PointResult, varying: Sequence[str]) -> bool:
    return r.point.concurrency != (r.point.parallel or 0)


def short_label(r: PointResult, varying: Sequence[str]) -> str:
    """A few characters naming a point on a chart: "p4", "c8", "p4·q8_0"."""
    parts = []
    if "parallel" in varying:
        parts.append(f"p{r.point.parallel}")
    if "concurrency" in varying and ("parallel" not in varying or _independent_clients(r, varying)):
        parts.append(f"c{r.point.concurrency}")
    s = r.point.settings
    if "kv_cache_types" in varying:
        parts.append(s.kv_cache_type)
    if "context_lengths" in varying:
        parts.append(f"{(s.context_length or 0) // 1024}k" if s.context_length else "ctx·def")
    if "flash_attention" in varying:
        parts.append(f"FA {s.flash_attention}")
    return "·".join(parts) or f"#{r.point.index + 1}"


def _plot(x_label: str, y_label: str) -> pg.PlotWidget:
    return plots.make_static_plot(y_label, x_label, min_height=240, grid=True, right_margin=14)


class ChartFrame(QWidget):
    """A chart with its title and legend above it in a label that wraps, so a long legend never
    widens the plot beyond its space."""

    def __init__(self, x_label: str, y_label: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ChartFrame")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.setStyleSheet(f"#ChartFrame {{ background: {plots.PLOT_BACKGROUND}; border-radius: 6px; }}"
                           "#ChartFrame QLabel { background: transparent; }")
        self.title = QLabel()
        self.title.setWordWrap(True)
        self.title.setTextFormat(Qt.TextFormat.RichText)
        self.title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.title.setStyleSheet(f"font-size: {plots.TITLE_FONT_PT}pt; padding: 6px 8px 0 8px;")
        # Its width follows the plot's, never the other way round.
        self.title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.plot = _plot(x_label, y_label)
        self.empty_label = QLabel("Run a sweep: each measured point is plotted here.")
        self.empty_label.setObjectName("Dim")
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setWordWrap(True)
        self.body = QStackedWidget()
        self.body.setStyleSheet(f"QStackedWidget, QLabel {{ background: {plots.PLOT_BACKGROUND}; }}")
        self.body.addWidget(self.plot)
        self.body.addWidget(self.empty_label)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(self.title)
        lay.addWidget(self.body, 1)
        self.set_empty(True)

    def set_empty(self, empty: bool) -> None:
        """Show a sentence instead of bare axes while there is nothing to plot."""
        self.body.setCurrentWidget(self.empty_label if empty else self.plot)

    def set_title(self, title: str, legend: list[tuple[str, str, bool]]) -> None:
        """The title followed by its legend entries (name, colour, dashed)."""
        head = f"<span style='color:{plots.TITLE_TEXT}; font-weight:700'>{title}</span>"
        entries = "&nbsp;&nbsp;&nbsp;".join(
            f"<span style='color:{colour}; font-weight:700'>{'&#x254D;&#x254D;' if dashed else '&#x2501;&#x2501;'}"
            f"</span><span style='color:{plots.AXIS_TEXT}'>&nbsp;{name}</span>" for name, colour, dashed in legend)
        self.title.setText(f"{head}<br><span style='font-size:{plots.LEGEND_FONT_PT}pt'>{entries}</span>"
                           if legend else head)


def _text(text: str, colour: str, anchor: tuple[float, float], bold: bool = False) -> pg.TextItem:
    label = pg.TextItem(text, color=QColor(colour), anchor=anchor)
    font = QFont()
    font.setPointSize(LABEL_FONT_PT)
    font.setBold(bold)
    label.setFont(font)
    return label


class ThroughputChart(ChartFrame):
    """Aggregate output tokens/s (solid) and one request's own tokens/s (dashed) per setting."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("parallel requests", "tokens/s", parent)
        self.set_title("Output tokens/s", [])
        self.points_drawn = 0

    def set_results(self, results: Sequence[PointResult], varying: Sequence[str], recommended: int | None) -> None:
        """Redraw for these results."""
        self.set_empty(not any(r.ran for r in results))
        item = self.plot.getPlotItem()
        item.clear()
        axis = axis_of(varying)
        item.getAxis("bottom").setLabel("parallel requests" if axis == "parallel" else "concurrent clients",
                                        color=plots.AXIS_TEXT,
                                        **{"font-size": f"{plots.AXIS_FONT_PT}pt"})
        values = sorted({_axis_value(r, axis) for r in results})
        position = {v: i for i, v in enumerate(values)}
        item.getAxis("bottom").setTicks([[(i, "∞" if v == 0 else str(v)) for v, i in position.items()], []])
        groups: dict[str, list[PointResult]] = {}
        for r in results:
            groups.setdefault(series_key(r, varying), []).append(r)
        legend = []
        y_max = 1.0
        self.points_drawn = 0
        for n, (key, members) in enumerate(groups.items()):
            colour = SERIES_COLOURS[n % len(SERIES_COLOURS)]
            ran = sorted((r for r in members if r.ran and r.output_tokens_per_s is not None),
                         key=lambda r: _axis_value(r, axis))
            xs = [position[_axis_value(r, axis)] for r in ran]
            ys = [r.output_tokens_per_s or 0.0 for r in ran]
            if ran:
                item.plot(xs, ys, pen=plots.pen(colour, 3.0), symbol="o", symbolSize=MARKER_PX,
                          symbolBrush=QColor(colour), symbolPen=plots.pen(plots.PLOT_BACKGROUND, 1.5))
                per_request = [r.stats.request_tokens_per_s.mean if r.stats else math.nan for r in ran]
                if len(groups) == 1 and any(math.isfinite(v) for v in per_request):
                    item.plot(xs, per_request, pen=plots.pen(colour, 2.0, dashed=True), connect="finite")
                    legend.append(("per request", colour, True))
                for x, y, r in zip(xs, ys, ran):
                    # A point measured while others took the device: its number is not its setting's alone.
                    contended = r.contention.contended
                    value = _text(f"{y:.0f} ⚠" if contended else f"{y:.0f}",
                                  theme.WARNING if contended else plots.TITLE_TEXT, (0.5, 1.35))
                    value.setPos(x, y)
                    item.addItem(value)
                y_max = max([y_max, *ys, *[v for v in per_request if math.isfinite(v)]])
                self.points_drawn += len(ran)
            legend.insert(0, (key or "aggregate", colour, False))
        self._mark_failed(item, results, axis, position, y_max * 0.05)
        self._mark_recommended(item, results, axis, position, recommended)
        self.set_title("Output tokens/s", legend)
        item.setXRange(-0.5, max(len(values) - 0.5, 0.5), padding=0)
        item.setYRange(0, y_max * 1.22, padding=0)

    def _mark_failed(self, item: pg.PlotItem, results: Sequence[PointResult], axis: str,
                     position: dict[int, int], y: float) -> None:
        """A red cross just above the axis for each point that was not measured, with one word why."""
        failed = [r for r in results if not r.ran]
        if not failed:
            return
        xs = [position[_axis_value(r, axis)] for r in failed]
        item.addItem(pg.ScatterPlotItem(xs, [y] * len(xs), symbol="x", size=MARKER_PX + 5,
                                        brush=QColor(FAILED_COLOUR), pen=plots.pen(FAILED_COLOUR, 2.0)))
        for x, r in zip(xs, failed):
            word = FAILURE_WORDS[r.failure].mark if r.failure is not None else r.status.value
            label = _text(word, FAILED_COLOUR, (0.5, 1.3), bold=True)
            label.setPos(x, y)
            item.addItem(label)

    @staticmethod
    def _mark_recommended(item: pg.PlotItem, results: Sequence[PointResult], axis: str, position: dict[int, int],
                          recommended: int | None) -> None:
        best = next((r for r in results if r.point.index == recommended and r.ran), None)
        if best is None or best.output_tokens_per_s is None:
            return
        item.addItem(pg.ScatterPlotItem([position[_axis_value(best, axis)]], [best.output_tokens_per_s],
                                        symbol="o", size=MARKER_PX + 14, brush=None,
                                        pen=plots.pen(RECOMMENDED_COLOUR, 3.0)))


class LatencyChart(ChartFrame):
    """TTFT p95 against throughput: up and to the left is worse; the front is what is worth choosing."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("output tokens/s", "TTFT p95 (ms)", parent)
        self.set_title("TTFT p95 vs throughput", [])
        self.front: list[int] = []

    def set_results(self, results: Sequence[PointResult], varying: Sequence[str], recommended: int | None,
                    ttft_target_ms: float | None) -> None:
        """Redraw for these results."""
        self.set_empty(not any(r.ran for r in results))
        item = self.plot.getPlotItem()
        item.clear()
        ran = [r for r in results if r.ran and r.stats is not None and r.stats.requests_ok]
        groups: dict[str, str] = {}
        for r in results:
            groups.setdefault(series_key(r, varying), SERIES_COLOURS[len(groups) % len(SERIES_COLOURS)])
        self.front = pareto_front(results)
        by_index = {r.point.index: r for r in ran}
        front = [by_index[i] for i in self.front]
        legend = [("front", plots.GREEN, False)]
        if len(front) > 1:
            item.plot([speed_latency(r)[0] for r in front], [speed_latency(r)[1] for r in front],
                      pen=plots.pen(plots.GREEN, 2.0))
        xs = [speed_latency(r)[0] for r in ran]
        ys = [speed_latency(r)[1] for r in ran]
        if ran:
            item.addItem(pg.ScatterPlotItem(xs, ys, symbol="o", size=MARKER_PX,
                                            brush=[QColor(groups[series_key(r, varying)]) for r in ran],
                                            pen=plots.pen(plots.PLOT_BACKGROUND, 1.5)))
            for x, y, r in zip(xs, ys, ran):
                label = _text(short_label(r, varying), plots.AXIS_TEXT, (0.5, 1.35))
                label.setPos(x, y)
                item.addItem(label)
        best = by_index.get(recommended) if recommended is not None else None
        if best is not None:
            item.addItem(pg.ScatterPlotItem([speed_latency(best)[0]], [speed_latency(best)[1]],
                                            symbol="o", size=MARKER_PX + 14, brush=None,
                                            pen=plots.pen(RECOMMENDED_COLOUR, 3.0)))
            legend.append(("recommended", RECOMMENDED_COLOUR, False))
        y_top = max(ys, default=1.0)
        if ttft_target_ms is not None:
            line = pg.InfiniteLine(pos=ttft_target_ms, angle=0, movable=False,
                                   pen=plots.pen(plots.LIMIT_GREY, 2.0, dashed=True))
            item.addItem(line, ignoreBounds=True)
            shown = ttft_target_ms <= y_top * 1.5
            legend.append((f"target {ttft_target_ms:g} ms" + ("" if shown else " (above)"), plots.LIMIT_GREY, True))
            if shown:
                y_top = max(y_top, ttft_target_ms)
        x_max = max(xs, default=1.0)
        item.setXRange(0, x_max * 1.15, padding=0)
        item.setYRange(0, y_top * 1.25 or 1.0, padding=0)
        self.set_title("TTFT p95 vs throughput", legend)


class SweepCharts(QWidget):
    """Both charts side by side."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.throughput = ThroughputChart()
        self.latency = LatencyChart()
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(12)
        lay.addWidget(self.throughput, 1)
        lay.addWidget(self.latency, 1)
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)

    def set_results(self, results: Sequence[PointResult], varying: Sequence[str], recommended: int | None,
                    ttft_target_ms: float | None) -> None:
        """Redraw both charts."""
        self.throughput.set_results(results, varying, recommended)
        self.latency.set_results(results, varying, recommended, ttft_target_ms)


__all__ = ["LatencyChart", "SweepCharts", "ThroughputChart", "axis_of", "series_key", "short_label"]
