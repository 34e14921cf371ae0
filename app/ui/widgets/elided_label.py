"""A one-line label that gives way to the widgets beside it: a text too long for its room is cut in
the middle with "…", and its tooltip holds the whole text."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget


# Fewer characters than this each side of the "…" is no clue to the text: only "…" shows.
MIN_CHARS_A_SIDE = 3


class ElidedLabel(QLabel):
    """One line of status beside buttons: it never takes their room; `full_text()` is what was set."""

    def __init__(self, text: str = "", parent: QWidget | None = None, *, min_width_px: int = 40,
                 whole_first: bool = False) -> None:
        """`whole_first`: as wide as its whole text where the row has room, cut only where it has not (else
        it takes only the room the others leave)."""
        super().__init__(parent)
        self._full = ""
        self._tip = ""
        self._min_width_px = min_width_px
        self.setSizePolicy(QSizePolicy.Policy.Preferred if whole_first else QSizePolicy.Policy.Ignored,
                           QSizePolicy.Policy.Preferred)
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802 - Qt override
        """Show `text`, cut to the room there is."""
        self._full = text
        self._fit()
        self.updateGeometry()

    def full_text(self) -> str:
        """The text as set, before any cut."""
        return self._full

    def setToolTip(self, tip: str) -> None:  # noqa: N802 - Qt override
        """A tooltip shown after the whole text (which the tooltip always carries when the text is cut)."""
        self._tip = tip
        self._fit()

    def clear(self) -> None:
        """No text, no tooltip."""
        self._tip = ""
        self.setText("")

    def is_elided(self) -> bool:
        """True when the text shown is cut."""
        return super().text() != self._full

    def _fit(self) -> None:
        shown = self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideMiddle, max(self.width(), 0))
        if shown != self._full and len(shown) <= 2 * MIN_CHARS_A_SIDE:
            shown = "…"  # "s…6" says nothing: "…" says there is more, in the tooltip
        super().setText(shown)
        tip = "\n".join(part for part in (self._full if shown != self._full else "", self._tip) if part)
        super().setToolTip(tip)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        """Room for the whole text."""
        metrics = self.fontMetrics()
        return QSize(metrics.horizontalAdvance(self._full) + 4, super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt override
        """Little: the text is cut before a neighbour shrinks."""
        return QSize(self._min_width_px, super().minimumSizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._fit()


__all__ = ["ElidedLabel"]
