"""The dashboard's time plots: which channels each plot shows, and a cheap per-frame update."""

from __future__ import annotations

import math

from dataclasses import dataclass, field

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QGraphicsItem, QWidget

from app.core.telemetry_buffers import Channel
from app.core.decimate import bin_starts, envelope_indices
from app.ui.widgets import plots
from app.ui.widgets.plots import LiveCurve, add_series, make_time_plot, pen, title_with_legend
from app.core.units import MIB_PER_GIB

PX_PER_BIN = 2  # one min/max pair per this many pixel columns: about one point per column, peaks kept


TITLE_ROW_PX = 30  # height of a one-line title row (pyqtgraph's own for a title)
TITLE_MARGIN_PX = 16  # kept clear at the title's ends

@dataclass(eq=False)
class Series:
    """One curve fed from one channel, scaled into the plot's unit."""

    curve: LiveCurve
    channel: int
    scale: float


@dataclass(eq=False)
class WindowRows:
    """One frame's rows of one source, shared by the plots that draw it: absolute times `t` (s),
    `x` the same in seconds before now, and the rows; bins are made once per bin width."""

    t: np.ndarray
    x: np.ndarray
    rows: np.ndarray
    _starts: dict[float, np.ndarray] = field(default_factory=dict)

    def starts(self, bin_s: float) -> np.ndarray:
        """First row of every `bin_s`-second bin (aligned to absolute time)."""
        found = self._starts.get(bin_s)
        if found is None:
            found = self._starts[bin_s] = bin_starts(self.t, bin_s)
        return found


