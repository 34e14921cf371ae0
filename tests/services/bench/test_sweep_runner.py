"""The sweep runner against the stand-in `ollama` run as a real subprocess by a real supervisor:
a restart per point, failed points (OOM, CPU spill, predicted not to fit) marked and skipped over,
cancel and every other ending putting the server back, and the attached-server case."""

from __future__ import annotations

import re
import threading

import pytest

from app.adapters.prompt_corpus import bundled_corpus
from app.core.bench.prompt_maker import CorpusPromptMaker
from app.services.bench.sweep_runner import SweepRunner
from app.backends.ollama.planner import OLLAMA_PLANNER
from app.backends.ollama.client import OllamaClient, load_client
from app.core.bench.stats import LatencyTargets
from app.core.errors import DeckError, ModelNotFound
from app.core.bench.workload import BenchPrompt, LoadPlan
from app.core.server.state import ServerState
from app.core.server.settings import ServerSettings
from app.core.bench.outcome import FailureKind, PointStatus, RunStatus
from app.core.bench.scenario import Arrival, Length, RequestClass, Scenario
from app.core.bench.sweep import ServerPeakUnknown, SweepAxes, SweepSpec
from app.adapters.storage.saved_format import SAVED_FORMAT
from tests.fakes.scripted_gpu import GpuReading, ScriptedGpuBackend
from tests.fakes.ollama.server_fixtures import WAIT_S, free_port
from tests.fakes.ollama.recorded import real_version

FAST = {"FAKE_OLLAMA_TOKENS_PER_S": "1000", "FAKE_OLLAMA_PROMPT_TOKENS_PER_S": "100000",
        "FAKE_OLLAMA_ANSWER_TOKENS": "10", "FAKE_OLLAMA_DECODE_SLOWDOWN": "0.5"}
SMALL = "qwen3:0.6b"  # 1246 MiB loaded at parallel 1 (4096 ctx), 1694 at 2, 2590 at 4 in the stand-in


def workload(model: str = SMALL, **kw) -> LoadPlan:
    values = dict(model=model, prompts=(BenchPrompt("p", "hello"),), requests=4, num_predict=None, think=False,
                  warmup_requests=1)
    values.update(kw)
    return LoadPlan(**values)


def spec(base: ServerSettings, parallel=(1, 2), managed: bool = True, **kw) -> SweepSpec:
    axes = kw.pop("axes", SweepAxes(parallel=parallel))
    return SweepSpec(base, axes, kw.pop("plan", workload()), LatencyTargets(2000, 100), managed=managed, **kw)


def kinds_survive_saving(run) -> bool:
    """Each point's failure kind reads back from its saved form (which does not hold it)."""
    from app.core.bench.run import result_from_json, result_to_json

    return all(result_from_json(result_to_json(r), run.spec.targets, SAVED_FORMAT).failure is r.failure for r in run.results)


def parallel_started(lines: list[str]) -> list[int]:
    """OLLAMA_NUM_PARALLEL of each `ollama serve` start, from its server config log lines."""
    return [int(m.group(1)) for line in lines if (m := re.search(r"OLLAMA_NUM_PARALLEL:(\d+)", line))]


@pytest.fixture
def env(monkeypatch):
    def set_env(**values: str) -> None:
        for name, value in {**FAST, **values}.items():
            monkeypatch.setenv(name, value)

    return set_env


def test_each_point_restarts_the_server_and_the_settings_come_back(make_supervisor, env):
    env()
    base = ServerSettings(port=free_port(), num_parallel=1)
    h = make_supervisor(base)
    assert h.run(h.supervisor.start()).state is ServerState.RUNNING_MANAGED
    progress = []
    run = h.run(SweepRunner(h.supervisor, OllamaClient, load_client, planner=OLLAMA_PLANNER).run(spec(base, (2, 4)), on_progress=progress.append), timeout=60)
    assert [r.status for r in run.results] == [PointStatus.OK, PointStatus.OK]
    assert run.status is RunStatus.FINISHED and all(r.failure is None for r in run.results)
    assert parallel_started(h.logs.lines) == [1, 2, 4, 1]  # before, one per point, restored
    assert h.supervisor.settings == base and h.supervisor.status.state is ServerState.RUNNING_MANAGED
    tps = [r.output_tokens_per_s for r in run.results]
    # each point measured its own throughput (how it scales with slots is a timing: benchmarks/, not here)
    assert all(t is not None and t > 0 for t in tps)
    assert all(r.stats.requests_ok == 4 and r.loaded_vram_mib == r.loaded_size_mib for r in run.results)
    phases = [p.phase for p in progress]
    for phase in ("preparing", "restarting", "loading", "warm-up", "measuring", "restoring", "done"):
        assert phase in phases
    assert any(p.eta_s is not None for p in progress if p.point == 1)  # known once a point has finished
    assert run.fingerprint.server_version == real_version() and run.fingerprint.model == SMALL
    assert len(run.fingerprint.model_digest) == 64 and run.fingerprint.base_settings["num_parallel"] == 1


