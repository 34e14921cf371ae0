"""The real llama-server with the bundled SmolLM2 model under the code-review scenario (three-turn conversations),
shortened: the sweep runner calibrates its prompt maker on the model once per run, so every request's prompt is
known in the server's tokens; llama-server's `timings` give each turn's cache hits (the conversation's history is
in the slot's cache) and the prefill over the tokens it evaluated; TTFT is split into its parts."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.backends.llama_server.spec import LLAMA_SERVER
from app.core.bench.outcome import PointStatus
from app.core.bench.scenario import BUILTIN_SCENARIOS
from app.core.bench.stats import LatencyTargets
from app.core.bench.sweep import SweepAxes, SweepSpec
from app.core.bench.workload import LoadPlan
from app.core.server.settings import ServerSettings
from app.services.bench.sweep_runner import SweepProgress, SweepRunner
from tests.backends.llama_server.engine_child import llama_server
from tests.bounded import run_within

pytestmark = pytest.mark.engine
run = functools.partial(run_within, timeout=500.0)


@pytest.fixture(scope="module")
def server(llama_server_binary: Path, bundled_model: Path) -> Iterator[tuple[str, Path]]:
    """One llama-server: two slots of 1024 tokens."""
    with llama_server(llama_server_binary, bundled_model, "-c", "2048", "-np", "2") as (url, _):
        yield url, bundled_model


def test_a_conversation_scenario_is_calibrated_once_and_its_cache_hits_and_waits_are_told(server) -> None:
    url, model = server
    scenario = BUILTIN_SCENARIOS["code-review"].scaled(0.05)  # ~19 new tokens a turn, ~22 out
    plan = LoadPlan(model=str(model), requests=6, scenario=scenario, warmup_requests=0)
    spec = SweepSpec(ServerSettings(), SweepAxes(parallel=(1,), concurrency=(1, 2)), plan,
                     LatencyTargets(None, None), managed=False)
    phases: list[SweepProgress] = []

    async def go():
        runner = SweepRunner(None, LLAMA_SERVER.catalog, LLAMA_SERVER.load_client, base_url=url,
                             planner=LLAMA_SERVER.planner, prompt_counter=LLAMA_SERVER.prompt_counter,
                             server_telemetry=LLAMA_SERVER.server_telemetry)
        return await runner.run(spec, phases.append)

    sweep = run(go)
    # calibrated once for the run, before the first point's measured stage, not again for the second point
    calibrating = [p for p in phases if p.phase == "calibrating"]
    assert len(calibrating) == 1 and calibrating[0].point == 0 and "tokens" in calibrating[0].detail
    assert [p.phase for p in phases].index("calibrating") < [p.phase for p in phases].index("measuring")
    assert [r.status for r in sweep.results] == [PointStatus.OK, PointStatus.OK], [r.detail for r in sweep.results]
    for result in sweep.results:
        records = [r for r in result.records if not r.warmup]
        assert len(records) == 6 and all(r.ok for r in records)
        # whole counts by /tokenize: what each request should count, and the server used it whole
        assert all(r.expected_prompt_tokens == r.delivered_prompt_tokens for r in records)
        later = [r for r in records if r.turn is not None and r.turn > 1]
        assert later and all(r.cached_prompt_tokens for r in later)  # the history came from the slot's cache
        for r in records:
            assert r.server_busy_s is not None and r.server_wait_s is not None and r.first_token_rest_s is not None
            parts = r.queue_s + r.server_wait_s + r.prompt_eval_s + r.first_token_rest_s
            assert parts == pytest.approx(r.ttft_s, abs=1e-6) or parts > r.ttft_s  # clamped parts only add
            assert r.prefill_tokens_per_s == pytest.approx(r.prompt_tokens / r.prompt_eval_s)
        stats = result.stats
        assert stats is not None and 0 < stats.cache_hit_share < 1
        assert stats.prefill_tokens_per_s.n == 6 and stats.server_wait_ms.n == 6 and stats.prefill_ms.n == 6
        cached = sum(r.cached_prompt_tokens or 0 for r in records)
        used = sum(r.delivered_prompt_tokens or 0 for r in records)
        assert stats.cache_hit_share == pytest.approx(cached / used)
