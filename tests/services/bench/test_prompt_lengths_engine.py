"""Prompt lengths on the real llama-server with the bundled SmolLM2 model, started with 256 tokens of context:
calibration through its /tokenize, requested against delivered lengths, and a prompt longer than the slot,
which this llama-server refuses (400 exceed_context_size_error, both sizes given) rather than cut, reported as
such and failing the sweep's point with the context it needs."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.adapters.prompt_corpus import bundled_corpus
from app.backends.llama_server.spec import LLAMA_SERVER
from app.core.bench.outcome import TRUNCATION_TOLERANCE_TOKENS, FailureKind, PointStatus, is_truncated
from app.core.bench.prompt_maker import Calibration
from app.core.bench.stats import LatencyTargets
from app.core.bench.sweep import SweepAxes, SweepSpec
from app.core.bench.workload import BenchPrompt, LoadPlan
from app.core.server.settings import ServerSettings
from app.services.bench.loadgen import LoadGenerator
from app.services.bench.prompt_lengths import calibrate
from app.services.bench.sweep_runner import SweepRunner
from tests.backends.llama_server.engine_child import llama_server
from tests.bounded import run_within

pytestmark = pytest.mark.engine
CONTEXT = 256
PROJECT_ROOT = Path(__file__).resolve().parents[3]
CALIBRATED_CHUNKS = 24  # a few thousand characters of the corpus: enough for these prompts


run = functools.partial(run_within, timeout=400.0)  # one coroutine to its end, within the time limit


@pytest.fixture(scope="module")
def server(llama_server_binary: Path, bundled_model: Path) -> Iterator[str]:
    """One llama-server for this module: one slot of 256 tokens."""
    with llama_server(llama_server_binary, bundled_model, "-c", str(CONTEXT), "-np", "1") as (url, _):
        yield url


@pytest.fixture(scope="module")
def calibration(server: str) -> Calibration:
    async def go() -> Calibration:
        counter = LLAMA_SERVER.prompt_counter(server)
        try:
            return await calibrate(counter, "", bundled_corpus(), max_chunks=CALIBRATED_CHUNKS)
        finally:
            await counter.aclose()
    return run(go)


def plan(model: Path, prompt: BenchPrompt, requests: int = 2) -> LoadPlan:
    return LoadPlan(model=str(model), prompts=(prompt,), requests=requests, num_predict=8, think=False,
                    warmup_requests=0)


def test_calibration_counts_each_piece_in_the_servers_tokens(server: str, calibration: Calibration) -> None:
    async def counts() -> tuple[int, list[int]]:
        counter = LLAMA_SERVER.prompt_counter(server)
        try:
            made = [calibration.maker().make(n, seed) for n, seed in ((32, 1), (120, 2), (200, 3))]
            return (await counter.count_chat("", [{"role": "user", "content": ""}]),
                    [await counter.count_text("", m.text) for m in made])
        finally:
            await counter.aclose()

    template, delivered = run(counts)
    assert calibration.template_tokens == template > 0  # SmolLM2's template with its default system prompt
    assert len(calibration.tokens) == CALIBRATED_CHUNKS and all(n > 0 for n in calibration.tokens)
    assert 0.5 < calibration.chars_per_token < 2.0  # Chinese prose in a byte-level tokenizer: about one a token
    for asked, got in zip((32, 120, 200), delivered):
        # within the leeway the truncation rule gives, so a prompt the server used whole is never called cut
        assert not is_truncated(asked, got) and abs(got - asked) <= max(TRUNCATION_TOLERANCE_TOKENS, asked * 0.1), \
            (asked, got)


def test_requested_and_delivered_lengths_agree_for_a_prompt_that_fits(server: str, bundled_model: Path,
                                                                      calibration: Calibration) -> None:
    made = calibration.maker().make(120, seed=4)

    async def go():
        async with LoadGenerator(server, LLAMA_SERVER.load_client, counter=LLAMA_SERVER.prompt_counter(server)) as gen:
            return await gen.run(plan(bundled_model, BenchPrompt("doc", made.text, expected_tokens=made.expected_tokens)))

    result = run(go)
    for record in result.records:
        assert record.ok, record.error
        # the whole chat counted by /apply-template and /tokenize, against the server's prompt_n + cache_n
        assert record.expected_prompt_tokens == record.delivered_prompt_tokens
        assert calibration.template_tokens is not None
        assert not is_truncated(made.expected_tokens + calibration.template_tokens, record.delivered_prompt_tokens)


def test_a_prompt_longer_than_the_slot_is_refused_and_reported_with_both_sizes(server: str, bundled_model: Path,
                                                                               calibration: Calibration) -> None:
    made = calibration.maker().make(400, seed=5)

    async def go():
        async with LoadGenerator(server, LLAMA_SERVER.load_client, counter=LLAMA_SERVER.prompt_counter(server)) as gen:
            return await gen.run(plan(bundled_model, BenchPrompt("doc", made.text, expected_tokens=made.expected_tokens)))

    result = run(go)
    assert [r.error_kind for r in result.records] == ["too_long", "too_long"]
    record = result.records[0]
    assert record.expected_prompt_tokens is not None and record.expected_prompt_tokens > CONTEXT
    # the count the load generator made beforehand is the very number the server refused
    assert record.error == (f"refused by the server: the prompt is {record.expected_prompt_tokens} tokens, "
                            f"the context per slot {CONTEXT}")


def test_a_sweep_point_whose_prompts_do_not_fit_fails_and_names_the_context_they_need(
        server: str, bundled_model: Path, calibration: Calibration) -> None:
    made = calibration.maker().make(400, seed=6)
    workload = plan(bundled_model, BenchPrompt("doc", made.text, expected_tokens=made.expected_tokens))
    spec = SweepSpec(ServerSettings(), SweepAxes(parallel=(1,), concurrency=(1,)), workload, LatencyTargets(60_000, 10_000),
                     managed=False)
    runner = SweepRunner(None, LLAMA_SERVER.catalog, LLAMA_SERVER.load_client, base_url=server,
                         planner=LLAMA_SERVER.planner, prompt_counter=LLAMA_SERVER.prompt_counter)
    result = run(lambda: runner.run(spec)).results[0]
    assert result.status is PointStatus.FAILED and result.failure is FailureKind.PROMPT_TOO_LONG
    assert result.reason == "prompts cut by the server (2 of 2 requests: prompt longer than the context per slot)"
    expected = result.records[0].expected_prompt_tokens
    assert expected is not None
    needed = -(-(expected + 8) // 256) * 256
    assert f"they need a context of at least {needed} tokens per slot" in result.detail
    assert result.detail.startswith(f"refused by the server: the prompt is {expected} tokens")


def test_the_bench_command_prints_the_lengths_and_the_fix(server: str, bundled_model: Path, calibration: Calibration,
                                                          tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text(calibration.maker().make(400, seed=7).text + "\n")
    done = subprocess.run([sys.executable, "-m", "app", "bench", "--backend", "llama_server", "--url", server,
                           "--model", str(bundled_model), "--requests", "2", "--warmup", "0", "--num-predict", "8",
                           "--prompt-file", str(prompts), "--no-history", "--quiet",
                           "--config-dir", str(tmp_path / "cfg")],
                          env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT)), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1, done.stderr  # no point ran to a measurement
    lines = done.stdout.splitlines()
    # a user's prompt file: the server counts it whole, so what it refused is said with both sizes
    requested = next(line for line in lines if line.startswith("1 client: prompt tokens requested"))
    assert requested.endswith("delivered not counted")
    fix = next(line for line in lines if line.startswith("✖ 1 client: refused by the server: the prompt is"))
    assert f"the context per slot {CONTEXT}." in fix and "they need a context of at least 512 tokens per slot" in fix
    assert "nothing to recommend" in done.stdout
