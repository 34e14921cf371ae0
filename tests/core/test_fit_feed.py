"""What the fit panel prices against, from one sampler reading, in 64 MiB steps."""

from __future__ import annotations

import math

from app.core.fit_feed import FEED_STEP_BYTES, gpu_budget, host_budget
from app.core.telemetry import GpuSample, HostSample
from app.core.units import GIB, MIB


def _gpu(used_mib: float, server_mib: float = math.nan, reserved_mib: float = math.nan) -> GpuSample:
    return GpuSample(t=0.0, memory_used_mib=used_mib, memory_total_mib=24_564.0, server_memory_mib=server_mib,
                     utilization_pct=0.0, power_w=0.0, temperature_c=0.0, memory_reserved_mib=reserved_mib)


def test_the_host_budget_counts_the_servers_memory_as_free_in_whole_steps():
    host = HostSample(t=0.0, ram_used_mib=10_000.0, ram_total_mib=32_000.0, server_cpu_pct=0.0,
                      server_rss_mib=1_000.0)
    budget = host_budget(host)
    assert budget.available_bytes % FEED_STEP_BYTES == 0
    assert 23_000 * MIB - FEED_STEP_BYTES < budget.available_bytes <= 23_000 * MIB  # free + what a restart gives back
    assert budget.total_bytes == 32_000 * MIB


def test_the_gpu_budget_leaves_out_the_server_and_steps_what_others_hold():
    total, others, reserved = gpu_budget(_gpu(15_000.0, server_mib=14_000.0), server_running=True,
                                         loaded_vram_bytes=0)
    assert total == int(24_564.0 * MIB) and others == 960 * MIB  # 1000 MiB others, down to a 64 MiB step
    assert reserved == 0  # the driver did not report its reserve apart: "used" holds it
    _total, stopped, _ = gpu_budget(_gpu(3 * 1024.0), server_running=False, loaded_vram_bytes=0)
    assert stopped == 3 * GIB  # no server running: everything on the card is someone else's
    _total, told, _ = gpu_budget(_gpu(15_000.0), server_running=True, loaded_vram_bytes=14_000 * MIB)
    assert told == 960 * MIB  # no per-process figure: what the server says its models hold


def test_the_gpu_budget_gives_the_drivers_reserve_apart_and_exactly():
    # nvidia-smi's used (memory info v2) leaves the 615 MiB reserve out; it is not another process's
    total, others, reserved = gpu_budget(_gpu(15_000.0, server_mib=14_000.0, reserved_mib=615.0625),
                                         server_running=True, loaded_vram_bytes=0)
    assert others == 960 * MIB and reserved == int(615.0625 * MIB)
    free_for_a_load = total - others - reserved
    assert free_for_a_load >= int((24_564.0 - 15_000.0 - 615.0625 + 14_000.0) * MIB)  # others stepped down, not up
