"""The exporter over real HTTP on a free port: the scripted RTX 4090 (tests/fakes/scripted_gpu.py) through the app's
real Sampler and host probe, the server figures of the real llama-server's recorded answers, read back with
prometheus_client's own text parser."""

from __future__ import annotations

import asyncio
import math
import os
import socket
import time
import urllib.request
from collections.abc import Callable
from dataclasses import replace

import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from app import __version__
from app.adapters.prometheus.exporter import (METRIC_NAMES, BindError, BindProblem, ExporterFeed, ExporterServer,
                                              ListenAddress, ListenError, ServerTarget, make_registry, parse_listen,
                                              poll_server)
from app.adapters.telemetry.host import HostProbe
from app.adapters.telemetry.sampler import Sampler
from app.backends.llama_server.metrics import server_telemetry
from app.core.server_telemetry import ServerSample
from app.core.throughput import TokenMeter
from app.core.units import MIB
from tests.backends.llama_server.recorded_samples import recorded_samples
from tests.bounded import run_within
from tests.fakes.raw_http import closed_port
from tests.prometheus_server import wait_for
from tests.fakes.scripted_gpu import RTX_4090, GpuReading, ScriptedGpuBackend, gpu_with

TARGET = ServerTarget("llama_server", "http://127.0.0.1:8081")
SERVER_LABELS = {"backend": "llama_server", "url": "http://127.0.0.1:8081"}
GPU_LABELS = {"gpu": "0", "name": RTX_4090.name, "uuid": RTX_4090.uuid}
SERVING = GpuReading(memory_used_mib=14_970.0, utilization_pct=97.0, power_w=331.5, temperature_c=66.0,
                     server_memory_mib=14_350.0, memory_reserved_mib=412.0)
UNKNOWN_GPU = GpuReading(memory_used_mib=620.0, utilization_pct=3.0, power_w=math.nan, temperature_c=math.nan)

Scrape = dict[str, list[tuple[dict[str, str], float]]]


def sampled(gpu: ScriptedGpuBackend, clock: Callable[[], float] = time.monotonic) -> Sampler:
    """The app's sampler over `gpu` and the real host probe, with this process as the server, one sample taken."""
    sampler = Sampler(gpu, HostProbe(), server_pids=lambda: [os.getpid()], token_meter=TokenMeter(), clock=clock)
    sampler.tick()
    return sampler


def scrape(url: str) -> Scrape:
    """Sample name -> [(labels, value)] of one GET of `url`, read by prometheus_client's parser."""
    with urllib.request.urlopen(url, timeout=5) as reply:
        text = reply.read().decode()
    found: Scrape = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return found


@pytest.fixture
def serve():
    servers: list[ExporterServer] = []

    def start(feed: ExporterFeed) -> ExporterServer:
        server = ExporterServer(make_registry(feed, __version__), ListenAddress("127.0.0.1", 0))
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def only(found: Scrape, name: str) -> tuple[dict[str, str], float]:
    assert len(found[name]) == 1, found[name]
    return found[name][0]


def test_every_figure_reaches_a_scrape_under_its_agreed_name_labels_and_unit(serve) -> None:
    sampler = sampled(ScriptedGpuBackend(script=[SERVING]))
    feed = ExporterFeed(RTX_4090, lambda: sampler.latest, target=TARGET)
    busy = recorded_samples()[1]  # two slots busy, one request waiting
    feed.server_read(replace(busy, requests_finished_total=7.0))
    url = serve(feed).url
    # The host's CPU is known once a window has passed between two reads of its counters.
    found = wait_for(lambda: (got := scrape(url)) and "ollama_deck_host_cpu_ratio" in got and got, 30, "the CPU ratio")

    assert set(found) == set(METRIC_NAMES)
    assert only(found, "ollama_deck_info") == ({"version": __version__}, 1.0)
    expected_gpu = {"ollama_deck_gpu_memory_total_bytes": RTX_4090.memory_total_mib * MIB,
                    "ollama_deck_gpu_memory_used_bytes": 14_970 * MIB,
                    "ollama_deck_gpu_memory_reserved_bytes": 412 * MIB,
                    "ollama_deck_gpu_utilization_ratio": 0.97, "ollama_deck_gpu_power_watts": 331.5,
                    "ollama_deck_gpu_temperature_celsius": 66.0}
    for name, value in expected_gpu.items():
        labels, got = only(found, name)
        assert labels == GPU_LABELS and got == pytest.approx(value), name
    assert only(found, "ollama_deck_server_gpu_memory_bytes") == ({**GPU_LABELS, **SERVER_LABELS}, 14_350 * MIB)
    expected_server = {"ollama_deck_server_up": 1, "ollama_deck_server_requests_running": 2,
                       "ollama_deck_server_requests_waiting": 1, "ollama_deck_server_slots_total": 2,
                       "ollama_deck_server_slots_busy": 2, "ollama_deck_server_kv_cache_usage_ratio": busy.kv_cache_fill,
                       "ollama_deck_server_prompt_tokens_total": 41, "ollama_deck_server_generated_tokens_total": 0,
                       "ollama_deck_server_requests_finished_total": 7}
    for name, value in expected_server.items():
        assert only(found, name) == (SERVER_LABELS, value), name
    host = sampler.latest.host
    assert only(found, "ollama_deck_host_memory_total_bytes")[1] == psutil.virtual_memory().total
    assert only(found, "ollama_deck_host_memory_available_bytes")[1] == (host.ram_total_mib - host.ram_used_mib) * MIB
    assert 0.0 <= only(found, "ollama_deck_host_cpu_ratio")[1] <= 1.0


