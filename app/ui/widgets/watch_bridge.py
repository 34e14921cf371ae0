"""The watchdog's events on the GUI thread: a Qt signal emitted by whichever thread raised the event,
delivered queued to receivers that live on the GUI thread."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Signal

from app.core.watch.events import WatchEvent
from app.services.watchdog import Watchdog


class WatchBridge(QObject):
    """Subscribes to a Watchdog and re-emits each new event as `event_seen` (queued to the GUI thread);
    close() ends the subscription (a page going away must not be called)."""

    event_seen = Signal(object)  # WatchEvent

    def __init__(self, watchdog: Watchdog, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._open = True
        self._open_lock = threading.Lock()
        self._unsubscribe = watchdog.subscribe(self._on_event)

    def _on_event(self, event: WatchEvent) -> None:
        # Any thread. The lock keeps close() from returning while an emit is under way.
        with self._open_lock:
            if self._open:
                self.event_seen.emit(event)

    def close(self) -> None:
        """Stop passing events on (the watchdog keeps its history); later calls do nothing."""
        with self._open_lock:
            if not self._open:
                return
            self._open = False
        self._unsubscribe()


__all__ = ["WatchBridge"]