class TimePlot:
    """A PlotWidget plus the series it draws; y ranges are set by hand (0 to a nice maximum),
    which is cheaper and steadier than pyqtgraph's auto-range on every frame."""

    def __init__(self, key: str, title: str, y_label: str, capacity: int) -> None:
        self.key = key
        self.title = title
        self.legend: list[tuple[str, str, bool]] = []
        self.widget = make_time_plot(title, y_label)
        self.item = self.widget.getPlotItem()
        # The title row spans the axes' columns too (pyqtgraph puts it over the data column alone), so the
        # text is laid out, wrapped and centred in the width it is actually drawn in: the whole plot's.
        label = self.item.titleLabel
        self.item.layout.removeItem(label)
        self.item.layout.addItem(label, 0, 0, 1, 3)
        self.grid = plots.TickGrid(self.item)
        self.limits: list[tuple[pg.InfiniteLine, int, float]] = []
        self.series: list[Series] = []
        self._capacity = capacity
        self._span_s = 1.0  # seconds across the x axis
        self.drawn: object = None  # the data state last drawn, so a plot scrolled back into view can catch up
        self._y_range: tuple[float, float] | None = None
        self.y_floor_max = 1.0  # the y axis reaches at least this high
        self.y_fixed_max: float | None = None
        self._one_line_width = 0.0  # px the title and its legend take on one line
        self.title_wrapped = False  # the legend is on a second line: the cell is too narrow for one

    def add(self, name: str, channel: int, color: str, scale: float = 1.0, dashed: bool = False,
            curve: LiveCurve | None = None) -> LiveCurve:
        """Draw `channel` (times `scale`) as a curve, named in the legend of the title row."""
        curve = curve if curve is not None else add_series(self.widget, color, dashed)
        self.series.append(Series(curve, channel, scale))
        self.legend.append((name, color, dashed))
        self._retitle()
        return curve

    def _fit_title(self) -> None:
        """One line where the title and its legend fit the plot's width, else wrapped between legend
        entries onto as many lines as it needs, the title row growing to hold them. The width is the title
        cell's as laid out (the row spans the axes' columns), less a margin at its ends."""
        label = self.item.titleLabel
        width = math.floor(label.geometry().width()) - TITLE_MARGIN_PX
        wrap = width > 0 and self._one_line_width > width
        text_width = float(width) if wrap else -1.0
        if text_width == label.item.textWidth() and wrap == self.title_wrapped:
            return
        self.title_wrapped = wrap
        label.item.setTextWidth(text_width)
        height = max(TITLE_ROW_PX, math.ceil(label.itemRect().height()) + 4) if wrap else TITLE_ROW_PX
        label.setMaximumHeight(height)
        self.item.layout.setRowFixedHeight(0, height)

    def _retitle(self) -> None:
        label = self.item.titleLabel
        label.item.setTextWidth(-1)
        self.title_wrapped = False
        self.item.setTitle(title_with_legend(self.title, self.legend), size=f"{plots.TITLE_FONT_PT}pt")
        self._one_line_width = label.itemRect().width()
        # Laid-out rich text (more so wrapped) costs a repaint each frame; as a pixmap it is drawn again
        # only when the title or its size changes.
        label.item.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        # A long title must not widen the plot past its cell on a small screen: let it clip. The label
        # sets its minimum back to the text's width on every resize, so it is lowered after each time.
        label = self.item.titleLabel
        if not getattr(label, "clips_to_cell", False):
            text_width_min = label.updateMin

            def clipping_min() -> None:
                text_width_min()
                label.setMinimumWidth(0)
                label._sizeHint[Qt.SizeHint.MinimumSize] = (0.0, label._sizeHint[Qt.SizeHint.MinimumSize][1])

            place_text = label.resizeEvent

            def place_clipped(event: object) -> None:
                # Too narrow for the legend beside the title: it goes under it. A title wider than its cell
                # even so keeps its start in view rather than losing both ends.
                self._fit_title()
                label.opts["justify"] = "left" if label.itemRect().width() > label.rect().width() else "center"
                place_text(event)

            label.updateMin = clipping_min
            label.resizeEvent = place_clipped
            label.clips_to_cell = True
        label.updateMin()
        self._fit_title()

    def add_limit(self, name: str, channel: int, color: str, scale: float = 1.0) -> pg.InfiniteLine:
        """A dashed horizontal line at the newest value of `channel` (a capacity, say)."""
        line = pg.InfiniteLine(angle=0, movable=False, pen=pen(color, dashed=True))
        line.setZValue(10)
        # Cached as a pixmap: a dashed 2 px stroke under the view's scaling is slow, and the value seldom changes.
        line.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        line.hide()
        self.item.addItem(line, ignoreBounds=True)
        self.limits.append((line, channel, scale))
        self.legend.append((name, color, True))
        self._retitle()
        return line

    def set_window(self, window_s: float) -> None:
        """Show the last window_s seconds, ending at 0."""
        # A sliver of margin on both sides keeps the end tick labels ("-300", "0") unclipped.
        margin = window_s * 0.015
        self._span_s = window_s + 2 * margin
        self.item.setXRange(-window_s - margin, margin, padding=0.0)

    def bin_s(self) -> float:
        """Seconds of data per min/max pair at the plot's current width."""
        width_px: float = max(self.item.getViewBox().width(), 1.0)
        return self._span_s * PX_PER_BIN / width_px

    def update(self, data: WindowRows) -> None:
        """New data for every series from one frame's rows of TelemetryBuffers."""
        top = self._update_series(data, self.series)
        top = max(top, self._update_limits(data.rows))
        self._fit_y(top)

    def _update_series(self, data: WindowRows, ranged: list[Series]) -> float:
        """The min/max envelope of every series at the plot's pixel width; returns the highest
        value among the `ranged` ones (the envelope keeps every bin's maximum, so it is the data's)."""
        top = self.y_floor_max
        if not self.series:
            return top
        picks = envelope_indices(data.rows, data.starts(self.bin_s()), [s.channel for s in self.series])
        for s, keep in zip(self.series, picks):
            y = data.rows[keep, s.channel] * s.scale
            s.curve.setData(data.x[keep], y)
            if s in ranged and len(y) and not np.isnan(y).all():
                top = max(top, float(np.nanmax(y)))
        return top

    def _update_limits(self, rows: np.ndarray) -> float:
        """Move limit lines to the newest values; returns the highest one (0 when none)."""
        top = 0.0
        for line, channel, scale in self.limits:
            value = float(rows[-1, channel]) * scale if len(rows) else np.nan
            if np.isfinite(value):
                if line.value() != value:
                    line.setValue(value)
                line.setVisible(True)
                top = max(top, value)
            else:
                line.setVisible(False)
        return top

    def _fit_y(self, data_max: float) -> None:
        # The small step below 0 keeps the "0" tick label and a zero line clear of the axis.
        hi = self.y_fixed_max if self.y_fixed_max is not None else nice_ceiling(data_max * 1.1)
        lo = -0.05 * hi
        if self._y_range != (lo, hi):
            self._y_range = (lo, hi)
            self.item.setYRange(lo, hi, padding=0.0)