def test_counters_are_typed_counters_and_the_rest_gauges(serve) -> None:
    sampler = sampled(ScriptedGpuBackend(script=[SERVING]))
    feed = ExporterFeed(RTX_4090, lambda: sampler.latest, target=TARGET)
    feed.server_read(replace(recorded_samples()[2], requests_finished_total=1.0))
    with urllib.request.urlopen(serve(feed).url, timeout=5) as reply:
        families = {f.name: f.type for f in text_string_to_metric_families(reply.read().decode())}
    counters = {"ollama_deck_server_prompt_tokens", "ollama_deck_server_generated_tokens",
                "ollama_deck_server_requests_finished"}
    assert {name for name, kind in families.items() if kind == "counter"} == counters
    assert all(kind == "gauge" for name, kind in families.items() if name not in counters)


def test_what_the_driver_or_server_does_not_report_is_left_out_never_zero(serve) -> None:
    sampler = sampled(ScriptedGpuBackend(script=[UNKNOWN_GPU]))
    feed = ExporterFeed(RTX_4090, lambda: sampler.latest, target=TARGET)
    idle = recorded_samples()[0]
    feed.server_read(replace(idle, kv_cache_fill=None, requests_processing=None, slots_total=None, slots_busy=None))
    found = scrape(serve(feed).url)
    for name in ("gpu_power_watts", "gpu_temperature_celsius", "gpu_memory_reserved_bytes", "server_gpu_memory_bytes",
                 "server_kv_cache_usage_ratio", "server_requests_running", "server_slots_total", "server_slots_busy",
                 "server_requests_finished_total"):
        assert f"ollama_deck_{name}" not in found, name
    assert only(found, "ollama_deck_gpu_utilization_ratio")[1] == pytest.approx(0.03)
    assert only(found, "ollama_deck_server_requests_waiting") == (SERVER_LABELS, 0.0)  # a known 0 stays


def test_without_a_gpu_there_are_no_gpu_metrics_and_the_rest_is_exported(serve) -> None:
    sampler = sampled(gpu_with(None, "No NVIDIA driver found"))
    feed = ExporterFeed(None, lambda: sampler.latest, target=TARGET)
    found = scrape(serve(feed).url)
    assert not [name for name in found if "gpu" in name]
    assert "ollama_deck_host_memory_total_bytes" in found
    assert "ollama_deck_server_up" not in found  # not polled yet: unknown


def test_a_server_that_stops_answering_reads_as_down_without_its_old_figures(serve) -> None:
    now = [100.0]
    sampler = sampled(ScriptedGpuBackend(script=[SERVING]), clock=lambda: now[0])
    feed = ExporterFeed(RTX_4090, lambda: sampler.latest, target=TARGET, stale_after_s=5.0, clock=lambda: now[0])
    feed.server_read(recorded_samples()[1])
    url = serve(feed).url
    now[0] = 104.0
    assert only(scrape(url), "ollama_deck_server_up")[1] == 1
    now[0] = 106.0  # no answer for longer than stale_after_s
    found = scrape(url)
    assert only(found, "ollama_deck_server_up") == (SERVER_LABELS, 0)
    assert not [name for name in found if name.startswith("ollama_deck_server_") and name != "ollama_deck_server_up"]
    assert "ollama_deck_gpu_power_watts" not in found  # the sampler's reading (taken at its own clock) is stale too
    feed.server_read(recorded_samples()[2])
    feed.server_down()
    assert only(scrape(url), "ollama_deck_server_up")[1] == 0


def test_another_server_drops_what_the_previous_one_said(serve) -> None:
    feed = ExporterFeed(None, lambda: None, target=TARGET)
    feed.server_read(recorded_samples()[2])
    url = serve(feed).url
    feed.set_target(ServerTarget("ollama", "http://127.0.0.1:11434"))
    assert not [name for name in scrape(url) if name.startswith("ollama_deck_server_")]


