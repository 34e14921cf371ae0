"""The sweep prices against the card as the driver splits it: what others use and the driver's reserve apart."""

from __future__ import annotations

import asyncio

from app.core.telemetry import GpuInfo
from app.core.units import MIB
from app.services.bench.sweep_gpu import GpuWindow, gpu_memory_now
from tests.fakes.scripted_gpu import GpuReading, ScriptedGpuBackend


H200 = GpuInfo("NVIDIA H200", "580.159.04", 143_771.0)


class NothingLoaded:
    """The one call gpu_memory_now makes of the server's catalog: its loaded models (none)."""

    async def ps(self) -> list[object]:
        return []


def _gpu_now(reading: GpuReading, server_running: bool) -> object:
    window = GpuWindow(ScriptedGpuBackend(H200, script=[reading]), lambda: [4242])
    return asyncio.run(gpu_memory_now(window, NothingLoaded(), server_running))  # type: ignore[arg-type]


def test_the_reserve_is_its_own_part_and_not_another_process():
    # an H200 with another process holding 118 GiB and the server 15 GiB; memory info v2 reports the reserve apart
    reading = GpuReading(memory_used_mib=118_592.0 + 15_000.0, utilization_pct=0.0, power_w=90.0, temperature_c=35.0,
                         server_memory_mib=15_000.0, memory_reserved_mib=615.0625)
    gpu = _gpu_now(reading, server_running=True)
    assert gpu.used_by_others_bytes == 118_592 * MIB and gpu.reserved_bytes == int(615.0625 * MIB)
    assert gpu.free_bytes == int((143_771.0 - 118_592.0 - 615.0625) * MIB)  # the server's own memory comes back


def test_without_a_reported_reserve_used_holds_it_and_it_is_counted_once():
    reading = GpuReading(memory_used_mib=118_592.0 + 615.0625 + 15_000.0, utilization_pct=0.0, power_w=90.0,
                         temperature_c=35.0, server_memory_mib=15_000.0)
    gpu = _gpu_now(reading, server_running=True)
    assert gpu.reserved_bytes == 0
    assert gpu.free_bytes == int((143_771.0 - 118_592.0 - 615.0625) * MIB)