def test_oom_and_cpu_spill_are_marked_failed_and_the_sweep_goes_on(make_supervisor, env):
    env(FAKE_OLLAMA_OOM_ABOVE_MIB="2200", FAKE_OLLAMA_GPU_MIB="1500")
    base = ServerSettings(port=free_port())
    h = make_supervisor(base)
    run = h.run(SweepRunner(h.supervisor, OllamaClient, load_client, planner=OLLAMA_PLANNER).run(spec(base, (1, 4, 2))), timeout=60)
    by_parallel = {r.point.parallel: r for r in run.results}
    assert by_parallel[1].status == PointStatus.OK
    assert by_parallel[4].status == PointStatus.FAILED and by_parallel[4].reason == "out of memory at load"
    assert "cudaMalloc failed: out of memory" in by_parallel[4].detail
    assert by_parallel[2].status == PointStatus.FAILED and by_parallel[2].reason.startswith("spilled to CPU (")
    assert by_parallel[2].loaded_vram_mib == pytest.approx(1500) and by_parallel[2].stats is None
    assert [by_parallel[p].failure for p in (1, 4, 2)] == [None, FailureKind.OUT_OF_MEMORY, FailureKind.SPILLED]
    assert kinds_survive_saving(run)
    assert run.recommendation.index == by_parallel[1].point.index
    # The server was stopped before the sweep: it is stopped again, with the settings it had.
    assert h.supervisor.status.state is ServerState.STOPPED and h.supervisor.settings == base


def test_a_point_predicted_to_spill_is_skipped_unless_forced(make_supervisor, env):
    env()
    base = ServerSettings(port=free_port(), context_length=32768)
    reading = GpuReading(memory_used_mib=11_000.0, utilization_pct=95.0, power_w=300.0, temperature_c=60.0,
                         server_memory_mib=10_400.0)
    gpu = ScriptedGpuBackend(script=[reading])
    h = make_supervisor(base)
    runner = SweepRunner(h.supervisor, OllamaClient, load_client, gpu=gpu, server_pids=h.supervisor.server_pids, sample_interval_s=0.05, planner=OLLAMA_PLANNER)
    run = h.run(runner.run(spec(base, (1, 16), plan=workload("qwen3:14b"))), timeout=60)
    one, sixteen = run.results
    assert one.status == PointStatus.OK and one.estimate_verdict in ("fits", "tight")
    # 16 slots x 32768 tokens of f16 KV is 80 GiB: most layers would have to run on the CPU.
    assert sixteen.status == PointStatus.SKIPPED and sixteen.estimate_verdict == "spills"
    assert sixteen.reason.startswith("predicted to spill to CPU (") and "Force" in sixteen.detail
    assert sixteen.failure is FailureKind.PREDICTED_SPILL and one.failure is None and kinds_survive_saving(run)
    assert parallel_started(h.logs.lines) == [1, 1]  # the start to read the model, then point 1 only
    # GPU figures over the measured window: the scripted card's numbers, and tokens per joule from them.
    # The server's own peak (its processes' memory) and the card's (the desktop's included), each its own figure.
    assert one.gpu.card_peak_mib == 11_000.0 and one.gpu.server_peak_mib == 10_400.0 and one.gpu.server_unknown is None
    assert one.gpu.power_mean_w == 300.0 and one.gpu.util_mean_pct == 95.0
    assert one.tokens_per_joule == pytest.approx(one.stats.output_tokens / one.gpu.energy_j)
    forced = h.run(SweepRunner(h.supervisor, OllamaClient, load_client, gpu=gpu, planner=OLLAMA_PLANNER).run(spec(base, (16,), plan=workload("qwen3:14b"), force=True)),
                   timeout=60)
    assert forced.results[0].status == PointStatus.OK and forced.results[0].estimate_verdict == "spills"
    # Without the server's processes to ask about, its own memory is not known: the card's does not stand in.
    assert forced.results[0].gpu.server_peak_mib is None and forced.results[0].gpu.card_peak_mib == 11_000.0
    assert forced.results[0].gpu.server_unknown is ServerPeakUnknown.NOT_HERE


