"""A dismissible message strip for errors, warnings and notices."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget


class Banner(QFrame):
    """Shows one message at a level (error / warning / info); hidden when empty."""

    def __init__(self, parent: QWidget | None = None) -> None:
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
        # One optional action that goes with the message (e.g. "Start the embedded engine").
        self.action_button = QPushButton()
        self.action_button.setObjectName("BannerAction")
        self.action_button.clicked.connect(self._act)
        self.action_button.hide()
        self._action: Callable[[], None] | None = None
        lay.addWidget(self.label, 1)
        lay.addWidget(self.action_button, 0, Qt.AlignmentFlag.AlignTop)
        lay.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def show_message(self, text: str, level: str = "info", action: tuple[str, Callable[[], None]] | None = None) -> None:
        """Show text at a level: 'error', 'warning' or 'info'; action: (button text, what it does)."""
        self._action = action[1] if action else None
        self.action_button.setText(action[0] if action else "")
        self.action_button.setVisible(action is not None)
        self.setProperty("level", level)
        self.style().unpolish(self)
        self.style().polish(self)
        self.label.setText(text)
        self.show()

    def clear(self) -> None:
        """Hide the banner."""
        self.label.clear()
        self._action = None
        self.action_button.hide()
        self.hide()

    def _act(self) -> None:
        action = self._action
        self.clear()
        if action is not None:
            action()

    @property
    def text(self) -> str:
        return self.label.text()
