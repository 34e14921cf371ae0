"""Read-only text that wraps anywhere: a long path or command line takes more lines, never more width.

A QLabel wraps only between words, so one long path (a model file in a virtual environment, a
llama-server command line) sets the label's minimum width and pushes a panel past a 1280x720
window. This widget wraps inside such words too, and copies its text exactly as written."""

from __future__ import annotations

from PySide6.QtCore import QSize, QSizeF, Qt
from PySide6.QtGui import QResizeEvent, QTextOption
from PySide6.QtWidgets import QFrame, QSizePolicy, QTextEdit, QWidget

# The narrowest it gets: a few characters, however long a word it holds.
MIN_WIDTH_PX = 60


class WrappingText(QTextEdit):
    """Plain, selectable, read-only text as tall as its wrapped lines; setText/text as on a QLabel."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setLineWrapMode(QTextEdit.LineWrapMode.WidgetWidth)
        self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse
                                     | Qt.TextInteractionFlag.TextSelectableByKeyboard)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setStyleSheet("QTextEdit { background: transparent; border: none; padding: 0; }")
        self.viewport().setAutoFillBackground(False)
        self.document().setDocumentMargin(0)
        self.document().documentLayout().documentSizeChanged.connect(self._fit_height)
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802 - QLabel's name
        """Show `text` as plain text (no markup)."""
        if text != self.toPlainText():
            self.setPlainText(text)
        self._fit_height(self.document().size())

    def text(self) -> str:
        """The text as given (for copying, and for tests)."""
        return self.toPlainText()

    def _fit_height(self, size: QSizeF) -> None:
        height = max(self.fontMetrics().height(), round(size.height())) + 2
        if height != self.height() or self.minimumHeight() != height:
            self.setFixedHeight(height)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's name
        """A new width re-wraps the lines: the height follows."""
        super().resizeEvent(event)
        self.document().setTextWidth(self.viewport().width())
        self._fit_height(self.document().size())

    def minimumSizeHint(self) -> QSize:  # noqa: D102 - Qt's name
        return QSize(MIN_WIDTH_PX, self.height())

    def sizeHint(self) -> QSize:  # noqa: D102 - Qt's name
        ideal = self.document().idealWidth()
        return QSize(max(MIN_WIDTH_PX, round(ideal) + 4), self.height())


__all__ = ["WrappingText"]
