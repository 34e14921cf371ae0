"""The sampler thread: GPU + host + token rate on a drift-free schedule, into ring buffers."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from app.adapters.telemetry.host import HostProbe
from app.core.ringbuffer import TimeSeriesRing
from app.core.telemetry import GpuBackend, Sample
from app.core.throughput import TokenMeter

log = logging.getLogger(__name__)

MIN_INTERVAL_S = 0.25
MAX_INTERVAL_S = 1.0
DEFAULT_HISTORY_S = 15 * 60
TOKEN_RATE_WINDOW_S = 2.0


class Channel:
    """Column indices of TelemetryBuffers rows (units in the names; NaN marks N/A)."""

    GPU_MEM_USED_MIB = 0
    GPU_MEM_TOTAL_MIB = 1
    GPU_MEM_SERVER_MIB = 2
    GPU_UTIL_PCT = 3
    GPU_POWER_W = 4
    GPU_TEMP_C = 5
    RAM_USED_MIB = 6
    RAM_TOTAL_MIB = 7
    SERVER_CPU_PCT = 8
    SERVER_RSS_MIB = 9
    TOKENS_PER_S = 10
    IN_FLIGHT = 11

    NAMES = (
        "gpu_mem_used_mib",
        "gpu_mem_total_mib",
        "gpu_mem_server_mib",
        "gpu_util_pct",
        "gpu_power_w",
        "gpu_temp_c",
        "ram_used_mib",
        "ram_total_mib",
        "server_cpu_pct",
        "server_rss_mib",
        "tokens_per_s",
        "in_flight",
    )
    COUNT = len(NAMES)


def clamp_interval(interval_s: float) -> float:
    """The sampling interval (s) limited to what the sampler supports, 0.25-1.0 s."""
    return min(MAX_INTERVAL_S, max(MIN_INTERVAL_S, float(interval_s)))


class TelemetryBuffers:
    """History of samples as one ring of Channel columns, sized for history_s at interval_s.

    The sampler thread appends; the GUI thread reads views. `version` grows by one per append,
    so a reader redraws only when something changed.
    """

    def __init__(self, history_s: float = DEFAULT_HISTORY_S, interval_s: float = 0.5) -> None:
        self.history_s = float(history_s)
        self.interval_s = float(interval_s)
        self.capacity = max(2, math.ceil(self.history_s / self.interval_s) + 1)
        self._ring = TimeSeriesRing(self.capacity, Channel.COUNT)
        self._row = np.full(Channel.COUNT, np.nan)

    @property
    def version(self) -> int:
        """Appends so far; changes whenever new data arrived."""
        return self._ring.version

    def __len__(self) -> int:
        return len(self._ring)

    def append(self, sample: Sample, in_flight: int = 0) -> None:
        """Add one sample as a row; missing GPU readings become NaN."""
        row = self._row
        row.fill(np.nan)
        g = sample.gpu
        if g is not None:
            row[Channel.GPU_MEM_USED_MIB] = g.memory_used_mib
            row[Channel.GPU_MEM_TOTAL_MIB] = g.memory_total_mib
            row[Channel.GPU_MEM_SERVER_MIB] = g.server_memory_mib
            row[Channel.GPU_UTIL_PCT] = g.utilization_pct
            row[Channel.GPU_POWER_W] = g.power_w
            row[Channel.GPU_TEMP_C] = g.temperature_c
        h = sample.host
        row[Channel.RAM_USED_MIB] = h.ram_used_mib
        row[Channel.RAM_TOTAL_MIB] = h.ram_total_mib
        row[Channel.SERVER_CPU_PCT] = h.server_cpu_pct
        row[Channel.SERVER_RSS_MIB] = h.server_rss_mib
        row[Channel.TOKENS_PER_S] = sample.tokens_per_s
        row[Channel.IN_FLIGHT] = in_flight
        self._ring.append(sample.t, row)

    def append_row(self, t: float, values: Sequence[float]) -> None:
        """Add one raw row of Channel.COUNT values at time t (seconds); for replays and tests."""
        self._ring.append(t, values)

    def view(self, since: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Copies of (t, rows) in time order, rows shaped (n, Channel.COUNT)."""
        return self._ring.view(since)

    def last(self) -> tuple[float, np.ndarray] | None:
        """The newest (t, row), or None before the first sample."""
        return self._ring.last()


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
