"""What the server did without saying so while a reply ran, under the reply: one compact coloured line per
event (severity, kind, what happened), its evidence and what to do in the tooltip and behind "Details"."""

from __future__ import annotations

import html
from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QVBoxLayout, QWidget

from app.core.watch.events import Severity, WatchEvent
from app.services.prompts import spoiled_note
from app.ui.widgets import theme

SEVERITY_COLOURS = {Severity.SEVERE: theme.ERROR, Severity.WARNING: theme.WARNING, Severity.INFO: theme.ACCENT}
EVENTS_STYLE = f"""
#ReplyEvent {{ background: #1f1a1c; border: none; border-left: 3px solid {theme.DIM}; border-radius: 4px; }}
#ReplyEvent QLabel {{ background: transparent; }}
#ReplyEventLine {{ color: {theme.TEXT}; font-size: 10.5pt; }}
#ReplyEventDetail {{ color: #b8bbc6; font-size: 10pt; }}
#ReplyEventToggle {{ background: transparent; border: none; color: {theme.DIM}; font-size: 10pt; padding: 0px 4px; }}
#ReplyEventToggle:hover {{ color: {theme.TEXT}; }}
#ReplyEventsNote {{ color: {theme.ERROR}; font-size: 10.5pt; font-weight: 600; }}
"""


def evidence_html(event: WatchEvent) -> str:
    """The event's evidence (source and text as given) and what to do, as rich text."""
    parts = [f"<b>{html.escape(ev.source.label)}:</b> <code>{html.escape(ev.text)}</code>" for ev in event.evidence]
    if event.advice:
        parts.append(f"<b>What to do:</b> {html.escape(event.advice)}")
    return "<br>".join(parts)


class EventRow(QFrame):
    """One event: a coloured line that says what happened, and its evidence and advice on demand."""

    def __init__(self, event: WatchEvent, parent: QWidget | None = None, *, replies: int = 1) -> None:
        super().__init__(parent)
        self.watch_event = event
        colour = SEVERITY_COLOURS.get(event.severity, theme.DIM)
        self.setObjectName("ReplyEvent")
        self.setStyleSheet(f"#ReplyEvent {{ border-left-color: {colour}; }}")
        self.line = QLabel(f"<span style='color:{colour}; font-weight:700'>{event.severity.name}</span>"
                           f"&nbsp; <b>{html.escape(event.kind.label)}</b> · {html.escape(event.summary)}"
                           + (f" <b>(in {replies} replies)</b>" if replies > 1 else "")
                           + f" <span style='color:{theme.DIM}'>{event.clock}</span>")
        self.line.setObjectName("ReplyEventLine")
        self.line.setWordWrap(True)
        self.line.setTextFormat(Qt.TextFormat.RichText)
        self.line.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        tip = evidence_html(event)
        self.line.setToolTip(tip)
        self.toggle = QToolButton()
        self.toggle.setObjectName("ReplyEventToggle")
        self.toggle.setText("Details ▸")
        self.toggle.setCheckable(True)
        self.toggle.setToolTip("Show the evidence and what to do")
        self.toggle.setCursor(Qt.CursorShape.PointingHandCursor)
        self.detail = QLabel(tip)
        self.detail.setObjectName("ReplyEventDetail")
        self.detail.setWordWrap(True)
        self.detail.setTextFormat(Qt.TextFormat.RichText)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.detail.hide()
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.setSpacing(6)
        top.addWidget(self.line, 1)
        top.addWidget(self.toggle, 0, Qt.AlignmentFlag.AlignTop)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 4, 4, 4)
        layout.setSpacing(3)
        layout.addLayout(top)
        layout.addWidget(self.detail)
        self.toggle.toggled.connect(self.set_expanded)

    def set_expanded(self, on: bool) -> None:
        """Show or hide the evidence and what to do."""
        self.detail.setVisible(on)
        self.toggle.setText("Details ▾" if on else "Details ▸")
        if self.toggle.isChecked() != on:
            self.toggle.setChecked(on)


class ReplyEvents(QWidget):
    """The events seen during one reply (hidden while there are none), with a line when they spoil it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setStyleSheet(EVENTS_STYLE)
        self.note = QLabel()
        self.note.setObjectName("ReplyEventsNote")
        self.note.setWordWrap(True)
        self.note.hide()
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 2, 0, 0)
        self._layout.setSpacing(4)
        self._layout.addWidget(self.note)
        self.rows: list[EventRow] = []
        self.hide()

    def show_events(self, events: Sequence[WatchEvent], *, per_reply: Sequence[Sequence[WatchEvent]] = ()) -> None:
        """Show these events, oldest first (none: nothing shows). With `per_reply` (the events of several
        replies at once, as a burst's), an event kind seen by several replies is one line that says how many."""
        for row in self.rows:
            self._layout.removeWidget(row)
            row.deleteLater()
        if per_reply:
            first: dict[tuple[object, str], WatchEvent] = {}
            replies: dict[tuple[object, str], int] = {}
            for seen in per_reply:
                for key in dict.fromkeys((e.kind, e.subject) for e in seen):
                    replies[key] = replies.get(key, 0) + 1
                for e in seen:
                    if (e.kind, e.subject) not in first or e.at < first[(e.kind, e.subject)].at:
                        first[(e.kind, e.subject)] = e
            events = sorted(first.values(), key=lambda e: e.at)
            self.rows = [EventRow(e, replies=replies[(e.kind, e.subject)]) for e in events]
        else:
            self.rows = [EventRow(e) for e in events]
        for row in self.rows:
            self._layout.addWidget(row)
        note = spoiled_note(events, pointer="")  # the events follow right under it
        self.note.setText(f"⚠ {note}" if note else "")
        self.note.setVisible(bool(note))
        self.setVisible(bool(self.rows))

    @property
    def events(self) -> tuple[WatchEvent, ...]:
        """The events shown."""
        return tuple(row.watch_event for row in self.rows)


__all__ = ["EVENTS_STYLE", "EventRow", "ReplyEvents", "SEVERITY_COLOURS", "evidence_html"]
