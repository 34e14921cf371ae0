"""What the server did without saying so while a sweep ran, point by point: a watchdog fed from what the
sweep already reads (each reply's figures, the loaded models it checks, the server's slots and counters,
the GPU samples, a managed server's log and status), and the events it raised between a point's start
and its end.

A sweep that restarts the server for a point starts a fresh watchdog for it, told what the point asks
for: the restart is the sweep's own doing, not one behind its back, and the new server's launch is held
to the new settings. The events of every watchdog the run used are kept together.

The runtime learner, where given, is fed the same log lines (through a reader of its own), loaded models and GPU
readings: each load the sweep makes teaches it the card's runtime allowance.

Qt-free and thread-safe: the feeds may come from the loop thread or any other.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from app.core.bench.stats import RequestRecord
from app.core.models import RunningModel
from app.core.ports.log_signals import LogSignalReader, LogSignalReaderFactory
from app.core.replies import FinalFigures
from app.core.server.state import ServerStatus
from app.core.server_telemetry import ServerSample
from app.core.telemetry import GpuSample
from app.core.watch.events import WatchEvent, between
from app.core.watch.signals import Asked, ReplyFacts
from app.services.runtime_learner import RuntimeLearner
from app.services.watchdog import Watchdog

LogListener = Callable[[str], None]
StatusListener = Callable[[ServerStatus], None]


def _ignore_status(_status: ServerStatus) -> None:
    return None


class ServerFeed:
    """A server's log lines and status changes, handed on to whoever follows them now (a running sweep).

    Give `on_log` and `on_status` to the server's supervisor (or call them with what arrives from it); a
    sweep subscribes for its run. Callable from any thread; listeners run on the calling thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._log: list[LogListener] = []
        self._status: list[StatusListener] = []

    def on_log(self, line: str) -> None:
        """One line of the server's log, in the order logged."""
        with self._lock:
            listeners = list(self._log)
        for listener in listeners:
            try:
                listener(line)
            except Exception:  # noqa: BLE001 - a follower must never break the supervisor's log reading
                pass

    def on_status(self, status: ServerStatus) -> None:
        """The server's status, each time it changes."""
        with self._lock:
            listeners = list(self._status)
        for listener in listeners:
            try:
                listener(status)
            except Exception:  # noqa: BLE001 - a follower must never break the supervisor's publishing
                pass

    def subscribe(self, on_log: LogListener, on_status: StatusListener = _ignore_status) -> Callable[[], None]:
        """Follow the lines and statuses from now on; returns the function that stops following."""
        with self._lock:
            self._log.append(on_log)
            self._status.append(on_status)

        def unsubscribe() -> None:
            with self._lock:
                if on_log in self._log:
                    self._log.remove(on_log)
                if on_status in self._status:
                    self._status.remove(on_status)
        return unsubscribe


def reply_facts(record: RequestRecord, *, model: str, at: float, counted: bool,
                context_per_slot: int | None) -> ReplyFacts:
    """A measured request as the watchdog reads a reply: the prompt tokens expected (in the server's tokens
    where `counted`) against those it used, its load time and first-token time."""
    final = FinalFigures(prompt_tokens=record.prompt_tokens, cached_prompt_tokens=record.cached_prompt_tokens,
                         load_ms=record.load_s * 1e3 if record.load_s is not None else None)
    return ReplyFacts.of(final, model=model, at=at, prompt_sent=record.expected_prompt_tokens, prompt_counted=counted,
                         ttft_s=record.ttft_s, refused_too_long=record.error_kind == "too_long",
                         context_per_slot=context_per_slot)


class RunWatch:
    """The watchdog of one sweep run (a fresh one after each restart the sweep makes), and every event they
    raised."""

    def __init__(self, subject: str, log_signals: LogSignalReaderFactory | None = None, *,
                 gpu_present: bool | None = None, clock: Callable[[], float] = time.time,
                 learner: RuntimeLearner | None = None) -> None:
        self._subject = subject
        self._log_signals = log_signals
        self._learner = learner
        self._gpu_present = gpu_present
        self._clock = clock
        self._lock = threading.Lock()
        self._events: list[WatchEvent] = []
        self._dog = self._make()

    def _make(self) -> Watchdog:
        reader = None
        if self._log_signals is not None:
            try:
                reader = self._log_signals()
            except Exception:  # noqa: BLE001 - a reader that cannot start leaves the log unread, not the sweep
                reader = None
        dog = Watchdog(subject=self._subject, log_reader=reader, clock=self._clock)
        if self._learner is not None:
            self._learner.follow(self._reader())
        if self._gpu_present is not None:
            dog.gpu_present(self._gpu_present)
        dog.subscribe(self._keep)
        return dog

    def _reader(self) -> LogSignalReader | None:
        try:
            return self._log_signals() if self._log_signals is not None else None
        except Exception:  # noqa: BLE001 - a reader that cannot start leaves the log unread, not the sweep
            return None

    def _keep(self, event: WatchEvent) -> None:
        with self._lock:
            self._events.append(event)

    @property
    def watchdog(self) -> Watchdog:
        """The watchdog fed now."""
        return self._dog

    def restarting(self, asked: Asked | None) -> None:
        """The sweep restarts the server itself: follow the new one with a fresh watchdog, held to `asked`."""
        dog = self._make()
        dog.expect(asked)
        self._dog = dog

    def expect(self, asked: Asked | None) -> None:
        """What the point now measured asks of the server (it was not restarted for it)."""
        self._dog.expect(asked)

    def now(self) -> float:
        """The wall clock the events are stamped with."""
        return self._clock()

    def events(self) -> tuple[WatchEvent, ...]:
        """Every event of the run so far, oldest first."""
        with self._lock:
            return tuple(sorted(self._events, key=lambda e: e.at))

    def between(self, start: float, end: float) -> tuple[WatchEvent, ...]:
        """The events from `start` to `end` (wall-clock seconds)."""
        with self._lock:
            return between(self._events, start, end)

    # -- feeds (each to the watchdog of now) ---------------------------------------------------------------
    def log(self, line: str) -> None:
        """A line of the server's log."""
        self._dog.feed_log(line)
        if self._learner is not None:
            self._learner.feed_log(line)

    def status(self, status: ServerStatus) -> None:
        """The supervised server's status."""
        self._dog.feed_status(status)

    def loaded(self, models: Sequence[RunningModel]) -> None:
        """The server's loaded models, as the sweep just read them."""
        self._dog.feed_loaded(models)
        if self._learner is not None:
            self._learner.feed_loaded(models)

    def server(self, sample: ServerSample) -> None:
        """A reading of the server's slots and counters."""
        self._dog.feed_server(sample)

    def gpu(self, sample: GpuSample) -> None:
        """A reading of the GPU."""
        self._dog.feed_gpu(sample)
        self.learn(sample)

    def learn(self, sample: GpuSample) -> None:
        """A reading of the GPU for the runtime learner only (one taken after a load, before the work)."""
        if self._learner is not None:
            self._learner.feed_gpu(sample)

    def reply(self, facts: ReplyFacts) -> None:
        """A finished request."""
        self._dog.feed_reply(facts)


__all__ = ["LogListener", "RunWatch", "ServerFeed", "StatusListener", "reply_facts"]
