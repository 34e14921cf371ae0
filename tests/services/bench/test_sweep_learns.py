"""The sweep's feeds teach the runtime learner (the command-line sweep has no other): the managed server's log
lines through a ServerFeed, the reading taken after each load, each restart a new load. The H200's recorded loads
(benchmarks/vram/h200_llama_server_run2.json) are the lines and readings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.backends.llama_server.log_signals import log_signal_reader
from app.core.memory.allowance import AllowanceSource
from app.core.telemetry import GpuInfo, GpuSample
from app.core.units import MIB
from app.services.bench.sweep_watch import RunWatch, ServerFeed
from app.services.runtime_learner import RuntimeLearner

ROOT = Path(__file__).resolve().parents[3]
ROWS = json.loads((ROOT / "benchmarks/vram/h200_llama_server_run2.json").read_text())["rows"]
H200 = GpuInfo("NVIDIA H200", "580.159.04", 143771.0)


def lines(r: dict) -> list[str]:
    return [f"0.00.644.935 I load_tensors:        CUDA0 model buffer size = {r['cuda0_model']:8.2f} MiB",
            f"0.01.531.920 I llama_kv_cache:      CUDA0 KV buffer size = {r['cuda0_kv']:8.2f} MiB",
            f"0.01.563.694 I sched_reserve:      CUDA0 compute buffer size = {r['cuda0_compute']:8.2f} MiB",
            f"0.01.651.167 I srv    load_model: initializing, n_slots = {r['parallel']}, n_ctx_slot = 4096, "
            "kv_unified = 'false'"]


def reading(mib: float) -> GpuSample:
    return GpuSample(t=0.0, memory_used_mib=mib + 615, memory_total_mib=H200.memory_total_mib, server_memory_mib=mib,
                     utilization_pct=0.0, power_w=90.0, temperature_c=35.0)


def test_each_point_the_sweep_loads_teaches_the_learner() -> None:
    learner = RuntimeLearner(None, H200)
    feed = ServerFeed()
    watch = RunWatch("http://127.0.0.1:8080", log_signal_reader, learner=learner)
    unsubscribe = feed.subscribe(watch.log, watch.status)
    for r in ROWS[:3]:
        watch.restarting(None)  # the sweep restarts the server for the point
        for line in lines(r):
            feed.on_log(line)
        watch.learn(reading(r["process_mib"]))  # after the load, before the work
        watch.gpu(reading(r["peak_mib"]))  # during the work: the pool grown
    unsubscribe()
    learnt = learner.allowance()
    assert learnt.source is AllowanceSource.LEARNED and learnt.loads == 3
    assert learnt.size_bytes / MIB == pytest.approx(588.24, abs=0.01)


def test_without_a_learner_the_watch_is_as_before() -> None:
    watch = RunWatch("http://127.0.0.1:8080", log_signal_reader)
    for line in lines(ROWS[0]):
        watch.log(line)
    watch.learn(reading(ROWS[0]["process_mib"]))
    assert watch.events() == ()
