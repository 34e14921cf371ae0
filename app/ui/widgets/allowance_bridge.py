"""The learnt runtime allowance on the GUI thread: the learner tells of a new figure on whichever thread fed it
the reading; this bridge re-emits it queued to receivers on the GUI thread."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Signal

from app.services.runtime_learner import RuntimeLearner
from app.ui.widgets.listener_bridge import ListenerBridge


class AllowanceBridge(ListenerBridge):
    """Subscribes to a RuntimeLearner and re-emits each new figure as `changed` (queued to the GUI thread); the
    subscription ends with close() or when the bridge is destroyed with its parent."""

    changed = Signal(object)  # RuntimeAllowance

    def __init__(self, learner: RuntimeLearner, parent: QObject | None = None) -> None:
        super().__init__(learner.subscribe, parent)

    def _deliver(self, value: Any) -> None:
        self.changed.emit(value)


__all__ = ["AllowanceBridge"]
