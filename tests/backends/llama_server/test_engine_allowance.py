"""The real embedded engine (the bundled llama-server, a CPU build, serving the bundled SmolLM2) started as the app
starts it: its command line asks for llama.cpp's debug verbosity, so its log holds the load's buffer lines, which
the backend's reader turns into BufferLogged — every one in host memory here. With no GPU buffer, no runtime
allowance is learnt, whatever the GPU readings say."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from app.adapters.aio import LoopThread
from app.backends.llama_server.log_signals import LlamaServerLogSignals
from app.backends.llama_server.supervisor import LlamaServerSupervisor
from app.backends.llama_server.tuning import llama_server_settings
from app.core.memory.allowance import DEFAULT_ALLOWANCE
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState
from app.core.telemetry import GpuInfo, GpuSample
from app.core.watch.signals import BufferLogged, LaunchSeen, LogSignal
from app.services.runtime_learner import RuntimeLearner
from tests.backends.llama_server.engine_child import free_port

pytestmark = pytest.mark.engine
START_S = 180.0  # SmolLM2 loads in about a second; a busy 2-core machine may take far longer


class Recording(LlamaServerLogSignals):
    """The backend's reader, keeping what it read (the log follower's thread) for the test."""

    def __init__(self) -> None:
        super().__init__()
        self.read_signals: list[LogSignal] = []
        self.ready = threading.Event()

    def read(self, line: str) -> Sequence[LogSignal]:
        found = super().read(line)
        self.read_signals.extend(found)
        if any(isinstance(s, LaunchSeen) and s.parallel for s in found):
            self.ready.set()
        return found


def test_the_engines_log_yields_its_cpu_buffers_and_teaches_nothing(supervisor_loop: LoopThread, tmp_path: Path,
                                                                    llama_server_binary: Path,
                                                                    bundled_model: Path) -> None:
    learner = RuntimeLearner(None, GpuInfo("NVIDIA H200", "580.159.04", 143771.0))
    reader = Recording()
    learner.follow(reader)
    base = ServerSettings(backend="llama_server", port=free_port(), context_length=512, num_parallel=2)
    settings = llama_server_settings(base, binary=str(llama_server_binary), model_path=str(bundled_model), threads=2)
    supervisor = LlamaServerSupervisor(settings, on_status=lambda _s: None, on_log=learner.feed_log,
                                       start_timeout_s=START_S, stop_grace_s=5.0, health_interval_s=0.2,
                                       runtime_dir=tmp_path / "run")
    try:
        status = supervisor_loop.run(supervisor.start(), START_S)
        assert status.state is ServerState.RUNNING_MANAGED, status.message
        assert reader.ready.wait(START_S), "the engine never logged its slots"
        # a reading as if the card held the process: nothing to take it against
        learner.feed_gpu(GpuSample(t=0.0, memory_used_mib=1200.0, memory_total_mib=143771.0, server_memory_mib=600.0,
                                   utilization_pct=0.0, power_w=80.0, temperature_c=30.0))
    finally:
        supervisor_loop.run(supervisor.close(), 60)

    buffers = [s for s in reader.read_signals if isinstance(s, BufferLogged)]
    kinds = [(b.buffer, b.kind) for b in buffers]
    assert ("CPU", "KV") in kinds and ("CPU", "compute") in kinds and ("CPU", "output") in kinds
    assert any(kind == "model" and name.startswith("CPU") for name, kind in kinds)  # CPU_Mapped, or CPU
    assert all(b.device is None for b in buffers)  # a CPU build: every buffer in host memory
    kv = next(b for b in buffers if b.kind == "KV")
    assert "KV buffer size =" in kv.line and kv.size_bytes > 0
    assert learner.allowance() is DEFAULT_ALLOWANCE
