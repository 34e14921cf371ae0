"""The local-models table: what is stored, what is loaded (VRAM/CPU, context, expiry), and whether
each model fits the GPU under the current settings."""

from __future__ import annotations

import re
from datetime import datetime, UTC

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem, QWidget

from app.core.memory.model_fit import FitVerdict
from app.core.memory.verdict import Verdict
from app.core.models import LocalModel, RunningModel
from app.core.pull_progress import fmt_bytes
from app.ui.widgets import theme
from app.core.units import GIB
COLUMNS = ("Name", "Family", "Parameters", "Quantization", "Size", "Modified", "Loaded", "Fit")
VERDICT_COLOURS = {Verdict.FITS: theme.OK, Verdict.TIGHT: theme.WARNING, Verdict.SPILLS: "#ff9f40",
                   Verdict.WONT_LOAD: theme.ERROR, Verdict.UNKNOWN: theme.DIM}
_FRACTION_RE = re.compile(r"(\.\d{6})\d+")


def parse_time(text: str) -> datetime | None:
    """An RFC 3339 time as Ollama writes it (nanoseconds allowed); None when unreadable."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(_FRACTION_RE.sub(r"\1", text.replace("Z", "+00:00")))
    except ValueError:
        return None


def fmt_age(text: str, now: datetime | None = None) -> str:
    """'3 days ago', 'just now'; the text itself when unreadable."""
    when = parse_time(text)
    if when is None:
        return text or "—"
    seconds = ((now or datetime.now(UTC)) - when).total_seconds()
    for unit, size in (("year", 31_536_000), ("month", 2_592_000), ("day", 86_400), ("hour", 3_600), ("minute", 60)):
        if seconds >= size:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n > 1 else ''} ago"
    return "just now"


def fmt_expiry(text: str, now: datetime | None = None) -> str:
    """'unloads in 4 min', 'stays loaded' (keep_alive < 0), or '' when unknown."""
    when = parse_time(text)
    if when is None:
        return ""
    seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if seconds > 10 * 365 * 86_400:
        return "stays loaded"
    if seconds <= 0:
        return "unloading"
    return f"unloads in {int(seconds // 60)} min" if seconds >= 60 else f"unloads in {int(seconds)} s"


def loaded_text(running: RunningModel, now: datetime | None = None) -> str:
    """'9.8 GiB VRAM · 100% GPU · ctx 4096 · unloads in 4 min'; 'loaded · ctx 4096' from a server that does
    not report where its model sits."""
    if running.size_bytes is None or running.size_vram_bytes is None:
        parts = ["loaded"]
    else:
        cpu = running.size_bytes - running.size_vram_bytes
        parts = [f"{running.size_vram_bytes / GIB:.1f} GiB VRAM" + (f" + {cpu / GIB:.1f} GiB CPU" if cpu > 0 else ""),
                 running.processor]
    if running.context_length:
        parts.append(f"ctx {running.context_length:,}")
    expiry = fmt_expiry(running.expires_at, now)
    if expiry:
        parts.append(expiry)
    return " · ".join(parts)


class ModelsTable(QTableWidget):
    """One row per local model; selection by row."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, len(COLUMNS), parent)
        self.setObjectName("ModelsTable")
        self.setHorizontalHeaderLabels(COLUMNS)
        self.verticalHeader().hide()
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setAlternatingRowColors(True)
        self.setWordWrap(False)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(6, QHeaderView.ResizeMode.Stretch)
        self.verticalHeader().setDefaultSectionSize(34)
        self.names: list[str] = []

    def set_models(self, local: list[LocalModel], running: list[RunningModel],
                   verdicts: dict[str, FitVerdict]) -> None:
        """Rebuild the rows, keeping the selected model selected."""
        selected = self.selected_name()
        loaded = {r.name: r for r in running}
        self.setRowCount(len(local))
        self.names = [m.name for m in local]
        bold = QFont(self.font())
        bold.setBold(True)
        for row, m in enumerate(local):
            cells = [m.name, m.family, m.parameter_size, m.quantization_level, fmt_bytes(m.size_bytes),
                     fmt_age(m.modified_at), loaded_text(loaded[m.name]) if m.name in loaded else ""]
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if col == 0:
                    item.setFont(bold)
                if col == 4:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if col == 5:
                    item.setToolTip(m.modified_at)
                if col == 6 and m.name in loaded:
                    item.setForeground(QColor(theme.ACCENT))
                self.setItem(row, col, item)
            self.setItem(row, 7, self._verdict_item(verdicts.get(m.name)))
        if selected in self.names:
            self.selectRow(self.names.index(selected))

    @staticmethod
    def _verdict_item(verdict: FitVerdict | None) -> QTableWidgetItem:
        if verdict is None:
            item = QTableWidgetItem("…")
            item.setToolTip("Reading the model's metadata…")
            return item
        mark = {Verdict.FITS: "●", Verdict.TIGHT: "●", Verdict.SPILLS: "▲", Verdict.WONT_LOAD: "✖",
                Verdict.UNKNOWN: "?"}.get(verdict.verdict, "")
        ctx = f" @ {verdict.num_ctx:,}" if verdict.num_ctx else ""
        item = QTableWidgetItem(f"{mark} {verdict.label}{ctx}")
        item.setForeground(QColor(VERDICT_COLOURS.get(verdict.verdict, theme.DIM)))
        item.setToolTip(verdict.explanation)
        return item

    def selected_name(self) -> str:
        """The selected model's name, or ''."""
        rows = self.selectionModel().selectedRows() if self.selectionModel() else []
        return self.names[rows[0].row()] if rows and rows[0].row() < len(self.names) else ""

    def select_name(self, name: str) -> bool:
        """Select a model's row; False when it is not listed."""
        if name not in self.names:
            return False
        self.selectRow(self.names.index(name))
        return True

    def cell_text(self, name: str, column: str) -> str:
        """The text in a model's row under a column title (for tests and screenshots)."""
        item = self.item(self.names.index(name), COLUMNS.index(column))
        return item.text() if item is not None else ""


__all__ = ["COLUMNS", "ModelsTable", "fmt_age", "fmt_expiry", "loaded_text", "parse_time"]
