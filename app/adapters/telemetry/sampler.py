"""The sampler thread: GPU + host + token rate on a drift-free schedule, into ring buffers."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence


from app.adapters.telemetry.host import HostProbe
from app.core.telemetry import GpuBackend, Sample
from app.core.telemetry_buffers import DEFAULT_HISTORY_S, TelemetryBuffers
from app.core.throughput import TokenMeter

log = logging.getLogger(__name__)

MIN_INTERVAL_S = 0.25
MAX_INTERVAL_S = 1.0
TOKEN_RATE_WINDOW_S = 2.0


def clamp_interval(interval_s: float) -> float:
    """The sampling interval (s) limited to what the sampler supports, 0.25-1.0 s."""
    return min(MAX_INTERVAL_S, max(MIN_INTERVAL_S, float(interval_s)))


class TickSchedule:
    """Deadlines on a fixed grid start + k * interval: no drift, and late ticks are skipped
    rather than run back to back, so a stall shows as a gap instead of a burst."""

    def __init__(self, interval_s: float, start: float) -> None:
        self.interval_s = interval_s
        self.deadline = start
        self.skipped = 0

    def wait_after_tick(self, now: float) -> float:
        """Advance to the next deadline after `now`; returns the seconds to wait until it."""
        self.deadline += self.interval_s
        if now > self.deadline:
            missed = math.floor((now - self.deadline) / self.interval_s) + 1
            self.skipped += missed
            self.deadline += missed * self.interval_s
        return self.deadline - now


class Sampler:
    """Takes one Sample per interval on a daemon thread and appends it to `buffers`.

    `server_pids` returns the server's root pids (empty when no server runs); the host probe
    expands them to the whole process tree for both GPU and host attribution. `token_meter`
    must stamp tokens with the same clock as `clock`. `on_sample` runs on the sampler thread:
    keep it short (emit a Qt signal, set an event).
    """

    def __init__(
        self,
        gpu: GpuBackend,
        host: HostProbe,
        *,
        server_pids: Callable[[], Sequence[int]],
        token_meter: TokenMeter,
        interval_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
        history_s: float = DEFAULT_HISTORY_S,
        on_sample: Callable[[Sample], None] | None = None,
    ) -> None:
        self.gpu = gpu
        self.host = host
        self.interval_s = clamp_interval(interval_s)
        self.buffers = TelemetryBuffers(history_s, self.interval_s)
        self.latest: Sample | None = None
        self.ticks = 0
        self.tick_errors = 0
        self.last_error: BaseException | None = None
        self._server_pids = server_pids
        self._meter = token_meter
        self._clock = clock
        self._on_sample = on_sample
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._schedule: TickSchedule | None = None

    @property
    def skipped_ticks(self) -> int:
        """Ticks dropped because a previous tick or the machine ran late."""
        return self._schedule.skipped if self._schedule else 0

    @property
    def running(self) -> bool:
        """True while the sampling thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def tick(self) -> Sample:
        """Take one sample now, store it and hand it to on_sample; returns it."""
        t = self._clock()
        roots = self._server_pids()
        # The probe caches the tree per set of roots, so both calls below share one walk.
        gpu = self.gpu.sample(t, self.host.tree_pids(roots))
        host = self.host.sample(t, roots)
        sample = Sample(t=t, gpu=gpu, host=host, tokens_per_s=self._meter.rate(t, TOKEN_RATE_WINDOW_S))
        self.buffers.append(sample, self._meter.in_flight)
        self.latest = sample
        self.ticks += 1
        if self._on_sample is not None:
            self._on_sample(sample)
        return sample

    def start(self) -> None:
        """Start the sampling thread (the first sample is taken at once)."""
        if self.running:
            return
        self._stop.clear()
        self._schedule = TickSchedule(self.interval_s, self._clock())
        self._thread = threading.Thread(target=self._run, name="deck-sampler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> bool:
        """Stop the thread and wait up to timeout seconds; True when it has ended."""
        self._stop.set()
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def _run(self) -> None:
        schedule = self._schedule
        assert schedule is not None
        while not self._stop.is_set():
            self._tick_guarded()
            wait_s = schedule.wait_after_tick(self._clock())
            if self._stop.wait(wait_s):
                break

    def _tick_guarded(self) -> None:
        try:
            self.tick()
        except Exception as err:  # noqa: BLE001 - one bad tick must not end sampling
            self.tick_errors += 1
            self.last_error = err
            # The first failure gets a traceback; a persistent fault then logs rarely.
            if self.tick_errors == 1 or self.tick_errors % 100 == 0:
                log.exception("Telemetry sample failed (%d so far)", self.tick_errors)
