"""The watchdog's events on the dashboard's time axis: a vertical line on a plot at each event's monotonic
time, coloured and dashed by severity, with a marker at its top and a tooltip naming what happened.

Events closer than a few pixels share one line (the worst one's colour, every event in its tooltip), so a
burst stays readable on a projector instead of a smear of overlapping lines."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPen

from app.core.watch.events import Severity, WatchEvent
from app.ui.pages.dashboard.plots import TimePlot

# Bright on the plots' dark background, and told apart by the stroke as well as the colour.
SEVERITY_COLOURS: dict[Severity, str] = {
    Severity.SEVERE: "#ff4f6a",
    Severity.WARNING: "#ffb020",
    Severity.INFO: "#8fa8ff",
}
_STYLE = {Severity.SEVERE: (3, Qt.PenStyle.SolidLine), Severity.WARNING: (2, Qt.PenStyle.DashLine),
          Severity.INFO: (2, Qt.PenStyle.DotLine)}
MERGE_PX = 10  # events closer than this share a line
MARKER_PX = 14
TOOLTIP_EVENTS = 6  # events listed in one line's tooltip; the rest are counted
TOOLTIP_SUMMARY_CHARS = 160  # a longer summary is cut at a word (the Events tab has it whole)


def severity_pen(severity: Severity) -> QPen:
    """The stroke of a marker line of this severity."""
    width, style = _STYLE[severity]
    p = QPen(QColor(SEVERITY_COLOURS[severity]))
    p.setWidthF(width)
    p.setStyle(style)
    p.setCosmetic(True)
    return p


def tooltip(events: Sequence[WatchEvent]) -> str:
    """Rich text naming each event (newest first): time, severity, kind and summary."""
    rows = []
    for e in sorted(events, key=lambda e: e.at, reverse=True)[:TOOLTIP_EVENTS]:
        colour = SEVERITY_COLOURS[e.severity]
        rows.append(f"<p style='margin:0 0 6px 0'><b style='color:{colour}'>{e.severity.label.upper()}</b> "
                    f"<b>{html.escape(e.kind.label)}</b> · {e.clock}<br>{html.escape(_short(e.summary))}</p>")
    if len(events) > TOOLTIP_EVENTS:
        rows.append(f"<p style='margin:0'>… and {len(events) - TOOLTIP_EVENTS} more in the Events tab</p>")
    rows.append("<p style='margin:0; color:#a3a7b3'>Click the line for the evidence and what to do.</p>")
    return "<div style='max-width: 420px'>" + "".join(rows) + "</div>"


def _short(text: str) -> str:
    if len(text) <= TOOLTIP_SUMMARY_CHARS:
        return text
    cut = text[:TOOLTIP_SUMMARY_CHARS].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + " …"


@dataclass(frozen=True)
class Mark:
    """One line: where (seconds before now), how bad, and the events it stands for."""

    x: float
    severity: Severity
    events: tuple[WatchEvent, ...]


def group(events: Sequence[WatchEvent], now: float, window_s: float, merge_s: float) -> list[Mark]:
    """The events seen in the last `window_s` seconds before `now` (monotonic), as marks; events within
    `merge_s` of the first of a run share its mark."""
    seen = sorted((e for e in events if e.mono is not None and now - window_s <= e.mono <= now + merge_s),
                  key=lambda e: e.mono or 0.0)
    marks: list[Mark] = []
    run: list[WatchEvent] = []
    for e in seen:
        assert e.mono is not None
        if run and e.mono - (run[0].mono or 0.0) > merge_s:
            marks.append(_mark(run, now))
            run = []
        run.append(e)
    if run:
        marks.append(_mark(run, now))
    return marks


def _mark(run: list[WatchEvent], now: float) -> Mark:
    worst = max(run, key=lambda e: (e.severity, e.mono or 0.0))
    return Mark(x=min((worst.mono or now) - now, 0.0), severity=worst.severity, events=tuple(run))


class EventMarks:
    """The marker lines on one TimePlot, pooled (a frame moves and recolours them, it makes none)."""

    def __init__(self, plot: TimePlot, on_click: Callable[[WatchEvent], None] | None = None) -> None:
        """`on_click(event)`: a line was clicked (the worst of its events)."""
        self.plot = plot
        self._on_click = on_click
        self.lines: list[pg.InfiniteLine] = []
        self.marks: list[Mark] = []

    def show(self, events: Sequence[WatchEvent], now: float, window_s: float) -> None:
        """Draw `events` for a frame ending at `now` (monotonic) showing the last `window_s` seconds."""
        width_px = max(self.plot.item.getViewBox().width(), 1.0)
        merge_s = MERGE_PX * (window_s * 1.03) / width_px
        marks = group(events, now, window_s, merge_s)
        while len(self.lines) < len(marks):
            line = pg.InfiniteLine(angle=90, movable=False)
            line.addMarker("v", position=0.96, size=MARKER_PX)
            line.setZValue(30)
            line.setAcceptHoverEvents(True)
            line.sigClicked.connect(lambda _line, _ev, i=len(self.lines): self._clicked(i))
            self.plot.item.addItem(line, ignoreBounds=True)
            self.lines.append(line)
        for line, mark in zip(self.lines, marks):
            if mark in self.marks and line.value() == mark.x and line.isVisible():
                continue
            pen_ = severity_pen(mark.severity)
            line.setPen(pen_)
            line.setHoverPen(pg.mkPen(pen_.color(), width=pen_.widthF() + 2))
            line.setValue(mark.x)
            line.setToolTip(tooltip(mark.events))
            line.setVisible(True)
        for line in self.lines[len(marks):]:
            line.setVisible(False)
        self.marks = marks

    def _clicked(self, index: int) -> None:
        if self._on_click is not None and index < len(self.marks):
            mark = self.marks[index]
            self._on_click(max(mark.events, key=lambda e: (e.severity, e.at)))

    def clear(self) -> None:
        """No marks."""
        for line in self.lines:
            line.setVisible(False)
        self.marks = []


__all__ = ["EventMarks", "Mark", "SEVERITY_COLOURS", "group", "severity_pen", "tooltip"]
