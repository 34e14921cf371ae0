"""The fleet monitor's snapshots on the GUI thread: it polls on the app's asyncio loop, and each snapshot is
re-emitted as a queued signal."""

from __future__ import annotations

import concurrent.futures

from PySide6.QtCore import QObject, Signal

from app.core.fleet_status import FleetSnapshot
from app.core.ports.tasks import CoroutineRunner
from app.services.fleet import POLL_INTERVAL_S, FleetMonitor


class FleetFeed(QObject):
    """Runs `monitor` on `loop` from start() until stop(); `snapshot_ready` carries every FleetSnapshot."""

    snapshot_ready = Signal(object)  # FleetSnapshot

    def __init__(self, monitor: FleetMonitor, loop: CoroutineRunner, *, interval_s: float = POLL_INTERVAL_S,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.monitor = monitor
        self._loop = loop
        self.interval_s = interval_s
        self._future: concurrent.futures.Future[None] | None = None
        self._closed = False

    @property
    def running(self) -> bool:
        return self._future is not None and not self._future.done()

    def start(self) -> None:
        if not self.running:
            self._future = self._loop.submit_unless(self._closed, self.monitor.run(self._deliver, self.interval_s))

    def _deliver(self, snapshot: FleetSnapshot) -> None:
        # The loop thread: the signal is queued to the GUI thread's receivers.
        self.snapshot_ready.emit(snapshot)

    def stop(self) -> None:
        """Stop polling for good (the monitor closes its clients on the loop thread)."""
        self._closed = True
        if self._future is not None:
            self._future.cancel()
            self._future = None


__all__ = ["FleetFeed"]
