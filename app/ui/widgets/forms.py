"""Small reusable form pieces: inline messages, dim hints, a path picker, aligned field groups."""

from __future__ import annotations

import html
import os
from collections.abc import Iterable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

# Chosen to read on the dark theme; also legible on a light one.
ERROR_COLOR = "#ff6b6b"
WARNING_COLOR = "#f0b429"
HINT_COLOR = "#8b96a5"

_MESSAGE_STYLES = {
    "": "",
    "error": f"color: {ERROR_COLOR};",
    "warning": f"color: {WARNING_COLOR};",
}
_PROMINENT_STYLES = {
    "": "",
    "error": (
        f"color: {ERROR_COLOR}; background: rgba(255, 107, 107, 0.10);"
        f" border: 1px solid {ERROR_COLOR}; border-radius: 4px; padding: 6px 8px;"
    ),
    "warning": (
        f"color: {WARNING_COLOR}; background: rgba(240, 180, 41, 0.12);"
        f" border: 1px solid {WARNING_COLOR}; border-radius: 4px; padding: 6px 8px;"
    ),
}
_PREFIX = {"error": "✖ ", "warning": "⚠ "}


class InlineMessage(QLabel):
    """A wrapped line under a field: a red error, an amber warning, or nothing (hidden)."""

    def __init__(self, parent: QWidget | None = None, *, prominent: bool = False) -> None:
        super().__init__(parent)
        self._severity = ""
        self._prominent = prominent
        self.setWordWrap(True)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        self.hide()

    @property
    def severity(self) -> str:
        """'error', 'warning' or '' when nothing is shown."""
        return self._severity

    @property
    def message(self) -> str:
        """The message without its severity mark."""
        return self.text()[len(_PREFIX.get(self._severity, "")):]

    def show_error(self, text: str) -> None:
        """Show text as an error (blocks Apply)."""
        self._show("error", text)

    def show_warning(self, text: str) -> None:
        """Show text as a warning (allowed, but worth reading)."""
        self._show("warning", text)

    def clear_message(self) -> None:
        """Hide the message."""
        self._show("", "")

    def _show(self, severity: str, text: str) -> None:
        self._severity = severity
        self.setProperty("severity", severity)
        styles = _PROMINENT_STYLES if self._prominent else _MESSAGE_STYLES
        self.setStyleSheet(f"QLabel {{ {styles[severity]} }}" if severity else "")
        self.setText(_PREFIX.get(severity, "") + text if severity else "")
        self.setVisible(bool(severity))


class HintLabel(QLabel):
    """Dim explanatory text under a field; an environment variable name is shown in monospace."""

    def __init__(self, text: str = "", env_name: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.RichText)
        # In the widget's own sheet so that an application-wide font-size rule does not undo it.
        size_pt = QApplication.font().pointSizeF() * 0.9
        self.setStyleSheet(f"QLabel {{ color: {HINT_COLOR}; font-size: {size_pt:.1f}pt; }}")
        parts = []
        if env_name:
            parts.append(f"<span style='font-family: monospace;'>{html.escape(env_name)}</span>")
        if text:
            parts.append(html.escape(text))
        self.setText(" · ".join(parts))


