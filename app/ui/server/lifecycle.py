"""View-model of the server's lifecycle: probe, start, stop and apply, the rules around them
(a held server refuses them; a managed restart is verified and rolled back), and the busy state."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from PySide6.QtCore import QObject, Signal

from app.adapters.aio import refused
from app.core.errors import DeckError
from app.core.memory.estimator import VramEstimate
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState, ServerStatus
from app.services.guarded_apply import GuardedApplier
from app.ui.server.loop_gate import LoopGate

T = TypeVar("T")


class ServerLifecycle(QObject):
    """Schedules the supervisor's coroutines on the loop; results and failures come back as signals."""

    busy_changed = Signal(bool)
    error = Signal(str)  # a user-facing message
    settings_applied = Signal(object)  # ServerSettings now in force (saved)
    apply_checked = Signal(object)  # ApplyReport after a guarded apply
    held_changed = Signal(str)  # why start/stop/apply are reserved (a sweep owns the server); "" when free

    def __init__(self, gate: LoopGate, save_settings: Callable[[ServerSettings], object],
                 applier: GuardedApplier | None = None, last_good: ServerSettings | None = None,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._gate = gate
        self._save_settings = save_settings
        self.applier = applier  # verifies a managed restart and rolls back if it broke
        self.last_good: ServerSettings | None = last_good
        self._busy = 0
        self._busy_lock = threading.Lock()
        self._held_by = ""
        self.probed = False  # True once the first probe finished (used by --screenshot)

    # --- holding --------------------------------------------------------------------------
    @property
    def held_reason(self) -> str:
        """Non-empty while something else (a benchmark sweep) owns the server's lifecycle."""
        return self._held_by

    def hold(self, reason: str) -> None:
        """Reserve the server: start, stop and apply are refused with `reason` until release()."""
        self._held_by = reason
        self.held_changed.emit(reason)

    def release(self) -> None:
        """End a hold()."""
        if self._held_by:
            self._held_by = ""
            self.held_changed.emit("")

    @property
    def busy(self) -> int:
        """How many lifecycle actions are in flight."""
        return self._busy

    # --- actions (GUI thread) -------------------------------------------------------------
    def probe(self) -> concurrent.futures.Future[ServerStatus]:
        """Find the binary and look at host:port."""

        async def work() -> ServerStatus:
            try:
                return await self._gate.server.probe()
            finally:
                self.probed = True

        return self._run(work())

    def start(self) -> concurrent.futures.Future[ServerStatus]:
        """Start a managed server (or attach to one that already answers)."""
        return self._run_unless_held(self._gate.server.start())

    def stop(self) -> concurrent.futures.Future[ServerStatus]:
        """Stop the managed server; refused for an attached one."""
        return self._run_unless_held(self._gate.server.stop())

    def apply(self, settings: ServerSettings, then_start: bool = False, model: str | None = None,
              predicted: VramEstimate | None = None, keep: bool = True) -> concurrent.futures.Future[ServerStatus]:
        """Save the settings; restart a managed server with them (verified with `model` against
        `predicted` when a guarded applier is set, rolling back if it broke), or start one if asked.
        `keep=False`: in force for now (settings_applied says so) but not saved, as a demo step's are."""
        server = self._gate.server

        async def save(s: ServerSettings) -> None:
            if keep:
                await asyncio.get_running_loop().run_in_executor(None, self._save_settings, s)
            self.settings_applied.emit(s)

        async def work() -> ServerStatus:
            await save(settings)
            state = server.status.state
            if state is ServerState.RUNNING_MANAGED and self.applier is not None:
                report = await self.applier.apply(settings, self.last_good or settings, model, predicted)
                if report.judgement.keep:
                    self.last_good = settings
                elif report.restored is not None:
                    await save(report.restored)
                self.apply_checked.emit(report)
                return server.status
            if state.is_running:
                # Managed: restart with the settings. Attached: only refreshes how to apply them.
                return await server.restart(settings)
            server.settings = settings
            if then_start:
                status = await server.start()
                if status.state is ServerState.RUNNING_MANAGED:
                    self.last_good = settings
                return status
            return await server.probe()

        return self._run_unless_held(work())

    # --- internals ------------------------------------------------------------------------
    def _run_unless_held(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if self._held_by:
            self.error.emit(self._held_by)
            return refused(coro)
        return self._run(coro)

    def _run(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        fut = self._gate.submit(coro)
        if fut.cancelled():
            return fut
        self._set_busy(+1)
        fut.add_done_callback(self._done)
        return fut

    def _done(self, fut: concurrent.futures.Future[Any]) -> None:
        # Runs on the loop thread: only emit signals here.
        if not fut.cancelled() and (exc := fut.exception()) is not None:
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


__all__ = ["ServerLifecycle"]
