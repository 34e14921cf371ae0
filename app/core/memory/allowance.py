"""The CUDA runtime allowance: GPU memory a llama.cpp process holds beyond its own buffers (the CUDA
context, cuBLAS handles, loaded kernels). It differs by GPU model and driver, so the figure priced
says where it came from: the built-in default, a figure learnt from a load on this card, or one given.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from app.core.units import MIB

# One llama.cpp process on a consumer card (an RTX 4090 on a desktop). An H200 with driver 580 measured
# about 592 MiB; a figure learnt on the user's own card replaces this one.
DEFAULT_RUNTIME_OVERHEAD_BYTES = 450 * MIB


class AllowanceSource(str, Enum):
    """Where a runtime allowance comes from."""

    DEFAULT = "default"  # the built-in figure for a consumer card
    LEARNED = "learned"  # measured on this GPU model and driver from a load the app saw
    GIVEN = "given"  # set by the user


@dataclass(frozen=True)
class RuntimeAllowance:
    """The runtime figure priced per process, and where it came from."""

    size_bytes: int = DEFAULT_RUNTIME_OVERHEAD_BYTES
    source: AllowanceSource = AllowanceSource.DEFAULT
    gpu_name: str = ""  # the GPU model it was learnt on ("" unless learnt)
    driver: str = ""  # the driver version it was learnt with
    learned_at: str = ""  # ISO-8601 time of the load it was learnt from
    loads: int = 0  # loads it was learnt from

    def describe(self) -> str:
        """One line: the figure and its source, e.g. "592 MiB, learnt on NVIDIA H200 (driver 580.159.04)"."""
        mib = f"{self.size_bytes / MIB:.0f} MiB"
        if self.source is AllowanceSource.LEARNED:
            when = f", {self.learned_at[:16].replace('T', ' ')}" if self.learned_at else ""
            loads = f" from {self.loads} load{'s' if self.loads != 1 else ''}" if self.loads else ""
            return f"{mib}, learnt on {self.gpu_name or 'this GPU'} (driver {self.driver or 'unknown'}){loads}{when}"
        if self.source is AllowanceSource.GIVEN:
            return f"{mib}, as given"
        return f"{mib}, the default for a consumer card (learnt from the first load the app sees on this card)"


DEFAULT_ALLOWANCE = RuntimeAllowance()

__all__ = ["DEFAULT_ALLOWANCE", "DEFAULT_RUNTIME_OVERHEAD_BYTES", "AllowanceSource", "RuntimeAllowance"]
