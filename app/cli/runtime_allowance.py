"""The runtime allowance a command prices with: the one given (--runtime-overhead-mib), else the one learnt on
this machine's GPU when the card priced is that GPU (its memory as NVML reports it, to the MiB), else the
default for a consumer card."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from app.adapters.storage.allowance_store import AllowanceStore
from app.adapters.telemetry.nvml import make_gpu_backend
from app.core.memory.allowance import DEFAULT_ALLOWANCE, AllowanceSource, RuntimeAllowance
from app.core.telemetry import GpuInfo
from app.core.units import MIB
from app.services.runtime_learner import RuntimeLearner

SAME_CARD_MIB = 1.0  # a card priced within this of the local GPU's memory is that GPU


def local_gpu() -> GpuInfo | None:
    """This machine's first NVIDIA GPU (None without one)."""
    gpu = make_gpu_backend()
    try:
        return gpu.info()
    finally:
        gpu.close()


def runtime_allowance(given_mib: float | None, gpu_total_mib: float, config_dir: str | None,
                      local: Callable[[], GpuInfo | None] | None = None) -> RuntimeAllowance:
    """The figure to price the card of `gpu_total_mib` with (see the module's docstring); `local` reads this
    machine's GPU (default: local_gpu)."""
    if given_mib is not None:
        return RuntimeAllowance(int(given_mib * MIB), AllowanceSource.GIVEN)
    info = (local or local_gpu)()
    if info is None or abs(info.memory_total_mib - gpu_total_mib) > SAME_CARD_MIB:
        return DEFAULT_ALLOWANCE
    return RuntimeLearner(AllowanceStore(Path(config_dir) if config_dir else None), info).allowance()


__all__ = ["local_gpu", "runtime_allowance"]
