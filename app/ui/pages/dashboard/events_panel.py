"""The dashboard's list of the watchdog's events: newest first (time, severity, what, summary), a severity
filter, and for the event selected its evidence and what to do. Clearing empties the view only: the
watchdog keeps its history (replies, sweeps and the history still see every event)."""

from __future__ import annotations

import html
from collections.abc import Iterable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QTextBrowser,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core.watch.events import Severity, WatchEvent
from app.ui.pages.dashboard.event_marks import SEVERITY_COLOURS

# The filter's choices: the lowest severity shown.
FILTERS: tuple[tuple[str, Severity], ...] = (
    ("All events", Severity.INFO), ("Warnings and severe", Severity.WARNING), ("Severe only", Severity.SEVERE))
COLUMNS = ("Time", "Severity", "What", "Summary")
MAX_ROWS = 2000  # the oldest rows leave the view beyond this (the watchdog keeps as many)
EMPTY_TEXT = ("No events. The watchdog reads the server's log, its loaded models, slots and counters, and the GPU, "
              "and lists here what the server does without saying so.")
PANEL_STYLE = """
#EventsPanel QTreeWidget { background: #1e1f24; border: 1px solid #30323b; border-radius: 8px; font-size: 11pt; }
#EventsPanel QTreeWidget::item { padding: 4px 2px; }
#EventsPanel QTextBrowser { background: #1e1f24; border: 1px solid #30323b; border-radius: 8px; font-size: 11pt;
                            padding: 6px; }
"""


class EventsPanel(QWidget):
    """The event list; `count_changed` carries how many events the view holds (cleared ones not counted)."""

    count_changed = Signal(int)
    event_selected = Signal(object)  # WatchEvent | None

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("EventsPanel")
        self.setStyleSheet(PANEL_STYLE)
        self._events: list[WatchEvent] = []  # in the view, oldest first
        self._items: dict[int, QTreeWidgetItem] = {}  # id(event) -> its row

        root = QVBoxLayout(self)
        root.setContentsMargins(0, 6, 0, 0)
        root.setSpacing(6)
        bar = QHBoxLayout()
        bar.setSpacing(8)
        shown = QLabel("Show")
        shown.setObjectName("DashDim")
        self.filter_combo = QComboBox()
        self.filter_combo.setObjectName("EventsFilter")
        for text, severity in FILTERS:
            self.filter_combo.addItem(text, int(severity))
        self.filter_combo.currentIndexChanged.connect(lambda _i: self._apply_filter())
        self.notify_check = QCheckBox("Notify severe events")  # short: the bar fits 1280x720 at --scale 1.5
        self.notify_check.setObjectName("EventsNotify")
        self.notify_check.setChecked(True)
        self.notify_check.setToolTip("A desktop notification for severe events, at most one per kind of event "
                                     "a minute.")
        self.clear_button = QPushButton("Clear view")
        self.clear_button.setObjectName("EventsClear")
        self.clear_button.setToolTip("Empty this list and the plots' markers; the events are still kept for "
                                     "replies, sweeps and the history.")
        self.clear_button.clicked.connect(self.clear)
        bar.addWidget(shown)
        bar.addWidget(self.filter_combo)
        bar.addSpacing(12)
        bar.addWidget(self.notify_check)
        bar.addStretch(1)
        bar.addWidget(self.clear_button)
        root.addLayout(bar)

        self.tree = QTreeWidget()
        self.tree.setObjectName("EventsList")
        self.tree.setColumnCount(len(COLUMNS))
        self.tree.setHeaderLabels(list(COLUMNS))
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(False)
        self.tree.setSelectionMode(QTreeWidget.SelectionMode.SingleSelection)
        self.tree.setTextElideMode(Qt.TextElideMode.ElideRight)
        header = self.tree.header()
        header.setStretchLastSection(True)
        for col in range(3):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        self.tree.currentItemChanged.connect(lambda _cur, _prev: self._show_selected())
        self.detail = QTextBrowser()
        self.detail.setObjectName("EventDetail")
        self.detail.setOpenLinks(False)
        self.empty = QLabel(EMPTY_TEXT)
        self.empty.setObjectName("DashDim")
        self.empty.setWordWrap(True)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(self.tree)
        self.splitter.addWidget(self.detail)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 2)
        self.splitter.setChildrenCollapsible(False)
        root.addWidget(self.empty)
        root.addWidget(self.splitter, 1)
        self._show_selected()
        self._show_empty()

    # --- public API -----------------------------------------------------------------------
    @property
    def events(self) -> tuple[WatchEvent, ...]:
        """The events in the view (after the last clear), oldest first, whatever the filter."""
        return tuple(self._events)

    @property
    def shown(self) -> tuple[WatchEvent, ...]:
        """The events the filter lets through, newest first, as listed."""
        return tuple(e for e in reversed(self._events) if e.severity >= self.min_severity)

    @property
    def min_severity(self) -> Severity:
        """The lowest severity listed."""
        return Severity(int(self.filter_combo.currentData()))

    def set_min_severity(self, severity: Severity) -> None:
        """List only events at least this severe."""
        self.filter_combo.setCurrentIndex(next(i for i, (_t, s) in enumerate(FILTERS) if s == severity))

    def add(self, events: Iterable[WatchEvent]) -> None:
        """New events (in the order seen); listed newest first."""
        added = False
        for event in events:
            self._events.append(event)
            item = self._item(event)
            self._items[id(event)] = item
            self.tree.insertTopLevelItem(0, item)
            item.setHidden(event.severity < self.min_severity)
            added = True
        while len(self._events) > MAX_ROWS:
            oldest = self._events.pop(0)
            row = self._items.pop(id(oldest), None)
            if row is not None:
                self.tree.takeTopLevelItem(self.tree.indexOfTopLevelItem(row))
        if added:
            self._show_empty()
            self.count_changed.emit(len(self._events))

    def clear(self) -> None:
        """Empty the view (the watchdog keeps its history)."""
        self._events.clear()
        self._items.clear()
        self.tree.clear()
        self._show_selected()
        self._show_empty()
        self.count_changed.emit(0)

    def select(self, event: WatchEvent) -> None:
        """Select `event`'s row (shows its evidence); the filter is widened if it hid it."""
        item = self._items.get(id(event))
        if item is None:
            return
        if item.isHidden():
            self.set_min_severity(Severity.INFO)
        self.tree.setCurrentItem(item)
        self.tree.scrollToItem(item)

    def selected(self) -> WatchEvent | None:
        """The event selected, None when none."""
        item = self.tree.currentItem()
        if item is None or item.isHidden():
            return None
        found = item.data(0, Qt.ItemDataRole.UserRole)
        return found if isinstance(found, WatchEvent) else None

    # --- internals ------------------------------------------------------------------------
    def _item(self, e: WatchEvent) -> QTreeWidgetItem:
        item = QTreeWidgetItem([e.clock, e.severity.label, e.kind.label, e.summary])
        item.setData(0, Qt.ItemDataRole.UserRole, e)
        colour = QBrush(QColor(SEVERITY_COLOURS[e.severity]))
        bold = QFont()
        bold.setBold(True)
        item.setForeground(1, colour)
        item.setFont(1, bold)
        item.setForeground(2, colour)
        item.setToolTip(3, e.summary)
        return item

    def _apply_filter(self) -> None:
        floor = self.min_severity
        for e in self._events:
            item = self._items.get(id(e))
            if item is not None:
                item.setHidden(e.severity < floor)
        self._show_selected()

    def _show_empty(self) -> None:
        self.empty.setVisible(not self._events)
        self.splitter.setVisible(bool(self._events))

    def _show_selected(self) -> None:
        event = self.selected()
        self.detail.setHtml(details_html(event) if event is not None else
                            "<p style='color:#8b8e99'>Select an event to see its evidence and what to do.</p>")
        self.event_selected.emit(event)


