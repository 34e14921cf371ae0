"""View-model of what the server says about itself: its state, its log and the models it has loaded."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import threading
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from app.core.errors import DeckError
from app.core.models import RunningModel
from app.core.ports.catalog import CatalogFactory
from app.core.server.state import ServerState, ServerStatus
from app.ui.server.loop_gate import LoopGate

log = logging.getLogger(__name__)

PS_POLL_S = 2.0
LOG_FLUSH_MS = 100  # log lines reach the page at most ten times a second, however fast they come
LOG_LINES_PENDING = 5000


class StatusPoller(QObject):
    """Turns the supervisor's callbacks (loop thread) into queued signals, and while the server runs
    reads its loaded models every PS_POLL_S seconds."""

    status_changed = Signal(object)  # ServerStatus
    log_lines = Signal(list)  # list[str], batched
    running_models_changed = Signal(list)  # list[RunningModel]
    version_changed = Signal(str)

    def __init__(self, gate: LoopGate, catalog: CatalogFactory, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._gate = gate
        self._catalog = catalog
        self._status = ServerStatus(ServerState.STOPPED)
        self._pending_lines: collections.deque[str] = collections.deque(maxlen=LOG_LINES_PENDING)
        self._lines_lock = threading.Lock()
        self._ps_future: concurrent.futures.Future[None] | None = None
        self._last_models: list[RunningModel] = []
        self._loaded_taps: list[Callable[[list[RunningModel]], None]] = []
        self._log_timer = QTimer(self)
        self._log_timer.setInterval(LOG_FLUSH_MS)
        self._log_timer.timeout.connect(self._flush_log)
        self._log_timer.start()
        self.status_changed.connect(self._remember_status)

    @property
    def status(self) -> ServerStatus:
        """The latest status seen on the GUI thread."""
        return self._status

    def reset(self, status: ServerStatus) -> None:
        """Start from this status (a supervisor was attached)."""
        self._status = status

    def tap_loaded(self, tap: Callable[[list[RunningModel]], None]) -> None:
        """Also hand every successful read of the loaded models to `tap`, on the loop thread."""
        self._loaded_taps.append(tap)

    # --- callbacks from the loop thread -------------------------------------------------
    def on_status(self, status: ServerStatus) -> None:
        """Supervisor callback (loop thread): re-emitted as a queued signal, after the log lines the server wrote
        before it. Lines wait for the next flush, a status does not: without this a stopped server's last lines
        (its launch line among them) reached the GUI after the next server's start, as if the new one wrote them."""
        with self._lines_lock:
            lines = list(self._pending_lines)
            self._pending_lines.clear()
        if lines:
            self.log_lines.emit(lines)  # queued from this thread in order, before the status
        self.status_changed.emit(status)

    def on_log(self, line: str) -> None:
        """Supervisor callback (loop thread): buffered, flushed on the GUI thread."""
        with self._lines_lock:
            self._pending_lines.append(line)

    # --- GUI thread -----------------------------------------------------------------------
    def _flush_log(self) -> None:
        with self._lines_lock:
            if not self._pending_lines:
                return
            lines = list(self._pending_lines)
            self._pending_lines.clear()
        self.log_lines.emit(lines)

    def _remember_status(self, status: ServerStatus) -> None:
        self._status = status
        if status.version:
            self.version_changed.emit(status.version)
        if status.state.is_running:
            self._ensure_ps_poll()
        else:
            self.running_models_changed.emit([])

    def _ensure_ps_poll(self) -> None:
        if self._ps_future is None or self._ps_future.done():
            self._ps_future = self._gate.submit(self._poll_ps())

    async def _poll_ps(self) -> None:
        """While the server runs, read its loaded models every few seconds and publish changes."""
        server = self._gate.server
        client = self._catalog(server.settings.base_url)
        try:
            while server.status.state.is_running:
                try:
                    models = await client.ps()
                except DeckError:
                    models = []
                else:
                    for tap in self._loaded_taps:
                        try:
                            tap(models)
                        except Exception:  # noqa: BLE001 - a tap must not stop the polling
                            log.exception("a loaded-models tap failed")
                if models != self._last_models:
                    self._last_models = models
                    self.running_models_changed.emit(models)
                await asyncio.sleep(PS_POLL_S)
        finally:
            await client.aclose()

    def stop(self) -> None:
        """Stop flushing and polling (on quit)."""
        self._log_timer.stop()
        if self._ps_future is not None:
            self._ps_future.cancel()


__all__ = ["PS_POLL_S", "StatusPoller"]