def test_cancel_stops_at_once_and_puts_the_server_back(make_supervisor, env):
    env(FAKE_OLLAMA_TOKENS_PER_S="50", FAKE_OLLAMA_ANSWER_TOKENS="500")  # 10 s per request
    base = ServerSettings(port=free_port(), num_parallel=1)
    h = make_supervisor(base)
    h.run(h.supervisor.start())
    runner = SweepRunner(h.supervisor, OllamaClient, load_client, planner=OLLAMA_PLANNER)
    measuring = threading.Event()
    future = h.loop.submit(runner.run(spec(base, (2, 4), plan=workload(warmup_requests=0)),
                                      on_progress=lambda p: p.phase == "measuring" and measuring.set()))
    assert measuring.wait(WAIT_S)
    runner.cancel()
    run = future.result(WAIT_S)
    assert run.status == "cancelled" and run.results == ()
    assert parallel_started(h.logs.lines) == [1, 2, 1]
    assert h.supervisor.settings == base and h.supervisor.status.state is ServerState.RUNNING_MANAGED


def test_a_cancel_before_the_run_begins_ends_it_before_its_first_point_and_the_next_run_is_whole(make_supervisor, env):
    env(**FAST)
    base = ServerSettings(port=free_port(), num_parallel=1)
    h = make_supervisor(base)
    h.run(h.supervisor.start())
    runner = SweepRunner(h.supervisor, OllamaClient, load_client, planner=OLLAMA_PLANNER)
    runner.cancel()  # pressed while the sweep was still on its way to the loop
    run = h.run(runner.run(spec(base, (2, 4))), timeout=60)
    assert run.status == "cancelled" and run.results == ()
    assert parallel_started(h.logs.lines) == [1]  # no point restarted the server
    assert h.supervisor.settings == base and h.supervisor.status.state is ServerState.RUNNING_MANAGED
    again = h.run(runner.run(spec(base, (2,))), timeout=60)  # the cancel belonged to the run it ended
    assert again.status == "finished" and [r.status for r in again.results] == [PointStatus.OK]


@pytest.mark.parametrize("phase", ["pricing", "restarting", "loading", "warm-up"])
def test_cancel_in_any_phase_of_the_second_point_restores_the_settings(make_supervisor, env, phase):
    env()
    base = ServerSettings(port=free_port(), num_parallel=1)
    h = make_supervisor(base)
    h.run(h.supervisor.start())
    runner = SweepRunner(h.supervisor, OllamaClient, load_client, gpu=ScriptedGpuBackend(), sample_interval_s=0.05, planner=OLLAMA_PLANNER)

    def progress(p) -> None:
        if p.point == 1 and p.phase == phase:
            runner.cancel()  # from inside the sweep, at that very step

    run = h.run(runner.run(spec(base, (2, 4)), on_progress=progress), timeout=60)
    assert run.status == "cancelled" and [r.point.parallel for r in run.results] == [2]
    assert h.supervisor.settings == base and h.supervisor.status.state is ServerState.RUNNING_MANAGED
    assert parallel_started(h.logs.lines)[-1] == 1


def test_an_attached_server_varies_only_the_clients(make_supervisor, external_standin, env):
    env()
    server = external_standin(**FAST)
    url = f"http://127.0.0.1:{server.port}"
    runner = SweepRunner(None, OllamaClient, load_client, base_url=url, planner=OLLAMA_PLANNER)
    attached = spec(ServerSettings(port=server.port), axes=SweepAxes(parallel=None, concurrency=(1, 2)), managed=False)
    h = make_supervisor(ServerSettings(port=server.port))
    run = h.run(runner.run(attached), timeout=60)
    assert [(r.point.parallel, r.point.concurrency, r.status) for r in run.results] == [(None, 1, PointStatus.OK), (None, 2, PointStatus.OK)]
    assert any("Attached server" in n for n in run.notes)
    # A managed sweep refuses a server ollama-deck did not start, before touching anything.
    assert h.run(h.supervisor.probe()).state is ServerState.RUNNING_ATTACHED
    with pytest.raises(DeckError, match="not started by ollama-deck"):
        h.run(SweepRunner(h.supervisor, OllamaClient, load_client, planner=OLLAMA_PLANNER).run(spec(ServerSettings(port=server.port), (1, 2))))
    assert server.process.poll() is None


