"""A rate sweep's result on the Benchmark page: the sustainable rate and requests a day in large text, what
broke first, latency against load as a chart (the lines of app/ui/widgets/load_chart.py, drawn live with
pyqtgraph like the page's other charts) and each step's verdict. Used live (step by step) and for history."""

from __future__ import annotations

import html
import math

import pyqtgraph as pg

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QAbstractItemView, QFrame, QHeaderView, QLabel, QSizePolicy, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from app.core.bench.capacity import STEP_HEADER, Capacity, CapacityStatus, day_words, step_cells
from app.ui.pages.bench.charts import ChartFrame
from app.ui.widgets import plots, theme
from app.ui.widgets.load_chart import chart_series

SERIES_COLOURS = (plots.CYAN, plots.ORANGE, plots.VIOLET, plots.MAGENTA, plots.GREEN, plots.YELLOW)
MARKER_PX = 11
CARD_STYLE = ("#CapacityCard { background: #16222c; border: 1px solid #2f6f9a; border-radius: 8px; }"
              "#CapacityCard QLabel { background: transparent; }")
STATUS_WORDS = {CapacityStatus.FOUND: "Sustainable rate",
                CapacityStatus.NEVER_BROKE: "Sustainable rate: at least",
                CapacityStatus.NEVER_MET: "Not sustainable at any rate tried",
                CapacityStatus.INCOMPLETE: "Sustainable so far: at least",
                CapacityStatus.LOAD_LIMITED: "Sustainable rate: at least"}


def headline(capacity: Capacity) -> tuple[str, str]:
    """The large line and the one under it: ("2.4 requests/s", "≈ 207,000 requests a day"), or what stands
    instead (no step met, none measured yet)."""
    rate = capacity.sustainable_rps
    if rate is None:
        bad = capacity.broke_at
        if bad is not None:
            return "not sustainable", f"even the lowest rate tried, {bad.offered_rps:.3g} requests/s, missed"
        return "not measured", ""  # no step was judged (the notes say why); a running ladder shows its first
    return f"{rate:.3g} requests/s", f"≈ {day_words(rate)} requests a day"


def broke_words(capacity: Capacity) -> str:
    """What broke first, in words ('' when nothing broke)."""
    bad = capacity.broke_at
    if bad is None:
        return ""
    return f"At {bad.offered_rps:.3g} requests/s: " + "; ".join(m.words() for m in bad.misses) + "."


def log_ticks(low: float, high: float) -> list[float]:
    """1-2-5 tick values from low to high, for a logarithmic axis."""
    out = []
    for exp in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
        out += [m * 10.0 ** exp for m in (1, 2, 5) if low <= m * 10.0 ** exp <= high]
    return out


def seconds_tick(ms: float) -> str:
    """A logarithmic axis' tick in seconds, short enough for the axis' width: "0.2", "1", "20"."""
    return f"{ms / 1000:g}"


