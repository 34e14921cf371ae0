"""Pull a model by name:tag with a real progress bar: bytes, speed and time left per layer and overall."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QGroupBox, QHBoxLayout, QHeaderView, QLabel, QLineEdit,
                               QProgressBar, QPushButton, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from app.core.pull_progress import PullSnapshot, fmt_bytes, fmt_eta
from app.core.ports.backend import ModelStoreRules
from app.ui.widgets.forms import HintLabel, InlineMessage

LAYER_COLUMNS = ("layer", "done", "size", "%", "speed", "left")
PROGRESS_STYLE = """
QProgressBar { background: #101115; border: 1px solid #343742; border-radius: 6px; text-align: center;
               color: #ffffff; font-weight: 600; min-height: 26px; }
QProgressBar::chunk { background: #1f6fa8; border-radius: 5px; }
"""


def overall_text(snapshot: PullSnapshot) -> str:
    """'3.1 GB of 9.3 GB · 112.0 MB/s · 55 s left'."""
    if snapshot.succeeded:
        return f"Done: {fmt_bytes(snapshot.total_bytes)} in {fmt_eta(snapshot.elapsed_s)}"
    speed = f"{fmt_bytes(snapshot.speed_bps)}/s" if snapshot.speed_bps else "measuring speed"
    return (f"{fmt_bytes(snapshot.completed_bytes)} of {fmt_bytes(snapshot.total_bytes)} · {speed} · "
            f"{fmt_eta(snapshot.eta_s)} left")


class PullPanel(QGroupBox):
    """Name field, Pull and Cancel, the overall bar and a row per layer."""

    pull_requested = Signal(str)
    cancel_requested = Signal()

    def __init__(self, rules: ModelStoreRules, parent: QWidget | None = None) -> None:
        super().__init__("Pull a model", parent)
        self._rules = rules
        self.setStyleSheet(PROGRESS_STYLE)
        self.name_edit = QLineEdit()
        self.name_edit.setObjectName("pull_name")
        self.name_edit.setPlaceholderText("name:tag, e.g. qwen3:14b or qwen3:14b-q8_0")
        self.name_edit.setClearButtonEnabled(True)
        self.pull_button = QPushButton("Pull")
        self.pull_button.setProperty("accent", True)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        row = QHBoxLayout()
        row.addWidget(self.name_edit, 1)
        row.addWidget(self.pull_button)
        row.addWidget(self.cancel_button)
        self.advice = InlineMessage()
        self.status = QLabel("")
        self.status.setObjectName("Dim")
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.setValue(0)
        self.bar.setFormat("Nothing is being pulled")
        self.layers = QTableWidget(0, len(LAYER_COLUMNS))
        self.layers.setObjectName("PullLayers")
        self.layers.setHorizontalHeaderLabels(LAYER_COLUMNS)
        self.layers.verticalHeader().hide()
        self.layers.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.layers.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.layers.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.layers.verticalHeader().setDefaultSectionSize(26)
        self.layers.setMinimumHeight(90)
        self.message = InlineMessage(prominent=True)
        layout = QVBoxLayout(self)
        layout.setSpacing(6)
        layout.addLayout(row)
        layout.addWidget(self.advice)
        layout.addWidget(HintLabel("From the Ollama library through the server. Cancel keeps the layers "
                                   "downloaded so far; pulling again resumes."))
        layout.addWidget(self.bar)
        layout.addWidget(self.status)
        layout.addWidget(self.layers, 1)
        layout.addWidget(self.message)
        self.pull_button.clicked.connect(self._request)
        self.name_edit.returnPressed.connect(self._request)
        self.cancel_button.clicked.connect(self.cancel_requested)
        self.name_edit.textChanged.connect(self._advise)
        self._busy = False
        # (parameter count, GPU bytes) for a typed name, to price the real quantizations; set by the page.
        self.sizes_for: Callable[[str], tuple[int | None, int | None]] = lambda _name: (None, None)

    def _advise(self, text: str) -> None:
        advice = self._rules.quantization_advice(text, *self.sizes_for(text))
        if advice:
            self.advice.show_warning(advice)
        else:
            self.advice.clear_message()

    def _request(self) -> None:
        name = self.name_edit.text().strip()
        if not name:
            self.message.show_error("Type a model name, e.g. qwen3:14b.")
            return
        if not self._busy:
            self.pull_requested.emit(name)

    def set_busy(self, busy: bool, name: str = "") -> None:
        """Pulling (Cancel enabled) or idle."""
        self._busy = busy
        self.pull_button.setEnabled(not busy)
        self.cancel_button.setEnabled(busy)
        self.name_edit.setReadOnly(busy)
        if busy:
            self.message.clear_message()
            self.layers.setRowCount(0)
            self.bar.setValue(0)
            self.bar.setFormat(f"{name}: starting…")
            self.status.setText("")

    def show_progress(self, snapshot: PullSnapshot) -> None:
        """Redraw the bar and the layers."""
        self.bar.setValue(int(snapshot.fraction * 1000))
        self.bar.setFormat(f"{snapshot.fraction * 100:.0f} %  ·  " + overall_text(snapshot)
                           if snapshot.total_bytes else snapshot.status)
        self.status.setText(snapshot.status)
        self.layers.setRowCount(len(snapshot.layers))
        for row, layer in enumerate(snapshot.layers):
            cells = (layer.digest.removeprefix("sha256:")[:12], fmt_bytes(layer.completed_bytes),
                     fmt_bytes(layer.total_bytes), f"{layer.fraction * 100:.0f}",
                     f"{fmt_bytes(layer.speed_bps)}/s" if layer.speed_bps else ("done" if layer.done else "—"),
                     fmt_eta(layer.eta_s) if not layer.done else "")
            for col, text in enumerate(cells):
                item = self.layers.item(row, col)
                if item is None:
                    item = QTableWidgetItem()
                    item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                    self.layers.setItem(row, col, item)
                if item.text() != text:
                    item.setText(text)

    def show_done(self, name: str) -> None:
        """The pull succeeded."""
        self.set_busy(False)
        self.bar.setValue(1000)
        self.status.setText(f"✔ {name} is ready.")

    def show_failed(self, text: str) -> None:
        """The pull failed: say why and what to do."""
        self.set_busy(False)
        self.message.show_error(text)
        self.status.setText("")

    def show_cancelled(self) -> None:
        """The user cancelled."""
        self.set_busy(False)
        self.bar.setFormat(f"Cancelled at {self.bar.value() / 10:.0f} %")
        self.status.setText("Cancelled. Downloaded layers are kept; pull again to resume.")


__all__ = ["PullPanel", "overall_text"]