def test_an_unknown_model_fails_before_anything_restarts(make_supervisor, env):
    env()
    base = ServerSettings(port=free_port())
    h = make_supervisor(base)
    h.run(h.supervisor.start())
    pid = h.supervisor.status.pid
    with pytest.raises(ModelNotFound, match="nope:1b"):
        h.run(SweepRunner(h.supervisor, OllamaClient, load_client, planner=OLLAMA_PLANNER).run(spec(base, (2,), plan=workload("nope:1b"))))
    assert h.supervisor.status.pid == pid and parallel_started(h.logs.lines) == [1]


def test_a_server_without_a_gpu_is_measured_on_the_cpu_not_failed_as_a_spill(make_supervisor, env):
    env(FAKE_OLLAMA_GPU_MIB="0")  # /api/ps size_vram 0, as the real Ollama reports on a machine without a GPU
    base = ServerSettings(port=free_port())
    h = make_supervisor(base)
    run = h.run(SweepRunner(h.supervisor, OllamaClient, load_client, planner=OLLAMA_PLANNER).run(spec(base, (1, 2))), timeout=60)
    assert [r.status for r in run.results] == [PointStatus.OK, PointStatus.OK]
    for r in run.results:
        assert r.ran and r.stats.requests_ok == 4 and r.output_tokens_per_s > 0
        assert r.loaded_vram_mib == 0 and r.loaded_size_mib > 0
        assert r.reason == "on the CPU (no GPU)" and r.stable_text() == "✓ on the CPU (no GPU)"
        assert "runs on the CPU by design" in r.detail
    assert run.recommendation is not None and run.recommendation.index is not None


def test_nothing_in_vram_on_a_machine_with_a_gpu_is_still_a_spill(make_supervisor, env):
    env(FAKE_OLLAMA_GPU_MIB="0")
    base = ServerSettings(port=free_port())
    reading = GpuReading(memory_used_mib=500.0, utilization_pct=0.0, power_w=30.0, temperature_c=40.0,
                         server_memory_mib=0.0)
    h = make_supervisor(base)
    runner = SweepRunner(h.supervisor, OllamaClient, load_client, gpu=ScriptedGpuBackend(script=[reading]),
                         server_pids=h.supervisor.server_pids, sample_interval_s=0.05, planner=OLLAMA_PLANNER)
    run = h.run(runner.run(spec(base, (1,), force=True)), timeout=60)
    (only,) = run.results
    assert only.status == PointStatus.FAILED and only.reason == "spilled to CPU (100% CPU)" and only.stats is None
    assert only.failure is FailureKind.SPILLED and kinds_survive_saving(run)


def test_a_point_whose_cpu_side_outgrows_the_hosts_ram_is_skipped_as_running_out_of_memory(make_supervisor, env):
    from app.core.memory.host import HostMemory
    from app.core.units import GIB

    env()
    base = ServerSettings(port=free_port(), context_length=32768)
    reading = GpuReading(memory_used_mib=11_000.0, utilization_pct=95.0, power_w=300.0, temperature_c=60.0,
                         server_memory_mib=10_400.0)
    h = make_supervisor(base)
    runner = SweepRunner(h.supervisor, OllamaClient, load_client, gpu=ScriptedGpuBackend(script=[reading]),
                         server_pids=h.supervisor.server_pids, sample_interval_s=0.05,
                         host_memory=lambda: HostMemory(16 * GIB, 32 * GIB), planner=OLLAMA_PLANNER)
    run = h.run(runner.run(spec(base, (1, 16), plan=workload("qwen3:14b"))), timeout=60)
    one, sixteen = run.results
    assert one.status == PointStatus.OK
    # 16 slots x 32768 tokens: the layers llama.cpp's fit leaves on the CPU bring ~60 GiB of KV cache to RAM
    assert sixteen.status == PointStatus.SKIPPED and sixteen.estimate_verdict == "wont_load"
    assert sixteen.reason.startswith("predicted to run the computer out of memory (")
    assert "GiB of RAM needed, 16.0 GiB available" in sixteen.reason
    assert sixteen.failure is FailureKind.PREDICTED_OUT_OF_MEMORY and kinds_survive_saving(run)
    assert "The computer runs out of memory" in sixteen.detail and "Force" in sixteen.detail


