"""Latency against load: a rate sweep's chart, painted with QPainter onto a QImage (works off screen).

Offered load (requests/s) on x; TTFT and end-to-end latency, average and P95, on y (overall for a one-class
scenario, P95 per class otherwise); each class's targets as dashed lines in its colour; the sustainable
rate and the rate that broke as vertical lines. A step that missed is drawn as a hollow marker. The y axis
turns logarithmic when latencies span more than a factor of 30 (a queue that grows makes them jump).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QImage, QPainter, QPen

from app.core.bench.capacity import Capacity, CapacityStatus, day_words

BACKGROUND = QColor("#ffffff")
INK = QColor("#202124")
GRID = QColor("#e3e5e8")
GOOD = QColor("#1e8e3e")
BAD = QColor("#d93025")
PALETTE = ("#1a73e8", "#e8710a", "#9334e6", "#12b5cb", "#c5221f", "#188038", "#f9ab00", "#5f6368")


@dataclass(frozen=True)
class Series:
    """One line: its name, colour, whether dashed-dotted, marker shape and (rate, ms, met) points."""

    name: str
    colour: str
    dotted: bool
    square: bool
    points: tuple[tuple[float, float, bool], ...]


@dataclass(frozen=True)
class TargetLine:
    """A horizontal target line."""

    label: str
    colour: str
    ms: float


def chart_series(capacity: Capacity) -> tuple[list[Series], list[TargetLine]]:
    """The lines and targets the chart draws (separate from painting, so they can be checked)."""
    series: list[Series] = []
    targets: list[TargetLine] = []
    classes = capacity.scenario.classes
    if len(classes) == 1:
        c = classes[0]
        for i, (name, key, dotted, square) in enumerate((("TTFT avg", "ttft_avg", True, False),
                                                          ("TTFT P95", "ttft_p95", False, False),
                                                          ("E2E avg", "e2e_avg", True, True),
                                                          ("E2E P95", "e2e_p95", False, True))):
            pts = []
            for step in capacity.steps:
                cs = step.classes[0] if step.classes else None
                if cs is None:
                    continue
                dist = cs.ttft_ms if key.startswith("ttft") else cs.e2e_ms
                value = dist.mean if key.endswith("avg") else dist.p95
                if math.isfinite(value):
                    pts.append((step.offered_rps, value, step.met))
            colour = PALETTE[i]
            series.append(Series(name, colour, dotted, square, tuple(pts)))
            limit = getattr(c.targets, f"{key}_ms")
            if limit is not None:
                targets.append(TargetLine(f"{name} target {_ms(limit)}", colour, limit))
        if capacity.targets.ttft_p95_ms is not None and c.targets.ttft_p95_ms is None:
            targets.append(TargetLine(f"TTFT P95 target {_ms(capacity.targets.ttft_p95_ms)}", PALETTE[1],
                                      capacity.targets.ttft_p95_ms))
        return series, targets
    for n, c in enumerate(classes):
        colour = PALETTE[n % len(PALETTE)]
        for name, square in (("TTFT P95", False), ("E2E P95", True)):
            pts = []
            for step in capacity.steps:
                cs = next((s for s in step.classes if s.name == c.name), None)
                if cs is None:
                    continue
                value = (cs.e2e_ms if square else cs.ttft_ms).p95
                if math.isfinite(value):
                    pts.append((step.offered_rps, value, step.met))
            series.append(Series(f"{c.name} {name}", colour, square, square, tuple(pts)))
        for key, word in (("ttft_avg_ms", "TTFT avg"), ("ttft_p95_ms", "TTFT P95"), ("e2e_avg_ms", "E2E avg"),
                          ("e2e_p95_ms", "E2E P95")):
            limit = getattr(c.targets, key)
            if limit is not None:
                targets.append(TargetLine(f"{c.name} {word} target {_ms(limit)}", colour, limit))
    return series, targets


def _ms(ms: float) -> str:
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.3g} s"


def _nice_ticks(low: float, high: float, count: int = 6) -> list[float]:
    """Round tick values from low to high (linear)."""
    span = max(high - low, 1e-9)
    raw = span / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    start = math.ceil(low / step) * step
    return [start + i * step for i in range(int((high - start) / step) + 1)]


def _log_ticks(low: float, high: float) -> list[float]:
    out = []
    for exp in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
        for m in (1, 2, 5):
            v = m * 10 ** exp
            if low <= v <= high:
                out.append(v)
    return out


def load_chart_image(capacity: Capacity, subtitle: str = "", width: int = 1200, height: int = 720) -> QImage:
    """The chart as an image (needs a QGuiApplication)."""
    image = QImage(width, height, QImage.Format.Format_ARGB32)
    image.fill(BACKGROUND)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    try:
        _paint(painter, capacity, subtitle, width, height)
    finally:
        painter.end()
    return image


def _paint(p: QPainter, capacity: Capacity, subtitle: str, width: int, height: int) -> None:
    series, targets = chart_series(capacity)
    base = QFont()
    base.setPixelSize(14)
    title_font = QFont(base)
    title_font.setPixelSize(20)
    title_font.setBold(True)
    small = QFont(base)
    small.setPixelSize(12)

    p.setPen(INK)
    p.setFont(title_font)
    p.drawText(QRectF(20, 10, width - 40, 28), Qt.AlignmentFlag.AlignLeft,
               f"Latency against load — {capacity.scenario.name} at {capacity.setting or 'one setting'}")
    p.setFont(small)
    p.drawText(QRectF(20, 40, width - 40, 18), Qt.AlignmentFlag.AlignLeft, subtitle)
    p.setFont(base)
    p.drawText(QRectF(20, 60, width - 40, 40), Qt.AlignmentFlag.AlignLeft | Qt.TextFlag.TextWordWrap,
               capacity.summary())

    legend_w = 300.0
    left, top, right, bottom = 90.0, 110.0, width - legend_w - 40.0, height - 70.0
    values = [v for s in series for _x, v, _m in s.points] + [t.ms for t in targets]
    rates = [s.offered_rps for s in capacity.steps] or [1.0]
    x_max = max(rates) * 1.08
    x_ticks = _nice_ticks(0.0, x_max)
    x_max = max(x_max, x_ticks[-1])
    v_low = min((v for v in values if v > 0), default=1.0)
    v_high = max(values, default=1000.0)
    log = v_high / max(v_low, 1e-9) > 30
    if log:
        y_low, y_high = 10 ** math.floor(math.log10(max(v_low, 1e-3))), 10 ** math.ceil(math.log10(v_high * 1.05))
        y_ticks = _log_ticks(y_low, y_high)

        def y_of(v: float) -> float:
            t = (math.log10(max(v, y_low)) - math.log10(y_low)) / (math.log10(y_high) - math.log10(y_low))
            return bottom - t * (bottom - top)
    else:
        y_ticks = _nice_ticks(0.0, v_high * 1.1)
        y_low, y_high = 0.0, max(v_high * 1.1, y_ticks[-1])

        def y_of(v: float) -> float:
            return bottom - (v - y_low) / (y_high - y_low) * (bottom - top)

    def x_of(r: float) -> float:
        return left + r / x_max * (right - left)

    # grid and axes
    p.setFont(small)
    for t in y_ticks:
        y = y_of(t)
        p.setPen(QPen(GRID, 1))
        p.drawLine(QPointF(left, y), QPointF(right, y))
        p.setPen(INK)
        p.drawText(QRectF(0, y - 9, left - 8, 18), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                   _ms(t))
    for t in x_ticks:
        x = x_of(t)
        p.setPen(QPen(GRID, 1))
        p.drawLine(QPointF(x, top), QPointF(x, bottom))
        p.setPen(INK)
        p.drawText(QRectF(x - 40, bottom + 4, 80, 18), Qt.AlignmentFlag.AlignHCenter, f"{t:g}")
    p.setPen(QPen(INK, 1.5))
    p.drawLine(QPointF(left, bottom), QPointF(right, bottom))
    p.drawLine(QPointF(left, top), QPointF(left, bottom))
    p.setFont(base)
    p.drawText(QRectF(left, bottom + 26, right - left, 20), Qt.AlignmentFlag.AlignHCenter,
               "offered load (requests/s, the open-loop classes in all)")
    p.save()
    p.translate(18, (top + bottom) / 2)
    p.rotate(-90)
    p.drawText(QRectF(-150, -10, 300, 20), Qt.AlignmentFlag.AlignHCenter,
               "latency from arrival" + (" (log scale)" if log else ""))
    p.restore()

    # targets (named in the legend)
    p.setFont(small)
    for line in targets:
        y = y_of(line.ms)
        p.setPen(QPen(QColor(line.colour), 1.5, Qt.PenStyle.DashLine))
        p.drawLine(QPointF(left, y), QPointF(right, y))

    # sustainable and broke-at rates
    sustainable = capacity.sustainable_rps
    if sustainable is not None:
        x = x_of(sustainable)
        p.setPen(QPen(GOOD, 2))
        p.drawLine(QPointF(x, top), QPointF(x, bottom))
        at_least = "≥ " if capacity.status is not CapacityStatus.FOUND else ""
        p.drawText(QRectF(x - 364, top + 2, 360, 16), Qt.AlignmentFlag.AlignRight,
                   f"sustainable {at_least}{sustainable:.3g}/s ≈ {day_words(sustainable)}/day")
    broke = capacity.broke_at
    if broke is not None:
        x = x_of(broke.offered_rps)
        p.setPen(QPen(BAD, 1.5, Qt.PenStyle.DotLine))
        p.drawLine(QPointF(x, top), QPointF(x, bottom))
        words = f"broke at {broke.offered_rps:.3g}/s"
        if x + 130 < right:
            p.drawText(QRectF(x + 4, top + 2, 126, 16), Qt.AlignmentFlag.AlignLeft, words)
        else:
            p.drawText(QRectF(x - 130, top + 20, 126, 16), Qt.AlignmentFlag.AlignRight, words)

    # the lines
    for s in series:
        colour = QColor(s.colour)
        p.setPen(QPen(colour, 2.2, Qt.PenStyle.DashDotLine if s.dotted else Qt.PenStyle.SolidLine))
        pts = [QPointF(x_of(r), y_of(v)) for r, v, _met in s.points]
        for a, b in zip(pts, pts[1:]):
            p.drawLine(a, b)
        for (_r, _v, met), pt in zip(s.points, pts):
            p.setPen(QPen(colour, 2))
            p.setBrush(colour if met else BACKGROUND)
            if s.square:
                p.drawRect(QRectF(pt.x() - 4.5, pt.y() - 4.5, 9, 9))
            else:
                p.drawEllipse(pt, 5, 5)
        p.setBrush(Qt.BrushStyle.NoBrush)

    # legend
    p.setFont(small)
    rows = [(s.name, s.colour, s.dotted, s.square) for s in series]
    box_w, row_h = legend_w, 18.0
    box = QRectF(right + 20, top, box_w, row_h * (len(rows) + len(targets) + 1) + 8)
    p.setPen(QPen(GRID, 1))
    p.setBrush(QColor(255, 255, 255, 230))
    p.drawRect(box)
    p.setBrush(Qt.BrushStyle.NoBrush)
    for i, (name, hue, dotted, square) in enumerate(rows):
        y = box.top() + 6 + i * row_h + row_h / 2
        pen_colour = QColor(hue)
        p.setPen(QPen(pen_colour, 2.2, Qt.PenStyle.DashDotLine if dotted else Qt.PenStyle.SolidLine))
        p.drawLine(QPointF(box.left() + 8, y), QPointF(box.left() + 38, y))
        p.setBrush(pen_colour)
        if square:
            p.drawRect(QRectF(box.left() + 19, y - 4, 8, 8))
        else:
            p.drawEllipse(QPointF(box.left() + 23, y), 4, 4)
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.setPen(INK)
        p.drawText(QRectF(box.left() + 46, y - 8, box_w - 50, 16), Qt.AlignmentFlag.AlignVCenter, name)
    for i, line in enumerate(targets, start=len(rows)):
        y = box.top() + 6 + i * row_h + row_h / 2
        p.setPen(QPen(QColor(line.colour), 1.5, Qt.PenStyle.DashLine))
        p.drawLine(QPointF(box.left() + 8, y), QPointF(box.left() + 38, y))
        p.setPen(INK)
        p.drawText(QRectF(box.left() + 46, y - 8, box_w - 50, 16), Qt.AlignmentFlag.AlignVCenter, line.label)
    y = box.top() + 6 + (len(rows) + len(targets)) * row_h + row_h / 2
    p.setPen(QPen(INK, 2))
    p.drawEllipse(QPointF(box.left() + 23, y), 4, 4)
    p.drawText(QRectF(box.left() + 46, y - 8, box_w - 50, 16), Qt.AlignmentFlag.AlignVCenter,
               "hollow: the step missed")


__all__ = ["Series", "TargetLine", "chart_series", "load_chart_image"]
