"""llama.cpp's buffer lines read into BufferLogged, on real logs: the 48 held-out loads on the NVIDIA H200
(benchmarks/vram/h200_heldout_buffer_lines.txt: every buffer line of those logs, as printed), the CUDA build's
logs in tests/data/gpu/ and the bundled CPU build's here (tests/data/llama_server/logs/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.backends.llama_server.log_signals import LlamaServerLogSignals
from app.core.memory.buffer_lines import parse_buffer_line
from app.core.units import MIB
from app.core.watch.signals import BufferLogged, LaunchSeen, LogSignal

ROOT = Path(__file__).resolve().parents[3]
HELDOUT = ROOT / "benchmarks/vram/h200_heldout_buffer_lines.txt"
DATA = ROOT / "tests/data"


def read(lines: list[str]) -> list[LogSignal]:
    reader = LlamaServerLogSignals()
    return [signal for line in lines for signal in reader.read(line)]


def heldout_logs() -> dict[str, list[str]]:
    logs: dict[str, list[str]] = {}
    name = ""
    for line in HELDOUT.read_text().splitlines():
        if line.startswith("== "):
            name = line[3:]
            logs[name] = []
        else:
            logs[name].append(line)
    return logs


def test_every_buffer_line_of_the_h200_loads_is_read() -> None:
    logs = heldout_logs()
    assert len(logs) == 48
    for name, lines in logs.items():
        found = read(lines)
        buffers = [s for s in found if isinstance(s, BufferLogged)]
        assert len(buffers) == sum("buffer size" in line for line in lines), name
        assert [b.line for b in buffers] == [line for line in lines if "buffer size" in line]  # as printed
        gpu = [b for b in buffers if b.device is not None]
        assert {b.buffer for b in gpu} == {"CUDA0"} and {b.device for b in gpu} == {0}
        assert {b.buffer for b in buffers if b.device is None} <= {"CPU_Mapped", "CUDA_Host", "CPU"}
        assert [b.kind for b in gpu][0] == "model" and [b.kind for b in gpu][-1] == "compute"
        # Gemma 3's sliding-window layers have a cache of their own: two KV buffers on the GPU
        assert sum(b.kind == "KV" for b in gpu) == (2 if "gemma3" in name else 1), name


def test_a_sliding_window_model_logs_two_caches_both_summed() -> None:
    lines = heldout_logs()["run1 gemma3-12b/server_16384_1_f16_off_2048_512.log"]
    gpu = [s for s in read(lines) if isinstance(s, BufferLogged) and s.device is not None]
    assert [(b.kind, b.size_bytes) for b in gpu] == [
        ("model", round(6956.18 * MIB)), ("KV", 1024 * MIB), ("KV", 480 * MIB), ("compute", round(609.02 * MIB))]


def test_the_cuda_builds_own_log_with_its_prefix() -> None:
    found = read((DATA / "gpu/llama_server_cuda_nglall_lv4.log").read_text().splitlines())
    buffers = [(s.buffer, s.kind, s.size_bytes / MIB) for s in found if isinstance(s, BufferLogged)]
    assert buffers == [("CPU_Mapped", "model", pytest.approx(72.0)), ("CUDA0", "model", pytest.approx(4097.52)),
                       ("CUDA_Host", "output", pytest.approx(0.25)), ("CUDA0", "KV", pytest.approx(512.0)),
                       ("CUDA0", "compute", pytest.approx(172.01)), ("CUDA_Host", "compute", pytest.approx(36.02))]
    buffer_at = max(i for i, s in enumerate(found) if isinstance(s, BufferLogged))
    assert any(isinstance(s, LaunchSeen) for s in found[buffer_at:])  # the slots line comes after the buffers


def test_the_default_verbosity_logs_no_buffer() -> None:
    found = read((DATA / "gpu/llama_server_cuda_ngl20_lv3.log").read_text().splitlines())
    assert not [s for s in found if isinstance(s, BufferLogged)]


def test_the_cpu_builds_buffers_are_in_host_memory() -> None:
    found = read((DATA / "llama_server/logs/load_np2_c1024_lv4.log").read_text().splitlines())
    buffers = [s for s in found if isinstance(s, BufferLogged)]
    assert [(b.buffer, b.kind, b.device) for b in buffers] == [
        ("CPU_Mapped", "model", None), ("CPU", "output", None), ("CPU", "KV", None), ("CPU", "compute", None)]
    assert buffers[0].line == "0.00.666.279 I load_tensors:   CPU_Mapped model buffer size =    92.10 MiB"


@pytest.mark.parametrize(("line", "expected"), [
    ("llama_memory_recurrent:      CUDA0 RS buffer size =    12.50 MiB", ("CUDA0", "RS", 0)),
    ("load_tensors:        CUDA1 model buffer size =  100.00 MiB", ("CUDA1", "model", 1)),
    ("load_tensors:      Vulkan0 model buffer size =  100.00 MiB", ("Vulkan0", "model", 0)),
    ("load_tensors:   CPU_REPACK model buffer size =  100.00 MiB", ("CPU_REPACK", "model", None)),
])
def test_other_buffers(line: str, expected: tuple[str, str, int | None]) -> None:
    parsed = parse_buffer_line(line)
    assert parsed is not None and (parsed.buffer, parsed.kind, parsed.device) == expected


@pytest.mark.parametrize("line", [
    "llama_kv_cache: size =   22.50 MiB (   512 cells,  30 layers,  2/2 seqs), K (f16):   11.25 MiB",
    "load_tensors:        CUDA0 model buffer size =  lots MiB",
    "common_memory_breakdown_print: |   - Host               |                  129 =    92 +      22 +      15 |",
    "",
])
def test_lines_that_are_not_a_buffer(line: str) -> None:
    assert parse_buffer_line(line) is None
