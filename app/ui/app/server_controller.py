"""View-model for the server: runs supervisor work on the asyncio loop, reports through Qt signals."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import threading
from typing import Any
from collections.abc import Callable, Coroutine

from PySide6.QtCore import QObject, QTimer, Signal

from app.adapters.aio import refused
from app.core.errors import DeckError
from app.core.model_shape import shape_from_show
from app.core.server.state import ServerState, ServerStatus
from app.core.server.settings import ServerSettings

log = logging.getLogger(__name__)

PS_POLL_S = 2.0


class ServerController(QObject):
    """Owns no I/O itself: it schedules the supervisor's coroutines on the loop thread and turns
    their results and callbacks into queued signals, so widgets only ever run on the GUI thread."""

    status_changed = Signal(object)  # ServerStatus
    log_lines = Signal(list)  # list[str], batched at most ~10 times a second
    running_models_changed = Signal(list)  # list[RunningModel]
    version_changed = Signal(str)
    busy_changed = Signal(bool)
    error = Signal(str)  # a user-facing message
    settings_applied = Signal(object)  # ServerSettings now in force (saved)
    apply_checked = Signal(object)  # ApplyReport after a guarded apply
    models_listed = Signal(list)  # list[LocalModel] from /api/tags
    model_shape_ready = Signal(str, object, str)  # name, ModelShape | None, error text
    held_changed = Signal(str)  # why start/stop/apply are reserved (a sweep owns the server); "" when free

    def __init__(
        self,
        loop: Any,
        supervisor: Any,
        client_factory: Callable[[str], Any],
        save_settings: Callable[[ServerSettings], None],
        parent: QObject | None = None,
        applier: Any = None,
        last_good: ServerSettings | None = None,
    ) -> None:
        super().__init__(parent)
        self._loop = loop
        self._supervisor = supervisor
        self._client_factory = client_factory
        self._save_settings = save_settings
        self._applier = applier  # GuardedApplier: verify a managed restart and roll back if it broke
        self.last_good: ServerSettings | None = last_good
        self._pending_lines: collections.deque[str] = collections.deque(maxlen=5000)
        self._lines_lock = threading.Lock()
        self._busy = 0
        self._busy_lock = threading.Lock()
        self._closed = False
        self._held_by = ""
        self._status: ServerStatus = ServerStatus(ServerState.STOPPED) if supervisor is None else supervisor.status
        self.probed = False  # True once the first probe finished (used by --screenshot)
        self._ps_future: concurrent.futures.Future | None = None
        self._last_models: list = []
        self._log_timer = QTimer(self)
        self._log_timer.setInterval(100)
        self._log_timer.timeout.connect(self._flush_log)
        self._log_timer.start()
        self.status_changed.connect(self._remember_status)

    def attach_supervisor(self, supervisor: Any, applier: Any = None) -> None:
        """Set the supervisor (and its guarded applier) when they need this controller's callbacks."""
        self._supervisor = supervisor
        self._status = supervisor.status
        if applier is not None:
            self._applier = applier

    # --- callbacks from the loop thread -------------------------------------------------
    def on_status(self, status: ServerStatus) -> None:
        """Supervisor callback (loop thread): re-emitted as a queued signal."""
        self.status_changed.emit(status)

    def on_log(self, line: str) -> None:
        """Supervisor callback (loop thread): buffered, flushed on the GUI thread."""
        with self._lines_lock:
            self._pending_lines.append(line)

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

    # --- actions (GUI thread) -------------------------------------------------------------
    @property
    def held_reason(self) -> str:
        """Non-empty while something else (a benchmark sweep) owns the server's lifecycle."""
        return self._held_by

    def hold(self, reason: str) -> None:
        """Reserve the server: start, stop and apply are refused with `reason` until release()."""
        self._held_by = reason
        self.held_changed.emit(reason)

    def release(self) -> None:
        if self._held_by:
            self._held_by = ""
            self.held_changed.emit("")

    def _run_unless_held(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future:
        if self._held_by:
            self.error.emit(self._held_by)
            return refused(coro)
        return self._run(coro)

    @property
    def status(self) -> ServerStatus:
        return self._status

    @property
    def settings(self) -> ServerSettings:
        return self._supervisor.settings

    def probe(self) -> concurrent.futures.Future:
        """Find the binary and look at host:port."""

        async def work() -> ServerStatus:
            try:
                return await self._supervisor.probe()
            finally:
                self.probed = True

        return self._run(work())

    def start(self) -> concurrent.futures.Future:
        """Start a managed server (or attach to one that already answers)."""
        return self._run_unless_held(self._supervisor.start())

    def stop(self) -> concurrent.futures.Future:
        """Stop the managed server; refused for an attached one."""
        return self._run_unless_held(self._supervisor.stop())

    def apply(self, settings: ServerSettings, then_start: bool = False, model: str | None = None,
              predicted: Any = None) -> concurrent.futures.Future:
        """Save the settings; restart a managed server with them (verified with `model` against
        `predicted` when a guarded applier is set, rolling back if it broke), or start one if asked."""

        async def save(s: ServerSettings) -> None:
            await asyncio.get_running_loop().run_in_executor(None, self._save_settings, s)
            self.settings_applied.emit(s)

        async def work() -> ServerStatus:
            await save(settings)
            state = self._supervisor.status.state
            if state is ServerState.RUNNING_MANAGED and self._applier is not None:
                report = await self._applier.apply(settings, self.last_good or settings, model, predicted)
                if report.judgement.keep:
                    self.last_good = settings
                elif report.restored is not None:
                    await save(report.restored)
                self.apply_checked.emit(report)
                return self._supervisor.status
            if state.is_running:
                # Managed: restart with the settings. Attached: only refreshes how to apply them.
                return await self._supervisor.restart(settings)
            self._supervisor.settings = settings
            if then_start:
                status = await self._supervisor.start()
                if status.state is ServerState.RUNNING_MANAGED:
                    self.last_good = settings
                return status
            return await self._supervisor.probe()

        return self._run_unless_held(work())

    def publish_models(self, models: list) -> None:
        """Pass a model list read elsewhere (the Models page) to every page that shows one."""
        self.models_listed.emit(list(models))

    def list_models(self) -> concurrent.futures.Future:
        """Read /api/tags; the result arrives as models_listed."""

        async def work() -> None:
            async with self._client_factory(self._supervisor.settings.base_url) as client:
                self.models_listed.emit(await client.tags())

        return self._submit(work())

    def fetch_model_shape(self, name: str) -> concurrent.futures.Future:
        """Read a model's metadata (/api/show verbose + its size); arrives as model_shape_ready."""

        async def work() -> None:
            try:
                async with self._client_factory(self._supervisor.settings.base_url) as client:
                    details = await client.show(name, verbose=True)
                    sizes = {m.name: m.size_bytes for m in await client.tags()}
                show = details.show_dict()
                shape = shape_from_show(show, sizes.get(name, 0))
            except DeckError as exc:
                self.model_shape_ready.emit(name, None, f"Cannot price {name}: {exc.user_text()}")
            else:
                self.model_shape_ready.emit(name, shape, "")

        return self._submit(work())

    def server_pids(self) -> list[int]:
        """PIDs of the server process tree (thread-safe read for the sampler)."""
        try:
            return list(self._supervisor.server_pids())
        except Exception:  # a vanished process must never break sampling
            return []

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stop polling and the managed server (blocking; call on quit)."""
        if self._closed:
            return
        self._closed = True
        self._log_timer.stop()
        if self._ps_future is not None:
            self._ps_future.cancel()
        try:
            self._loop.run(self._supervisor.close(), timeout=timeout_s)
        except Exception as exc:  # quitting must go on even if the server misbehaves
            log.warning("closing the supervisor failed: %s", exc)

    # --- internals ------------------------------------------------------------------------
    def _submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future:
        """Schedule on the loop; after shutdown nothing runs (a late signal must not reach a closed loop)."""
        return self._loop.submit_unless(self._closed, coro)

    def _run(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future:
        fut = self._submit(coro)
        if fut.cancelled():
            return fut
        self._set_busy(+1)
        fut.add_done_callback(self._done)
        return fut

    def _done(self, fut: concurrent.futures.Future) -> None:
        # Runs on the loop thread: only emit signals here.
        if not fut.cancelled() and fut.exception() is not None:
            exc = fut.exception()
            text = exc.user_text() if isinstance(exc, DeckError) else f"Unexpected error: {exc!r}"
            self.error.emit(text)
        self._set_busy(-1)

    def _set_busy(self, delta: int) -> None:
        # Called from the GUI thread (submit) and the loop thread (done): guard the counter.
        with self._busy_lock:
            before = self._busy
            self._busy += delta
            after = self._busy
        if before == 0 and after > 0:
            self.busy_changed.emit(True)
        elif before > 0 and after == 0:
            self.busy_changed.emit(False)

    def _ensure_ps_poll(self) -> None:
        if self._ps_future is None or self._ps_future.done():
            self._ps_future = self._submit(self._poll_ps())

    async def _poll_ps(self) -> None:
        """While the server runs, read /api/ps every few seconds and publish changes."""
        client = self._client_factory(self._supervisor.settings.base_url)
        try:
            while self._supervisor.status.state.is_running:
                try:
                    models = await client.ps()
                except DeckError:
                    models = []
                if models != self._last_models:
                    self._last_models = models
                    self.running_models_changed.emit(models)
                await asyncio.sleep(PS_POLL_S)
        finally:
            await client.aclose()

