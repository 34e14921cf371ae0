"""Each sweep point carries what the server did without saying so while it ran, read by a watchdog the
runner feeds from what it already reads: the loaded-models check (a model spilled to the CPU), the GPU
samples (the card lowering its clocks), the server's log lines and statuses as its supervisor hands them
on. Against the stand-in `ollama` run as a real subprocess by a real supervisor; the GPU is scripted (no
GPU here), its clock-event reasons as NVML reports them."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from app.backends.ollama.client import OllamaClient, load_client
from app.backends.ollama.planner import OLLAMA_PLANNER
from app.backends.ollama.supervisor import ServerSupervisor
from app.core.bench.outcome import FailureKind, PointStatus
from app.core.bench.stats import LatencyTargets
from app.core.bench.sweep import SweepAxes, SweepSpec
from app.core.bench.workload import BenchPrompt, LoadPlan
from app.core.server.settings import ServerSettings
from app.core.telemetry import GpuSample, GpuSlowdown
from app.core.watch.events import EventKind, Severity, Source
from app.core.watch.signals import LogSignal, ServerListening
from app.services.bench.sweep_runner import SweepRunner
from app.services.bench.sweep_watch import ServerFeed
from tests.fakes.ollama.server_fixtures import free_port
from tests.fakes.scripted_gpu import GpuReading, ScriptedGpuBackend
from app.adapters.aio import LoopThread

FAST = {"FAKE_OLLAMA_TOKENS_PER_S": "1000", "FAKE_OLLAMA_PROMPT_TOKENS_PER_S": "100000",
        "FAKE_OLLAMA_ANSWER_TOKENS": "10", "FAKE_OLLAMA_DECODE_SLOWDOWN": "0.5"}
SMALL = "qwen3:0.6b"
WAIT_S = 60.0


def spec(base: ServerSettings, parallel: tuple[int, ...]) -> SweepSpec:
    plan = LoadPlan(model=SMALL, prompts=(BenchPrompt("p", "hello"),), requests=4, num_predict=None, think=False,
                    warmup_requests=1)
    return SweepSpec(base, SweepAxes(parallel=parallel), plan, LatencyTargets(2000, 100), managed=True)


class ListeningReader:
    """A log reader of the port's shape that knows one line: the server saying it listens (each start)."""

    heard: list[str] = []

    def read(self, line: str) -> Sequence[LogSignal]:
        if "Listening on" not in line:
            return []
        ListeningReader.heard.append(line)
        return [ServerListening(line)]


class ThrottledGpu(ScriptedGpuBackend):
    """The scripted card, reporting the power-cap and thermal clock-event reasons while `slow` is set."""

    def __init__(self) -> None:
        super().__init__(script=[GpuReading(memory_used_mib=3_000.0, utilization_pct=97.0, power_w=448.0,
                                            temperature_c=88.0, server_memory_mib=2_400.0)])
        self.slow = threading.Event()

    def sample(self, t: float, server_pids: Sequence[int]) -> GpuSample | None:
        sample = super().sample(t, server_pids)
        if sample is None or not self.slow.is_set():
            return sample
        return dataclasses.replace(sample, slowdowns=frozenset({GpuSlowdown.POWER_CAP, GpuSlowdown.THERMAL}))


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch):
    def set_env(**values: str) -> None:
        for name, value in {**FAST, **values}.items():
            monkeypatch.setenv(name, value)
    return set_env


@pytest.fixture
def fed(supervisor_loop: LoopThread, standin_ollama: Path) -> Iterator[tuple[ServerFeed, list[ServerSupervisor]]]:
    """A ServerFeed and the supervisors made to report to it (closed after the test)."""
    feed, made = ServerFeed(), []
    yield feed, made
    for supervisor in made:
        supervisor_loop.run(supervisor.close(), 30)