def test_polling_a_closed_port_says_why_once_and_reads_down() -> None:
    feed = ExporterFeed(None, lambda: None, target=TARGET)
    notices: list[str] = []
    telemetry = server_telemetry(f"http://127.0.0.1:{closed_port()}")

    async def poll_a_while() -> None:
        task = asyncio.ensure_future(poll_server(telemetry, feed, 0.05, notices.append))
        while feed.reading().server_up is None or len(notices) < 1:
            await asyncio.sleep(0.05)
        for _ in range(4):  # more failed polls: said once
            await asyncio.sleep(0.05)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    run_within(poll_a_while, 30)
    assert feed.reading().server_up is False
    assert len(notices) == 1 and "did not answer" in notices[0]


def test_a_port_in_use_is_refused_naming_the_port(serve) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        server = ExporterServer(make_registry(ExporterFeed(None, lambda: None), __version__),
                                ListenAddress("127.0.0.1", port))
        with pytest.raises(BindError) as caught:
            server.start()
    assert caught.value.problem is BindProblem.PORT_IN_USE
    assert f"Port {port} on 127.0.0.1 is already in use" in caught.value.message
    assert "choose another port" in caught.value.hint


def test_stopping_frees_the_port(serve) -> None:
    server = serve(ExporterFeed(None, lambda: None))
    port = server.port
    server.stop()
    assert not server.running
    with socket.socket() as again:
        again.bind(("127.0.0.1", port))  # would raise EADDRINUSE while the exporter held it


@pytest.mark.parametrize(("text", "host", "port"), [
    ("127.0.0.1:9464", "127.0.0.1", 9464), ("[::1]:0", "::1", 0), ("localhost:80", "localhost", 80),
    (" 0.0.0.0:9100 ", "0.0.0.0", 9100)])
def test_listen_addresses_are_read(text: str, host: str, port: int) -> None:
    assert parse_listen(text) == ListenAddress(host, port)


@pytest.mark.parametrize("text", ["9464", ":9464", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "::1:9464",
                                  "[::1:9464", "a b:1", "http://x:1"])
def test_unusable_listen_addresses_say_why(text: str) -> None:
    with pytest.raises(ListenError):
        parse_listen(text)


@given(st.text(max_size=40))
def test_any_listen_text_is_read_or_refused_with_a_listen_error(text: str) -> None:
    try:
        address = parse_listen(text)
    except ListenError as exc:
        assert exc.user_text()
    else:
        assert 0 <= address.port <= 65535 and address.host and address.text.endswith(f":{address.port}")


def test_only_loopback_is_allowed_without_permission_for_that_host() -> None:
    assert ListenAddress("127.0.0.1", 1).allowed("") and ListenAddress("::1", 1).allowed("")
    exposed = ListenAddress("0.0.0.0", 9464)
    assert not exposed.allowed("") and not exposed.allowed("192.168.1.5") and exposed.allowed("0.0.0.0")
    assert "any machine that can reach it can read" in exposed.warning() and not ListenAddress("127.0.0.1", 1).warning()


def test_server_samples_are_dropped_when_no_server_is_exported() -> None:
    feed = ExporterFeed(None, lambda: None, target=None)
    feed.server_read(ServerSample(at=0.0, slots_total=1, slots_busy=0, requests_processing=0, requests_deferred=0,
                                  kv_cache_fill=0.0, prompt_tokens_per_s=None, generation_tokens_per_s=None,
                                  prompt_tokens_total=1.0, predicted_tokens_total=1.0))
    reading = feed.reading()
    assert reading.server is None and reading.server_up is None


def test_a_server_whose_telemetry_answers_with_reasons_only_reads_down_and_says_why() -> None:
    # Ollama's telemetry reads its llama-server child; with no Ollama (or no child) known there, it answers with the
    # reasons alone. That is no figure of the server's, so it must not read as up.
    from app.backends import registry

    feed = ExporterFeed(None, lambda: None, target=TARGET)
    notices: list[str] = []
    url = f"http://127.0.0.1:{closed_port()}"
    feed.set_target(ServerTarget("ollama", url))
    telemetry = registry.get("ollama").server_telemetry(url)

    async def poll_once() -> None:
        task = asyncio.ensure_future(poll_server(telemetry, feed, 0.05, notices.append))
        while feed.reading().server_up is None or not notices:
            await asyncio.sleep(0.05)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    run_within(poll_once, 30)
    assert feed.reading().server_up is False and feed.reading().server is None
    assert notices and notices[0]