class PathEdit(QWidget):
    """A line edit with a Browse… button that picks a directory or a file."""

    text_changed = Signal(str)

    def __init__(
        self, *, pick_directory: bool, dialog_title: str, placeholder: str = "",
        parent: QWidget | None = None, file_filter: str = "",
    ) -> None:
        super().__init__(parent)
        self._pick_directory = pick_directory
        self._dialog_title = dialog_title
        self.file_filter = file_filter  # e.g. "GGUF models (*.gguf)"; "" = any file
        self.line_edit = QLineEdit(self)
        self.line_edit.setPlaceholderText(placeholder)
        self.line_edit.setClearButtonEnabled(True)
        self.browse_button = QPushButton("Browse…", self)
        self.browse_button.setAutoDefault(False)
        # Files chosen before, newest first (set_recent); hidden until there are some.
        self.recent_button = QToolButton(self)
        self.recent_button.setText("Recent")
        self.recent_button.setToolTip("Files served lately")
        self.recent_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.recent_menu = QMenu(self.recent_button)
        self.recent_button.setMenu(self.recent_menu)
        self.recent_button.hide()
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addWidget(self.line_edit, 1)
        layout.addWidget(self.recent_button)
        layout.addWidget(self.browse_button)
        self.line_edit.textChanged.connect(self.text_changed)
        self.browse_button.clicked.connect(self._browse)

    def setObjectName(self, name: str) -> None:  # noqa: N802 - Qt's spelling
        """Name this widget and its parts (<name>_edit, <name>_browse) for tests and stylesheets."""
        super().setObjectName(name)
        self.line_edit.setObjectName(f"{name}_edit")
        self.browse_button.setObjectName(f"{name}_browse")

    def text(self) -> str:
        """The path as typed, trimmed."""
        return self.line_edit.text().strip()

    def set_recent(self, paths: Iterable[str]) -> None:
        """Offer these paths (newest first) in the Recent menu; a path no longer on disk is shown disabled."""
        self.recent_menu.clear()
        for path in paths:
            action = self.recent_menu.addAction(path)
            exists = os.path.exists(path)
            action.setEnabled(exists)
            action.setToolTip("" if exists else f"{path} is no longer there")
            action.triggered.connect(lambda _checked=False, chosen=path: self.line_edit.setText(chosen))
        self.recent_button.setVisible(not self.recent_menu.isEmpty())

    def recent(self) -> list[str]:
        """The paths the Recent menu offers, newest first."""
        return [action.text() for action in self.recent_menu.actions()]

    def set_text(self, text: str) -> None:
        """Replace the path."""
        self.line_edit.setText(text)

    def _browse(self) -> None:
        start = self.text()
        if self._pick_directory:
            chosen = QFileDialog.getExistingDirectory(self, self._dialog_title, start)
        else:
            chosen, _filter = QFileDialog.getOpenFileName(self, self._dialog_title, start, self.file_filter)
        if chosen:
            self.line_edit.setText(chosen)


class FieldGroup(QGroupBox):
    """A titled group of label | field rows; each field has a hint and an inline message under it."""

    def __init__(self, title: str, parent: QWidget | None = None) -> None:
        super().__init__(title, parent)
        self._grid = QGridLayout(self)
        self._grid.setContentsMargins(10, 14, 10, 10)
        self._grid.setHorizontalSpacing(12)
        self._grid.setVerticalSpacing(12)
        self._grid.setColumnStretch(1, 1)
        self.labels: list[QLabel] = []

    def add_field(
        self, label: str, editor: QWidget, *, env_name: str = "", hint: str = "",
        below: Iterable[QWidget] = (), prominent_message: bool = False,
    ) -> InlineMessage:
        """Add one row and return the message widget that reports on it."""
        row = self._grid.rowCount()
        caption = QLabel(label, self)
        caption.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        # Centre the caption on the editor's first line, not on the hint and message below it.
        caption.setMinimumHeight(min(editor.sizeHint().height(), _line_height(editor)))
        caption.setBuddy(editor)
        self.labels.append(caption)

        column = QWidget(self)
        stack = QVBoxLayout(column)
        stack.setContentsMargins(0, 0, 0, 0)
        stack.setSpacing(4)
        stack.addWidget(editor)
        for widget in below:
            stack.addWidget(widget)
        if env_name or hint:
            stack.addWidget(HintLabel(hint, env_name, column))
        message = InlineMessage(column, prominent=prominent_message)
        stack.addWidget(message)

        self._grid.addWidget(caption, row, 0, Qt.AlignmentFlag.AlignTop)
        self._grid.addWidget(column, row, 1, Qt.AlignmentFlag.AlignTop)
        return message


def _line_height(widget: QWidget) -> int:
    """Height of a one-line editor (a QLineEdit) in widget's font."""
    probe = QLineEdit()
    probe.setFont(widget.font())
    height = probe.sizeHint().height()
    probe.deleteLater()
    return height


def align_label_columns(groups: Iterable[FieldGroup]) -> None:
    """Give every group's captions one width so fields line up from group to group."""
    groups = list(groups)
    width = max((label.sizeHint().width() for g in groups for label in g.labels), default=0)
    for group in groups:
        for label in group.labels:
            label.setMinimumWidth(width)


def left_aligned(*widgets: QWidget, stretch: bool = True, spacing: int = 6) -> QWidget:
    """A row holding widgets at their natural width, packed to the left."""
    row = QWidget()
    layout = QHBoxLayout(row)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(spacing)
    for widget in widgets:
        layout.addWidget(widget)
    if stretch:
        layout.addStretch(1)
    return row
