"""A service's news on the GUI thread: a bridge subscribes to a Qt-free service and re-emits each value as its
own signal, from whichever thread the service told it on, delivered queued to receivers on the GUI thread."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject


class ListenerBridge(QObject):
    """The subscription and its end; a subclass declares its signal and emits it in `_deliver`. close() ends the
    subscription (a page going away must not be called), and so does the bridge's destruction."""

    def __init__(self, subscribe: Callable[[Callable[[Any], None]], Callable[[], None]],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._open = True
        self._open_lock = threading.Lock()
        self._unsubscribe = subscribe(self._on_value)
        self.destroyed.connect(lambda *_: self.close())

    def _on_value(self, value: Any) -> None:
        # Any thread. The lock keeps close() from returning while an emit is under way.
        with self._open_lock:
            if self._open:
                self._deliver(value)

    def _deliver(self, value: Any) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Stop passing values on; later calls do nothing."""
        with self._open_lock:
            if not self._open:
                return
            self._open = False
        self._unsubscribe()


__all__ = ["ListenerBridge"]
