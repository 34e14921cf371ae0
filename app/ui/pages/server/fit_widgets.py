"""Painted widgets of the fit panel: the stacked VRAM bar and the parallel x context heat-map."""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QMouseEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.core.memory.pricing import FitCell
from app.core.memory.verdict import VERDICT_LABELS, Verdict
from app.core.units import GIB


# Segment colours of the stacked bar, in drawing order.
SEGMENT_COLOURS = {
    "weights": "#4cc2ff",
    "kv": "#b38cff",
    "compute": "#ff9f43",
    "overhead": "#8b8e99",
    "others": "#5c5f6b",
    "reserved": "#44464f",
    "free": "#20232b",
}
SEGMENT_LABELS = {
    "weights": "weights", "kv": "KV cache", "compute": "compute", "overhead": "CUDA runtime",
    "others": "other processes", "reserved": "driver reserve", "free": "free",
}
VERDICT_COLOURS = {
    Verdict.FITS: "#2f8f5b",
    Verdict.TIGHT: "#b8901f",
    Verdict.SPILLS: "#c9622b",
    Verdict.WONT_LOAD: "#a8323f",
    Verdict.INVALID: "#2a2c33",
}
VERDICT_WORDS = {**VERDICT_LABELS, Verdict.INVALID: "—"}


