"""OpenAiTelemetry against the real llama-server's /metrics (attached as an OpenAI-compatible server through
its /v1 URL): the llama.cpp dialect's counters match what the llama_server backend's own reader reads, and
the replies' token counts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.backends.llama_server.metrics import LlamaServerTelemetry
from app.backends.openai.metrics import MetricsDialect, MetricsFailure, MetricsUnavailable, OpenAiTelemetry
from app.core.server_telemetry import ServerSample
from tests.backends.llama_server.engine_server import llama_server, sample_until
from tests.backends.openai.exposition_server import scrape
from tests.backends.llama_server.test_metrics_engine import FLAGS, fire


@pytest.mark.engine
def test_llama_server_read_as_openai_matches_its_own_backend_and_the_replies(llama_server_binary: Path,
                                                                              bundled_model: Path,
                                                                              tmp_path: Path) -> None:
    with llama_server(llama_server_binary, bundled_model, tmp_path, FLAGS) as server:
        replies: list[dict] = []

        async def go() -> tuple[ServerSample, list[ServerSample], ServerSample, ServerSample]:
            openai = OpenAiTelemetry(f"{server.base_url}/v1")
            own = LlamaServerTelemetry(server.base_url)
            try:
                before = await openai.sample()
                assert openai.dialect is MetricsDialect.LLAMA_CPP
                threads = fire(server.base_url, replies, 3)
                loaded = await sample_until(openai, lambda s: s.requests_processing == 2 and s.requests_deferred == 1,
                                            "2 requests processing and 1 deferred")
                await sample_until(openai, lambda s: len(replies) == 3 and s.requests_processing == 0,
                                   "all three replies and nothing processing")
                for thread in threads:
                    thread.join()
                return before, loaded, await openai.sample(), await own.sample()
            finally:
                await openai.aclose()
                await own.aclose()

        before, loaded, after, own = asyncio.run(go())

    assert (before.requests_processing, before.requests_deferred) == (0, 0)
    assert (loaded[-1].slots_total, loaded[-1].slots_busy, loaded[-1].requests_finished_total) == (2, 2, None)
    for field in ("prompt_tokens_total", "predicted_tokens_total", "requests_processing", "requests_deferred",
                  "kv_cache_fill", "slots_total", "slots_busy", "slots_reason"):
        assert getattr(after, field) == getattr(own, field), field
    assert after.predicted_tokens_total - before.predicted_tokens_total == sum(r["usage"]["completion_tokens"]
                                                                               for r in replies)
    assert after.prompt_tokens_total - before.prompt_tokens_total == sum(r["timings"]["prompt_n"] for r in replies)
    assert after.skipped_lines == 0


@pytest.mark.engine
def test_llama_server_without_metrics_is_no_metrics(llama_server_binary: Path, bundled_model: Path,
                                                    tmp_path: Path) -> None:
    with llama_server(llama_server_binary, bundled_model, tmp_path, ("-np", "1", "-c", "512", "-t", "2")) as server:
        with pytest.raises(MetricsUnavailable) as caught:
            asyncio.run(scrape(OpenAiTelemetry(f"{server.base_url}/v1")))
    assert caught.value.kind is MetricsFailure.NO_METRICS and "HTTP 501" in caught.value.message
