"""View-models of the Benchmark page: a sweep running on the asyncio loop thread, and history calls
run off the GUI thread, both reporting through queued Qt signals."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from dataclasses import replace
from typing import Any
from collections.abc import Callable, Sequence

from PySide6.QtCore import QObject, Signal

from app.adapters.storage.history import BenchHistory, HistoryError
from app.services.bench.sweep_runner import SweepProgress, SweepRunner
from app.core.errors import DeckError
from app.core.bench.sweep import PointResult, SweepSpec
from app.core.bench.run import SweepRun

log = logging.getLogger(__name__)


class SweepController(QObject):
    """Starts and cancels sweeps; every result is also written to the history as it arrives."""

    started = Signal(object)  # SweepRun as it begins
    progress = Signal(object)  # SweepProgress
    point_finished = Signal(object)  # SweepRun with the points so far
    finished = Signal(object)  # SweepRun (finished or cancelled)
    failed = Signal(str)  # why the sweep could not run
    history_problem = Signal(str)
    running_changed = Signal(bool)

    def __init__(self, loop: Any, supervisor: Any, client_factory: Callable[[str], Any], *, gpu: Any = None,
                 server_pids: Callable[[], Sequence[int]] = lambda: [], meter: Any = None,
                 history: BenchHistory | None = None, app_version: str = "", parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._loop = loop
        self._supervisor = supervisor
        self._client_factory = client_factory
        self._gpu = gpu
        self._server_pids = server_pids
        self._meter = meter
        self._history = history
        self._app_version = app_version
        self._runner: SweepRunner | None = None
        self._future: concurrent.futures.Future | None = None
        self._run_id: int | None = None

    @property
    def running(self) -> bool:
        """True from start() until finished or failed was emitted."""
        return self._future is not None and not self._future.done()

    def start(self, spec: SweepSpec, base_url: str) -> None:
        """Run the sweep on the loop thread (managed specs restart the supervisor's server)."""
        if self.running:
            return
        self._runner = SweepRunner(self._supervisor if spec.managed else None, self._client_factory,
                                   base_url=base_url, gpu=self._gpu, server_pids=self._server_pids,
                                   meter=self._meter, app_version=self._app_version)
        self._run_id = None
        self._future = self._loop.submit(self._runner.run(spec, self.progress.emit, self._on_point, self._on_start))
        self._future.add_done_callback(self._done)
        self.running_changed.emit(True)

    def cancel(self) -> None:
        """Stop the sweep; the server is put back as it was before finished is emitted."""
        if self._runner is not None and self.running:
            self._runner.cancel()

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Cancel a running sweep and wait for the server to be restored (call on quit)."""
        future = self._future
        if future is None or future.done():
            return
        self.cancel()
        try:
            future.result(timeout_s)
        except Exception as exc:  # noqa: BLE001 - quitting goes on whatever the sweep did
            log.warning("the sweep did not end cleanly: %s", exc)

    # ---- loop thread --------------------------------------------------------------------------
    def _history_call(self, fn: Callable[[], Any]) -> Any:
        if self._history is None:
            return None
        try:
            return fn()
        except HistoryError as exc:
            self.history_problem.emit(exc.user_text())
            return None

    def _on_start(self, run: SweepRun) -> None:
        self._run_id = self._history_call(lambda: self._history.begin(run))
        self.started.emit(run)

    def _on_point(self, run: SweepRun, result: PointResult) -> None:
        if self._run_id is not None:
            self._history_call(lambda: self._history.add_point(self._run_id, result))
        self.point_finished.emit(run)

    def _done(self, future: concurrent.futures.Future) -> None:
        if future.cancelled():
            self.failed.emit("The sweep was stopped.")
        elif future.exception() is not None:
            exc = future.exception()
            self.failed.emit(exc.user_text() if isinstance(exc, DeckError) else f"The sweep failed: {exc!r}")
        else:
            run: SweepRun = future.result()
            if self._run_id is not None:
                self._history_call(lambda: self._history.finish(self._run_id, run))
                run = replace(run, run_id=self._run_id)
            self.finished.emit(run)
        self.running_changed.emit(False)


class Background(QObject):
    """Runs blocking calls (the history's SQLite) in a worker thread; results come back on the GUI thread."""

    _delivered = Signal(object)

    def __init__(self, loop: Any, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._loop = loop
        self._delivered.connect(self._deliver)

    def call(self, fn: Callable[..., Any], *args: Any, on_done: Callable[[Any], None],
             on_error: Callable[[str], None]) -> concurrent.futures.Future:
        """fn(*args) in a thread; on_done(result) or on_error(text) later on the GUI thread."""
        future = self._loop.submit(asyncio.to_thread(fn, *args))

        def finished(f: concurrent.futures.Future) -> None:
            if f.cancelled():
                return
            exc = f.exception()
            if exc is None:
                self._delivered.emit((on_done, f.result()))
            else:
                text = exc.user_text() if isinstance(exc, DeckError) else f"{type(exc).__name__}: {exc}"
                self._delivered.emit((on_error, text))

        future.add_done_callback(finished)
        return future

    def _deliver(self, pair: tuple[Callable[[Any], None], Any]) -> None:
        callback, value = pair
        callback(value)


__all__ = ["Background", "SweepController", "SweepProgress"]
