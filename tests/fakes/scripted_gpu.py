"""A scripted stand-in for the NVML backend, reporting what NVML reports on an RTX 4090.

Numbers follow ollama-facts.md: nvidia-smi shows 24564 MiB on a 4090; a desktop holds a few
hundred MiB; Qwen3-14B Q4_K_M with a 32768 context and f16 KV takes ~14 GiB (weights ~8.6 GiB,
KV 5 GiB, compute buffers and CUDA context); decode runs at ~65-70 tok/s single-stream with the
card near full utilisation and 300-380 W of its 450 W limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Callable, Sequence

from app.adapters.telemetry.nvml import gpu_lost_reason
from app.core.telemetry_buffers import TelemetryBuffers
from app.core.telemetry import GpuInfo, GpuProcessUse, GpuSample, HostSample, Sample

NAN = math.nan
RTX_4090 = GpuInfo(
    "NVIDIA GeForce RTX 4090", "570.133.07", 24564.0, index=0, uuid="GPU-5c3e1d7a-4090-0000-0000-000000000000"
)
RTX_4090_POWER_LIMIT_W = 450.0
DESKTOP_MIB = 620.0
QWEN3_14B_SERVER_MIB = 14_350.0  # weights + 32k f16 KV + compute + CUDA context (derived)


@dataclass(frozen=True)
class GpuReading:
    """What one NVML poll returns; NaN for a field the card reports as N/A."""

    memory_used_mib: float
    utilization_pct: float
    power_w: float
    temperature_c: float
    server_memory_mib: float = NAN  # memory of the server's pids, as the process list shows it
    memory_reserved_mib: float = NAN  # the driver's reserve, outside memory_used_mib (NaN: not reported apart)


Script = Callable[[float, Sequence[int]], GpuReading] | Sequence[GpuReading]


def idle_reading() -> GpuReading:
    """A 4090 driving a desktop with no model loaded."""
    return GpuReading(DESKTOP_MIB, 2.0, 24.0, 38.0, 0.0)


class ScriptedGpuBackend:
    """A GpuBackend whose readings come from a script: a list (one reading per sample, the last
    one repeating) or a callable (t, server_pids) -> GpuReading. `go_lost()` makes it behave
    like NVML after the card fell off the bus."""

    def __init__(
        self,
        info: GpuInfo = RTX_4090,
        script: Script | None = None,
        available: bool = True,
        reason: str = "",
        processes: Callable[[float], Sequence[GpuProcessUse] | None] | None = None,
    ) -> None:
        self._info = info
        self._script: Script = script if script is not None else [idle_reading()]
        self._available = available
        self._had_gpu = available
        self._reason = reason
        # What nvmlDeviceGetProcessUtilization and the compute-process list answer for a window that
        # began at a wall time; None (the default) is a driver that attributes nothing to processes.
        self._processes = processes
        self._step = 0
        self.calls: list[tuple[float, tuple[int, ...]]] = []
        self.closed = False

    @property
    def available(self) -> bool:
        """True until the backend is lost or closed."""
        return self._available and not self.closed

    @property
    def unavailable_reason(self) -> str:
        """Why there are no readings (empty while available)."""
        return "" if self.available else self._reason

    def info(self) -> GpuInfo | None:
        """The card's static facts; None only for a backend that never had a GPU."""
        return self._info if self._had_gpu else None

    def go_lost(self, detail: str = "GPU is lost") -> None:
        """From now on, answer as NVML does for a lost GPU: no samples, a reason."""
        self._available = False
        self._reason = gpu_lost_reason(self._info.name, detail)

    def sample(self, t: float, server_pids: Sequence[int]) -> GpuSample | None:
        """The next scripted reading at time t, or None when unavailable."""
        self.calls.append((t, tuple(server_pids)))
        if not self.available:
            return None
        r = self._next(t, server_pids)
        total = self._info.memory_total_mib
        reserved = 0.0 if math.isnan(r.memory_reserved_mib) else r.memory_reserved_mib
        if r.memory_used_mib + reserved > total:
            raise ValueError(f"scripted reading uses {r.memory_used_mib} MiB and reserves {reserved} MiB "
                             f"of a {total} MiB card")
        return GpuSample(
            t=t,
            memory_used_mib=r.memory_used_mib,
            memory_total_mib=total,
            server_memory_mib=r.server_memory_mib if server_pids else NAN,
            utilization_pct=r.utilization_pct,
            power_w=r.power_w,
            temperature_c=r.temperature_c,
            memory_reserved_mib=r.memory_reserved_mib,
        )

    def process_use(self, since_s: float) -> Sequence[GpuProcessUse] | None:
        """The scripted per-process use since wall time since_s (None when not scripted or unavailable)."""
        if not self.available or self._processes is None:
            return None
        return self._processes(since_s)

    def close(self) -> None:
        """Mark the backend closed."""
        self.closed = True

    def _next(self, t: float, server_pids: Sequence[int]) -> GpuReading:
        self._step += 1
        if callable(self._script):
            return self._script(t, server_pids)
        return self._script[min(self._step, len(self._script)) - 1]


