"""The fleet's table: one row per endpoint (the balancer last), its health, the server's figures and its
host's, with where the host figures came from."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem, QWidget

from app.core.fleet_status import EndpointStatus, Health, HostFigures, HostSource
from app.core.units import GIB
from app.ui.widgets import theme

COLUMNS = ("Endpoint", "Health", "Version", "Model", "Tokens/s", "Slots", "Queue", "GPU memory", "GPU util",
           "Host RAM", "Host figures from")
ENDPOINT, HEALTH, VERSION, MODEL, TOKENS, SLOTS, QUEUE, GPU_MEMORY, GPU_UTIL, RAM, SOURCE = range(len(COLUMNS))
WIDTHS = {ENDPOINT: 200, HEALTH: 104, VERSION: 92, MODEL: 160, TOKENS: 118, SLOTS: 58, QUEUE: 58, GPU_MEMORY: 118,
          GPU_UTIL: 72, RAM: 118}
HISTORY = 60  # polls a sparkline keeps (a minute at one a second)
HEALTH_COLOURS = {Health.UP: theme.OK, Health.PENDING: theme.DIM}
SOURCE_COLOURS = {HostSource.PROMETHEUS_DCGM: theme.ACCENT, HostSource.PROMETHEUS_EXPORTER: theme.ACCENT,
                  HostSource.THIS_MACHINE: theme.OK, HostSource.UNKNOWN: theme.DIM}
DASH = "—"


def fmt_rate(value: float | None) -> str:
    return DASH if value is None else f"{value:.1f}"


def fmt_count(value: int | None) -> str:
    return DASH if value is None else str(value)


def fmt_slots(status: EndpointStatus) -> str:
    if status.slots_total is None:
        return DASH
    return f"{fmt_count(status.slots_busy)}/{status.slots_total}"


def fmt_gpu_memory(host: HostFigures | None) -> str:
    if host is None or host.gpu_total_bytes is None:
        return DASH
    used = host.gpu_used_bytes
    return f"{DASH if used is None else f'{used / GIB:.1f}'} / {host.gpu_total_bytes / GIB:.1f} GiB"


def fmt_utilization(host: HostFigures | None) -> str:
    value = None if host is None else host.gpu_utilization
    return DASH if value is None else f"{value * 100:.0f} %"


def fmt_ram(host: HostFigures | None) -> str:
    if host is None or host.ram_total_bytes is None:
        return DASH
    available = host.ram_available_bytes
    free = "" if available is None else f"{available / GIB:.0f} of "
    return f"{free}{host.ram_total_bytes / GIB:.0f} GiB free" if free else f"{host.ram_total_bytes / GIB:.0f} GiB"


def host_tooltip(host: HostFigures) -> str:
    lines = [host.source_text]
    for gpu in host.gpus:
        lines.append(f"GPU {gpu.gpu}: {gpu.name or 'unnamed'} {gpu.uuid}".rstrip())
    if host.ram_source:
        lines.append(f"RAM from {host.ram_source}")
    return "\n".join(lines)


class Sparkline(QWidget):
    """The latest tokens/s as a number, and the last minute of them as a line."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.values: deque[float | None] = deque(maxlen=HISTORY)
        self.setMinimumHeight(24)

    def add(self, value: float | None) -> None:
        self.values.append(value)
        self.update()

    @property
    def text(self) -> str:
        return fmt_rate(self.values[-1] if self.values else None)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return QSize(WIDTHS[TOKENS], 28)

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt override
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        rect = QRectF(self.rect()).adjusted(6, 4, -6, -4)
        painter.setPen(QColor(theme.TEXT))
        text_rect = QRectF(rect.left(), rect.top(), 42, rect.height())
        painter.drawText(text_rect, int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight), self.text)
        line = QRectF(rect.left() + 50, rect.top() + 2, rect.width() - 50, rect.height() - 4)
        known = [v for v in self.values if v is not None]
        if len(self.values) < 2 or not known or line.width() < 8:
            return
        top = max(known) or 1.0
        step = line.width() / (HISTORY - 1)
        start = line.right() - step * (len(self.values) - 1)
        painter.setPen(QPen(QColor(theme.ACCENT), 1.4))
        previous: QPointF | None = None
        for i, value in enumerate(self.values):
            if value is None:
                previous = None
                continue
            point = QPointF(start + i * step, line.bottom() - line.height() * value / top)
            if previous is not None:
                painter.drawLine(previous, point)
            previous = point


