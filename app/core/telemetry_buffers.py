"""The sampler's history: one ring of timestamped rows, a column per Channel (pure: numpy only)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from app.core.ringbuffer import TimeSeriesRing
from app.core.telemetry import Sample

DEFAULT_HISTORY_S = 15 * 60


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
    GPU_MEM_RESERVED_MIB = 12  # the driver's reserve, outside "used" (NaN where the driver does not report it)

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
        "gpu_mem_reserved_mib",
    )
    COUNT = len(NAMES)


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
            row[Channel.GPU_MEM_RESERVED_MIB] = g.memory_reserved_mib
        h = sample.host
        row[Channel.RAM_USED_MIB] = h.ram_used_mib
        row[Channel.RAM_TOTAL_MIB] = h.ram_total_mib
        row[Channel.SERVER_CPU_PCT] = h.server_cpu_pct
        row[Channel.SERVER_RSS_MIB] = h.server_rss_mib
        row[Channel.TOKENS_PER_S] = sample.tokens_per_s
        row[Channel.IN_FLIGHT] = in_flight
        self._ring.append(sample.t, row)

    def clear(self) -> None:
        """Forget every sample (a reset: the dashboard starts empty; the next sample comes on its own)."""
        self._ring.clear()

    def append_row(self, t: float, values: Sequence[float]) -> None:
        """Add one raw row of Channel.COUNT values at time t (seconds); for replays and tests."""
        self._ring.append(t, values)

    def view(self, since: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Copies of (t, rows) in time order, rows shaped (n, Channel.COUNT)."""
        return self._ring.view(since)

    def last(self) -> tuple[float, np.ndarray] | None:
        """The newest (t, row), or None before the first sample."""
        return self._ring.last()
