"""The learnt runtime allowance on the GUI thread: the learner tells of a new figure on whichever thread fed it
the reading; this bridge re-emits it queued to receivers on the GUI thread."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Signal

from app.core.memory.allowance import RuntimeAllowance
from app.services.runtime_learner import RuntimeLearner


class AllowanceBridge(QObject):
    """Subscribes to a RuntimeLearner and re-emits each new figure as `changed` (queued to the GUI thread); the
    subscription ends with close() or when the bridge is destroyed with its parent."""

    changed = Signal(object)  # RuntimeAllowance

    def __init__(self, learner: RuntimeLearner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._open = True
        self._open_lock = threading.Lock()
        self._unsubscribe = learner.subscribe(self._on_change)
        self.destroyed.connect(lambda *_: self.close())

    def _on_change(self, allowance: RuntimeAllowance) -> None:
        with self._open_lock:  # any thread; close() does not return while an emit is under way
            if self._open:
                self.changed.emit(allowance)

    def close(self) -> None:
        """Stop passing figures on; later calls do nothing."""
        with self._open_lock:
            if not self._open:
                return
            self._open = False
        self._unsubscribe()


__all__ = ["AllowanceBridge"]
