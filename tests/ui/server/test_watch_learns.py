"""The runtime learner fed where the app feeds its watchdog: the server's log lines through the server controller
(on the loop thread, read by llama-server's own log reader) and GPU samples from a real Sampler (its thread),
with the readings of the H200's recorded load (benchmarks/vram/h200_llama_server_run2.json)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from app.adapters.aio import LoopThread
from app.adapters.storage.allowance_store import AllowanceStore
from app.adapters.telemetry.host import HostProbe
from app.adapters.telemetry.sampler import Sampler
from app.backends.llama_server.log_signals import log_signal_reader
from app.core.memory.allowance import AllowanceSource
from app.core.models import RunningModel
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState, ServerStatus
from app.core.telemetry import GpuInfo
from app.core.throughput import TokenMeter
from app.core.units import MIB
from app.services.runtime_learner import RuntimeLearner
from app.services.watchdog import Watchdog
from app.ui.server.controller import ServerController
from app.ui.server.watch import ServerWatch
from tests.fakes.scripted_gpu import GpuReading, ScriptedGpuBackend

ROOT = Path(__file__).resolve().parents[3]
ROW = json.loads((ROOT / "benchmarks/vram/h200_llama_server_run2.json").read_text())["rows"][0]
H200 = GpuInfo("NVIDIA H200", "580.159.04", 143771.0)
LOAD = [f"0.00.644.935 I load_tensors:        CUDA0 model buffer size = {ROW['cuda0_model']:8.2f} MiB",
        f"0.01.531.920 I llama_kv_cache:      CUDA0 KV buffer size = {ROW['cuda0_kv']:8.2f} MiB",
        f"0.01.563.694 I sched_reserve:      CUDA0 compute buffer size = {ROW['cuda0_compute']:8.2f} MiB",
        "0.01.651.167 I srv    load_model: initializing, n_slots = 1, n_ctx_slot = 4096, kv_unified = 'false'"]


@pytest.fixture
def loop():
    with LoopThread() as running:
        yield running


def on_loop(loop: LoopThread, *calls) -> None:
    async def run() -> None:
        for fn, arg in calls:
            fn(arg)
    loop.run(run(), timeout=10)


def sample_until(qtbot, watch: ServerWatch, condition) -> None:
    gpu = ScriptedGpuBackend(H200, script=[GpuReading(ROW["process_mib"] + 615, 0.0, 90.0, 35.0, ROW["process_mib"])])
    sampler = Sampler(gpu, HostProbe(), server_pids=lambda: [os.getpid()], token_meter=TokenMeter(), interval_s=0.05,
                      on_sample=watch.on_sample)
    sampler.start()
    try:
        qtbot.waitUntil(condition, timeout=5000)
    finally:
        assert sampler.stop()


def test_a_load_the_app_sees_teaches_the_learner_off_the_gui_thread(qtbot, loop, tmp_path) -> None:
    learner = RuntimeLearner(AllowanceStore(tmp_path), H200)
    controller = ServerController(loop, None, lambda _url: None, lambda _s: None,
                                  last_good=ServerSettings(backend="llama_server"))
    watch = ServerWatch(Watchdog(), log_signal_reader, lambda: controller.settings, learner=learner)
    controller.tap(on_log=watch.on_log, on_status=watch.on_status, on_loaded=watch.on_loaded)
    try:
        on_loop(loop, (controller.on_status, ServerStatus(ServerState.STARTING, pid=100)),
                *((controller.on_log, line) for line in LOAD))
        sample_until(qtbot, watch, lambda: learner.allowance().source is AllowanceSource.LEARNED)
    finally:
        controller.shutdown()
    assert learner.allowance().size_bytes / MIB == pytest.approx(588.24, abs=0.01)
    assert RuntimeLearner(AllowanceStore(tmp_path), H200).allowance() == learner.allowance()  # kept for the next start


def test_readings_while_two_models_are_loaded_teach_nothing(qtbot, loop, tmp_path) -> None:
    learner = RuntimeLearner(AllowanceStore(tmp_path), H200)
    taken: list[object] = []
    controller = ServerController(loop, None, lambda _url: None, lambda _s: None,
                                  last_good=ServerSettings(backend="llama_server"))
    watch = ServerWatch(Watchdog(), log_signal_reader, lambda: controller.settings, learner=learner)
    controller.tap(on_log=watch.on_log, on_status=watch.on_status, on_loaded=watch.on_loaded)
    watch.on_loaded([RunningModel("a", "a", 1, 1), RunningModel("b", "b", 1, 1)])
    try:
        on_loop(loop, *((controller.on_log, line) for line in LOAD))

        def counted(sample) -> None:
            watch.on_sample(sample)
            taken.append(sample)
        gpu = ScriptedGpuBackend(H200, script=[GpuReading(ROW["process_mib"] + 615, 0.0, 90.0, 35.0, ROW["process_mib"])])
        sampler = Sampler(gpu, HostProbe(), server_pids=lambda: [os.getpid()], token_meter=TokenMeter(),
                          interval_s=0.05, on_sample=counted)
        sampler.start()
        try:
            qtbot.waitUntil(lambda: len(taken) >= 3, timeout=5000)
        finally:
            assert sampler.stop()
    finally:
        controller.shutdown()
    assert learner.allowance().source is AllowanceSource.DEFAULT
