"""The watchdog's events on the GUI thread: a Qt signal emitted by whichever thread raised the event,
delivered queued to receivers that live on the GUI thread."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Signal

from app.services.watchdog import Watchdog
from app.ui.widgets.listener_bridge import ListenerBridge


class WatchBridge(ListenerBridge):
    """Subscribes to a Watchdog and re-emits each new event as `event_seen` (queued to the GUI thread);
    close() ends the subscription (the watchdog keeps its history)."""

    event_seen = Signal(object)  # WatchEvent

    def __init__(self, watchdog: Watchdog, parent: QObject | None = None) -> None:
        super().__init__(watchdog.subscribe, parent)

    def _deliver(self, value: Any) -> None:
        self.event_seen.emit(value)


__all__ = ["WatchBridge"]
