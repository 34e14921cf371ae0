"""Severe events said where people look: a desktop notification through the system tray where the desktop
has one, else a toast in the window's corner. At most one per kind of event a minute, and none while the
user turned them off."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import QFrame, QLabel, QPushButton, QSystemTrayIcon, QVBoxLayout, QWidget, QHBoxLayout

from app.core.watch.events import EventKind, Severity, WatchEvent

PER_KIND_S = 60.0  # one notification per kind of event per this many seconds
STALE_S = 60.0  # an event that happened longer ago than this (wall-clock seconds) is not notified
SHOW_MS = 10_000  # how long a notification or toast stays
TOAST_WIDTH_PX = 440
BODY_CHARS = 220  # a longer summary is cut at a word: the dashboard's Events tab has it whole


class Tray(Protocol):
    """The part of QSystemTrayIcon a notification needs (a fake in tests)."""

    def showMessage(self, title: str, msg: str, icon: QSystemTrayIcon.MessageIcon,  # noqa: N802 - Qt's name
                    msecs: int = ...) -> None:
        """Show a desktop notification."""
        ...


def notification_text(event: WatchEvent) -> tuple[str, str]:
    """The title and body of an event's notification."""
    title = f"ollama-deck: {event.kind.label}"
    body = event.summary
    if len(body) > BODY_CHARS:
        body = body[:BODY_CHARS].rsplit(" ", 1)[0].rstrip(",;:") + " …"
    if event.subject:
        body += f"\n({event.subject})"
    return title, body


class Toast(QFrame):
    """A message in the bottom-right corner of `window`, over its pages, gone after SHOW_MS or on a click."""

    clicked = Signal()

    def __init__(self, window: QWidget) -> None:
        super().__init__(window)
        self.setObjectName("Toast")
        self.setStyleSheet("#Toast { background: #3a1d24; border: 2px solid #ff4f6a; border-radius: 10px; }"
                           "#Toast QLabel { background: transparent; color: #f2f3f5; }"
                           "#ToastTitle { font-size: 12pt; font-weight: 700; color: #ff8095; }"
                           "#Toast QPushButton { background: transparent; color: #c3c6cf; border: none; "
                           "font-size: 12pt; padding: 0 4px; }")
        self.setFixedWidth(TOAST_WIDTH_PX)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(14, 10, 10, 12)
        lay.setSpacing(4)
        top = QHBoxLayout()
        self.title = QLabel()
        self.title.setObjectName("ToastTitle")
        self.title.setWordWrap(True)
        close = QPushButton("✕")
        close.setObjectName("ToastClose")
        close.setCursor(Qt.CursorShape.PointingHandCursor)
        close.clicked.connect(self.hide)
        top.addWidget(self.title, 1)
        top.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.body = QLabel()
        self.body.setWordWrap(True)
        hint = QLabel("Click for the evidence and what to do.")
        hint.setStyleSheet("color: #c3c6cf;")
        lay.addLayout(top)
        lay.addWidget(self.body)
        lay.addWidget(hint)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.hide)
        window.installEventFilter(self)
        self.hide()

    def show_message(self, title: str, body: str) -> None:
        """Show (or replace) the message, for SHOW_MS."""
        self.title.setText(title)
        self.body.setText(body)
        self.adjustSize()
        self._place()
        self.show()
        self.raise_()
        self._timer.start(SHOW_MS)

    def mousePressEvent(self, event: object) -> None:  # noqa: N802 - Qt override
        self.clicked.emit()
        self.hide()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if event.type() == QEvent.Type.Resize and self.isVisible():
            self._place()
        return False

    def _place(self) -> None:
        parent = self.parentWidget()
        if parent is None:
            return
        margin = 18
        layout = self.layout()
        height = layout.totalHeightForWidth(self.width()) if layout is not None else self.sizeHint().height()
        self.setFixedHeight(max(height, self.sizeHint().height()))
        self.move(max(0, parent.width() - self.width() - margin), max(0, parent.height() - self.height() - margin))


class SevereNotifier(QObject):
    """Says each SEVERE event through `tray` (a desktop notification) or, without one, `toast`; one per kind
    per PER_KIND_S seconds. Connect a WatchBridge's event_seen to `on_event`."""

    notified = Signal(object)  # WatchEvent said

    def __init__(self, *, tray: Tray | None, toast: Toast | None, enabled: bool = True,
                 clock: Callable[[], float] = time.monotonic, per_kind_s: float = PER_KIND_S,
                 wall: Callable[[], float] = time.time, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.tray = tray
        self.toast = toast
        self.enabled = enabled
        self._clock = clock
        self._wall = wall
        self._per_kind_s = per_kind_s
        self._last: dict[EventKind, float] = {}

    def set_enabled(self, enabled: bool) -> None:
        """Notify (True) or stay quiet (False)."""
        self.enabled = enabled

    def on_event(self, event: WatchEvent) -> None:
        """A new event (GUI thread): said when it is severe, recent, notifications are on and its kind was not
        said in the last minute."""
        if event.severity < Severity.SEVERE or not self.enabled:
            return
        now = self._clock()
        if self._wall() - event.at > STALE_S:
            return  # read from a log's backlog: it happened before anyone was watching, the list has it
        last = self._last.get(event.kind)
        if last is not None and now - last < self._per_kind_s:
            return
        self._last[event.kind] = now
        title, body = notification_text(event)
        if self.tray is not None:
            self.tray.showMessage(title, body, QSystemTrayIcon.MessageIcon.Critical, SHOW_MS)
        elif self.toast is not None:
            self.toast.show_message(title, body)
        else:
            return
        self.notified.emit(event)


def system_tray(icon_owner: QWidget) -> QSystemTrayIcon | None:
    """A tray icon with the window's icon where the desktop has a system tray, else None."""
    if not QSystemTrayIcon.isSystemTrayAvailable():
        return None
    tray = QSystemTrayIcon(icon_owner.windowIcon(), icon_owner)
    tray.setToolTip("ollama-deck")
    tray.show()
    return tray


__all__ = ["PER_KIND_S", "SevereNotifier", "Toast", "Tray", "notification_text", "system_tray"]
