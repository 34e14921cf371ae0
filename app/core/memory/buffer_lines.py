"""llama.cpp's own account of the buffers a load allocated, as its log prints them at log verbosity 4:

    load_tensors:        CUDA0 model buffer size =  8096.47 MiB
    load_tensors:   CPU_Mapped model buffer size =   417.30 MiB
    llama_context:  CUDA_Host  output buffer size =     1.00 MiB
    llama_kv_cache:      CUDA0 KV buffer size =  6400.00 MiB
    llama_memory_recurrent:      CUDA0 RS buffer size =    12.00 MiB
    sched_reserve:      CUDA0 compute buffer size =   728.00 MiB

(one `llama_kv_cache` line per cache: a model with sliding-window layers logs two). A buffer named after a
device and its index (`CUDA0`, `ROCm1`, `Vulkan0`, `MTL0`) is in that device's memory; the host-side ones
(`CPU`, `CPU_Mapped`, `CUDA_Host`, `CPU_REPACK`) are in RAM."""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.core.units import MIB

_LINE = re.compile(r"^\s*\w+:\s+(\S+)\s+(model|KV|RS|compute|output) buffer size\s*=\s*([0-9]+(?:\.[0-9]+)?) MiB\s*$")
_DEVICE = re.compile(r"^([A-Za-z]+)(\d+)$")  # a device buffer: its backend's name and the device's index


@dataclass(frozen=True)
class BufferLine:
    """One buffer as logged: its backend buffer's name, what it holds, its size and (for a device buffer) the
    device's index."""

    buffer: str  # "CUDA0", "CPU_Mapped", "CUDA_Host"
    kind: str  # "model", "KV", "RS" (recurrent state), "compute" or "output"
    size_bytes: int
    device: int | None  # the device's index for a GPU buffer; None for one in host memory


def parse_buffer_line(text: str) -> BufferLine | None:
    """The buffer a log line tells of (the log's own prefix already removed), None for any other line."""
    if "buffer size" not in text:
        return None
    m = _LINE.match(text)
    if m is None:
        return None
    name, kind, mib = m.group(1), m.group(2), float(m.group(3))
    device = _DEVICE.match(name)
    return BufferLine(name, kind, round(mib * MIB), int(device.group(2)) if device else None)


__all__ = ["BufferLine", "parse_buffer_line"]