def test_a_runner_killed_by_the_kernel_is_named_as_the_computer_running_out_of_memory():
    from app.services.bench.sweep_words import load_failure

    killed = "llama-server process has terminated: signal: killed"
    kind, reason, detail = load_failure(killed, "")
    assert kind is FailureKind.HOST_OUT_OF_MEMORY
    assert reason == "the computer ran out of memory at load" and detail.startswith(killed)
    assert "outgrew the computer's RAM" in detail
    assert load_failure("model 'x' not found", "") == (FailureKind.LOAD_ERROR, "model did not load",
                                                       "model 'x' not found")
    assert load_failure(killed, "the server crashed: exit 2") == (FailureKind.CRASHED, "server crashed at load",
                                                                  "the server crashed: exit 2")


class RecordedProbe:
    """A contention probe at the port: hands out recorded verdicts, one per window, and notes how it was called."""

    def __init__(self, verdicts: list, calls: list) -> None:
        self._verdicts = verdicts
        self._calls = calls

    def begin(self, server_pids):
        self._calls.append(("begin", threading.get_ident(), tuple(server_pids)))

    def end(self, server_pids, on_gpu):
        self._calls.append(("end", threading.get_ident(), tuple(server_pids), on_gpu))
        verdict = self._verdicts.pop(0)
        if isinstance(verdict, Exception):
            raise verdict
        return verdict


def test_a_point_measured_while_others_took_the_device_is_unstable_and_not_recommended(make_supervisor, env):
    from app.core.bench.contention import Competitor, ContentionKind, CpuUse, judge
    from app.core.bench.outcome import PointStatus

    env()
    base = ServerSettings(port=free_port(), num_parallel=1)
    h = make_supervisor(base)
    contended = judge(CpuUse(10.0, 2, 20.0, 13.0, 0.8, (Competitor("stress", 4242, 0.31),)), None)
    verdicts: list = [contended, judge(CpuUse(10.0, 2, 20.0, 19.0, 0.8), None), OSError("no /proc")]
    calls: list = []
    runner = SweepRunner(h.supervisor, OllamaClient, load_client, server_pids=h.supervisor.server_pids,
                         contention=lambda: RecordedProbe(verdicts, calls), planner=OLLAMA_PLANNER)
    loop_thread: list[int] = []

    async def sweep():
        loop_thread.append(threading.get_ident())
        return await runner.run(spec(base, (1, 2, 4)))

    run = h.run(sweep(), timeout=60)
    one, two, four = run.results
    assert one.status == PointStatus.UNSTABLE and one.reason == "CPU contended 31 %" and one.stats is not None
    assert "stress (pid 4242)" in one.detail and one.contention == contended
    assert one.stable_text() == "⚠ CPU contended 31 %"
    assert one.failure is FailureKind.CONTENDED and two.failure is None and kinds_survive_saving(run)
    assert two.status == PointStatus.OK and two.contention.kind is ContentionKind.NONE
    # A probe that fails leaves the point measured, its contention unknown.
    assert four.status == PointStatus.OK and four.contention.kind is ContentionKind.UNMEASURED and "no /proc" in four.contention.why_unmeasured
    assert run.recommendation is not None and run.recommendation.index != 0 and run.recommendation.contended == (0,)
    # Each window read the server's processes, off the loop thread that drives the workload.
    assert [c[0] for c in calls] == ["begin", "end"] * 3
    assert all(c[2] and loop_thread[0] != c[1] for c in calls)
    # Judged for the device the server computes on: the stand-in holds its model on the (scripted-less) GPU.
    assert one.loaded_vram_mib and [c[3] for c in calls if c[0] == "end"] == [True] * 3


