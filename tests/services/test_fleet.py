"""The fleet monitor against the real parts: two llama-servers, nginx balancing them, and Prometheus scraping
them beside the DCGM and node-exporter exposition files of tests/data/fleet/."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from collections.abc import Callable

import pytest

from app.adapters.prometheus.query import PrometheusReader
from app.backends import registry
from app.core.fleet import parse_fleet
from app.core.fleet_status import FleetSnapshot, Health, HostFigures, HostSource
from app.core.telemetry import HostSample, Sample
from app.core.telemetry_buffers import TelemetryBuffers
from app.services.fleet import CALL_TIMEOUT_S, FleetMonitor, local_host_figures
from tests.adapters.prometheus.fleet_stack import FleetStack, module_fleet_stack, wait_until
from tests.backends.llama_server.engine_server import free_port, post_json
from tests.fakes.scripted_gpu import ScriptedGpuBackend, serving_script

pytestmark = [pytest.mark.slow, pytest.mark.engine]
BACKENDS = {name: registry.get(name) for name in registry.names()}
MIB = 1024 * 1024


stack = module_fleet_stack(with_nginx=True)


def _monitor(text: str, *, timeout_s: float = CALL_TIMEOUT_S,
             local_host: Callable[[], HostFigures] | None = None) -> FleetMonitor:
    return FleetMonitor(parse_fleet(text, BACKENDS), BACKENDS, host_reader=PrometheusReader, timeout_s=timeout_s,
                        local_host=local_host)


async def _polls(monitor: FleetMonitor, count: int) -> list[FleetSnapshot]:
    try:
        return [await monitor.poll() for _ in range(count)]
    finally:
        await monitor.aclose()


def test_both_servers_are_up_with_version_model_slots_and_their_hosts_dcgm_figures(stack: FleetStack) -> None:
    [snapshot] = asyncio.run(_polls(_monitor(stack.toml()), 1))
    a, b = snapshot.endpoints
    for endpoint, url in zip((a, b), stack.servers):
        assert (endpoint.health, endpoint.why, endpoint.kind, endpoint.url) == (Health.UP, "", "llama-server", url)
        assert endpoint.version and "SmolLM2" in endpoint.model
        assert (endpoint.slots_busy, endpoint.slots_total, endpoint.queue) == (0, 2, 0)
    assert a.host is not None and b.host is not None
    assert (a.host.source, a.host.gpu_used_bytes, a.host.gpu_total_bytes) == (
        HostSource.PROMETHEUS_DCGM, 18230 * MIB, 24564 * MIB)
    assert (b.host.gpu_used_bytes, b.host.gpu_utilization) == (17102 * MIB, pytest.approx(0.41))
    assert b.host.ram_total_bytes == 128000 * MIB
    # The queries of both hosts, once each, in the order asked.
    assert 'DCGM_FI_DEV_FB_USED{Hostname="box-a"} or DCGM_FI_DEV_FB_USED{instance=~"(box-a)(:[0-9]+)?"}' in \
        snapshot.queries
    assert len(snapshot.queries) == len(set(snapshot.queries)) == 12  # 6 per host: 3 DCGM, 2 node, 1 server
    assert (snapshot.prometheus_url, snapshot.prometheus_problem) == (stack.prometheus_url, "")
    assert len(snapshot.targets) == 7 and snapshot.targets_down == ()
    assert {t.instance for t in snapshot.targets if t.job == "llama-server"} == {
        url.removeprefix("http://") for url in stack.servers}
    balancer = snapshot.balancer
    assert balancer is not None
    assert (balancer.name, balancer.health, balancer.behind, balancer.slots_total) == (
        "nginx", Health.UP, ("box-a", "box-b"), 4)


def test_tokens_per_second_come_from_the_servers_own_counters(stack: FleetStack) -> None:
    async def run() -> tuple[float | None, float | None]:
        monitor = _monitor(stack.toml(prometheus=False))
        try:
            await monitor.poll()  # the counters' first reading: no rate yet
            await asyncio.to_thread(post_json, f"{stack.servers[0]}/completion",
                                    {"prompt": "Count: one, two,", "n_predict": 24, "temperature": 0})
            seen: list[FleetSnapshot] = []

            async def rate_seen() -> bool:
                seen.append(await monitor.poll())
                return (seen[-1].endpoints[0].tokens_per_s or 0) > 0

            await wait_until(rate_seen, "box-a's tokens/s", timeout_s=30)
            return seen[-1].endpoints[0].tokens_per_s, seen[-1].endpoints[1].tokens_per_s
        finally:
            await monitor.aclose()

    a_rate, b_rate = asyncio.run(run())
    assert a_rate is not None and a_rate > 0
    assert not b_rate  # box-b generated nothing


def test_a_down_server_says_why_and_the_others_keep_their_figures(stack: FleetStack) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    extra = (f'\n[[server]]\nname = "box-c"\nurl = "{nobody}"\nbackend = "llama_server"\nhost = "box-c"\n'
             f'\n[[server]]\nname = "wrong-kind"\nurl = "{stack.servers[1]}"\nbackend = "ollama"\n')
    [snapshot] = asyncio.run(_polls(_monitor(stack.toml(extra=extra)), 1))
    a, b, c, wrong = snapshot.endpoints
    assert a.health is Health.UP and b.health is Health.UP
    assert c.health is Health.UNREACHABLE and nobody.removeprefix("http://") in c.why
    assert (c.version, c.model, c.tokens_per_s, c.slots_total) == ("", "", None, None)
    # Its host still has figures: Prometheus knows box-c through the app's own exporter.
    assert c.host is not None and c.host.source is HostSource.PROMETHEUS_EXPORTER
    # An Ollama client at a llama-server: it answers, but not Ollama's API.
    assert wrong.health in (Health.ERROR_STATUS, Health.NOT_ITS_API) and wrong.why


def test_prometheus_down_is_said_once_and_every_host_is_unknown_with_why(stack: FleetStack) -> None:
    text = stack.toml(prometheus=False) + f'\n[prometheus]\nurl = "http://127.0.0.1:{free_port()}"\n'
    [snapshot] = asyncio.run(_polls(_monitor(text, timeout_s=3.0), 1))
    assert "cannot be reached" in snapshot.prometheus_problem
    for endpoint in snapshot.endpoints:
        assert endpoint.health is Health.UP
        assert endpoint.host is not None and endpoint.host.source is HostSource.UNKNOWN
        assert endpoint.host.source_text.startswith("unknown: Prometheus failed: ")


def test_without_prometheus_a_loopback_server_gets_this_machines_gpu_and_ram(stack: FleetStack) -> None:
    # No GPU here: the sampler's row comes from the NVML backend's stand-in (an RTX 4090 serving Qwen3-14B).
    gpu = ScriptedGpuBackend(script=serving_script())
    samples = TelemetryBuffers()
    samples.append(Sample(30.0, gpu.sample(30.0, []), HostSample(30.0, 10 * 1024, 16 * 1024, 5.0, 900.0), 0.0))
    monitor = _monitor(stack.toml(prometheus=False), local_host=local_host_figures(gpu.info(), "", samples))
    [snapshot] = asyncio.run(_polls(monitor, 1))
    host = snapshot.endpoints[0].host
    assert host is not None and host.source is HostSource.THIS_MACHINE and host.source_text == "this machine: NVML"
    [card] = host.gpus
    assert (card.name, card.total_bytes, host.ram_total_bytes, host.ram_available_bytes) == (
        "NVIDIA GeForce RTX 4090", 24564 * MIB, 16 * 1024 * MIB, 6 * 1024 * MIB)
    assert card.used_bytes is not None and card.used_bytes > 14_000 * MIB  # the model is loaded at 30 s
    assert snapshot.queries == ()
    no_gpu = _monitor(stack.toml(prometheus=False), local_host=local_host_figures(None, "NVML: driver not loaded",
                                                                                 samples))
    [snapshot] = asyncio.run(_polls(no_gpu, 1))
    host = snapshot.endpoints[0].host
    assert host is not None and host.source_text == "unknown: no GPU readings on this machine: NVML: driver not loaded"
    assert host.ram_available_bytes == 6 * 1024 * MIB


def test_a_host_on_another_machine_without_prometheus_says_what_to_add() -> None:
    text = '[[server]]\nname = "far"\nurl = "http://192.0.2.1:8080"\nbackend = "llama_server"\n'
    [snapshot] = asyncio.run(_polls(_monitor(text, timeout_s=1.0), 1))
    [far] = snapshot.endpoints
    assert far.health in (Health.UNREACHABLE, Health.TIMEOUT)
    assert far.host is not None and far.host.source_text == (
        "unknown: 192.0.2.1 is another machine: add a [prometheus] url to the fleet file for its GPU")
    assert snapshot.notes and "192.0.2.1" in snapshot.notes[0]


def test_a_server_whose_own_telemetry_the_app_cannot_read_takes_its_queue_from_prometheus(stack: FleetStack) -> None:
    # As for a server whose /metrics the app cannot reach itself: the spec without a telemetry factory.
    blind = {**BACKENDS, "llama_server": replace(BACKENDS["llama_server"], server_telemetry=None)}
    monitor = FleetMonitor(parse_fleet(stack.toml(), BACKENDS), blind, host_reader=PrometheusReader)
    [snapshot] = asyncio.run(_polls(monitor, 1))
    a = snapshot.endpoints[0]
    assert (a.health, a.queue, a.slots_busy, a.slots_total) == (Health.UP, 0, 0, None)
    assert a.telemetry_note.startswith("queue and requests decoding as Prometheus scraped them")
    assert a.host is not None and (a.host.scraped_running, a.host.scraped_waiting) == (0, 0)


def test_a_server_listed_as_openai_compatible_is_read_through_v1_and_its_metrics(stack: FleetStack) -> None:
    # The same llama-server, entered as any OpenAI-compatible server (its /v1 root): models from /v1/models, the
    # queue and busy requests from its /metrics in the llama.cpp dialect.
    text = (f'[[server]]\nname = "any"\nurl = "{stack.servers[0]}/v1"\nbackend = "openai"\n')
    [snapshot] = asyncio.run(_polls(_monitor(text), 1))
    [endpoint] = snapshot.endpoints
    assert (endpoint.health, endpoint.why, endpoint.kind) == (Health.UP, "", "OpenAI-compatible")
    assert "SmolLM2" in endpoint.model
    assert endpoint.queue == 0 and endpoint.slots_total == 2
