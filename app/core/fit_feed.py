"""What the fit panel prices against, from one sampler reading: the RAM a load can have, and the GPU's
size with what other processes hold on it, in 64 MiB steps so that small drifts do not re-price it
every second."""

from __future__ import annotations

from app.core.memory.host import HostMemory, host_memory_from
from app.core.memory.pricing import others_bytes
from app.core.telemetry import GpuSample, HostSample
from app.core.units import MIB

FEED_STEP_BYTES = 64 * MIB


def _stepped(n_bytes: int) -> int:
    return n_bytes // FEED_STEP_BYTES * FEED_STEP_BYTES


def host_budget(host: HostSample) -> HostMemory:
    """The RAM a new load can have (64 MiB steps) and the host's total, from one host reading."""
    ram = host_memory_from(host.ram_total_mib, host.ram_used_mib, host.server_rss_mib)
    return HostMemory(_stepped(ram.available_bytes), ram.total_bytes)


def gpu_budget(gpu: GpuSample, server_running: bool, loaded_vram_bytes: int) -> tuple[int, int, int]:
    """(the GPU's size, what processes other than the server hold on it in 64 MiB steps, the driver's reserve),
    all in bytes, from one GPU reading; `loaded_vram_bytes` is what the server says its loaded models hold.
    The reserve is 0 where the driver does not report it apart: then "others" holds it."""
    others = others_bytes(gpu.memory_used_mib, gpu.server_memory_mib, server_running, loaded_vram_bytes)
    return int(gpu.memory_total_mib * MIB), _stepped(others), int(gpu.reserved_known_mib * MIB)


__all__ = ["FEED_STEP_BYTES", "gpu_budget", "host_budget"]