class FleetTable(QTableWidget):
    """One row per endpoint; a down endpoint's row says why across its server columns."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, len(COLUMNS), parent)
        self.setHorizontalHeaderLabels(list(COLUMNS))
        self.verticalHeader().hide()
        self.setAlternatingRowColors(True)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setWordWrap(True)
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header = self.horizontalHeader()
        for column, width in WIDTHS.items():
            header.resizeSection(column, width)
        header.setSectionResizeMode(SOURCE, QHeaderView.ResizeMode.Stretch)
        header.setMinimumSectionSize(48)
        self.sparklines: dict[str, Sparkline] = {}
        self._names: list[str] = []

    def set_endpoints(self, endpoints: Sequence[EndpointStatus]) -> None:
        """Show these endpoints (rows keep their sparkline's history by name)."""
        names = [e.name for e in endpoints]
        if names != self._names:
            self.clearSpans()
            self.setRowCount(len(endpoints))
            self._names = names
            self.sparklines = {name: self.sparklines.get(name) or Sparkline() for name in names}
            for row, name in enumerate(names):
                self.setCellWidget(row, TOKENS, self.sparklines[name])
                self.setRowHeight(row, 48)
        for row, status in enumerate(endpoints):
            self._fill(row, status)

    def row_of(self, name: str) -> int:
        return self._names.index(name)

    def cell_text(self, row: int, column: int) -> str:
        if column == TOKENS:
            return self.sparklines[self._names[row]].text
        item = self.item(row, column)
        return item.text() if item is not None else ""

    def _set(self, row: int, column: int, text: str, *, colour: str | None = None, tip: str = "",
             bold: bool = False) -> QTableWidgetItem:
        item = self.item(row, column)
        if item is None:
            item = QTableWidgetItem()
            self.setItem(row, column, item)
        item.setText(text)
        item.setToolTip(tip or text)
        item.setForeground(QColor(colour or theme.TEXT))
        if bold:
            font = QFont(item.font())
            font.setBold(True)
            item.setFont(font)
        if column in (TOKENS, SLOTS, QUEUE, GPU_UTIL):
            item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return item

    def _fill(self, row: int, status: EndpointStatus) -> None:
        kind = f"balancer → {', '.join(status.behind)}" if status.behind else status.kind
        self._set(row, ENDPOINT, f"{status.name}\n{kind} · {status.url}", bold=False,
                  tip=f"{status.name}: {kind} at {status.url}")
        colour = HEALTH_COLOURS.get(status.health, theme.ERROR)
        self._set(row, HEALTH, f"● {status.health.value}", colour=colour, tip=status.why or status.health.value)
        self.sparklines[status.name].add(status.tokens_per_s if status.health.is_up else None)
        down = status.health.is_down
        self.setSpan(row, VERSION, 1, 2 if down else 1)
        if down:
            self._set(row, VERSION, status.why, colour=theme.ERROR)
            self._set(row, MODEL, "")
        else:
            self._set(row, VERSION, status.version or DASH)
            self._set(row, MODEL, status.model or DASH)
        note = status.telemetry_note
        self._set(row, SLOTS, fmt_slots(status), tip=note)
        self._set(row, QUEUE, fmt_count(status.queue), tip=note)
        host = status.host
        self._set(row, GPU_MEMORY, fmt_gpu_memory(host))
        self._set(row, GPU_UTIL, fmt_utilization(host))
        self._set(row, RAM, fmt_ram(host))
        if host is None:
            self._set(row, SOURCE, DASH if status.behind else "", colour=theme.DIM,
                      tip="a balancer: the figures above are the sums of the servers behind it")
        else:
            self._set(row, SOURCE, host.source_text, colour=SOURCE_COLOURS[host.source], tip=host_tooltip(host))


__all__ = ["COLUMNS", "FleetTable", "Sparkline"]