def test_a_point_whose_prompts_the_server_cut_fails_and_prices_the_context_they_need(make_supervisor, env):
    # The stand-in cuts a prompt longer than its context as the real Ollama does (a 200, fewer prompt tokens).
    env()
    base = ServerSettings(port=free_port(), context_length=256)
    reading = GpuReading(memory_used_mib=2_000.0, utilization_pct=50.0, power_w=100.0, temperature_c=50.0,
                         server_memory_mib=1_400.0)
    h = make_supervisor(base)
    made = CorpusPromptMaker(bundled_corpus(), chars_per_token=4.0).make(600, seed=1)  # the stand-in's 4 a token
    plan = workload(prompts=(BenchPrompt("doc", made.text, expected_tokens=made.expected_tokens),), requests=2,
                    num_predict=16, warmup_requests=0)
    runner = SweepRunner(h.supervisor, OllamaClient, load_client, gpu=ScriptedGpuBackend(script=[reading]),
                         server_pids=h.supervisor.server_pids, sample_interval_s=0.05, planner=OLLAMA_PLANNER,
                         prompt_counter=OllamaClient)
    run = h.run(runner.run(spec(base, (1,), plan=plan)), timeout=60)
    (point,) = run.results
    assert point.status is PointStatus.FAILED and point.failure is FailureKind.TRUNCATED and kinds_survive_saving(run)
    assert point.reason == "prompts cut by the server (2 of 2 requests: prompt truncated by the server)"
    expected = point.records[0].expected_prompt_tokens
    assert expected is not None and expected > 600  # the text, and the template's tokens the probe measured
    assert [r.error for r in point.records] == [f"truncated by the server: 130 of {expected} prompt tokens used"] * 2
    assert "they need a context of at least 768 tokens per slot (the longest prompt and 16 output tokens), " \
           "not 256" in point.detail
    priced = re.search(r"By the estimate that costs ([\d.]+) GiB of VRAM at parallel 1, against ([\d.]+) GiB now",
                       point.detail)
    assert priced and float(priced.group(1)) > float(priced.group(2)), point.detail  # a longer context costs more
    assert run.recommendation is not None and run.recommendation.index is None
    assert "at least 768 tokens per slot" in run.recommendation.text


SHORT_QA = Scenario("short-qa", (RequestClass("qa", Length.fixed(40), Length.fixed(4), Arrival("closed", concurrency=1)),))


def test_a_scenario_is_calibrated_on_the_model_once_per_run_before_it_is_measured(make_supervisor, external_standin,
                                                                                   env):
    env()
    server = external_standin(**FAST)
    url = f"http://127.0.0.1:{server.port}"
    phases: list[tuple[int, str, str]] = []
    runner = SweepRunner(None, OllamaClient, load_client, base_url=url, planner=OLLAMA_PLANNER,
                         prompt_counter=OllamaClient)  # no maker: the bundled corpus's, calibrated here
    attached = spec(ServerSettings(port=server.port), axes=SweepAxes(parallel=None, concurrency=(1, 2)), managed=False,
                    plan=workload(scenario=SHORT_QA, requests=3, warmup_requests=0))
    h = make_supervisor(ServerSettings(port=server.port))
    run = h.run(runner.run(attached, lambda p: phases.append((p.point, p.phase, p.detail))), timeout=60)
    assert [p for p in phases if p[1] == "calibrating"] == [(0, "calibrating",
                                                            "counting the prompt corpus in the model's tokens")]
    assert [p[1] for p in phases].index("calibrating") < [p[1] for p in phases].index("measuring")
    assert [r.status for r in run.results] == [PointStatus.OK, PointStatus.OK]
    records = [r for res in run.results for r in res.records]
    # first turns of a calibrated maker: the text's counted tokens plus the template's, used whole
    assert len(records) == 6 and all(r.expected_prompt_tokens is not None and r.ok for r in records)


def test_a_server_that_cannot_count_leaves_the_scenario_on_estimated_lengths_and_says_so(make_supervisor,
                                                                                        external_standin, env):
    env()
    server = external_standin(**FAST)
    url = f"http://127.0.0.1:{server.port}"
    nowhere = f"http://127.0.0.1:{free_port()}"
    phases: list[tuple[str, str]] = []
    runner = SweepRunner(None, OllamaClient, load_client, base_url=url, planner=OLLAMA_PLANNER,
                         prompt_counter=lambda _url: OllamaClient(nowhere))
    attached = spec(ServerSettings(port=server.port), axes=SweepAxes(parallel=None, concurrency=(1,)), managed=False,
                    plan=workload(scenario=SHORT_QA, requests=2, warmup_requests=0))
    h = make_supervisor(ServerSettings(port=server.port))
    run = h.run(runner.run(attached, lambda p: phases.append((p.phase, p.detail))), timeout=60)
    words = [detail for phase, detail in phases if phase == "calibrating"]
    assert len(words) == 2 and words[1].startswith("the server could not count the corpus (")
    assert words[1].endswith("): prompt lengths are estimated")
    (point,) = run.results
    assert point.status is PointStatus.OK and all(r.expected_prompt_tokens is None for r in point.records)
