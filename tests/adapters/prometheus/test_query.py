"""The Prometheus reader against the real Prometheus (Debian's 2.42) scraping two real llama-servers, the DCGM
and node-exporter exposition files of tests/data/fleet/ and one host with only the app's own exporter."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from app.adapters.prometheus.query import (
    PrometheusBadStatus,
    PrometheusEmptyResult,
    PrometheusQueryError,
    PrometheusReader,
    PrometheusUnreachable,
    ScrapeTarget,
    instance_pattern,
    on_host,
    server_query,
)
from app.core.fleet import FleetServer
from app.core.fleet_status import HostFigures, HostSource
from app.core.server.url import parse_server_url
from tests.adapters.prometheus.fleet_stack import (
    FleetStack,
    exposition_files,
    module_fleet_stack,
    prometheus,
    wait_until,
)
from tests.backends.llama_server.engine_server import free_port

pytestmark = [pytest.mark.slow, pytest.mark.engine]
MIB = 1024 * 1024
T = TypeVar("T")


def _server(stack: FleetStack, index: int, host: str) -> FleetServer:
    return FleetServer(f"s{index}", parse_server_url(stack.servers[index]), "llama_server", host)


stack = module_fleet_stack(with_nginx=False)


def _run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


async def _figures(url: str, server: FleetServer) -> HostFigures:
    async with PrometheusReader(url) as reader:
        return await reader.host_figures(server)


def test_dcgm_and_node_exporter_figures_of_each_host_with_the_queries_used(stack: FleetStack) -> None:
    a = _run(_figures(stack.prometheus_url, _server(stack, 0, "box-a")))
    b = _run(_figures(stack.prometheus_url, _server(stack, 1, "box-b")))
    assert a.source is HostSource.PROMETHEUS_DCGM and a.source_text == "Prometheus: DCGM"
    [gpu] = a.gpus
    assert (gpu.gpu, gpu.name, gpu.uuid) == ("0", "NVIDIA GeForce RTX 4090", "GPU-5f3c9a1e-2b7d-4c1f-9e8a-0d6b1c2a3f4e")
    assert (gpu.used_bytes, gpu.total_bytes, gpu.utilization) == (18230 * MIB, 24564 * MIB, pytest.approx(0.87))
    assert (a.ram_total_bytes, a.ram_available_bytes, a.ram_source) == (
        64000 * MIB, 39322 * MIB, "Prometheus: node exporter")
    assert (b.gpu_used_bytes, b.gpu_total_bytes, b.gpu_utilization) == (17102 * MIB, 24564 * MIB, pytest.approx(0.41))
    assert b.ram_total_bytes == 128000 * MIB
    assert a.queries[0] == ('DCGM_FI_DEV_FB_USED{Hostname="box-a"} or '
                            'DCGM_FI_DEV_FB_USED{instance=~"(box-a)(:[0-9]+)?"}')
    assert 'node_memory_MemTotal_bytes{instance=~"(box-a)(:[0-9]+)?"}' in a.queries
    # The server's own series, as Prometheus scraped them from that server and not from the other.
    port = parse_server_url(stack.servers[0]).port
    assert server_query(_server(stack, 0, "box-a")) in a.queries
    metrics = dict(a.server_metrics)
    assert metrics["llamacpp:requests_processing"] == 0
    assert "llamacpp:prompt_tokens_total" in metrics
    assert str(port) in server_query(_server(stack, 0, "box-a"))


def test_a_host_with_only_the_apps_exporter_falls_back_to_its_names(stack: FleetStack) -> None:
    c = _run(_figures(stack.prometheus_url, _server(stack, 0, "box-c")))
    assert c.source is HostSource.PROMETHEUS_EXPORTER and c.source_text == "Prometheus: ollama-deck exporter"
    [gpu] = c.gpus
    assert (gpu.name, gpu.used_bytes, gpu.total_bytes, gpu.utilization) == (
        "NVIDIA GeForce RTX 3090", 12 * 1024 * MIB, 24 * 1024 * MIB, 0.25)
    assert (c.ram_total_bytes, c.ram_available_bytes, c.ram_source) == (
        32 * 1024 * MIB, 16 * 1024 * MIB, "Prometheus: ollama-deck exporter")
    assert c.queries.index(on_host("DCGM_FI_DEV_FB_USED", "box-c", hostname_label=True)) < c.queries.index(
        on_host("ollama_deck_gpu_memory_used_bytes", "box-c"))


def test_a_host_prometheus_does_not_know_is_unknown_with_why_and_every_query_tried(stack: FleetStack) -> None:
    d = _run(_figures(stack.prometheus_url, _server(stack, 1, "box-d")))
    assert d.source is HostSource.UNKNOWN and d.gpus == ()
    assert d.source_text.startswith("unknown: Prometheus has no DCGM_FI_DEV_FB_USED or "
                                    "ollama_deck_gpu_memory_used_bytes series for host 'box-d'")
    assert d.ram_total_bytes is None and len(d.queries) == 11
    assert dict(d.server_metrics)["llamacpp:requests_processing"] == 0  # the server's own series still match


def test_targets_lists_every_scrape_target_with_its_health(stack: FleetStack) -> None:
    async def targets() -> list[ScrapeTarget]:
        async with PrometheusReader(stack.prometheus_url) as reader:
            return await reader.targets()

    found = _run(targets())
    servers = sorted(t.instance for t in found if t.job == "llama-server")
    assert servers == sorted(s.removeprefix("http://") for s in stack.servers)
    assert {t.health for t in found} == {"up"} and len(found) == 7
    assert {t.instance for t in found if t.job.startswith("node-")} == {"box-a:9100", "box-b:9100"}


def test_the_apis_error_document_is_a_typed_error_with_its_type(stack: FleetStack) -> None:
    async def bad() -> None:
        async with PrometheusReader(stack.prometheus_url) as reader:
            await reader.query("sum(")

    with pytest.raises(PrometheusQueryError) as caught:
        _run(bad())
    assert caught.value.error_type == "bad_data" and "parse error" in caught.value.error


def test_no_series_is_an_empty_result_error_where_one_is_required(stack: FleetStack) -> None:
    async def empty() -> None:
        async with PrometheusReader(stack.prometheus_url) as reader:
            assert await reader.query("no_such_metric") == []
            await reader.query_some("no_such_metric")

    with pytest.raises(PrometheusEmptyResult) as caught:
        _run(empty())
    assert caught.value.query == "no_such_metric"


def test_something_that_is_not_prometheus_is_a_bad_status(stack: FleetStack) -> None:
    async def not_prometheus() -> None:
        async with PrometheusReader(stack.files_url) as reader:  # the exposition files' server: 404 for the API
            await reader.query("up")

    with pytest.raises(PrometheusBadStatus) as caught:
        _run(not_prometheus())
    assert caught.value.status == 404


def test_nothing_listening_is_unreachable() -> None:
    async def nobody() -> None:
        async with PrometheusReader(f"http://127.0.0.1:{free_port()}", timeout_s=2.0) as reader:
            await reader.query("up")

    with pytest.raises(PrometheusUnreachable, match="cannot be reached"):
        _run(nobody())


def test_host_patterns_escape_what_re2_would_read_and_bracket_ipv6() -> None:
    assert instance_pattern(["10.0.0.5"]) == r"(10\.0\.0\.5)(:[0-9]+)?"
    assert instance_pattern(["::1"], "8080", port_optional=False) == r"(\[::1\]):8080"
    assert on_host("m", 'a"b') == 'm{instance=~"(a\\"b)(:[0-9]+)?"}'


def test_a_target_prometheus_cannot_scrape_is_listed_down_with_its_error(prometheus_binary: Path,
                                                                         tmp_path: Path) -> None:
    gone = f"127.0.0.1:{free_port()}"
    with exposition_files() as files_url:
        config = {"global": {"scrape_interval": "1s", "scrape_timeout": "1s"}, "scrape_configs": [
            {"job_name": "gone", "static_configs": [{"targets": [gone]}]},
            {"job_name": "dcgm", "metrics_path": "/dcgm-box-a.prom",
             "static_configs": [{"targets": [files_url.removeprefix("http://")]}]}]}
        with prometheus(prometheus_binary, tmp_path / "prometheus", config) as url:
            async def scraped_both() -> list[ScrapeTarget]:
                async with PrometheusReader(url) as reader:
                    async def known() -> bool:
                        found = await reader.targets()
                        return len(found) == 2 and all(t.health != "unknown" for t in found)

                    await wait_until(known, "both targets scraped once")
                    return await reader.targets()

            found = {t.job: t for t in _run(scraped_both())}
    assert (found["dcgm"].health, found["dcgm"].last_error) == ("up", "")
    assert found["gone"].health == "down" and found["gone"].instance == gone
    assert "connection refused" in found["gone"].last_error and found["gone"].scrape_url == f"http://{gone}/metrics"