def on_screen(widget: QWidget) -> bool:
    """True when part of `widget` can be seen: shown, and not scrolled out of its page's view.

    Every ancestor clips it (a scroll area's viewport does the scrolling); visibleRegion() is
    no help here, since it leaves out whatever opaque children cover, a plot's whole viewport."""
    if not widget.isVisible():
        return False
    window = widget.window()
    seen = QRect(widget.mapTo(window, QPoint(0, 0)), widget.size())
    parent = widget.parentWidget()
    while parent is not None and not seen.isEmpty():
        seen &= QRect(parent.mapTo(window, QPoint(0, 0)), parent.size())
        parent = parent.parentWidget()
    return not seen.isEmpty()


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 × 10^k that is >= value (value > 0)."""
    if value <= 0 or not np.isfinite(value):
        return 1.0
    exp = np.floor(np.log10(value))
    base = 10.0 ** exp
    for step in (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0):
        if step * base >= value * (1 - 1e-9):
            return float(step * base)
    return float(10.0 * base)


class PowerTemperaturePlot(TimePlot):
    """Power on the left axis (W) and temperature on its own right axis (°C, 0-100)."""

    def __init__(self, capacity: int) -> None:
        super().__init__("power_temp", "Power · temperature", "power (W)", capacity)
        self.y_floor_max = 100.0
        self.add("W (left)", Channel.GPU_POWER_W, plots.POWER_COLOR)
        self.temp_view = pg.ViewBox(enableMouse=False)
        self.temp_view.setMouseEnabled(x=False, y=False)
        self.item.showAxis("right")
        right = self.item.getAxis("right")
        plots.style_axis(right, "temperature (°C)")
        self.item.scene().addItem(self.temp_view)
        right.linkToView(self.temp_view)
        self.temp_view.setXLink(self.item)
        self.temp_view.setYRange(-5.0, 100.0, padding=0.0)
        temp_curve = LiveCurve(pen(plots.TEMPERATURE_COLOR))
        self.temp_view.addItem(temp_curve, ignoreBounds=True)
        self.add("°C (right)", Channel.GPU_TEMP_C, plots.TEMPERATURE_COLOR, curve=temp_curve)
        self.item.getViewBox().sigResized.connect(self._sync_geometry)
        self._temp_series = self.series[-1]

    def _sync_geometry(self) -> None:
        self.temp_view.setGeometry(self.item.getViewBox().sceneBoundingRect())

    def update(self, data: WindowRows) -> None:
        """Like TimePlot.update, but only power decides the left axis' range."""
        self._fit_y(self._update_series(data, [s for s in self.series if s is not self._temp_series]))


def build_gpu_plots(capacity: int, total_vram_mib: float) -> list[TimePlot]:
    """VRAM, utilisation, and power + temperature plots."""
    vram = TimePlot("vram", "GPU memory", "memory (GiB)", capacity)
    vram.add("used", Channel.GPU_MEM_USED_MIB, plots.VRAM_USED_COLOR, 1 / MIB_PER_GIB)
    vram.add("by server", Channel.GPU_MEM_SERVER_MIB, plots.VRAM_SERVER_COLOR, 1 / MIB_PER_GIB)
    vram.add_limit("total", Channel.GPU_MEM_TOTAL_MIB, plots.VRAM_TOTAL_COLOR, 1 / MIB_PER_GIB)
    vram.y_fixed_max = total_vram_mib / MIB_PER_GIB * 1.06  # the card's limit stays in view
    util = TimePlot("gpu_util", "GPU utilisation", "utilisation (%)", capacity)
    util.add("GPU busy %", Channel.GPU_UTIL_PCT, plots.GPU_UTIL_COLOR)
    util.y_fixed_max = 110.0
    return [vram, util, PowerTemperaturePlot(capacity)]


def build_host_plots(capacity: int) -> list[TimePlot]:
    """Tokens/s, host memory, and server CPU plots."""
    tokens = TimePlot("tokens", "Throughput of ollama-deck's requests", "tokens/s", capacity)
    tokens.add("tokens/s", Channel.TOKENS_PER_S, plots.TOKENS_COLOR)
    tokens.y_floor_max = 20.0
    memory = TimePlot("host_mem", "Host memory", "memory (GiB)", capacity)
    memory.add("RAM used", Channel.RAM_USED_MIB, plots.RAM_COLOR, 1 / MIB_PER_GIB)
    memory.add("server RSS", Channel.SERVER_RSS_MIB, plots.RSS_COLOR, 1 / MIB_PER_GIB)
    memory.add_limit("RAM total", Channel.RAM_TOTAL_MIB, plots.LIMIT_GREY, 1 / MIB_PER_GIB)
    cpu = TimePlot("server_cpu", "Server CPU", "CPU (% of one core)", capacity)
    cpu.add("server CPU %", Channel.SERVER_CPU_PCT, plots.CPU_COLOR)
    cpu.y_floor_max = 100.0
    return [tokens, memory, cpu]


def estimate_line() -> pg.InfiniteLine:
    """A horizontal dashed line for the predicted VRAM, labelled with its value."""
    line = pg.InfiniteLine(
        angle=0,
        movable=False,
        pen=pen(plots.VRAM_ESTIMATE_COLOR, dashed=True),
        label="estimate {value:.1f} GiB",
        labelOpts={"position": 0.12, "color": plots.VRAM_ESTIMATE_COLOR, "anchors": [(0, 1), (0, 1)],
                   "fill": pg.mkBrush(30, 31, 36, 200)},
    )
    font = QFont()
    font.setPointSize(plots.LEGEND_FONT_PT)
    font.setBold(True)
    line.label.setFont(font)
    line.setZValue(20)
    for item in (line, line.label, line.label.textItem):  # redrawn only when the estimate changes
        item.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
    line.hide()
    return line

