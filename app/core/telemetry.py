"""Telemetry snapshots and the GPU backend seam. Units are in the field names."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Protocol
from collections.abc import Sequence

NAN = math.nan


@dataclass(frozen=True)
class GpuInfo:
    """Static facts about the GPU, read once."""

    name: str
    driver: str
    memory_total_mib: float
    index: int = 0
    uuid: str = ""


class GpuSlowdown(enum.Enum):
    """Why the GPU runs below its clocks, as the driver reports it (clock-event reasons); idle and the
    user's own clock settings are not slowdowns."""

    THERMAL = "thermal"  # too hot: the driver or the board lowers the clocks
    POWER_CAP = "power cap"  # drawing its power limit
    HW_SLOWDOWN = "hardware slowdown"  # the board asked for it (temperature, power brake, supply)
    POWER_BRAKE = "power brake"  # an external power brake (the system's power supply)


@dataclass(frozen=True)
class GpuSample:
    """One GPU reading; NaN where the driver reports N/A.

    Memory follows the driver's own split: total = used + reserved + free, where `reserved` is what the driver
    keeps for itself and no process can have. `memory_used_mib` is the "used" figure nvidia-smi shows, which
    leaves the reserve out; where the driver does not report its reserve (`memory_reserved_mib` NaN) used is
    total - free and holds the reserve. Either way `memory_free_mib` is what a new load can still have."""

    t: float  # time.monotonic() seconds
    memory_used_mib: float  # in use by processes (nvidia-smi's "used"); the reserve too where it is not reported
    memory_total_mib: float
    server_memory_mib: float  # used by the server's process tree; NaN when NVML cannot attribute it
    utilization_pct: float
    power_w: float
    temperature_c: float
    slowdowns: frozenset[GpuSlowdown] = frozenset()  # why the clocks are down now (empty: they are not)
    sm_clock_mhz: float = NAN  # the SM clock now
    memory_reserved_mib: float = NAN  # the driver's reserve, outside memory_used_mib; NaN where not reported

    @property
    def reserved_known_mib(self) -> float:
        """The driver's reserve where reported separately from used, else 0 (then used already holds it)."""
        return 0.0 if math.isnan(self.memory_reserved_mib) else self.memory_reserved_mib

    @property
    def memory_free_mib(self) -> float:
        """Memory no process holds and the driver does not keep: total - used - reserved (NaN when not read)."""
        return self.memory_total_mib - self.memory_used_mib - self.reserved_known_mib


@dataclass(frozen=True)
class GpuProcessUse:
    """One process's use of the GPU over a window, as the driver reports it."""

    pid: int
    sm_util_pct: float  # mean SM utilisation over the driver's samples of it; NaN when it kept none
    memory_mib: float = NAN  # memory it holds now; NaN when not reported


@dataclass(frozen=True)
class HostSample:
    """One host reading: RAM and the server process tree's CPU and resident memory."""

    t: float
    ram_used_mib: float
    ram_total_mib: float
    server_cpu_pct: float  # percent of one core, summed over the tree; NaN without a server
    server_rss_mib: float


@dataclass(frozen=True)
class Sample:
    """What one sampler tick produced."""

    t: float
    gpu: GpuSample | None
    host: HostSample
    tokens_per_s: float  # aggregate over requests the app has in flight


class GpuBackend(Protocol):
    """A source of GPU readings (NVML, a null backend, or a scripted one in tests)."""

    @property
    def available(self) -> bool:
        """True when readings can be taken."""

    @property
    def unavailable_reason(self) -> str:
        """Why there are no readings (empty when available)."""

    def info(self) -> GpuInfo | None:
        """Static GPU facts, or None when unavailable."""

    def sample(self, t: float, server_pids: Sequence[int]) -> GpuSample | None:
        """A reading at time t, attributing memory to server_pids where possible; None when unavailable."""

    def process_use(self, since_s: float) -> Sequence[GpuProcessUse] | None:
        """Each process's GPU use since wall-clock time since_s (time.time() seconds); None when the
        driver cannot attribute use to processes here (blocks on the driver: call in a worker)."""

    def close(self) -> None:
        """Release the library."""
