"""The app's watchdog, fed from what the app already reads and reporting to the GUI thread.

ServerWatch owns nothing it reads: the server controller hands it every log line, status and loaded-models
poll (on the asyncio loop thread), the server telemetry poller every slots/counters sample (loop thread) and
the sampler every GPU sample (sampler thread). The watchdog's work is a few comparisons under its own
lock, so it runs on those threads and never on the GUI thread; each new event crosses to the GUI thread
through a WatchBridge's queued signal. The runtime learner, where given, is fed the same log lines (through a
reader of its own), loaded models and GPU samples on the same threads: any load the app sees teaches it.

One watchdog follows one server at a time: when the app starts a server (its status turns to starting) or
the address in force changes (attached to another URL), the watchdog follows the new one with a fresh log
reader, and the events seen so far stay in its history, so the dashboard keeps one history across servers
(and across the app taking its window over for another server: the successor is given the same watchdog).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from app.core.memory.estimator import VramEstimate
from app.core.memory.verdict import Verdict
from app.core.models import RunningModel
from app.core.ports.log_signals import LogSignalReader, LogSignalReaderFactory
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState, ServerStatus
from app.core.server_telemetry import ServerSample
from app.core.telemetry import Sample
from app.core.watch.signals import Asked
from app.services.runtime_learner import RuntimeLearner
from app.services.watchdog import Watchdog

_PRICED_TO_FIT = (Verdict.FITS, Verdict.TIGHT)


def asked_for(settings: ServerSettings, priced: ServerSettings | None = None,
              estimate: VramEstimate | None = None, model: str = "") -> Asked:
    """What to hold a server started with `settings` to: their parallel and context, and where the fit panel
    priced these same settings, the context the launch was planned with (when the settings leave it to the
    server) and whether the load was priced to fit on the GPU."""
    planned_context = None
    fits = None
    if estimate is not None and priced is not None and _same_load(priced, settings):
        if settings.num_parallel > 0 and estimate.n_ctx_total > 0:
            planned_context = estimate.n_ctx_total // settings.num_parallel
        fits = None if estimate.cpu_only else estimate.verdict in _PRICED_TO_FIT
    return Asked.of(settings.num_parallel, settings.context_length, planned_parallel=settings.num_parallel,
                    planned_context=planned_context, fits_on_gpu=fits, model=model)


def _same_load(a: ServerSettings, b: ServerSettings) -> bool:
    """True when two settings load alike (the address and permissions may differ)."""
    return a.replace(host=b.host, port=b.port, network_allowed_for=b.network_allowed_for) == b


class ServerWatch:
    """Feeds the app's Watchdog (see the module's docstring); the feed methods may be called from any
    thread. Its events reach the GUI thread through a WatchBridge (app.ui.widgets.watch_bridge)."""

    def __init__(self, watchdog: Watchdog, readers: LogSignalReaderFactory | None,
                 settings: Callable[[], ServerSettings], *, gpu_available: bool = True,
                 learner: RuntimeLearner | None = None) -> None:
        """`readers` makes the backend's log reader (None: its log says nothing the watchdog reads);
        `settings()` gives the settings in force (thread-safe read); `learner` learns the runtime allowance from
        the loads seen (None: not learnt)."""
        self.watchdog = watchdog
        self.learner = learner
        self._readers = readers
        self._settings = settings
        self._lock = threading.Lock()
        self._priced: tuple[ServerSettings, VramEstimate | None] | None = None
        self._asked: Asked | None = None
        self._state: ServerState | None = None  # the last state fed (on the feeding thread)
        self.servers_followed = 0
        if not gpu_available:
            watchdog.gpu_present(False)
        self._follow(self._settings())

    # -- what the settings asked (GUI thread) ----------------------------------------------------
    def set_price(self, priced: ServerSettings | None, estimate: VramEstimate | None) -> None:
        """The fit panel's price of `priced` (None: nothing priced); used when those settings start."""
        with self._lock:
            self._priced = (priced, estimate) if priced is not None else None

    def settings_applied(self, settings: ServerSettings) -> None:
        """Settings were applied: hold the server to them (a managed server also starts again)."""
        self._expect(settings)

    # -- feeds (any thread) ----------------------------------------------------------------------
    def on_log(self, line: str) -> None:
        """One line of the server's log."""
        self.watchdog.feed_log(line)
        if self.learner is not None:
            self.learner.feed_log(line)

    def on_status(self, status: ServerStatus) -> None:
        """The server's status; the app starting a server, or another address, is a new server followed."""
        settings = self._settings()
        started = status.state is ServerState.STARTING and self._state is not ServerState.STARTING
        self._state = status.state
        if started or settings.base_url != self.watchdog.subject:
            self._follow(settings)
        self.watchdog.feed_status(status)

    def on_loaded(self, models: Sequence[RunningModel]) -> None:
        """One successful read of the server's loaded models."""
        self.watchdog.feed_loaded(models)
        if self.learner is not None:
            self.learner.feed_loaded(models)

    def on_server_sample(self, sample: ServerSample) -> None:
        """One reading of the server's slots and counters."""
        self.watchdog.feed_server(sample)

    def on_sample(self, sample: Sample) -> None:
        """One sampler tick: its GPU reading, where the GPU answered."""
        if sample.gpu is not None:
            self.watchdog.feed_gpu(sample.gpu)
            if self.learner is not None:
                self.learner.feed_gpu(sample.gpu)

    # -- internals -------------------------------------------------------------------------------
    def _follow(self, settings: ServerSettings) -> None:
        reader: LogSignalReader | None = self._readers() if self._readers is not None else None
        self.watchdog.follow(settings.base_url, reader)
        if self.learner is not None:
            self.learner.follow(self._readers() if self._readers is not None else None)
        self.servers_followed += 1
        with self._lock:
            self._asked = None
        self._expect(settings)

    def _expect(self, settings: ServerSettings) -> None:
        with self._lock:
            priced, estimate = self._priced if self._priced is not None else (None, None)
            asked = asked_for(settings, priced, estimate)
            if asked == self._asked:
                return  # the same again: a condition already raised is not raised twice
            self._asked = asked
        self.watchdog.expect(asked)


__all__ = ["ServerWatch", "asked_for"]
