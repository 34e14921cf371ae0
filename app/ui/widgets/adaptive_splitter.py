"""A splitter whose panes sit side by side where their minimum widths fit, and one above the other,
each at its full height, where they do not (a 1280x720 projector at --scale 1.5).

A side-by-side splitter is as wide as its panes together at least; inside a page that scrolls, that
width scrolls sideways or, outside one, holds the window wider than the screen. This one asks only the
widest pane's width; stacked, its panes take the height their content needs, so the page around it
scrolls down instead, the pane with the page's main actions first."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QEvent, QObject, QSize, Qt, QTimer
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QScrollArea, QSizePolicy, QSplitter, QWidget


class AdaptiveSplitter(QSplitter):
    """Horizontal while the panes fit side by side, vertical (panes stacked, `lead` first) otherwise."""

    def __init__(self, lead: int = 0, parent: QWidget | None = None) -> None:
        super().__init__(Qt.Orientation.Horizontal, parent)
        self._lead = lead  # the pane on top when stacked
        self._panes: list[QWidget] = []  # in their side-by-side order
        self._side: dict[QWidget, tuple[QSizePolicy.Policy, int]] = {}  # vertical policy, minimum height
        self._bars: dict[QScrollArea, Qt.ScrollBarPolicy] = {}  # a scroll area's own vertical scroll bar
        self._side_sizes: list[int] = []
        self._fitting = False  # a height fit is queued

    def addWidget(self, widget: QWidget) -> None:  # noqa: N802 - Qt's name
        """Add a pane (at the right, side by side)."""
        self._panes.append(widget)
        self._side[widget] = (widget.sizePolicy().verticalPolicy(), widget.minimumHeight())
        content = widget.widget() if isinstance(widget, QScrollArea) else None
        if isinstance(widget, QScrollArea) and content is not None:
            self._bars[widget] = widget.verticalScrollBarPolicy()
            content.installEventFilter(self)  # its content's height, which the pane takes stacked
        super().addWidget(widget)

    def setSizes(self, sizes: Sequence[int]) -> None:  # noqa: N802 - Qt's name
        """Side by side, the panes' widths (kept for when they are side by side again)."""
        if not self.stacked:
            self._side_sizes = list(sizes)
        super().setSizes(sizes)

    @property
    def stacked(self) -> bool:
        """True while the panes are one above the other."""
        return self.orientation() == Qt.Orientation.Vertical

    def side_by_side_width(self) -> int:
        """The width the panes need side by side."""
        return sum(min_width(p) for p in self._panes) + self.handleWidth() * max(0, len(self._panes) - 1)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt override
        """The widest pane's width: narrower than the panes together, they stack."""
        hint = super().minimumSizeHint()
        return QSize(max((min_width(p) for p in self._panes), default=hint.width()), hint.height())

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        self._arrange(event.size().width() < self.side_by_side_width())
        super().resizeEvent(event)
        self._queue_fit()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        """A scroll area's content that grew or shrank: the stacked pane takes its new height."""
        if event.type() == QEvent.Type.LayoutRequest:
            self._queue_fit()
        return False

    def _queue_fit(self) -> None:
        """Fit the heights once the events in hand are done (never from inside a resize: a pane's new
        height may resize the window, and this splitter again)."""
        if self.stacked and not self._fitting:
            self._fitting = True
            QTimer.singleShot(0, self, self._fit_heights)

    def _fit_heights(self) -> None:
        self._fitting = False
        if not self.stacked:
            return
        for pane in self._panes:
            if isinstance(pane, QScrollArea):
                height = max(self._side[pane][1], _content_height(pane))
                if pane.minimumHeight() != height:
                    pane.setMinimumHeight(height)

    def _arrange(self, stack: bool) -> None:
        if stack == self.stacked or not self._panes:
            return
        if stack and self.isVisible():  # the widths a person left them at (else those the page set)
            self._side_sizes = self.sizes()
        self.setOrientation(Qt.Orientation.Vertical if stack else Qt.Orientation.Horizontal)
        for pane in self._panes:
            # stacked, a pane is as tall as its content asks at least (a plain widget: its size hint)
            policy, floor = (QSizePolicy.Policy.Minimum, self._side[pane][1]) if stack else self._side[pane]
            sizing = pane.sizePolicy()
            sizing.setVerticalPolicy(policy)
            pane.setSizePolicy(sizing)
            pane.setMinimumHeight(floor)
        for area, bar in self._bars.items():
            # stacked, a scroll area is as tall as its content: a scroll bar that came and went with each
            # re-wrap of the content would resize it without end
            area.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff if stack else bar)
        lead = self._panes[self._lead]
        order = [lead, *(p for p in self._panes if p is not lead)] if stack else self._panes
        for index, pane in enumerate(order):
            self.insertWidget(index, pane)
        for index in range(1, self.count()):
            self.handle(index).setEnabled(not stack)  # stacked panes are as tall as they need: nothing to drag
        if not stack and self._side_sizes:
            self.setSizes(self._side_sizes)
        self.updateGeometry()


def _content_height(area: QScrollArea) -> int:
    """How tall a scroll area must be to show its whole content at its width (no scrolling inside)."""
    content = area.widget()
    if content is None:
        return 0
    frame = 2 * area.frameWidth()
    height = content.heightForWidth(area.width() - frame)
    if height < 0:
        height = content.sizeHint().height()
    return max(height, content.minimumSizeHint().height()) + frame


def min_width(widget: QWidget) -> int:
    """The width a layout leaves a widget at least: its minimum width where one is set (it wins over
    the hint, as in Qt's layouts), else its minimum size hint."""
    return widget.minimumWidth() or max(0, widget.minimumSizeHint().width())


__all__ = ["AdaptiveSplitter", "min_width"]
