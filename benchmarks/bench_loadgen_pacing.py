"""How close do the load generator's figures come to a server's known pacing?

The stand-in `ollama serve` the tests use (tests/fakes/ollama, on a thread of this process) writes token i
at its prompt time plus i / rate. tests/services/bench/test_loadgen.py asserts only what that pacing
guarantees on any machine (no figure beats it); this script measures how far above it the figures land,
which depends on the machine and its load. Each scenario runs --repeat times; printed: the figure, what
the pacing gives, the measured values (median and worst) and the worst error in %.

1. pacing: 2 clients, 2 slots, 8 requests of 20 tokens at 200 tokens/s, prompts at 1000 tokens/s;
2. queue: 3 clients, 1 slot: the TTFT of the first and the third served, and the third's wait;
3. thinking: 10 thinking tokens then 5 answer tokens at 500 tokens/s: first token to first answer token;
4. duration stop: 2 clients, 0.15 s, 10 tokens at 1000 tokens/s: requests counted, the last one's send.

    python benchmarks/bench_loadgen_pacing.py [--repeat 5] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.backends.ollama.client import load_client  # noqa: E402
from app.core.bench.stats import summarize  # noqa: E402
from app.core.bench.workload import BenchPrompt, LoadPlan  # noqa: E402
from app.services.bench.loadgen import LoadGenerator, LoadResult  # noqa: E402
from tests.fakes.ollama.fake_ollama import FakeOllama  # noqa: E402
from tests.fakes.ollama.fake_ollama_infer import count_prompt_tokens  # noqa: E402

PROMPT = BenchPrompt("fixed", "x" * 200)
PREFILL_S = count_prompt_tokens([PROMPT.text]) / 1000.0


def paced(num_parallel: int) -> FakeOllama:
    """A started stand-in: 20 answer tokens at 200 tokens/s, prompts at 1000 tokens/s."""
    return FakeOllama(num_parallel=num_parallel, tokens_per_s=200.0, prompt_tokens_per_s=1000.0, answer_tokens=20,
                      thinking_tokens=0).start()


def seconds(value: float | None) -> float:
    """A stamp every successful request has."""
    assert value is not None
    return value


def run(fake: FakeOllama, **plan: Any) -> LoadResult:
    values: dict[str, Any] = dict(model="qwen3:0.6b", prompts=(PROMPT,), num_predict=None, think=False, requests=4)
    values.update(plan)

    async def go() -> LoadResult:
        async with LoadGenerator(fake.url, load_client) as generator:
            return await generator.run(LoadPlan(**values))

    return asyncio.run(go())


def scenarios() -> dict[str, tuple[float, float]]:
    """One run of every scenario: figure -> (what the pacing gives, measured)."""
    out: dict[str, tuple[float, float]] = {}
    fake = paced(2)
    try:
        stats = summarize(run(fake, concurrency=2, requests=8).records)
        out["pacing: TTFT mean (ms)"] = ((PREFILL_S + 1 / 200.0) * 1e3, stats.ttft_ms.mean)
        out["pacing: TPOT p50 (ms)"] = (5.0, stats.tpot_ms.p50)
        out["pacing: ITL p50 (ms)"] = (5.0, stats.itl_ms.p50)
        out["pacing: output tokens/s"] = (2 * 20 / (PREFILL_S + 20 / 200.0), stats.output_tokens_per_s)
        out["pacing: server decode tokens/s"] = (200.0, stats.server_decode_tokens_per_s.mean)
        out["pacing: wait p95 (ms)"] = (1 / 200.0 * 1e3, stats.wait_ms.p95)
    finally:
        fake.stop()
    fake = paced(1)
    try:
        result = run(fake, concurrency=3, requests=3, warmup_requests=1)
        one, first = PREFILL_S + 20 / 200.0, PREFILL_S + 1 / 200.0
        ttfts = sorted(seconds(r.ttft_s) for r in result.records)
        out["queue: first TTFT (ms)"] = (first * 1e3, ttfts[0] * 1e3)
        out["queue: third TTFT (ms)"] = ((2 * one + first) * 1e3, ttfts[2] * 1e3)
        out["queue: third wait (ms)"] = (2 * one * 1e3, sorted(seconds(r.wait_s) for r in result.records)[2] * 1e3)
    finally:
        fake.stop()
    fake = FakeOllama(num_parallel=1, tokens_per_s=500.0, prompt_tokens_per_s=5000.0, answer_tokens=5,
                      thinking_tokens=10).start()
    try:
        result = run(fake, model="qwen3:14b", think=True, requests=2, warmup_requests=0)
        gaps = [seconds(r.first_answer_s) - seconds(r.first_token_s) for r in result.records]
        out["thinking: first token to answer (ms)"] = (10 / 500.0 * 1e3, max(gaps) * 1e3)
    finally:
        fake.stop()
    fake = FakeOllama(num_parallel=2, tokens_per_s=1000.0, prompt_tokens_per_s=100000.0, answer_tokens=10).start()
    try:
        result = run(fake, concurrency=2, requests=None, duration_s=0.15, warmup_requests=0)
        out["duration: requests counted"] = (2 * 0.15 / (10 / 1000.0), float(len(result.records)))
        out["duration: last send (ms, < 150)"] = (150.0, max(r.sent_s for r in result.records) * 1e3)
    finally:
        fake.stop()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", metavar="OUT", help="write every measurement as JSON")
    args = parser.parse_args()
    runs = [scenarios() for _ in range(args.repeat)]
    report = {}
    print(f"{'figure':40} {'pacing':>9} {'median':>9} {'worst':>9} {'worst error':>12}")
    for name, (expected, _) in runs[0].items():
        values = [r[name][1] for r in runs]
        worst = max(values, key=lambda v: abs(v - expected))
        error = 100.0 * (worst - expected) / expected
        report[name] = {"pacing": expected, "measured": values, "worst_error_pct": error}
        print(f"{name:40} {expected:9.2f} {statistics.median(values):9.2f} {worst:9.2f} {error:+11.1f}%")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
