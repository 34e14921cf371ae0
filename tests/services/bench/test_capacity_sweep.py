"""A rate sweep after a sweep, run by the real sweep runner against the stand-in `ollama` under a real
supervisor: it runs at the recommended point (one restart, then none), reports its steps, and a cancel during
it stops it and still puts the server back."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.adapters.prompt_corpus import bundled_corpus
from app.backends.ollama.client import OllamaClient, load_client
from app.backends.ollama.planner import OLLAMA_PLANNER
from app.core.bench.capacity import RateLadder
from app.core.bench.outcome import RunStatus
from app.core.bench.prompt_maker import CorpusPromptMaker
from app.core.bench.scenario import Arrival, Length, RequestClass, Scenario
from app.core.bench.stats import ClassTargets, LatencyTargets
from app.core.bench.sweep import SweepAxes, SweepSpec
from app.core.bench.workload import LoadPlan
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState
from app.services.bench.capacity import CapacityProgress, CapacitySweep
from app.services.bench.sweep_runner import SweepRunner
from tests.fakes.ollama.server_fixtures import free_port
from tests.services.bench.test_sweep_runner import FAST, SMALL, parallel_started

QUESTIONS = Scenario("questions", (RequestClass("q", Length.fixed(8), Length.fixed(6), Arrival("poisson", 20.0),
                                                targets=ClassTargets(e2e_p95_ms=60_000)),))


@pytest.fixture
def env(monkeypatch):
    def set_env() -> None:
        for name, value in FAST.items():
            monkeypatch.setenv(name, value)

    return set_env


def runner_and_spec(h, base: ServerSettings) -> tuple[SweepRunner, SweepSpec]:
    plan = LoadPlan(model=SMALL, scenario=QUESTIONS, concurrency=0, requests=6, warmup_requests=1)
    spec = SweepSpec(base, SweepAxes(parallel=(1, 2), concurrency=(0,)), plan, LatencyTargets(None, None))
    runner = SweepRunner(h.supervisor, OllamaClient, load_client, planner=OLLAMA_PLANNER,
                         prompt_maker=CorpusPromptMaker(bundled_corpus()))
    return runner, spec


def test_the_ladder_runs_at_the_recommended_point_after_the_sweep(make_supervisor, env):
    env()
    base = ServerSettings(port=free_port(), num_parallel=1)
    h = make_supervisor(base)
    assert h.run(h.supervisor.start()).state is ServerState.RUNNING_MANAGED
    runner, spec = runner_and_spec(h, base)
    progress: list[CapacityProgress] = []
    judged = []
    stage = CapacitySweep(RateLadder(rates=(10.0, 20.0), refine=0), progress.append,
                          lambda c, s: judged.append((len(c.steps), s.offered_rps)))
    run = h.run(runner.run(spec, after=stage), timeout=120)
    assert run.status is RunStatus.FINISHED and run.recommendation is not None
    chosen = run.result_for(run.recommendation.index)
    assert chosen is not None
    capacity = run.capacity
    assert capacity is not None and [s.offered_rps for s in capacity.steps] == [10.0, 20.0]
    assert judged == [(1, 10.0), (2, 20.0)]
    assert capacity.setting == chosen.point.label(("parallel", "concurrency"))
    assert capacity.notes[0] == f"The rate sweep ran at the recommended point ({capacity.setting}) after the sweep."
    assert all(s.stats.requests == 6 and {c.name for c in s.classes} == {"q"} for s in capacity.steps)
    # Before, one start per point, one for the ladder's first step only, then put back (unless it is as it was).
    restored = [1] if chosen.point.parallel != 1 else []
    assert parallel_started(h.logs.lines) == [1, 1, 2, chosen.point.parallel, *restored]
    assert {(p.step, p.offered_rps) for p in progress} == {(0, 10.0), (1, 20.0)}
    assert {"restarting", "loading", "measuring"} <= {p.phase for p in progress if p.step == 0}
    assert "restarting" not in {p.phase for p in progress if p.step == 1}
    assert h.supervisor.settings == base and h.supervisor.status.state is ServerState.RUNNING_MANAGED


def test_cancel_during_the_ladder_stops_it_and_puts_the_server_back(make_supervisor, env):
    env()
    base = ServerSettings(port=free_port(), num_parallel=1)
    h = make_supervisor(base)
    assert h.run(h.supervisor.start()).state is ServerState.RUNNING_MANAGED
    runner, spec = runner_and_spec(h, base)

    def on_progress(p: CapacityProgress) -> None:
        if p.step == 1 and p.phase == "measuring":
            runner.cancel()

    stage = CapacitySweep(RateLadder(rates=(10.0, 20.0, 40.0), refine=0), on_progress)
    run = h.run(runner.run(spec, after=stage), timeout=120)
    assert run.status is RunStatus.CANCELLED and len(run.results) == 2
    capacity = run.capacity
    assert capacity is not None and capacity.cancelled and [s.offered_rps for s in capacity.steps] == [10.0]
    assert h.supervisor.settings == base and h.supervisor.status.state is ServerState.RUNNING_MANAGED


@pytest.mark.parametrize(("step_seconds", "requests", "duration_s"), [(None, 6, None), (3.0, None, 3.0)])
def test_each_step_runs_the_sweeps_stop_rule_or_the_seconds_asked(step_seconds, requests, duration_s):
    import asyncio

    from app.core.bench.outcome import PointStatus
    from app.core.bench.run import SweepRun
    from app.core.bench.sweep import Fingerprint, PointResult

    plan = LoadPlan(model=SMALL, scenario=QUESTIONS, concurrency=0, requests=6, warmup_requests=1)
    spec = SweepSpec(ServerSettings(), SweepAxes(parallel=(1,), concurrency=(0,)), plan, LatencyTargets(None, None))
    planned = spec.plan()
    run = SweepRun(spec, Fingerprint(model=SMALL), planned.points, planned.varying, ())
    asked: list[LoadPlan] = []

    async def measure(workload, _progress):
        asked.append(workload)
        return None  # as when the sweep is cancelled during the step

    stage = CapacitySweep(RateLadder(rates=(10.0,)), step_seconds=step_seconds)
    out = asyncio.run(stage(run, PointResult(planned.points[0], PointStatus.OK), measure))
    [workload] = asked
    assert (workload.requests, workload.duration_s) == (requests, duration_s)
    assert workload.scenario.classes[0].arrival.rate_rps == 10.0 and workload.problems() == []
    assert out.capacity is not None and out.capacity.cancelled


def test_a_step_of_no_seconds_is_refused():
    with pytest.raises(ValueError, match="more than 0 s"):
        CapacitySweep(RateLadder(), step_seconds=0.0)


def test_with_a_default_point_the_ladder_also_runs_at_the_default_setting(make_supervisor, env):
    env()
    base = ServerSettings(port=free_port(), num_parallel=2)
    h = make_supervisor(base)
    assert h.run(h.supervisor.start()).state is ServerState.RUNNING_MANAGED
    runner, spec = runner_and_spec(h, base)
    spec = replace(spec, axes=SweepAxes(parallel=(2,), concurrency=(0,)),
                   default_settings=base.replace(num_parallel=1), default_words=("parallel 1",))
    stage = CapacitySweep(RateLadder(rates=(10.0,), refine=0))
    run = h.run(runner.run(spec, after=stage), timeout=120)
    assert run.status is RunStatus.FINISHED and run.recommendation is not None and run.comparison is not None
    default = next(r for r in run.results if r.point.default)
    chosen = run.result_for(run.recommendation.index)
    assert chosen is not None and run.capacity is not None and len(run.capacity.steps) == 1
    assert run.capacity.setting == chosen.point.label(("parallel", "concurrency"))
    if chosen.point.index == default.point.index:  # one setting: its rate sweep stands for the default
        assert run.default_capacity is None
        assert run.capacity.notes[0].startswith("The rate sweep ran at the server's default setting")
    else:  # both sides measured: the before/after has each side's requests/day where found
        assert run.default_capacity is not None and len(run.default_capacity.steps) == 1
        assert run.default_capacity.setting == default.point.label(("parallel", "concurrency"))
        assert run.default_capacity.notes[0].startswith("The rate sweep ran at the server's default setting")
        assert run.capacity.notes[0].startswith("The rate sweep ran at the recommended point")
    assert h.supervisor.settings == base and h.supervisor.status.state is ServerState.RUNNING_MANAGED


def test_each_step_sends_texts_of_its_own_so_none_is_served_from_the_previous_steps_cache():
    """The steps run on one server without restarts: a step that repeated the sweep's (or an earlier step's)
    prompts would find them in the server's prompt cache and measure a prefill it never did."""
    from app.core.bench.capacity import at_factor
    from app.services.bench.capacity import step_workload
    from app.services.bench.loadgen import made_scenario_request

    maker = CorpusPromptMaker(bundled_corpus())
    plan = LoadPlan(model=SMALL, scenario=QUESTIONS, concurrency=0, requests=6, warmup_requests=1)
    (cls,) = QUESTIONS.classes

    def texts(workload: LoadPlan) -> set[str]:
        return {made_scenario_request(workload, cls, n, 1, (), maker)[1] for n in range(6)}

    steps = [step_workload(plan, QUESTIONS, factor, order) for order, factor in enumerate((0.5, 1.0, 1.5))]
    assert all(step.scenario == at_factor(QUESTIONS, f) for step, f in zip(steps, (0.5, 1.0, 1.5)))
    seen = texts(plan)
    for step in steps:
        fresh = texts(step)
        assert not fresh & seen, "a step repeated a prompt already sent"
        seen |= fresh
