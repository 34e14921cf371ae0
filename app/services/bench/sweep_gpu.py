"""GPU readings over a benchmark's measured window: the server's own peak VRAM and the card's, mean utilisation
and power, energy;
and whether a loaded model that is not on the GPU spilled there or runs on a machine without one."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence

from app.core.memory.allowance import DEFAULT_ALLOWANCE, RuntimeAllowance
from app.core.bench.sweep import GpuFigures, ServerPeakUnknown
from app.core.errors import ServerError
from app.core.memory.estimator import GpuMemory
from app.core.memory.pricing import others_bytes
from app.core.models import RunningModel
from app.core.ports.catalog import ModelCatalog
from app.core.units import MIB
from app.core.telemetry import GpuBackend, GpuInfo, GpuSample
from app.services.bench.window import PollingWindow


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def figures_from(samples: Sequence[GpuSample], baseline: GpuSample | None, server_known: bool = True) -> GpuFigures:
    """The server's own peak (its processes' memory as NVML attributes it), the card's peak and baseline (as
    nvidia-smi shows them, other programs included), mean utilisation and power, and energy (trapezoid rule over
    the power readings, joules); None where there were no readings. `server_known`: whether the server's processes
    were known while sampling (an attached or remote server's are not); where the card was read but the server's
    own memory was not, the figures say why instead of standing the card's in for it."""
    if not samples:
        return GpuFigures()
    used = _finite([s.memory_used_mib for s in samples])
    server = _finite([s.server_memory_mib for s in samples])
    util = _finite([s.utilization_pct for s in samples])
    power = [(s.t, s.power_w) for s in samples if math.isfinite(s.power_w)]
    energy = None
    if len(power) >= 2:
        energy = sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in zip(power, power[1:]))
    unknown = None
    if not server and used:
        unknown = ServerPeakUnknown.NOT_ATTRIBUTED if server_known else ServerPeakUnknown.NOT_HERE
    return GpuFigures(
        card_peak_mib=max(used) if used else None,
        card_baseline_mib=baseline.memory_used_mib if baseline and math.isfinite(baseline.memory_used_mib) else None,
        util_mean_pct=sum(util) / len(util) if util else None,
        power_mean_w=sum(p for _, p in power) / len(power) if power else None,
        energy_j=energy if energy and energy > 0 else None,
        server_peak_mib=max(server) if server else None,
        server_unknown=unknown,
    )


def gpu_facts(gpu: GpuBackend | None) -> tuple[GpuInfo | None, str]:
    """The GPU's static facts, or None and why there are none (blocks on the driver: call in a worker)."""
    if gpu is None:
        return None, "no GPU backend"
    if gpu.available:
        return gpu.info(), ""
    return None, gpu.unavailable_reason


# The label of a point measured on a server without a GPU (it is not a spill: there is nowhere else).
ON_CPU_REASON = "on the CPU (no GPU)"


def runs_without_gpu(gpu: GpuBackend | None, loaded: RunningModel | None) -> bool:
    """True when the server has no GPU at all: none can be read here and it holds nothing in VRAM
    (/api/ps size_vram 0). Such a server runs on the CPU by design and is measured there."""
    no_gpu_here = gpu is None or not gpu.available
    return no_gpu_here and loaded is not None and loaded.size_vram_bytes == 0


def computes_on_gpu(gpu: GpuBackend | None, loaded: RunningModel | None) -> bool:
    """True when the server computes on the GPU: its loaded model holds GPU memory (/api/ps size_vram);
    without a loaded model to ask (or one whose server does not report where it sits, as llama-server),
    when a GPU can be read here."""
    if loaded is not None and loaded.size_vram_bytes is not None:
        return loaded.size_vram_bytes > 0
    return gpu is not None and gpu.available


def spill_words(gpu: GpuBackend | None, loaded: RunningModel | None) -> str:
    """The server's own word for a model partly or wholly off its GPU ("100% CPU"), "" when it is all
    on the GPU, or runs on a machine without one."""
    if loaded is None or loaded.size_bytes is None or loaded.size_vram_bytes is None:
        return ""  # the server does not say where its model sits
    if loaded.size_vram_bytes >= loaded.size_bytes or runs_without_gpu(gpu, loaded):
        return ""
    return loaded.processor


async def gpu_memory_now(window: GpuWindow, client: ModelCatalog, server_running: bool,
                         allowance: RuntimeAllowance = DEFAULT_ALLOWANCE) -> GpuMemory | None:
    """Total GPU bytes, what other processes use and the driver's reserve, as the estimator prices against
    (None without a reading), each process priced with the runtime `allowance` (learnt on this card, else the
    default).

    What the server's loaded models hold is not "others": the server's list of loaded models says how much to leave out.
    The reserve is its own part where the driver reports it apart from "used" (else "used" holds it)."""
    sample = await window.read()
    if sample is None:
        return None
    try:
        loaded = sum(m.size_vram_bytes or 0 for m in await client.ps())
    except ServerError:
        loaded = 0
    used_by_others = others_bytes(sample.memory_used_mib, sample.server_memory_mib, server_running, loaded)
    return GpuMemory.with_allowance(int(sample.memory_total_mib * MIB), used_by_others,
                                    int(sample.reserved_known_mib * MIB), allowance)


class GpuWindow(PollingWindow[GpuSample]):
    """Samples the GPU every interval_s seconds while a workload runs (NVML calls in a worker thread,
    so a slow driver never stalls the streams' clock)."""

    def __init__(self, gpu: GpuBackend | None, server_pids: Callable[[], Sequence[int]],
                 interval_s: float = 0.25, clock: Callable[[], float] = time.monotonic,
                 on_sample: Callable[[GpuSample], None] | None = None) -> None:
        super().__init__(interval_s, on_sample)
        self._gpu = gpu
        self._server_pids = server_pids
        self._clock = clock
        self.server_known = False  # whether the server's processes were known at any reading

    def _pids(self) -> list[int]:
        pids = list(self._server_pids())
        self.server_known = self.server_known or bool(pids)
        return pids

    @property
    def enabled(self) -> bool:
        """True when there is a GPU to read."""
        return self._gpu is not None and self._gpu.available

    async def read(self) -> GpuSample | None:
        """One reading now (None without a GPU or when the driver does not answer)."""
        if not self.enabled:
            return None
        assert self._gpu is not None
        try:
            return await asyncio.to_thread(self._gpu.sample, self._clock(), self._pids())
        except Exception:  # noqa: BLE001 - a failed reading is a gap, never a failed benchmark
            return None

    async def stop(self) -> None:
        """Take a last reading and stop."""
        await self.finish()


__all__ = ["ON_CPU_REASON", "GpuWindow", "computes_on_gpu", "figures_from", "gpu_facts", "gpu_memory_now", "runs_without_gpu",
           "spill_words"]