def details_html(e: WatchEvent) -> str:
    """An event for people: what happened, when and to what, the evidence as read, and what to do."""
    colour = SEVERITY_COLOURS[e.severity]
    parts = [f"<p style='margin:0 0 6px 0'><b style='color:{colour}'>{e.severity.label.upper()}</b> "
             f"<b style='font-size:13pt'>{html.escape(e.kind.label)}</b> · {e.clock}</p>"
             + (f"<p style='margin:0 0 6px 0; color:#a3a7b3'>{html.escape(e.subject)}</p>" if e.subject else ""),
             f"<p style='margin:0 0 8px 0'>{html.escape(e.summary)}</p>"]
    for ev in e.evidence:
        figures = ", ".join(f"{html.escape(k)} {v:g}" for k, v in ev.figures.items())
        parts.append(f"<p style='margin:0 0 2px 0; color:#a3a7b3'>Evidence ({html.escape(ev.source.label)})</p>"
                     f"<pre style='white-space: pre-wrap; margin:0 0 4px 0; font-size:10pt'>"
                     f"{html.escape(ev.text)}</pre>"
                     + (f"<p style='margin:0 0 8px 0; color:#a3a7b3'>{figures}</p>" if figures else ""))
    if e.advice:
        parts.append(f"<p style='margin:6px 0 0 0'><b>What to do:</b> {html.escape(e.advice)}</p>")
    if e.spoils_measurement:
        parts.append("<p style='margin:6px 0 0 0; color:#a3a7b3'>Figures measured while this happened are not "
                     "the settings' own.</p>")
    return "".join(parts)


__all__ = ["COLUMNS", "EventsPanel", "FILTERS", "details_html"]
