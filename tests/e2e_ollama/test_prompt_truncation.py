"""The real Ollama 0.32.15 with a short context (OLLAMA_CONTEXT_LENGTH=256) and a ~600-token prompt made by the
calibrated maker: Ollama answers 200 with a prompt_eval_count far below what was sent (it starts llama-server
with --context-shift and drops most of the prompt without a word). The load generator reports every such
request as truncated, "N of M prompt tokens used", and the sweep's point fails naming the context it needs."""

from __future__ import annotations

import functools

import pytest

from app.adapters.prompt_corpus import bundled_corpus
from app.backends.ollama.spec import OLLAMA
from app.core.bench.outcome import FailureKind, PointStatus
from app.core.bench.scenario import Arrival, Length, RequestClass, Scenario
from app.core.bench.stats import LatencyTargets
from app.core.bench.sweep import SweepAxes, SweepSpec
from app.core.bench.workload import BenchPrompt, LoadPlan
from app.core.server.settings import ServerSettings
from app.services.bench.loadgen import LoadGenerator
from app.services.bench.prompt_lengths import calibrate
from app.services.bench.sweep_runner import SweepRunner
from tests.ollama_real_fixtures import MODEL_NAME
from tests.bounded import run_within

pytestmark = pytest.mark.ollama_real
CONTEXT = 256
PROMPT_TOKENS = 600
CALIBRATED_CHUNKS = 4  # each piece is a probe request: a few are enough for one prompt


run = functools.partial(run_within, timeout=400.0)  # one coroutine to its end, within the time limit


def test_a_prompt_cut_by_context_shift_is_reported_truncated_and_fails_the_point(make_real_ollama) -> None:
    server = make_real_ollama(OLLAMA_CONTEXT_LENGTH=str(CONTEXT))
    url = server.base_url

    async def measure():
        counter = OLLAMA.prompt_counter(url)
        try:
            calibration = await calibrate(counter, MODEL_NAME, bundled_corpus(), max_chunks=CALIBRATED_CHUNKS)
        finally:
            await counter.aclose()
        made = calibration.maker().make(PROMPT_TOKENS, seed=1)
        plan = LoadPlan(model=MODEL_NAME, prompts=(BenchPrompt("doc", made.text, expected_tokens=made.expected_tokens),),
                        requests=1, num_predict=8, think=False, warmup_requests=0)
        async with LoadGenerator(url, OLLAMA.load_client, counter=OLLAMA.prompt_counter(url)) as generator:
            result = await generator.run(plan)
        spec = SweepSpec(ServerSettings(), SweepAxes(parallel=(1,), concurrency=(1,)), plan,
                         LatencyTargets(60_000, 10_000), managed=False)
        sweep = await SweepRunner(None, OLLAMA.catalog, OLLAMA.load_client, base_url=url, planner=OLLAMA.planner,
                                  prompt_counter=OLLAMA.prompt_counter).run(spec)
        return calibration, made, result, sweep

    calibration, made, result, sweep = run(measure)
    assert calibration.template_tokens is not None and 0 < calibration.template_tokens < 64
    assert abs(made.expected_tokens - PROMPT_TOKENS) <= 2
    (record,) = result.records
    expected = made.expected_tokens + calibration.template_tokens
    assert record.expected_prompt_tokens == expected
    # Ollama said nothing: a 200 and its count, far below what was sent, at most the context
    assert record.prompt_tokens is not None and record.prompt_tokens <= CONTEXT
    assert record.error_kind == "truncated" and not record.ok
    assert record.error == f"truncated by the server: {record.prompt_tokens} of {expected} prompt tokens used"

    (point,) = sweep.results
    assert point.status is PointStatus.FAILED and point.failure is FailureKind.TRUNCATED
    assert point.reason == "prompts cut by the server (1 of 1 requests: prompt truncated by the server)"
    needed = -(-(expected + 8) // 256) * 256
    assert f"they need a context of at least {needed} tokens per slot" in point.detail
    assert f"not {CONTEXT}" in point.detail  # the context Ollama reports it loaded the model with
    assert sweep.recommendation is None or sweep.recommendation.index is None


def test_a_scenario_on_a_short_context_fails_its_point_as_truncated(make_real_ollama) -> None:
    """No prompt maker given: the sweep runner calibrates the bundled corpus on the model (Ollama's probes), so
    each scenario request's prompt is known in Ollama's tokens and the cut one is a failure, not a fast success."""
    server = make_real_ollama(OLLAMA_CONTEXT_LENGTH=str(CONTEXT))
    url = server.base_url
    documents = RequestClass("documents", Length.fixed(PROMPT_TOKENS), Length.fixed(8), Arrival("closed", concurrency=1))
    scenario = Scenario("short-context", (documents,))
    plan = LoadPlan(model=MODEL_NAME, requests=1, scenario=scenario, warmup_requests=0)
    spec = SweepSpec(ServerSettings(), SweepAxes(parallel=(1,), concurrency=(1,)), plan,
                     LatencyTargets(60_000, 10_000), managed=False)
    phases: list[str] = []

    async def sweep():
        return await SweepRunner(None, OLLAMA.catalog, OLLAMA.load_client, base_url=url, planner=OLLAMA.planner,
                                 prompt_counter=OLLAMA.prompt_counter).run(spec, lambda p: phases.append(p.phase))

    run_ = run(sweep)
    assert phases.count("calibrating") == 1 and phases.index("calibrating") < phases.index("measuring")
    (point,) = run_.results
    (record,) = point.records
    assert record.request_class == "documents"
    # the calibrated maker's length plus the template's: within a few tokens of what was asked, in Ollama's tokens
    assert record.expected_prompt_tokens is not None and PROMPT_TOKENS <= record.expected_prompt_tokens < PROMPT_TOKENS + 64
    assert record.prompt_tokens is not None and record.prompt_tokens <= CONTEXT
    assert record.error_kind == "truncated" and not record.ok
    assert point.status is PointStatus.FAILED and point.failure is FailureKind.TRUNCATED
    assert "they need a context of at least" in point.detail
