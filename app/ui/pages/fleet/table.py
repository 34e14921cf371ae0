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

COLUMNS = ("Endpoint", "Health", "Model", "Tokens/s", "Slots", "Queue", "GPU", "Host RAM", "Figures from")
ENDPOINT, HEALTH, MODEL, TOKENS, SLOTS, QUEUE, GPU, RAM, SOURCE = range(len(COLUMNS))
# Fits the 1280x720 layout (about 1060 pixels beside the sidebar); the source column takes the rest.
WIDTHS = {ENDPOINT: 176, HEALTH: 122, MODEL: 138, TOKENS: 104, SLOTS: 56, QUEUE: 64, GPU: 128, RAM: 104}
ROW_HEIGHT = 48
SHOWN_ROWS = 8  # the table grows to show this many rows before it scrolls
HISTORY = 60  # polls a sparkline keeps (a minute at one a second)
SPARK_MIN_POINTS = 12
HEALTH_COLOURS = {Health.UP: theme.OK, Health.PENDING: theme.DIM}
SOURCE_COLOURS = {HostSource.PROMETHEUS_DCGM: theme.ACCENT, HostSource.PROMETHEUS_EXPORTER: theme.ACCENT,
                  HostSource.THIS_MACHINE: theme.OK, HostSource.UNKNOWN: theme.DIM}
DASH = "—"


def fmt_rate(value: float | None) -> str:
    return DASH if value is None else f"{value:.1f}"


def fmt_count(value: int | None) -> str:
    return DASH if value is None else str(value)


def fmt_slots(status: EndpointStatus) -> str:
    """'1/2' busy of total; '1 busy' where only the requests decoding are known."""
    if status.slots_total is None:
        return DASH if status.slots_busy is None else f"{status.slots_busy} busy"
    return f"{fmt_count(status.slots_busy)}/{status.slots_total}"


def fmt_gpu(host: HostFigures | None) -> str:
    """'17.8 / 24.0 GiB' and, on a second line, '87 % busy' (the busiest GPU of the host)."""
    if host is None or host.gpu_total_bytes is None:
        return DASH
    used = host.gpu_used_bytes
    memory = f"{DASH if used is None else f'{used / GIB:.1f}'} / {host.gpu_total_bytes / GIB:.1f} GiB"
    use = host.gpu_utilization
    return memory if use is None else f"{memory}\n{use * 100:.0f} % busy"


def fmt_ram(host: HostFigures | None) -> str:
    """'38 GiB free' and 'of 62 GiB' under it; the total alone where what is available is not known."""
    if host is None or host.ram_total_bytes is None:
        return DASH
    total = f"{host.ram_total_bytes / GIB:.0f} GiB"
    available = host.ram_available_bytes
    return total if available is None else f"{available / GIB:.0f} GiB free\nof {total}"


def fmt_model(model: str) -> str:
    """A model named by its file path (llama-server's /v1/models id) as its file name, without .gguf."""
    return ", ".join(name.rsplit("/", 1)[-1].removesuffix(".gguf") for name in model.split(", "))


def fmt_url(url: str) -> str:
    return url.removeprefix("http://")


def host_tooltip(host: HostFigures) -> str:
    lines = [host.source_text]
    for gpu in host.gpus:
        lines.append(f"GPU {gpu.gpu}: {gpu.name or 'unnamed'} {gpu.uuid}".rstrip())
    if host.ram_source:
        lines.append(f"RAM from {host.ram_source}")
    if host.server_metrics:
        lines.append("The server's series as Prometheus scraped them:")
        lines.extend(f"  {name} {value:g}" for name, value in host.server_metrics)
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
        step = line.width() / (max(len(self.values), SPARK_MIN_POINTS) - 1)  # a short history is not a sliver
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
        self.setTextElideMode(Qt.TextElideMode.ElideRight)
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
                self.setRowHeight(row, ROW_HEIGHT)
            header = self.horizontalHeader().sizeHint().height()
            self.setMinimumHeight(header + ROW_HEIGHT * min(len(names), SHOWN_ROWS) + 2 * self.frameWidth() + 14)
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
        if column in (TOKENS, SLOTS, QUEUE):
            item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return item

    def _fill(self, row: int, status: EndpointStatus) -> None:
        kind = "balancer" if status.behind else status.kind
        self._set(row, ENDPOINT, f"{status.name} · {kind}\n{fmt_url(status.url)}",
                  tip=f"{status.name}: {kind} at {status.url}"
                      + (f" in front of {', '.join(status.behind)}" if status.behind else ""))
        colour = HEALTH_COLOURS.get(status.health, theme.ERROR)
        version = f"\n{status.version}" if status.version else ""
        self._set(row, HEALTH, f"● {status.health.value}{version}", colour=colour,
                  tip=status.why or f"{status.health.value}{', version ' + status.version if version else ''}")
        self.sparklines[status.name].add(status.tokens_per_s if status.health.is_up else None)
        if status.health.is_down:  # why, in the client's words (whole in the tooltip and under the table)
            self._set(row, MODEL, status.why, colour=theme.ERROR)
        else:
            self._set(row, MODEL, fmt_model(status.model) or DASH, tip=status.model)
        note = status.telemetry_note
        self._set(row, SLOTS, fmt_slots(status), tip=note)
        self._set(row, QUEUE, fmt_count(status.queue), tip=note)
        host = status.host
        self._set(row, GPU, fmt_gpu(host))
        self._set(row, RAM, fmt_ram(host))
        if host is None:
            self._set(row, SOURCE, f"sums of {', '.join(status.behind)}" if status.behind else "", colour=theme.DIM,
                      tip="a balancer: tokens/s, slots and queue are the sums of the servers behind it that are up")
        else:
            self._set(row, SOURCE, host.source_text, colour=SOURCE_COLOURS[host.source], tip=host_tooltip(host))


__all__ = ["COLUMNS", "FleetTable", "Sparkline"]
