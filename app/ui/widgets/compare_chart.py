"""The before/after report as a picture: per scenario class, the average and P95 end-to-end latency on the
server's default setting beside the recommended one (with the change in %), and the point-wide peak VRAM (the
server's own) and
mean GPU utilisation. Painted with QPainter onto a QImage, so it renders without a window (Qt offscreen)."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QGuiApplication, QImage, QPainter, QPen

from app.core.bench.compare import (BeforeAfter, Change, Delta, Outcome, SideState, STATE_WORDS, change_text,
                                    requests_per_day_words)

DEFAULT_COLOR = QColor("#8a8f98")
RECOMMENDED_COLOR = QColor("#2f7de1")
TEXT_COLOR = QColor("#1d2026")
GRID_COLOR = QColor("#d9dce1")
BETTER_COLOR = QColor("#1f8a4c")
WORSE_COLOR = QColor("#c0392b")
NOTE_COLOR = QColor("#5b616b")

_app: QGuiApplication | None = None


def ensure_gui_application() -> None:
    """A QGuiApplication to paint with: the running one, or one on Qt's offscreen platform (no display needed)."""
    global _app
    if QGuiApplication.instance() is not None:
        return
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    _app = QGuiApplication([])


def _nice_top(value: float) -> float:
    """A round axis top at or above value (1, 2, 2.5 or 5 times a power of ten)."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        if step * power >= value:
            return step * power
    return 10.0 * power


def _change_color(d: Delta) -> QColor:
    return {Change.BETTER: BETTER_COLOR, Change.WORSE: WORSE_COLOR}.get(d.change, NOTE_COLOR)


def comparison_image(c: BeforeAfter, title: str = "", width: int = 1400, height: int = 780) -> QImage:
    """The chart as an image of width × height pixels, on white."""
    ensure_gui_application()
    image = QImage(width, height, QImage.Format.Format_ARGB32)
    image.fill(QColor("white"))
    painter = QPainter(image)
    try:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        _paint(painter, c, title, width, height)
    finally:
        painter.end()
    return image


def save_comparison_png(c: BeforeAfter, title: str, path: str) -> None:
    """Write the chart as a PNG; OSError when it cannot be written."""
    if not comparison_image(c, title).save(path):  # the format by its extension (the CLI asks for .png)
        raise OSError(f"could not write the chart to {path}")


def _font(size: float, bold: bool = False) -> QFont:
    font = QFont()
    font.setPointSizeF(size)
    font.setBold(bold)
    return font


def _paint(p: QPainter, c: BeforeAfter, title: str, width: int, height: int) -> None:
    margin = 28.0
    p.setPen(TEXT_COLOR)
    p.setFont(_font(15, bold=True))
    head = "Before/after: server default vs recommended" + (f" — {c.scenario}" if c.scenario else "")
    p.drawText(QRectF(margin, 12, width - 2 * margin, 30), Qt.AlignmentFlag.AlignLeft, head)
    p.setFont(_font(10))
    p.setPen(NOTE_COLOR)
    p.drawText(QRectF(margin, 42, width - 2 * margin, 20), Qt.AlignmentFlag.AlignLeft, title)
    rec = c.recommended if c.outcome is not Outcome.DEFAULT_RECOMMENDED else None
    # Legend.
    y = 70.0
    x = margin
    p.setFont(_font(10))
    entries = [(DEFAULT_COLOR, f"Default: {c.default.label}")]
    if rec is not None:
        entries.append((RECOMMENDED_COLOR, f"Recommended: {rec.label}"))
    elif c.outcome is Outcome.DEFAULT_RECOMMENDED:
        entries.append((RECOMMENDED_COLOR, "Recommended: the default itself"))
    metrics = QFontMetrics(p.font())
    for color, words in entries:
        p.fillRect(QRectF(x, y + 3, 14, 14), color)
        p.setPen(TEXT_COLOR)
        p.drawText(QRectF(x + 20, y, width, 20), Qt.AlignmentFlag.AlignLeft, words)
        x += 20 + metrics.horizontalAdvance(words) + 28
    top = 134.0
    bottom = height - 92.0
    split = width * 0.7
    _latency_panel(p, c, rec is not None, QRectF(margin + 48, top, split - margin - 60, bottom - top))
    _resource_panel(p, c, rec is not None, QRectF(split + 40, top, width - split - 40 - margin, bottom - top))
    # Notes under the chart: what the sides' measurements were.
    p.setFont(_font(9.5))
    p.setPen(NOTE_COLOR)
    notes = [requests_per_day_words(c), f"Default: {STATE_WORDS[c.default.state]}."]
    if rec is not None:
        notes.append(f"Recommended: {STATE_WORDS[rec.state]}.")
    if c.outcome is Outcome.NO_RECOMMENDATION:
        notes.append("Nothing could be recommended: only the default is shown.")
    if c.outcome is Outcome.DEFAULT_NOT_MEASURED:
        notes.append("The default setting was not measured.")
    if any(s.state is not SideState.CLEAN for s in (c.default, rec) if s is not None):
        notes.append("A side with failed or cut requests, or measured while other programs used the device, is "
                     "not comparable (no change shown).")
    p.drawText(QRectF(margin, height - 78, width - 2 * margin, 60),
               int(Qt.AlignmentFlag.AlignLeft) | int(Qt.TextFlag.TextWordWrap), " ".join(notes))


def _bars(p: QPainter, area: QRectF, groups: Sequence[tuple[str, Sequence[tuple[float | None, QColor]], str, QColor]],
          axis_top: float, unit: str, fmt: str) -> None:
    """Grouped bars in `area`: each group a label, its bars (value, colour), and a caption under it (a change)."""
    p.setFont(_font(9))
    metrics = QFontMetrics(p.font())
    for k in range(5):  # grid lines and tick labels
        value = axis_top * k / 4
        y = area.bottom() - area.height() * k / 4
        p.setPen(QPen(GRID_COLOR, 1))
        p.drawLine(int(area.left()), int(y), int(area.right()), int(y))
        p.setPen(NOTE_COLOR)
        text = format(value, fmt)
        p.drawText(QRectF(area.left() - 56, y - 8, 50, 16), int(Qt.AlignmentFlag.AlignRight), text)
    p.save()
    p.translate(area.left() - 62, area.top() + area.height() / 2)
    p.rotate(-90)
    p.drawText(QRectF(-area.height() / 2, -16, area.height(), 16), int(Qt.AlignmentFlag.AlignCenter), unit)
    p.restore()
    if not groups:
        return
    slot = area.width() / len(groups)
    for n, (label, bars, caption, caption_color) in enumerate(groups):
        left = area.left() + slot * n
        bar_w = min(46.0, slot * 0.8 / max(1, len(bars)))
        start = left + (slot - bar_w * len(bars)) / 2
        for b, (shown, color) in enumerate(bars):
            x = start + b * bar_w
            if shown is None:
                p.setPen(NOTE_COLOR)
                p.drawText(QRectF(x, area.bottom() - 18, bar_w, 16), int(Qt.AlignmentFlag.AlignCenter), "—")
                continue
            h = area.height() * min(1.0, shown / axis_top) if axis_top > 0 else 0.0
            p.fillRect(QRectF(x + 2, area.bottom() - h, bar_w - 4, h), color)
            p.setPen(TEXT_COLOR)
            p.drawText(QRectF(x - 10, area.bottom() - h - 16, bar_w + 20, 15), int(Qt.AlignmentFlag.AlignCenter),
                       format(shown, fmt))
        p.setPen(TEXT_COLOR)
        p.drawText(QRectF(left, area.bottom() + 4, slot, 16), int(Qt.AlignmentFlag.AlignCenter),
                   metrics.elidedText(label, Qt.TextElideMode.ElideRight, int(slot) - 4))
        if caption:
            p.setPen(caption_color)
            p.drawText(QRectF(left, area.bottom() + 20, slot, 16), int(Qt.AlignmentFlag.AlignCenter), caption)


def _latency_panel(p: QPainter, c: BeforeAfter, two: bool, area: QRectF) -> None:
    p.setFont(_font(11, bold=True))
    p.setPen(TEXT_COLOR)
    p.drawText(QRectF(area.left() - 48, area.top() - 30, area.width(), 20), int(Qt.AlignmentFlag.AlignLeft),
               "End-to-end latency per class: average and P95 (ms, lower is better)")
    inner = QRectF(area.left(), area.top() + 12, area.width(), area.height() - 66)
    groups: list[tuple[str, Sequence[tuple[float | None, QColor]], str, QColor]] = []
    values: list[float] = []
    for row in [*c.classes, c.overall]:
        for word, attr in (("avg", "e2e_mean_ms"), ("P95", "e2e_p95_ms")):
            before = getattr(row.default, attr)
            after = getattr(row.recommended, attr) if two and row.recommended is not None else None
            bars: list[tuple[float | None, QColor]] = [(before, DEFAULT_COLOR)]
            if two:
                bars.append((after, RECOMMENDED_COLOR))
            values += [v for v in (before, after) if v is not None]
            d = c.delta(row, attr)
            caption = change_text(d).replace(" better", "").replace(" worse", "") if two else ""
            groups.append((word, bars, caption, _change_color(d)))
    _bars(p, inner, groups, _nice_top(max(values, default=0.0) * 1.08), "ms", ".0f")
    # The class under each pair of groups (its average and its P95), with a separator between classes.
    rows = [*c.classes, c.overall]
    pair = inner.width() / max(1, len(rows))
    p.setFont(_font(10, bold=True))
    metrics = QFontMetrics(p.font())
    for n, row in enumerate(rows):
        left = inner.left() + pair * n
        p.setPen(TEXT_COLOR)
        p.drawText(QRectF(left, inner.bottom() + 38, pair, 18), int(Qt.AlignmentFlag.AlignCenter),
                   metrics.elidedText(row.name, Qt.TextElideMode.ElideRight, int(pair) - 6))
        if n:
            p.setPen(QPen(GRID_COLOR, 1, Qt.PenStyle.DashLine))
            p.drawLine(int(left), int(inner.top()), int(left), int(inner.bottom() + 54))


def _resource_panel(p: QPainter, c: BeforeAfter, two: bool, area: QRectF) -> None:
    p.setFont(_font(11, bold=True))
    p.setPen(TEXT_COLOR)
    p.drawText(QRectF(area.left() - 30, area.top() - 30, area.width() + 30, 20), int(Qt.AlignmentFlag.AlignLeft),
               "Peak VRAM and GPU utilisation")
    rec = c.recommended if two else None
    half = (area.height() - 40) / 2
    vram = [(None if c.default.vram_peak_mib is None else c.default.vram_peak_mib / 1024, DEFAULT_COLOR)]
    util = [(c.default.gpu_util_mean_pct, DEFAULT_COLOR)]
    if rec is not None:
        vram.append((None if rec.vram_peak_mib is None else rec.vram_peak_mib / 1024, RECOMMENDED_COLOR))
        util.append((rec.gpu_util_mean_pct, RECOMMENDED_COLOR))
    top_vram = _nice_top(max((v for v, _c in vram if v is not None), default=0.0) * 1.1)
    _bars(p, QRectF(area.left() + 30, area.top() + 12, area.width() - 30, half - 40),
          [("Peak VRAM (the server's own)", vram, "" if any(v is not None for v, _c in vram)
            else "not known (no GPU readings, or none of the server's own)",
            NOTE_COLOR)], top_vram, "GiB", ".2f")
    _bars(p, QRectF(area.left() + 30, area.top() + half + 40, area.width() - 30, half - 40),
          [("GPU utilisation (mean)", util, "" if any(v is not None for v, _c in util)
            else "not measured (no GPU readings)", NOTE_COLOR)], 100.0, "%", ".0f")


__all__ = ["comparison_image", "ensure_gui_application", "save_comparison_png"]
