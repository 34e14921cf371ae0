"""View-models of the Benchmark page: a sweep running on the asyncio loop thread, and history calls
run off the GUI thread, both reporting through queued Qt signals."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
from dataclasses import replace
from typing import Any, TypeVar
from collections.abc import Callable, Sequence

from PySide6.QtCore import QObject, Signal

from app.services.runtime_learner import RuntimeLearner
from app.core.ports.tasks import CoroutineRunner
from app.services.bench.capacity import CapacitySweep
from app.services.bench.recording import QueuedRecorder
from app.services.bench.sweep_runner import SweepProgress, SweepRunner
from app.services.bench.sweep_watch import ServerFeed
from app.services.bench.sweep_balance import Behind
from app.core.errors import DeckError
from app.core.bench.sweep import PointResult, SweepSpec
from app.core.bench.run import SweepRun
from app.core.bench.capacity import Capacity, CapacityStep
from app.core.ports.contention import ContentionProbeFactory
from app.core.ports.planner import LoadPlanner
from app.core.ports.catalog import CatalogFactory
from app.core.ports.inference import PromptCounterFactory, StreamingClientFactory
from app.core.ports.log_signals import LogSignalReaderFactory
from app.core.ports.server import ServerControl
from app.core.ports.stores import SweepRecorder
from app.core.memory.host import HostMemory
from app.core.ports.telemetry import ServerTelemetryFactory
from app.core.telemetry import GpuBackend
from app.core.throughput import TokenMeter
from app.ui.pages.bench.capacity_editor import CapacityAsk

log = logging.getLogger(__name__)
T = TypeVar("T")


class SweepController(QObject):
    """Starts and cancels sweeps; every result is also written to the history as it arrives.

    The runner reports on the asyncio loop thread; the history's SQLite writes go to the sweep's
    QueuedRecorder (one worker thread, in order: begin, each point, finish), so the loop never waits on
    the disk, and a write that fails is said at once (history_problem)."""

    started = Signal(object)  # SweepRun as it begins
    progress = Signal(object)  # SweepProgress
    point_finished = Signal(object)  # SweepRun with the points so far
    capacity_progress = Signal(object)  # CapacityProgress: the rate sweep's step, rate and phase
    capacity_step = Signal(object)  # Capacity with the steps judged so far
    finished = Signal(object)  # SweepRun (finished or cancelled)
    failed = Signal(str)  # why the sweep could not run
    history_problem = Signal(str)
    running_changed = Signal(bool)

    def __init__(self, loop: CoroutineRunner, supervisor: ServerControl | None, client_factory: CatalogFactory,
                 load_client: StreamingClientFactory, *,
                 gpu: GpuBackend | None = None, server_pids: Callable[[], Sequence[int]] = lambda: [],
                 meter: TokenMeter | None = None, history: SweepRecorder | None = None, app_version: str = "",
                 server_telemetry: ServerTelemetryFactory | None = None,
                 host_memory: Callable[[], HostMemory | None] = lambda: None,
                 contention: ContentionProbeFactory | None = None, planner: LoadPlanner | None = None,
                 prompt_counter: PromptCounterFactory | None = None,
                 log_signals: LogSignalReaderFactory | None = None, server_feed: ServerFeed | None = None,
                 learner: RuntimeLearner | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._loop = loop
        self._supervisor = supervisor
        self._client_factory = client_factory
        self._load_client = load_client
        self._gpu = gpu
        self._server_pids = server_pids
        self._meter = meter
        self._history = history
        self._app_version = app_version
        self._server_telemetry = server_telemetry
        self._host_memory = host_memory  # the RAM a point can have, for pricing (read in a worker thread)
        self._contention = contention  # what else used the device over each point's window
        self._planner = planner  # the launch the server makes for a point's settings (priced before it runs)
        self._prompt_counter = prompt_counter  # counts prompts in the server's tokens (truncation shows)
        # The server's log read into signals (None: the backend reads nothing there), and its lines and statuses as
        # they come: each point's events.
        self._log_signals = log_signals
        self._server_feed = server_feed
        self._learner = learner  # the card's runtime allowance: priced with, and taught by each load
        # The backends behind the balancer a sweep measures at, each read at its own URL for its share of every point
        # (empty: the sweep's URL is one server); set by whoever knows the fleet.
        self.behind: tuple[Behind, ...] = ()
        self._runner: SweepRunner | None = None
        self._future: concurrent.futures.Future[SweepRun] | None = None
        # Closes a finished sweep's recorder (it waits on the disk) off the loop thread.
        self._closer = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-history-end")

    @property
    def running(self) -> bool:
        """True from start() until finished or failed was emitted."""
        return self._future is not None and not self._future.done()

    def start(self, spec: SweepSpec, base_url: str, capacity: CapacityAsk | None = None) -> None:
        """Run the sweep on the loop thread (managed specs restart the supervisor's server); with `capacity`,
        then the rate sweep it asks for at the recommended point (the CLI's --rate-sweep stage)."""
        if self.running:
            return
        self._runner = SweepRunner(self._supervisor if spec.managed else None, self._client_factory, self._load_client,
                                   base_url=base_url, gpu=self._gpu, server_pids=self._server_pids,
                                   meter=self._meter, app_version=self._app_version,
                                   # behind a balancer each backend is read at its own URL, not at the balancer's
                                   server_telemetry=None if self.behind else self._server_telemetry,
                                   behind=self.behind, host_memory=self._host_memory,
                                   contention=self._contention, planner=self._planner,
                                   prompt_counter=self._prompt_counter, log_signals=self._log_signals,
                                   server_feed=self._server_feed, learner=self._learner,
                                   teach=False)  # the app's ServerWatch learns from this server's log and readings
        # This sweep's history writer (its own thread, in order: begin, each point, finish).
        history = self._history
        recorder = QueuedRecorder(history, on_problem=self.history_problem.emit) if history is not None else None
        stage = CapacitySweep(capacity.ladder, self.capacity_progress.emit, self._on_capacity_step,
                              step_seconds=capacity.step_seconds) if capacity is not None else None
        self._future = self._loop.submit(self._runner.run(
            spec, self.progress.emit, functools.partial(self._on_point, recorder),
            functools.partial(self._on_start, recorder), after=stage))
        self._future.add_done_callback(functools.partial(self._done, recorder))
        self.running_changed.emit(True)

    def cancel(self) -> None:
        """Stop the sweep; the server is put back as it was before finished is emitted."""
        if self._runner is not None and self.running:
            self._runner.cancel()

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Cancel a running sweep and wait for the server to be restored (call on quit)."""
        future = self._future
        if future is not None and not future.done():
            self.cancel()
            try:
                future.result(timeout_s)
            except Exception as exc:  # noqa: BLE001 - quitting goes on whatever the sweep did
                log.warning("the sweep did not end cleanly: %s", exc)
        self._closer.shutdown(wait=True)  # the last points and the finish reach the disk before quitting

    # ---- the history's writes -----------------------------------------------------------------
    def _queue(self, fn: Callable[[T], None], arg: T) -> None:
        try:
            self._closer.submit(fn, arg)
        except RuntimeError:  # shut down on quit while the sweep was ending: close now
            fn(arg)

    def _finish(self, ended: tuple[QueuedRecorder | None, SweepRun | None]) -> None:
        """Store the end of the run (the recorder stores any point a failed write missed, or the whole run when
        even its start could not be stored), then announce it with its history id, if any (no run: the sweep
        failed; only what was queued is written)."""
        recorder, run = ended
        if recorder is not None:
            kept = recorder.close(run)
            if run is not None and kept.run_id is not None:
                run = replace(run, run_id=kept.run_id)
        if run is not None:
            self.finished.emit(run)
            self.running_changed.emit(False)

    # ---- loop thread --------------------------------------------------------------------------
    def _on_start(self, recorder: QueuedRecorder | None, run: SweepRun) -> None:
        if recorder is not None:
            recorder.started(run)
        self.started.emit(run)

    def _on_point(self, recorder: QueuedRecorder | None, run: SweepRun, result: PointResult) -> None:
        if recorder is not None:
            recorder.point_done(run, result)
        self.point_finished.emit(run)

    def _on_capacity_step(self, capacity: Capacity, _step: CapacityStep) -> None:
        self.capacity_step.emit(capacity)

    def _done(self, recorder: QueuedRecorder | None, future: concurrent.futures.Future[SweepRun]) -> None:
        if future.cancelled():
            self.failed.emit("The sweep was stopped.")
        elif (exc := future.exception()) is not None:
            self.failed.emit(exc.user_text() if isinstance(exc, DeckError) else f"The sweep failed: {exc!r}")
        else:
            # finished follows the writes already queued, so the run it carries is in the history.
            self._queue(self._finish, (recorder, future.result()))
            return
        self._queue(self._finish, (recorder, None))
        self.running_changed.emit(False)


class Background(QObject):
    """Runs blocking calls (the history's SQLite) in a worker thread; results come back on the GUI thread."""

    _delivered = Signal(object)

    def __init__(self, loop: CoroutineRunner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._loop = loop
        self._delivered.connect(self._deliver)

    def call(self, fn: Callable[..., Any], *args: Any, on_done: Callable[[Any], None],
             on_error: Callable[[str], None]) -> concurrent.futures.Future[Any]:
        """fn(*args) in a thread; on_done(result) or on_error(text) later on the GUI thread."""
        future = self._loop.submit(asyncio.to_thread(fn, *args))

        def finished(f: concurrent.futures.Future[Any]) -> None:
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
