"""The telemetry reader against the real llama-server with the bundled model (-np 2, -c 2048, -t 2)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from app.backends.llama_server.metrics import LlamaServerTelemetry
from app.core.server_telemetry import ServerSample, TelemetryUnavailable
from tests.backends.llama_server.engine_server import llama_server, post_json, sample_until
from tests.fakes.raw_http import closed_port

FLAGS = ("-np", "2", "-c", "2048", "-t", "2", "--metrics")
N_PREDICT = 64  # long enough that the third request waits while two decode, short on a busy 2-core machine
WAIT_S = 240.0
POLL_S = 0.25


def fire(base_url: str, replies: list[dict], count: int) -> list[threading.Thread]:
    """Start `count` chat requests at once on their own threads; replies land in `replies`."""
    body = {"messages": [{"role": "user", "content": "Tell a long story about a lighthouse keeper."}],
            "max_tokens": N_PREDICT, "temperature": 0}
    threads = [threading.Thread(target=lambda: replies.append(post_json(f"{base_url}/v1/chat/completions", body)))
               for _ in range(count)]
    for thread in threads:
        thread.start()
    return threads


@pytest.mark.engine
def test_two_slots_busy_one_deferred_and_counters_match_the_replies(llama_server_binary: Path, bundled_model: Path,
                                                                     tmp_path: Path) -> None:
    with llama_server(llama_server_binary, bundled_model, tmp_path, FLAGS) as server:
        replies: list[dict] = []

        async def go() -> tuple[ServerSample, list[ServerSample], ServerSample]:
            telemetry = LlamaServerTelemetry(server.base_url)
            try:
                before = await telemetry.sample()
                threads = fire(server.base_url, replies, 3)
                loaded = await sample_until(telemetry, lambda s: s.slots_busy == 2 and s.requests_deferred == 1,
                                            "2 slots busy and 1 request deferred")
                finished = await sample_until(telemetry, lambda s: len(replies) == 3 and s.slots_busy == 0
                                              and s.requests_processing == 0,
                                              "all three replies, no busy slot and none processing")
                for thread in threads:
                    thread.join()
                return before, loaded, finished[-1]
            finally:
                await telemetry.aclose()

        before, loaded, after = asyncio.run(go())

    assert (before.slots_total, before.slots_busy, before.requests_deferred) == (2, 0, 0)
    busy = loaded[-1]
    assert busy.requests_processing == 2 and busy.kv_cache_fill is not None and 0 < busy.kv_cache_fill <= 1
    assert all(s.busy and s.n_ctx == 1024 for s in busy.slots)
    assert after.requests_processing == 0 and after.requests_deferred == 0
    predicted = sum(r["timings"]["predicted_n"] for r in replies)
    prompt = sum(r["timings"]["prompt_n"] for r in replies)
    assert after.predicted_tokens_total - before.predicted_tokens_total == predicted
    assert after.prompt_tokens_total - before.prompt_tokens_total == prompt
    assert predicted == sum(r["usage"]["completion_tokens"] for r in replies)


@pytest.mark.engine
def test_a_server_without_slots_says_so_in_its_own_words(llama_server_binary: Path, bundled_model: Path,
                                                         tmp_path: Path) -> None:
    flags = ("-np", "2", "-c", "2048", "-t", "2", "--metrics", "--no-slots")
    with llama_server(llama_server_binary, bundled_model, tmp_path, flags) as server:
        async def go() -> ServerSample:
            telemetry = LlamaServerTelemetry(server.base_url)
            try:
                return await telemetry.sample()
            finally:
                await telemetry.aclose()

        sample = asyncio.run(go())
    assert sample.slots_total is None and not sample.reports_slots
    assert "HTTP 501: This server does not support slots endpoint" in sample.slots_reason
    assert server.base_url in sample.slots_reason
    assert sample.requests_deferred == 0 and sample.metrics_reason == ""


def test_a_closed_port_is_unavailable_with_both_endpoints_named() -> None:
    url = f"http://127.0.0.1:{closed_port()}"

    async def go() -> None:
        telemetry = LlamaServerTelemetry(url)
        try:
            await telemetry.sample()
        finally:
            await telemetry.aclose()

    with pytest.raises(TelemetryUnavailable) as caught:
        asyncio.run(go())
    assert f"/metrics at {url} did not answer" in caught.value.message
    assert f"/slots at {url} did not answer" in caught.value.message