class CapacityChart(ChartFrame):
    """Latency against offered load: TTFT and E2E per step, the targets dashed, the sustainable rate and the
    rate that broke as vertical lines; a step that missed is a hollow marker."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("offered load (requests/s)", "latency (ms)", parent)
        self.setObjectName("CapacityChart")
        self.set_title("Latency against load", [])
        self.empty_label.setText("Each step of the rate sweep is plotted here as it is measured.")
        self.drawn: list[str] = []  # the names of the series drawn (for checks)

    def set_capacity(self, capacity: Capacity | None) -> None:
        """Redraw for this rate sweep (None: empty)."""
        item = self.plot.getPlotItem()
        item.clear()
        self.drawn = []
        series, targets = chart_series(capacity) if capacity is not None else ([], [])
        self.set_empty(not any(s.points for s in series))
        if capacity is None:
            return
        values = [p[1] for s in series for p in s.points] + [t.ms for t in targets]
        finite = [y for y in values if math.isfinite(y) and y > 0]
        log = bool(finite) and max(finite) / min(finite) > 30  # a growing queue makes latencies jump
        item.setLogMode(x=False, y=log)

        def at(ms: float) -> float:  # where a latency sits on the y axis (lines are not transformed by log mode)
            return math.log10(ms) if log else ms

        legend: list[tuple[str, str, bool]] = []
        colours: dict[str, str] = {}
        xs: list[float] = []
        for s in series:
            if not s.points:
                continue
            colour = colours.setdefault(s.colour, SERIES_COLOURS[len(colours) % len(SERIES_COLOURS)])
            x = [p[0] for p in s.points]
            y = [p[1] for p in s.points]
            # One item for the line and its markers, so that both follow a logarithmic axis.
            item.plot(x, y, pen=plots.pen(colour, 2.0, dashed=s.dotted), symbol="s" if s.square else "o",
                      symbolSize=MARKER_PX, symbolPen=plots.pen(colour, 2.0),
                      symbolBrush=[QColor(colour) if met else QColor(plots.PLOT_BACKGROUND)
                                   for _x, _y, met in s.points])
            legend.append((s.name, colour, s.dotted))
            self.drawn.append(s.name)
            xs += x
        for t in targets:
            colour = colours.get(t.colour, plots.LIMIT_GREY)
            item.addItem(pg.InfiniteLine(pos=at(t.ms), angle=0, movable=False,
                                         pen=plots.pen(colour, 1.5, dashed=True)), ignoreBounds=True)
            legend.append((t.label, colour, True))
        good, bad = capacity.sustained, capacity.broke_at
        if good is not None:
            item.addItem(pg.InfiniteLine(pos=good.offered_rps, angle=90, movable=False,
                                         pen=plots.pen(plots.GREEN, 2.0)), ignoreBounds=True)
            legend.append((f"sustainable {good.offered_rps:.3g}/s", plots.GREEN, False))
        if bad is not None:
            item.addItem(pg.InfiniteLine(pos=bad.offered_rps, angle=90, movable=False,
                                         pen=plots.pen(plots.RED, 2.0, dashed=True)), ignoreBounds=True)
            legend.append((f"broke at {bad.offered_rps:.3g}/s", plots.RED, True))
        left = item.getAxis("left")
        left.setTicks(None)
        plots.style_axis(left, "latency (s, log scale)" if log else "latency (ms)")
        if xs:
            item.setXRange(0, max(xs) * 1.1, padding=0)
        if finite:
            if log:
                low, high = min(finite) / 1.5, max(finite) * 1.5
                item.setYRange(math.log10(low), math.log10(high), padding=0)
                left.setTicks([[(math.log10(v), seconds_tick(v)) for v in log_ticks(low, high)], []])
            else:
                item.setYRange(0, max(finite) * 1.2, padding=0)
        self.set_title("Latency against load" + (" (log scale)" if log else ""), legend)


class CapacityView(QWidget):
    """The rate sweep's card (large figures, what broke first), its chart and its steps."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("CapacityView")
        self.capacity: Capacity | None = None
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(8)
        self.card = QFrame()
        self.card.setObjectName("CapacityCard")
        self.card.setStyleSheet(CARD_STYLE)
        card = QVBoxLayout(self.card)
        card.setContentsMargins(14, 10, 14, 12)
        card.setSpacing(4)
        self.title = QLabel("Capacity")
        self.title.setObjectName("CapacityTitle")
        self.title.setWordWrap(True)
        self.title.setStyleSheet("font-size: 13pt; font-weight: 700; color: #9fd8ff;")
        self.rate = QLabel()
        self.rate.setObjectName("CapacityRate")
        self.rate.setWordWrap(True)
        self.rate.setStyleSheet("font-size: 26pt; font-weight: 800;")
        self.per_day = QLabel()
        self.per_day.setObjectName("CapacityPerDay")
        self.per_day.setWordWrap(True)
        self.per_day.setStyleSheet("font-size: 16pt; font-weight: 600;")
        self.broke = QLabel()
        self.broke.setObjectName("CapacityBroke")
        self.broke.setWordWrap(True)
        self.broke.setTextFormat(Qt.TextFormat.RichText)
        self.broke.setStyleSheet("font-size: 11.5pt;")
        self.notes = QLabel()
        self.notes.setObjectName("Dim")
        self.notes.setWordWrap(True)
        for w in (self.title, self.rate, self.per_day, self.broke, self.notes):
            card.addWidget(w)
        lay.addWidget(self.card)
        self.chart = CapacityChart()
        self.chart.setMinimumHeight(300)
        lay.addWidget(self.chart)
        self.steps = QTableWidget(0, len(STEP_HEADER))
        self.steps.setObjectName("CapacitySteps")
        self.steps.setHorizontalHeaderLabels(list(STEP_HEADER))
        self.steps.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.steps.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.steps.verticalHeader().setVisible(False)
        self.steps.setWordWrap(True)
        header = self.steps.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(len(STEP_HEADER) - 1, QHeaderView.ResizeMode.Stretch)
        self.steps.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        lay.addWidget(self.steps)
        self.hide()

    def set_capacity(self, capacity: Capacity | None) -> None:
        """Show a rate sweep (None: hide)."""
        self.capacity = capacity
        self.setVisible(capacity is not None)
        self.chart.set_capacity(capacity)
        if capacity is None:
            self.steps.setRowCount(0)
            return
        where = f" at {capacity.setting}" if capacity.setting else ""
        status = STATUS_WORDS[capacity.status].lower() if capacity.steps else "no rate sweep"
        self.title.setText(f"Capacity of {capacity.scenario.name}{where} — {status}")
        big, small = headline(capacity)
        self.rate.setText(big)
        colour = theme.ERROR if capacity.status is CapacityStatus.NEVER_MET else theme.TEXT
        self.rate.setStyleSheet(f"font-size: 26pt; font-weight: 800; color: {colour};")
        mix = capacity.class_mix
        if len(mix) > 1:
            small += " (" + ", ".join(f"{name} {r:.3g}/s" for name, r in mix.items()) + ")"
        self.per_day.setText(small)
        self.per_day.setVisible(bool(small))
        broke = broke_words(capacity)
        self.broke.setText(f"<b>Broke first</b> — {html.escape(broke)}" if broke else
                           "<b>Nothing broke</b> — every step met the targets." if capacity.steps else "")
        notes = list(capacity.notes)
        if capacity.unscaled:
            notes.append(f"Closed-loop {', '.join(capacity.unscaled)} ran alongside every step, not scaled.")
        if capacity.cancelled:
            notes.append("Cancelled before the ladder ended.")
        self.notes.setText("\n".join(notes))
        self._fill_steps(capacity)

    def _fill_steps(self, capacity: Capacity) -> None:
        table = self.steps
        table.setRowCount(len(capacity.steps))
        for row, step in enumerate(capacity.steps):
            for col, text in enumerate(step_cells(step)):
                item = QTableWidgetItem(text)
                last = col == len(STEP_HEADER) - 1
                item.setTextAlignment(Qt.AlignmentFlag.AlignVCenter | (
                    Qt.AlignmentFlag.AlignLeft if last else Qt.AlignmentFlag.AlignRight))
                if last:
                    item.setForeground(QColor(theme.OK if step.met else theme.ERROR))
                    item.setToolTip(text)
                table.setItem(row, col, item)
        table.setVisible(bool(capacity.steps))
        table.resizeRowsToContents()
        height = table.horizontalHeader().height() + sum(table.rowHeight(r) for r in range(table.rowCount()))
        table.setFixedHeight(height + 2 * table.frameWidth() + 2)


__all__ = ["CapacityChart", "CapacityView", "broke_words", "headline", "log_ticks", "seconds_tick"]
