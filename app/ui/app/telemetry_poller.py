"""View-model of what a running server reports about its own work (slots, queue, counters), for
the dashboard and the Server page. Polls on the asyncio loop thread once a second while the server
runs; samples reach the GUI thread as queued signals and land in a ring the dashboard draws from."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from app.adapters.aio import LoopThread
from app.core.errors import DeckError
from app.core.ports.backend import BackendSpec
from app.core.server.state import ServerStatus
from app.core.server_telemetry import ServerSample, ServerTelemetryRing

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 1.0
UNAVAILABLE_PREFIX = "server metrics unavailable: "


def notice_for(sample: ServerSample | None, failure: str = "") -> str:
    """What the user should read about missing telemetry ("" when everything answered)."""
    if sample is None:
        return UNAVAILABLE_PREFIX + failure if failure else ""
    parts = [reason for reason in (sample.metrics_reason, sample.slots_reason) if reason]
    return UNAVAILABLE_PREFIX + "; ".join(parts) if parts else ""


def polls(spec: BackendSpec) -> bool:
    """True when the backend reports slots or server-wide metrics and has a reader for them."""
    return spec.server_telemetry is not None and (spec.can("server_metrics") or spec.can("reports_slots"))


class ServerTelemetryPoller(QObject):
    """Samples the server's own telemetry while it runs, for backends with the capability.

    `sample_ready` carries every ServerSample; `notice_changed` carries the reason text only when it
    changes (a failing endpoint is said once, not once a second; "" when samples are whole again)."""

    sample_ready = Signal(object)  # ServerSample
    notice_changed = Signal(str)
    stopped = Signal(str)  # the server stopped running (its state, e.g. "starting"): earlier readings are stale

    def __init__(self, loop: LoopThread, spec: BackendSpec, base_url: Callable[[], str], *,
                 interval_s: float = POLL_INTERVAL_S, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._loop = loop
        self._spec = spec
        self._base_url = base_url
        self.interval_s = interval_s
        self.ring = ServerTelemetryRing(interval_s=interval_s)
        self.enabled = polls(spec)
        self._future: concurrent.futures.Future[None] | None = None
        self._notice = ""  # written on the loop thread only
        self.notice = ""  # the last notice seen on the GUI thread
        self.latest: ServerSample | None = None
        self._taps: list[Callable[[ServerSample], None]] = []
        self._closed = False
        self.notice_changed.connect(self._remember_notice)
        self.sample_ready.connect(self._remember_sample)

    def tap(self, tap: Callable[[ServerSample], None]) -> None:
        """Also hand every sample to `tap`, on the loop thread as it is read; it must not block."""
        self._taps.append(tap)

    @property
    def polling(self) -> bool:
        """True while a poll loop is scheduled or running."""
        return self._future is not None and not self._future.done()

    def on_status(self, status: ServerStatus) -> None:
        """A server status on the GUI thread: poll while it runs, stop when it does not."""
        if not self.enabled or self._closed:
            return
        if status.state.is_running:
            if not self.polling:
                self._future = self._loop.submit(self._poll(self._base_url()))
        else:
            was_polling = self.polling
            self.stop()
            if was_polling:
                self.stopped.emit(status.state.value)

    def stop(self) -> None:
        """Stop polling (the reader is closed on the loop thread)."""
        if self._future is not None:
            self._future.cancel()
            self._future = None

    def close(self) -> None:
        """Stop for good (on quit)."""
        self._closed = True
        self.stop()

    def _remember_notice(self, text: str) -> None:
        self.notice = text

    def _remember_sample(self, sample: ServerSample) -> None:
        self.latest = sample

    def _say(self, text: str) -> None:
        if text != self._notice:
            self._notice = text
            self.notice_changed.emit(text)

    async def _poll(self, base_url: str) -> None:
        """One reader for this run of the server; a drift-free 1 s schedule on the loop's clock."""
        factory = self._spec.server_telemetry
        assert factory is not None
        telemetry = factory(base_url)
        loop = asyncio.get_running_loop()
        deadline = loop.time()
        try:
            while True:
                try:
                    sample = await telemetry.sample()
                except DeckError as exc:
                    self.ring.gap(time.monotonic())  # the clock of the samples and the sampler
                    self._say(notice_for(None, exc.message))
                else:
                    self.ring.append(sample)
                    self._say(notice_for(sample))
                    self.sample_ready.emit(sample)
                    for tap in self._taps:
                        try:
                            tap(sample)
                        except Exception:  # noqa: BLE001 - a tap must not stop the polling
                            log.exception("a server telemetry tap failed")
                deadline += self.interval_s
                now = loop.time()
                if deadline < now:  # a slow answer: skip the missed ticks rather than run them back to back
                    deadline = now + self.interval_s
                await asyncio.sleep(deadline - now)
        finally:
            await telemetry.aclose()


__all__ = ["POLL_INTERVAL_S", "ServerTelemetryPoller", "UNAVAILABLE_PREFIX", "notice_for", "polls"]
