"""OpenAiTelemetry over a real loopback socket: the recorded expositions served as a server would,
rates from consecutive scrapes, the API key sent, and each failure said in words a user can act on."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from app.backends.openai.metrics import (
    MetricsDialect,
    MetricsFailure,
    MetricsUnavailable,
    OpenAiTelemetry,
    read_exposition,
    server_telemetry,
)
from app.core.ports.telemetry import ServerTelemetryFactory
from app.core.server_telemetry import ServerSample, TelemetryUnavailable
from tests.backends.openai.exposition_server import Exposer, exposer, scrape, serve_and_scrape, served
from tests.fakes.raw_http import closed_port

def run(go: Callable[[Exposer], Awaitable[object]]) -> object:
    async def main() -> object:
        async with exposer() as server:
            return await go(server)
    return asyncio.run(main())


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_vllm_through_its_v1_url_with_the_key_and_rates_between_two_scrapes() -> None:
    clock = Clock()

    async def go(server: Exposer) -> tuple[ServerSample, ServerSample]:
        telemetry = OpenAiTelemetry(f"{server.url}/v1", headers={"Authorization": "Bearer sk-test"}, clock=clock)
        try:
            server.answer(served("openai/vllm_idle.txt"))
            idle = await telemetry.sample()
            assert telemetry.dialect is MetricsDialect.VLLM and telemetry.last is not None
            server.answer(served("openai/vllm_busy.txt"))
            clock.now += 2.0
            busy = await telemetry.sample()
            assert telemetry.last.summary == "vLLM metrics, summed over 2 engines"
        finally:
            await telemetry.aclose()
        assert server.paths() == ["/metrics", "/metrics"]
        assert server.header("authorization") == ["Bearer sk-test"] * 2
        return idle, busy

    idle, busy = run(go)
    assert idle.prompt_tokens_per_s is None and idle.requests_processing == 0 and idle.kv_cache_fill == 0.0
    assert (busy.requests_processing, busy.requests_deferred, busy.kv_cache_fill) == (23, 5, 0.5)
    assert busy.prompt_tokens_per_s == (51200 + 49152 - 18432) / 2.0
    assert busy.generation_tokens_per_s == (102400 + 98304 - 40960) / 2.0
    assert busy.requests_finished_total == 403 and busy.at == 102.0
    assert busy.slots_total is None and not busy.reports_slots and busy.slots_reason == ""


@pytest.mark.parametrize("name", ["openai/vllm_busy.txt", "openai/sglang_busy.txt", "openai/tgi_busy.txt",
                                  "llama_server/metrics_busy.txt"])
def test_each_dialect_over_http_reads_as_the_parser_reads_the_file(name: str) -> None:
    sample, _ = serve_and_scrape({"/metrics": (200, served(name))})
    expected = read_exposition(served(name).decode(), at=0.0).reading
    assert isinstance(sample, ServerSample)
    assert (sample.requests_processing, sample.requests_deferred, sample.kv_cache_fill, sample.prompt_tokens_total,
            sample.predicted_tokens_total, sample.requests_finished_total) == (
        expected.requests_processing, expected.requests_deferred, expected.kv_cache_ratio,
        expected.prompt_tokens_total, expected.predicted_tokens_total, expected.requests_finished_total)
    assert sample.requests_processing is not None and sample.predicted_tokens_total is not None
    if not name.startswith("llama_server/"):  # only a llama-server has /slots (tested below)
        assert sample.slots_total is None and sample.slots_reason == ""


def test_a_llama_server_attached_as_openai_also_has_its_slots_read() -> None:
    sample, server = serve_and_scrape({"/metrics": (200, served("llama_server/metrics_busy.txt")),
                                       "/slots": (200, served("llama_server/slots_busy.json"))}, "/v1")
    assert server.paths() == ["/metrics", "/slots"]
    assert (sample.slots_total, sample.slots_busy, sample.requests_processing, sample.requests_deferred) == (2, 2, 2, 1)
    assert sample.kv_cache_fill is not None and 0 < sample.kv_cache_fill <= 1


def test_a_llama_server_without_slots_keeps_its_metrics_and_says_why() -> None:
    sample, _ = serve_and_scrape({"/metrics": (200, served("llama_server/metrics_busy.txt")),
                                  "/slots": (501, served("llama_server/slots_disabled.json"))})
    assert sample.slots_total is None and sample.requests_deferred == 1
    assert "/slots at http://127.0.0.1:" in sample.slots_reason and "HTTP 501" in sample.slots_reason


def failure(status: int, body: str = "", headers: dict[str, str] | None = None) -> MetricsUnavailable:
    with pytest.raises(MetricsUnavailable) as caught:
        serve_and_scrape({"/metrics": (status, body)}, "/v1/", headers)
    assert isinstance(caught.value, TelemetryUnavailable)  # what the pollers and the sweep's window catch
    return caught.value


def test_a_server_without_metrics_says_how_to_turn_them_on() -> None:
    error = failure(404, '{"detail":"Not Found"}')
    assert error.kind is MetricsFailure.NO_METRICS
    assert error.message.startswith("this server has no /metrics (http://127.0.0.1:")
    assert "/metrics: HTTP 404" in error.message
    assert "--enable-metrics" in error.hint and "--metrics" in error.hint


def test_llama_server_started_without_metrics_is_no_metrics_in_its_own_words() -> None:
    body = ('{"error":{"code":501,"message":"This server does not support metrics endpoint.",'
            '"type":"not_supported_error"}}')
    error = failure(501, body)
    assert error.kind is MetricsFailure.NO_METRICS and "does not support metrics endpoint" in error.message


def test_a_refused_key_and_a_missing_key_are_told_apart() -> None:
    refused = failure(401, '{"error":"Unauthorized"}', {"Authorization": "Bearer wrong"})
    assert refused.kind is MetricsFailure.KEY_REFUSED and "refused the API key (HTTP 401" in refused.message
    missing = failure(401, '{"error":"Unauthorized"}')
    assert missing.kind is MetricsFailure.KEY_REFUSED and "wants an API key and none was given" in missing.message
    assert "API key" in missing.hint


def test_another_status_is_an_http_error_with_the_servers_words() -> None:
    error = failure(500, "Internal Server Error\n  engine dead")
    assert error.kind is MetricsFailure.HTTP_ERROR
    assert error.message.endswith("HTTP 500: Internal Server Error engine dead")


def test_an_answer_without_known_metrics_is_unrecognised() -> None:
    error = failure(200, "<html><body>LM Studio</body></html>")
    assert error.kind is MetricsFailure.UNRECOGNISED
    assert "none of the metrics of vLLM, SGLang, TGI or llama.cpp" in error.message
    assert "--disable-log-stats" in error.hint  # vLLM then serves /metrics with only the process's own figures


def test_a_closed_port_is_unreachable() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(MetricsUnavailable) as caught:
        asyncio.run(scrape(OpenAiTelemetry(url)))
    assert caught.value.kind is MetricsFailure.UNREACHABLE and f"{url}/metrics did not answer" in caught.value.message


def test_server_telemetry_is_the_backends_factory() -> None:
    factory: ServerTelemetryFactory = server_telemetry
    reader = factory("http://127.0.0.1:8000/v1")
    assert isinstance(reader, OpenAiTelemetry) and reader.base_url == "http://127.0.0.1:8000"
    assert reader.dialect is MetricsDialect.UNKNOWN and reader.last is None