def supervised(feed: ServerFeed, made: list[ServerSupervisor], base: ServerSettings) -> ServerSupervisor:
    supervisor = ServerSupervisor(base, on_status=feed.on_status, on_log=feed.on_log, start_timeout_s=5.0,
                                  stop_grace_s=0.5, health_interval_s=0.2)
    made.append(supervisor)
    return supervisor


def test_a_spill_at_load_rides_on_the_failed_point_as_an_event(fed, supervisor_loop: LoopThread, env) -> None:
    env(FAKE_OLLAMA_OOM_ABOVE_MIB="99999", FAKE_OLLAMA_GPU_MIB="1500")  # parallel 2 needs 1694 MiB: 194 on the CPU
    feed, made = fed
    base = ServerSettings(port=free_port())
    supervisor = supervised(feed, made, base)
    ListeningReader.heard.clear()
    runner = SweepRunner(supervisor, OllamaClient, load_client, planner=OLLAMA_PLANNER,
                         log_signals=ListeningReader, server_feed=feed)
    run = supervisor_loop.run(runner.run(spec(base, (1, 2))), WAIT_S)
    one, two = run.results
    assert one.status is PointStatus.OK and one.events == () and not one.spoiled
    # The runner's own check fails the point; the watchdog's event rides along, not counted twice.
    assert two.status is PointStatus.FAILED and two.failure is FailureKind.SPILLED
    [spill] = two.events
    assert spill.kind is EventKind.LAYERS_ON_CPU and spill.subject == SMALL and two.spoiled_by == (EventKind.LAYERS_ON_CPU,)
    assert spill.evidence[0].source is Source.LOADED and spill.evidence[0].figures["size_vram_bytes"] == 1500 * 2 ** 20
    assert run.recommendation is not None and run.recommendation.index == one.point.index
    # Each restart was the sweep's own (a fresh watchdog per point): its "Listening on" and its new pid are no
    # restart behind the app's back, and no point saw the server crash.
    assert len(ListeningReader.heard) >= 2  # the server's own lines reached the watchdogs: one start per point
    everything = runner.watch.events()
    assert not [e for e in everything if e.kind in (EventKind.SERVER_RESTARTED, EventKind.SERVER_CRASHED)], everything


def test_a_gpu_slowing_down_makes_a_point_not_stable_and_not_recommended(fed, supervisor_loop: LoopThread,
                                                                        env) -> None:
    env()
    feed, made = fed
    base = ServerSettings(port=free_port())
    supervisor = supervised(feed, made, base)
    gpu = ThrottledGpu()
    runner = SweepRunner(supervisor, OllamaClient, load_client, gpu=gpu, server_pids=supervisor.server_pids,
                         sample_interval_s=0.05, planner=OLLAMA_PLANNER, server_feed=feed)

    def progress(p) -> None:
        if p.point == 1 and p.phase == "loading":
            gpu.slow.set()  # the card throttles while the second point runs

    run = supervisor_loop.run(runner.run(spec(base, (1, 2)), on_progress=progress), WAIT_S)
    one, two = run.results
    assert one.status is PointStatus.OK and not one.spoiled
    assert two.status is PointStatus.UNSTABLE and two.failure is FailureKind.SPOILED
    assert two.spoiled_by == (EventKind.GPU_SLOWDOWN,) and two.reason == "not stable: GPU slowing down"
    [slow] = two.events
    assert slow.severity is Severity.SEVERE and slow.evidence[0].source is Source.GPU  # thermal: not the card's limit
    assert slow.evidence[0].text == "clock-event reasons: power cap, thermal"
    assert two.detail.startswith("GPU slowing down: The GPU lowers its clocks (power cap, thermal) at 88 °C")
    assert two.stable_text() == "⚠ not stable: GPU slowing down"
    # Never recommended, whatever its speed, and the recommendation says why it was left out.
    rec = run.recommendation
    assert rec is not None and rec.index == one.point.index and rec.spoiled == (two.point.index,)
    assert "Left out, not stable because of what the server did meanwhile: parallel 2 (GPU slowing down)." in rec.text
