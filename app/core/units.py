"""Byte units, one definition for the whole app.

Memory is counted in binary units — NVML, llama.cpp's buffer lines and the servers' loaded-model
sizes are bytes that people read as KiB/MiB/GiB — while download sizes are quoted in decimal
gigabytes, as model registries and the servers' pull and list commands print them.
"""

from __future__ import annotations

KIB = 1024  # bytes in a kibibyte
MIB = 1024 * KIB  # bytes in a mebibyte
GIB = 1024 * MIB  # bytes in a gibibyte
MIB_PER_GIB = GIB // MIB  # mebibytes in a gibibyte: NVML reports MiB, plots show GiB
GB = 1_000_000_000  # bytes in a decimal gigabyte (download and file sizes)
