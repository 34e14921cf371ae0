"""A dismissible message strip for errors, warnings and notices."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton


class Banner(QFrame):
    """Shows one message at a level (error / warning / info); hidden when empty."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("Banner")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(12, 8, 8, 8)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        close = QPushButton("Dismiss")
        close.setObjectName("BannerDismiss")
        close.clicked.connect(self.clear)
        lay.addWidget(self.label, 1)
        lay.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def show_message(self, text: str, level: str = "info") -> None:
        """Show text at a level: 'error', 'warning' or 'info'."""
        self.setProperty("level", level)
        self.style().unpolish(self)
        self.style().polish(self)
        self.label.setText(text)
        self.show()

    def clear(self) -> None:
        """Hide the banner."""
        self.label.clear()
        self.hide()

    @property
    def text(self) -> str:
        return self.label.text()
