"""The Server page's per-slot progress: one row per server slot, from the server's own /slots report."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QHeaderView, QLabel, QProgressBar, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from app.core.server_telemetry import ServerSample, SlotState

COLUMNS = ("Slot", "State", "Prompt processed", "Cached", "Decoded", "Context used")
BUSY_COLOR = "#3ddc84"
IDLE_COLOR = "#8b8e99"


def _count(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


class SlotsView(QWidget):
    """A compact table of the server's slots (busy/idle, prompt tokens processed and cached, tokens
    decoded, context used as a bar), with a summary line and the reason when slots are not reported.
    Where the slots come from another server than the one at the app's address (Ollama's llama-server
    child), a line names it, and `command_logged` carries that server's command line when it changes."""

    command_logged = Signal(str)  # the command line as the server's log gave it ("" when none is known)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("SlotsView")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        self.summary = QLabel("Waiting for the server's first slot report.")
        self.summary.setObjectName("SlotsSummary")
        self.summary.setStyleSheet("font-weight: 600;")
        self.source = QLabel()
        self.source.setObjectName("SlotsSource")
        self.source.setWordWrap(True)
        self.source.setStyleSheet("color: #9a9da8;")
        self.source.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.source.hide()
        self.notice = QLabel()
        self.notice.setObjectName("SlotsNotice")
        self.notice.setWordWrap(True)
        self.notice.setStyleSheet("color: #ffe08a;")
        self.notice.hide()
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("SlotsTable")
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QTableWidget.SelectionMode.NoSelection)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(len(COLUMNS) - 1, QHeaderView.ResizeMode.Stretch)
        layout.addWidget(self.summary)
        layout.addWidget(self.source)
        layout.addWidget(self.notice)
        layout.addWidget(self.table, 1)
        self.bars: list[QProgressBar] = []
        self.shown: ServerSample | None = None
        self.logged_command = ""

    def set_notice(self, text: str) -> None:
        """Say why the server's report is incomplete ("" hides it)."""
        self.notice.setText(text)
        self.notice.setVisible(bool(text))

    def clear(self, state: str = "") -> None:
        """No slots to show: the server is not running (a restart, a stop); its last readings are gone."""
        self.shown = None
        self.table.setRowCount(0)
        self.bars = []
        self.summary.setText(f"The server is {state or 'not running'}: slots are read while it runs.")

    def set_sample(self, sample: ServerSample) -> None:
        """Show one sample's slots; rows are rebuilt only when the number of slots changes."""
        self.shown = sample
        self.source.setText(sample.source)
        self.source.setVisible(bool(sample.source))
        if sample.server_command != self.logged_command:
            self.logged_command = sample.server_command
            self.command_logged.emit(sample.server_command)
        waiting = "" if sample.requests_deferred is None else \
            f" · {sample.requests_deferred} request{'s' if sample.requests_deferred != 1 else ''} waiting"
        if not sample.reports_slots:
            # A named source that has no slots now (no child yet, or it exited) is not a server without slots.
            self.summary.setText(("No slots to show now" if sample.source else "The server does not report its slots")
                                 + waiting)
            self.table.setRowCount(0)
            self.bars = []
            return
        self.summary.setText(f"{sample.slots_busy} of {sample.slots_total} slots busy{waiting}")
        if self.table.rowCount() != len(sample.slots):
            self._rebuild(len(sample.slots))
        for row, slot in enumerate(sample.slots):
            self._fill(row, slot)

    def _rebuild(self, rows: int) -> None:
        self.table.setRowCount(rows)
        self.bars = []
        for row in range(rows):
            for col in range(len(COLUMNS) - 1):
                item = QTableWidgetItem()
                item.setTextAlignment(Qt.AlignmentFlag.AlignCenter if col < 2 else
                                      Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(row, col, item)
            bar = QProgressBar()
            bar.setTextVisible(True)
            self.table.setCellWidget(row, len(COLUMNS) - 1, bar)
            self.bars.append(bar)

    def _fill(self, row: int, slot: SlotState) -> None:
        texts = (str(slot.id), "busy" if slot.busy else "idle", _count(slot.prompt_processed),
                 _count(slot.cached_tokens), _count(slot.decoded))
        for col, text in enumerate(texts):
            item = self.table.item(row, col)
            if item is not None and item.text() != text:  # every cell got an item when the row was made
                item.setText(text)
        state = self.table.item(row, 1)
        if state is not None:
            state.setForeground(QColor(BUSY_COLOR if slot.busy else IDLE_COLOR))
        bar = self.bars[row]
        n_ctx = slot.n_ctx or 0
        used = slot.prompt_tokens or 0
        bar.setRange(0, max(1, n_ctx))
        bar.setValue(min(used, n_ctx) if n_ctx else 0)
        bar.setFormat(f"{used:,} / {n_ctx:,} tokens" if n_ctx else "context N/A")

    def cell_text(self, row: int, col: int) -> str:
        """The text of one cell (the bar's text in the last column)."""
        if col == len(COLUMNS) - 1:
            return self.bars[row].text()
        item = self.table.item(row, col)
        return item.text() if item is not None else ""


__all__ = ["COLUMNS", "SlotsView"]
