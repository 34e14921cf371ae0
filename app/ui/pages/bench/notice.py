"""A quiet line that says where an export was written, so the user can find the file."""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

from app.ui.widgets import theme


class ExportNotice(QLabel):
    """Hidden until an export succeeds; then 'Exported to <path>' (selectable, so it can be copied)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ExportNotice")
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.setStyleSheet(f"QLabel {{ color: {theme.OK}; font-size: 11.5pt; }}")
        self.path = ""
        self.hide()

    def show_written(self, path: str) -> None:
        """Say that `path` was written, naming the folder it is in."""
        self.path = path
        where = Path(path)
        self.setText(f"✔ Exported to <b>{html.escape(where.name)}</b> in "
                     f"<span style='font-family: monospace'>{html.escape(str(where.parent))}</span>")
        self.setToolTip(path)
        self.show()

    def clear_notice(self) -> None:
        """Hide the line (a newer message or run replaces it)."""
        self.path = ""
        self.hide()


__all__ = ["ExportNotice"]