class VramBar(QWidget):
    """A horizontal bar as wide as the GPU's memory, split into what would use it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMinimumHeight(34)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self._total = 0
        self._segments: list[tuple[str, int]] = []
        self._peak: int | None = None

    def sizeHint(self) -> QSize:
        return QSize(400, 34)

    def set_parts(self, total_bytes: int, segments: list[tuple[str, int]], peak_bytes: int | None) -> None:
        """Show segments (name, bytes) against total_bytes; a tick marks the predicted peak."""
        self._total = max(total_bytes, 1)
        self._segments = [(n, max(b, 0)) for n, b in segments]
        self._peak = peak_bytes
        self.update()

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802 - Qt's naming
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        r = QRectF(self.rect()).adjusted(1, 1, -1, -1)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(QColor(SEGMENT_COLOURS["free"]))
        p.drawRoundedRect(r, 5, 5)
        x = r.left()
        used = 0
        for name, size in self._segments:
            w = r.width() * size / self._total
            w = min(w, r.right() - x)
            if w <= 0:
                continue
            p.setBrush(QColor(SEGMENT_COLOURS.get(name, "#777")))
            p.drawRect(QRectF(x, r.top(), w, r.height()))
            x += w
            used += size
        if used > self._total:  # over the card: hatch the end red
            p.setBrush(QColor(VERDICT_COLOURS[Verdict.WONT_LOAD]))
            p.drawRect(QRectF(r.right() - 6, r.top(), 6, r.height()))
        if self._peak is not None and self._peak > 0:
            px = r.left() + min(r.width(), r.width() * self._peak / self._total)
            p.setPen(QPen(QColor("#ffffff"), 2, Qt.PenStyle.DashLine))
            p.drawLine(int(px), int(r.top()) - 1, int(px), int(r.bottom()) + 1)
        p.setPen(QPen(QColor("#3a3d49"), 1))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawRoundedRect(r, 5, 5)


def cell_tooltip(cell: FitCell, where: str) -> str:
    """What a heat-map cell means: its verdict and GiB, or why the combination is not offered."""
    head = f"{cell.parallel} parallel × {cell.context:,} tokens"
    if cell.verdict is Verdict.INVALID:
        return f"{head}: not offered — {cell.reason}."
    return (f"{head}: {VERDICT_WORDS[cell.verdict]} ({cell.total_gpu_bytes / GIB:.1f} GiB {where})"
            "\nClick to use this combination.")


class FitHeatmap(QWidget):
    """Verdicts of parallel (rows) x context (columns); the current choice is outlined."""

    cell_clicked = Signal(int, int)  # parallel, context

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._grid: list[list[FitCell]] = []
        self._current: tuple[int, int] | None = None
        self._highlight_context: int | None = None
        self._where = "on the GPU"
        self.setMinimumHeight(190)
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    def sizeHint(self) -> QSize:
        return QSize(520, 300)

    def set_grid(self, grid: list[list[FitCell]], current: tuple[int, int] | None,
                 default_context: int | None, where: str = "on the GPU") -> None:
        """Show a grid; `current` is (parallel, context) of the form; the default context is starred;
        `where` says where the cells' GiB are ("of RAM" for a server without a GPU)."""
        self._where = where
        self._grid = grid
        self._current = current
        self._highlight_context = default_context
        self.update()

    def cell_at(self, parallel: int, context: int) -> FitCell | None:
        for row in self._grid:
            for cell in row:
                if cell.parallel == parallel and cell.context == context:
                    return cell
        return None

    def _geometry(self) -> tuple[float, float, float, float]:
        left, top = 44.0, 40.0
        rows = len(self._grid) or 1
        cols = len(self._grid[0]) if self._grid else 1
        cw = (self.width() - left - 4) / cols
        ch = (self.height() - top - 4) / rows
        return left, top, cw, ch

    def _cell_under(self, event: QMouseEvent) -> FitCell | None:
        if not self._grid:
            return None
        left, top, cw, ch = self._geometry()
        col = int((event.position().x() - left) // cw)
        row = int((event.position().y() - top) // ch)
        if 0 <= row < len(self._grid) and 0 <= col < len(self._grid[0]):
            return self._grid[row][col]
        return None

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        cell = self._cell_under(event)
        if cell is not None and cell.verdict is not Verdict.INVALID:
            self.cell_clicked.emit(cell.parallel, cell.context)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        c = self._cell_under(event)
        if c is not None:
            self.setToolTip(cell_tooltip(c, self._where))

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        if not self._grid:
            p.setPen(QColor("#8b8e99"))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "Pick a model to see what fits.")
            return
        left, top, cw, ch = self._geometry()
        small = QFont(self.font())
        small.setPointSizeF(max(8.0, self.font().pointSizeF() - 1.5))
        bold = QFont(small)
        bold.setBold(True)
        p.setFont(small)
        p.setPen(QColor("#c9cbd3"))
        p.drawText(QRectF(0, 0, left, top), Qt.AlignmentFlag.AlignCenter, "par.")
        for j, cell in enumerate(self._grid[0]):
            label = f"{cell.context // 1024}k"
            if cell.context == self._highlight_context:
                label += " ★"
                p.setFont(bold)
                p.setPen(QColor("#ffd27a"))
            p.drawText(QRectF(left + j * cw, 0, cw, top - 4),
                       Qt.AlignmentFlag.AlignCenter | Qt.AlignmentFlag.AlignBottom, label)
            p.setFont(small)
            p.setPen(QColor("#c9cbd3"))
        for i, row in enumerate(self._grid):
            p.setPen(QColor("#c9cbd3"))
            p.drawText(QRectF(0, top + i * ch, left - 6, ch),
                       Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, str(row[0].parallel))
            for j, cell in enumerate(row):
                rect = QRectF(left + j * cw + 1, top + i * ch + 1, cw - 2, ch - 2)
                p.setPen(Qt.PenStyle.NoPen)
                p.setBrush(QColor(VERDICT_COLOURS[cell.verdict]))
                p.drawRoundedRect(rect, 3, 3)
                if cell.verdict is not Verdict.INVALID and cw > 34:
                    p.setPen(QColor("#ffffff"))
                    p.drawText(rect, Qt.AlignmentFlag.AlignCenter, f"{cell.total_gpu_bytes / GIB:.1f}")
                if self._current == (cell.parallel, cell.context):
                    p.setPen(QPen(QColor("#ffffff"), 3))
                    p.setBrush(Qt.BrushStyle.NoBrush)
                    p.drawRoundedRect(rect.adjusted(1, 1, -1, -1), 3, 3)