def serving_phase(t: float, load_at_s: float = 20.0, cycle_s: float = 40.0) -> tuple[float, bool]:
    """(fraction of the model loaded 0-1, decoding now?) at script time t (seconds)."""
    if t < load_at_s:
        return 0.0, False
    since = t - load_at_s
    if since < 4.0:  # weights stream in over a few seconds
        return since / 4.0, False
    return 1.0, (since - 4.0) % cycle_s < 0.6 * cycle_s


def serving_script(load_at_s: float = 20.0, cycle_s: float = 40.0) -> Callable[[float, Sequence[int]], GpuReading]:
    """Idle, then Qwen3-14B loads at load_at_s, then decode bursts repeat every cycle_s seconds."""

    def reading(t: float, server_pids: Sequence[int]) -> GpuReading:
        loaded, busy = serving_phase(t, load_at_s, cycle_s)
        if loaded == 0.0:
            return idle_reading()
        if loaded < 1.0:
            server = QWEN3_14B_SERVER_MIB * loaded
            return GpuReading(DESKTOP_MIB + server, 35.0, 90.0, 41.0, server)
        warm = min(1.0, (t - load_at_s) / 180.0)  # the card heats up over a few minutes
        wobble = math.sin(t * 1.7) * 0.5 + math.sin(t * 0.31) * 0.5
        server = QWEN3_14B_SERVER_MIB + (160.0 if busy else 0.0)
        if busy:
            temp = 58.0 + 12.0 * warm + wobble
            return GpuReading(DESKTOP_MIB + server, 96.0 + 3.0 * wobble, 345.0 + 25.0 * wobble, temp, server)
        return GpuReading(DESKTOP_MIB + server, 1.0, 38.0 + 3.0 * wobble, 50.0 + 8.0 * warm, server)

    return reading


def fill_demo_history(
    buffers: TelemetryBuffers,
    seconds: float,
    *,
    gpu: ScriptedGpuBackend | None = None,
    load_at_s: float = 20.0,
    end_t: float = 10_000.0,
    ram_total_mib: float = 65_536.0,
) -> None:
    """Append `seconds` of a scripted serving session at buffers.interval_s, ending at end_t.

    For screenshots and redraw benchmarks only: host and token numbers are synthesised to
    follow the same timeline as serving_script (decode bursts of two requests at ~66 tok/s each).
    """
    gpu = gpu or ScriptedGpuBackend(script=serving_script(load_at_s))
    step = buffers.interval_s
    n = int(seconds / step)
    start = end_t - n * step
    for i in range(n + 1):
        t = start + i * step
        script_t = t - start
        loaded, busy = serving_phase(script_t, load_at_s)
        g = gpu.sample(script_t, [4242, 4243])
        if g is not None:
            g = GpuSample(t, g.memory_used_mib, g.memory_total_mib, g.server_memory_mib,
                          g.utilization_pct, g.power_w, g.temperature_c, memory_reserved_mib=g.memory_reserved_mib)
        wobble = math.sin(script_t * 0.9)
        host = HostSample(
            t=t,
            ram_used_mib=9_800.0 + 1_900.0 * loaded + 120.0 * wobble,
            ram_total_mib=ram_total_mib,
            server_cpu_pct=(104.0 + 8.0 * wobble) if busy else (3.0 if loaded else 0.5),
            server_rss_mib=95.0 + 1_350.0 * loaded,
        )
        tokens = (2 * 66.0 + 6.0 * wobble) if busy else 0.0
        buffers.append(Sample(t=t, gpu=g, host=host, tokens_per_s=tokens), 2 if busy else 0)


def gpu_with(info: GpuInfo | None, reason: str = "") -> ScriptedGpuBackend:
    """A scripted backend whose info() is `info` (idle readings), or, for None, one with no GPU and `reason`."""
    return ScriptedGpuBackend(info) if info is not None else ScriptedGpuBackend(available=False, reason=reason)
