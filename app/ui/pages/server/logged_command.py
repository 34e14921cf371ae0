"""The Server page's "command as logged": the command line the engine really runs, as the server's
own log gave it (Ollama 0.30+ logs the llama-server it starts) or as the engine's process shows it,
beside the form's prediction."""

from __future__ import annotations

from PySide6.QtGui import QFont, QGuiApplication
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.ui.widgets.wrapping_text import WrappingText


class LoggedCommand(QFrame):
    """The command line the engine really runs, as the server's log or the engine's process gave it
    (Ollama's llama-server child); hidden until one is known. The form's own preview is what the
    settings predict."""

    TITLE = "Command as run — from the server's log or the process table"
    ENDED_TITLE = "Command as run — that run has ended"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("LoggedCommand")
        self.setStyleSheet("#LoggedCommand { background: #17181d; border: 1px solid #2c2e36; border-radius: 6px; }"
                           "#LoggedCommand QLabel { background: transparent; }")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 8, 10, 8)
        self.text = WrappingText()  # a command line of long paths wraps inside them, not past the panel
        self.text.setObjectName("LoggedCommandText")
        mono = QFont("DejaVu Sans Mono")
        mono.setPointSizeF(9)
        self.text.setFont(mono)
        top = QHBoxLayout()
        self.title = QLabel(self.TITLE)
        self.title.setStyleSheet("font-weight: 600;")
        self.title.setWordWrap(True)
        copy = QPushButton("Copy")
        copy.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.text.text()))
        top.addWidget(self.title, 1)
        top.addWidget(copy)
        lay.addLayout(top)
        lay.addWidget(self.text)
        self._running = False
        self.hide()

    def set_command(self, command: str) -> None:
        """Show the newest logged command line ("" keeps the last one: a run that ended is still worth reading)."""
        if not command:
            self.title.setText(self.ENDED_TITLE if self.text.text() else self.TITLE)
            return
        self.text.setText(command)
        self.title.setText(self.TITLE if self._running else self.ENDED_TITLE)
        self.show()

    def set_running(self, running: bool) -> None:
        """The server's state: a command logged by a run that has ended is said to be from that run (a
        server that runs again shows its own child's command once one is known, not this one)."""
        self._running = running
        if not running and self.text.text():
            self.title.setText(self.ENDED_TITLE)


__all__ = ["LoggedCommand"]
