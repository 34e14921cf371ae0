"""The buffer lines of the llama-server child Ollama 0.32.15 runs, passed through into Ollama's log (the child
starts with `--log-verbosity 4 --no-log-prefix`), read into BufferLogged: the real logs recorded here (a CPU
build: every buffer in host memory) and the CUDA0 lines of the H200's loads in the same form."""

from __future__ import annotations

from pathlib import Path

from app.backends.ollama.log_signals import OllamaLogSignals
from app.core.units import MIB
from app.core.watch.signals import BufferLogged, LaunchSeen, LoadFinished, LogSignal

ROOT = Path(__file__).resolve().parents[3]
REAL = ROOT / "tests/data/ollama/real"


def read(lines: list[str]) -> list[LogSignal]:
    reader = OllamaLogSignals()
    return [s for line in lines for s in reader.read(line)]


def test_the_real_ollama_log_passes_the_childs_buffers_through() -> None:
    found = read((REAL / "serve_default.log").read_text().splitlines())
    buffers = [s for s in found if isinstance(s, BufferLogged)]
    assert [(b.buffer, b.kind, b.size_bytes, b.device) for b in buffers[:4]] == [
        ("CPU", "model", round(92.10 * MIB), None), ("CPU", "output", round(0.19 * MIB), None),
        ("CPU", "KV", 90 * MIB, None), ("CPU", "compute", round(18.64 * MIB), None)]
    assert buffers[0].line == "load_tensors:          CPU model buffer size =    92.10 MiB"  # as Ollama logged it
    assert buffers[0].logged_at is not None  # dated by the Ollama line before it
    # the order the learner relies on: the engine starts, logs its buffers, initialises its slots, is ready
    first = found.index(buffers[0])
    starting = next(i for i, s in enumerate(found) if isinstance(s, LaunchSeen) and s.model)
    slots = next(i for i, s in enumerate(found) if isinstance(s, LaunchSeen) and s.parallel and not s.model)
    ready = next(i for i, s in enumerate(found) if isinstance(s, LoadFinished))
    assert starting < first < found.index(buffers[3]) < slots < ready


def test_the_h200_lines_through_ollama() -> None:
    lines = ['time=2026-12-02T10:00:00.000Z level=INFO source=llama_server.go:433 msg="starting llama-server" '
             'cmd="/usr/lib/ollama/llama-server --model /m/blobs/sha256-abc -c 16384 -np 1 --log-verbosity 4"']
    lines += (ROOT / "benchmarks/vram/h200_heldout_buffer_lines.txt").read_text().splitlines()[1:10]
    found = read(lines)
    gpu = [(s.kind, round(s.size_bytes / MIB, 2)) for s in found if isinstance(s, BufferLogged) and s.device == 0]
    assert gpu == [("model", 6956.18), ("KV", 1024.0), ("KV", 480.0), ("compute", 609.02)]
