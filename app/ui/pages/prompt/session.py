"""View-model of the prompt console: runs prompts on the loop thread and hands their streams to
the GUI at paint rate, never per token.

The loop thread writes chunks into a locked StreamBuffer; a GUI timer drains it about 30 times a
second and emits what arrived in one batch, so a 32-way burst at 200 tokens/s each costs the
window 30 small updates a second, not 6,400.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Coroutine

from PySide6.QtCore import QObject, QTimer, Signal

from app.core.ports.tasks import CoroutineRunner
from app.services.client_pool import ClientPool
from app.services.prompts import PromptRequest, ReplyOutcome, ReplyWatch, run_ab, run_burst, stream_reply
from app.services.watchdog import Watchdog
from app.core.errors import DeckError
from app.core.models import RunningModel
from app.core.ports.catalog import CatalogFactory
from app.core.ports.inference import ConsoleClientFactory, PromptCounterFactory, PromptTokenCounter
from app.core.replies import StreamChunk
from app.core.console.reply_stats import ReplyMeter, ReplyStats
from app.core.throughput import TokenMeter

DRAIN_INTERVAL_MS = 33
# After Stop, outcomes normally arrive within milliseconds; never wait on them longer than this.
STOP_GRACE_S = 2.0


@dataclass
class Drained:
    """What arrived since the last drain: new text per reply, live figures, and finished replies."""

    thinking: dict[int, str] = field(default_factory=dict)
    content: dict[int, str] = field(default_factory=dict)
    live: dict[int, ReplyStats] = field(default_factory=dict)
    outcomes: list[ReplyOutcome] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """True when nothing arrived."""
        return not (self.thinking or self.content or self.outcomes)


class StreamBuffer:
    """A ReplySink the loop thread fills and the GUI thread drains (all methods thread-safe)."""

    def __init__(self, started_s: float) -> None:
        self._lock = threading.Lock()
        self._started_s = started_s
        self._thinking: dict[int, list[str]] = {}
        self._content: dict[int, list[str]] = {}
        self._meters: dict[int, ReplyMeter] = {}
        self._touched: set[int] = set()
        self._outcomes: list[ReplyOutcome] = []

    def on_chunk(self, index: int, chunk: StreamChunk) -> None:
        """Loop thread: keep the text and count it."""
        with self._lock:
            meter = self._meters.get(index)
            if meter is None:
                meter = self._meters[index] = ReplyMeter(self._started_s)
            meter.add(chunk)
            if chunk.thinking:
                self._thinking.setdefault(index, []).append(chunk.thinking)
            if chunk.content:
                self._content.setdefault(index, []).append(chunk.content)
            self._touched.add(index)

    def on_done(self, outcome: ReplyOutcome) -> None:
        """Loop thread: a reply is over."""
        with self._lock:
            self._outcomes.append(outcome)

    def drain(self) -> Drained:
        """GUI thread: everything new since the last call."""
        now = time.monotonic()
        with self._lock:
            out = Drained(
                thinking={i: "".join(parts) for i, parts in self._thinking.items() if parts},
                content={i: "".join(parts) for i, parts in self._content.items() if parts},
                live={i: self._meters[i].snapshot(now) for i in self._touched},
                outcomes=self._outcomes,
            )
            self._thinking, self._content, self._touched, self._outcomes = {}, {}, set(), []
        return out


@dataclass(eq=False)
class ConsoleRun:
    """One Send: a chat turn, a burst, or an A/B pair."""

    kind: str  # "chat" | "burst" | "ab"
    request: PromptRequest
    expected: int  # replies it will produce
    buffer: StreamBuffer
    future: concurrent.futures.Future[None] | None = None
    outcomes: dict[int, ReplyOutcome] = field(default_factory=dict)
    stopped_at_s: float | None = None
    finished: bool = False
    error: str = ""  # a failure outside any reply (e.g. a bug); replies carry their own errors

    @property
    def stopped(self) -> bool:
        """True once the user pressed Stop."""
        return self.stopped_at_s is not None


class ConsoleSession(QObject):
    """Schedules console work on the LoopThread; every result reaches widgets through a signal."""

    models_loaded = Signal(str, list)  # url, list[LocalModel]
    models_failed = Signal(str, str)  # url, message
    details_loaded = Signal(str, object)  # model, ModelDetails
    details_failed = Signal(str, str)  # model, message
    run_progress = Signal(object, object)  # ConsoleRun, Drained
    run_finished = Signal(object)  # ConsoleRun

    def __init__(self, loop: CoroutineRunner, client_factory: ConsoleClientFactory, meter: TokenMeter | None,
                 parent: QObject | None = None, *, watchdog: Watchdog | None = None,
                 counter_factory: PromptCounterFactory | None = None,
                 catalog_factory: CatalogFactory | None = None) -> None:
        super().__init__(parent)
        self._loop = loop
        self._clients = ClientPool(client_factory)
        # Each finished reply goes to the server's watchdog (None: not watched) with its prompt counted by the
        # backend's counter, and comes back with the events seen while it ran.
        self._watchdog = watchdog
        self._counter_factory = counter_factory
        self._counters: dict[str, PromptTokenCounter] = {}  # per server URL; used on the loop thread only
        self._watches: dict[str, ReplyWatch] = {}
        # Where the server lists its loaded models: read after each reply for the context it ran at.
        self._catalogs = ClientPool(catalog_factory) if catalog_factory is not None else None
        self._closed = False
        self._meter = meter
        self._runs: list[ConsoleRun] = []
        self._timer = QTimer(self)
        self._timer.setInterval(DRAIN_INTERVAL_MS)
        self._timer.timeout.connect(self.drain_now)

    # --- models ---------------------------------------------------------------------------
    def refresh_models(self, url: str) -> concurrent.futures.Future[None]:
        """Read the local models of the server at url."""

        async def work() -> None:
            try:
                models = await self._clients.get(url).tags()
            except DeckError as exc:
                self.models_failed.emit(url, exc.user_text())
                return
            self.models_loaded.emit(url, models)

        return self._submit(work())

    def load_details(self, url: str, model: str) -> concurrent.futures.Future[None]:
        """Read a model's capabilities and metadata from the server."""

        async def work() -> None:
            try:
                details = await self._clients.get(url).show(model)
            except DeckError as exc:
                self.details_failed.emit(model, exc.user_text())
                return
            self.details_loaded.emit(model, details)

        return self._submit(work())

    # --- runs -----------------------------------------------------------------------------
    def start(self, url: str, kind: str, request: PromptRequest, copies: int = 1,
              think: bool | str = True) -> ConsoleRun:
        """Begin a chat turn, a burst of `copies`, or an A/B pair (thinking value `think`)."""
        buffer = StreamBuffer(time.monotonic())
        expected = {"chat": 1, "burst": copies, "ab": 2}[kind]
        run = ConsoleRun(kind, request, expected, buffer)

        async def work() -> Any:
            client = self._clients.get(url)
            watch = self._watch(url)
            if kind == "burst":
                return await run_burst(client, request, copies, sink=buffer, meter=self._meter, watch=watch)
            if kind == "ab":
                return await run_ab(client, request, think, sink=buffer, meter=self._meter, watch=watch)
            return await stream_reply(client, request, sink=buffer, meter=self._meter, watch=watch)

        run.future = self._submit(work())
        self._runs.append(run)
        self._timer.start()
        return run

    def _watch(self, url: str) -> ReplyWatch | None:
        """Loop thread: the watch for replies from `url` (None without a watchdog)."""
        if self._watchdog is None:
            return None
        watch = self._watches.get(url)
        if watch is None:
            counter = self._counter_factory(url) if self._counter_factory is not None else None
            if counter is not None:
                self._counters[url] = counter
            catalogs = self._catalogs

            async def loaded() -> list[RunningModel]:
                return await catalogs.get(url).ps() if catalogs is not None else []

            watch = self._watches[url] = ReplyWatch(self._watchdog, counter,
                                                    loaded=loaded if catalogs is not None else None)
        return watch

    async def _close_counters(self) -> None:
        counters, self._counters = list(self._counters.values()), {}
        self._watches = {}
        for counter in counters:
            try:
                await counter.aclose()
            except Exception:  # noqa: BLE001 - quitting goes on whatever the connections do
                pass

    def stop(self, run: ConsoleRun) -> None:
        """Stop a run now: its streams close at once; its stopped outcomes still arrive."""
        if run.finished or run.stopped:
            return
        run.stopped_at_s = time.monotonic()
        if run.future is not None:
            run.future.cancel()

    @property
    def active_runs(self) -> list[ConsoleRun]:
        """Runs not finished yet."""
        return list(self._runs)

    def drain_now(self) -> None:
        """Hand what arrived to the widgets; finish runs whose replies are all in."""
        for run in list(self._runs):
            # Read before draining: a coroutine that is over has already handed over everything.
            crashed = self._crash_text(run)
            drained = run.buffer.drain()
            for outcome in drained.outcomes:
                run.outcomes[outcome.index] = outcome
            if not drained.empty:
                self.run_progress.emit(run, drained)
            overdue = run.stopped_at_s is not None and time.monotonic() - run.stopped_at_s > STOP_GRACE_S
            if crashed:
                run.error = crashed
            if len(run.outcomes) >= run.expected or overdue or crashed:
                self._finish(run)
        if not self._runs:
            self._timer.stop()

    @staticmethod
    def _crash_text(run: ConsoleRun) -> str:
        """The failure of a run's coroutine outside any reply (replies report their own errors)."""
        future = run.future
        if future is None or not future.done() or future.cancelled() or future.exception() is None:
            return ""
        exc = future.exception()
        return exc.user_text() if isinstance(exc, DeckError) else f"Unexpected error: {exc!r}"

    def _finish(self, run: ConsoleRun) -> None:
        run.finished = True
        self._runs.remove(run)
        self.run_finished.emit(run)

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Stop every run and close the clients (blocking; call on quit)."""
        for run in list(self._runs):
            self.stop(run)
        self._timer.stop()
        self._closed = True
        closers = [self._clients.aclose, self._close_counters] + ([self._catalogs.aclose] if self._catalogs else [])
        for closing in closers:
            try:
                self._loop.run(closing(), timeout=timeout_s)
            except Exception:  # noqa: BLE001 - quitting goes on whatever the connections do
                pass

    def _submit(self, coro: Coroutine[Any, Any, None]) -> concurrent.futures.Future[None]:
        return self._loop.submit_unless(self._closed, coro)


__all__ = ["ConsoleRun", "ConsoleSession", "Drained", "StreamBuffer"]
