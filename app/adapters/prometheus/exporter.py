"""The app as a Prometheus exporter: what it samples (the GPU through NVML, the host through psutil, the server's
own telemetry) as ollama_deck_* metrics, served over HTTP by prometheus_client on loopback unless allowed otherwise.

The names are fixed (a fleet's dashboards and the Fleet page query them): gauges unless marked counter, every GPU
metric labelled gpu, name and uuid, every server metric labelled backend and url. A figure that is not known (a
driver's N/A, a server that keeps no such counter, a reading gone stale) is left out of the scrape, never sent as 0.

Nothing is read at scrape time but the newest readings the samplers already took (the app's Sampler for GPU and
host, the server-telemetry poll for the server) and the host's CPU counters, so a scrape costs a few dozen lines of
text, not a driver call.
"""

from __future__ import annotations

import asyncio
import enum
import errno
import math
import socket
import threading
import time
import wsgiref.simple_server
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import psutil
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.metrics_core import Metric

from app.adapters.process.procs import find_listener, listening_pids
from app.core.errors import DeckError
from app.core.ports.telemetry import ServerTelemetry
from app.core.server.exposure import address_text, is_loopback, same_host
from app.core.server_telemetry import ServerSample
from app.core.telemetry import GpuInfo, GpuSample, HostSample, Sample
from app.core.units import MIB

DEFAULT_PORT = 9464  # the port Prometheus' own list of exporter ports gives to OpenTelemetry's exporters; free here
PREFIX = "ollama_deck_"
GPU_LABELS = ("gpu", "name", "uuid")
SERVER_LABELS = ("backend", "url")
# Every name this exporter can send, for tests and for the Fleet page's queries.
METRIC_NAMES = tuple(PREFIX + name for name in (
    "info",
    "gpu_memory_total_bytes", "gpu_memory_used_bytes", "gpu_memory_reserved_bytes", "gpu_utilization_ratio",
    "gpu_power_watts", "gpu_temperature_celsius", "server_gpu_memory_bytes",
    "host_memory_total_bytes", "host_memory_available_bytes", "host_cpu_ratio",
    "server_up", "server_requests_running", "server_requests_waiting", "server_slots_total", "server_slots_busy",
    "server_kv_cache_usage_ratio", "server_prompt_tokens_total", "server_generated_tokens_total",
    "server_requests_finished_total",
))
MIN_CPU_WINDOW_S = 0.05  # a shorter window between two reads of the CPU counters says nothing new


@dataclass(frozen=True)
class ServerTarget:
    """The server whose telemetry is exported: its backend's registry name and its URL (the metrics' labels)."""

    backend: str
    url: str


class HostCpu:
    """The host's CPU use (0..1 over all cores) between two reads of the kernel's counters, taken at scrape time;
    its own counters, so psutil.cpu_percent's shared state is left to others. Thread-safe."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._last = psutil.cpu_times()
        self._last_at = clock()
        self._ratio: float | None = None

    def ratio(self) -> float | None:
        """Busy time over all time since the previous read (None until a window has passed)."""
        with self._lock:
            now = self._clock()
            if now - self._last_at < MIN_CPU_WINDOW_S:
                return self._ratio
            times = psutil.cpu_times()
            total = sum(times) - sum(self._last)
            idle = _idle(times) - _idle(self._last)
            self._last, self._last_at = times, now
            if total > 0:
                self._ratio = min(1.0, max(0.0, 1.0 - idle / total))
            return self._ratio


def _idle(times: object) -> float:
    """Time the CPUs had nothing to run: idle, and waiting on the disk where the kernel counts it apart."""
    return float(getattr(times, "idle", 0.0)) + float(getattr(times, "iowait", 0.0))


@dataclass(frozen=True)
class FeedReading:
    """What one scrape exports: the newest readings, None where unknown or gone stale."""

    gpu_info: GpuInfo | None
    gpu: GpuSample | None
    host: HostSample | None
    host_cpu_ratio: float | None
    target: ServerTarget | None
    server: ServerSample | None
    server_up: bool | None  # None: not polled yet (or no server to poll)


class ExporterFeed:
    """The newest readings, written by the threads that take them and read at each scrape (thread-safe).

    `latest_sample` returns the app's sampler's newest Sample (GPU and host). The server's samples come through
    `server_read` and `server_down`. A reading older than `stale_after_s` is left out: a sampler that stopped must
    not go on reporting its last figures; a server whose telemetry stopped answering reads as down."""

    def __init__(self, gpu_info: GpuInfo | None, latest_sample: Callable[[], Sample | None], *,
                 target: ServerTarget | None = None, stale_after_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic, host_cpu: HostCpu | None = None) -> None:
        self._gpu_info = gpu_info
        self._latest_sample = latest_sample
        self._target = target
        self.stale_after_s = stale_after_s
        self._clock = clock
        self._host_cpu = host_cpu if host_cpu is not None else HostCpu(clock)
        self._lock = threading.Lock()
        self._server: ServerSample | None = None
        self._server_at = -math.inf
        self._server_up: bool | None = None

    def set_target(self, target: ServerTarget | None) -> None:
        """Export another server (or none); what was read from the previous one is dropped."""
        with self._lock:
            if target != self._target:
                self._target, self._server, self._server_up = target, None, None

    def server_read(self, sample: ServerSample) -> None:
        """The server answered with `sample` (any thread)."""
        with self._lock:
            self._server, self._server_at, self._server_up = sample, self._clock(), True

    def server_down(self) -> None:
        """The server's telemetry did not answer, or the server stopped (any thread)."""
        with self._lock:
            self._server, self._server_up = None, False

    def reading(self) -> FeedReading:
        """The readings to export now."""
        now = self._clock()
        sample = self._latest_sample()
        if sample is not None and now - sample.t > self.stale_after_s:
            sample = None
        with self._lock:
            target, server, up = self._target, self._server, self._server_up
            if server is not None and now - self._server_at > self.stale_after_s:
                server, up = None, False
        return FeedReading(
            gpu_info=self._gpu_info, gpu=sample.gpu if sample is not None else None,
            host=sample.host if sample is not None else None, host_cpu_ratio=self._host_cpu.ratio(),
            target=target, server=server if target is not None else None, server_up=up if target is not None else None)


def _known(value: float | int | None, scale: float = 1.0) -> float | None:
    """value * scale, or None when the value is unknown (None or NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value) * scale


class _Families:
    """Collects metric families, leaving out those whose value is unknown."""

    def __init__(self) -> None:
        self.found: list[Metric] = []

    def gauge(self, name: str, doc: str, labels: dict[str, str], value: float | int | None,
              scale: float = 1.0) -> None:
        self._add(GaugeMetricFamily(PREFIX + name, doc, labels=list(labels)), labels, value, scale)

    def counter(self, name: str, doc: str, labels: dict[str, str], value: float | int | None) -> None:
        self._add(CounterMetricFamily(PREFIX + name, doc, labels=list(labels)), labels, value, 1.0)

    def _add(self, family: GaugeMetricFamily | CounterMetricFamily, labels: dict[str, str],
             value: float | int | None, scale: float) -> None:
        known = _known(value, scale)
        if known is None:
            return
        family.add_metric(list(labels.values()), known)
        self.found.append(family)


def gpu_labels(info: GpuInfo) -> dict[str, str]:
    """The labels of every GPU metric: the card's index, name and UUID as NVML gives them."""
    return {"gpu": str(info.index), "name": info.name, "uuid": info.uuid}


def server_labels(target: ServerTarget) -> dict[str, str]:
    """The labels of every server metric: the backend's registry name and the server's URL."""
    return {"backend": target.backend, "url": target.url}


class DeckCollector(Collector):
    """A prometheus_client collector over an ExporterFeed: one set of ollama_deck_* families per scrape."""

    def __init__(self, feed: ExporterFeed, version: str) -> None:
        self._feed = feed
        self._version = version

    def collect(self) -> Iterable[Metric]:
        """The families of this scrape (called on the HTTP server's thread)."""
        reading = self._feed.reading()
        out = _Families()
        out.gauge("info", "ollama-deck's version; always 1", {"version": self._version}, 1)
        self._gpu(out, reading)
        self._host(out, reading)
        self._server(out, reading)
        return out.found

    @staticmethod
    def _gpu(out: _Families, reading: FeedReading) -> None:
        info, gpu = reading.gpu_info, reading.gpu
        if info is None or gpu is None:
            return
        labels = gpu_labels(info)
        out.gauge("gpu_memory_total_bytes", "GPU memory, as the driver reports it", labels, gpu.memory_total_mib, MIB)
        out.gauge("gpu_memory_used_bytes", "GPU memory processes hold (nvidia-smi's used; the driver's reserve too "
                  "where it does not report it apart)", labels, gpu.memory_used_mib, MIB)
        out.gauge("gpu_memory_reserved_bytes", "GPU memory the driver keeps for itself, where it reports it",
                  labels, gpu.memory_reserved_mib, MIB)
        out.gauge("gpu_utilization_ratio", "share of the last sample period the GPU ran a kernel (0..1)", labels,
                  gpu.utilization_pct, 0.01)
        out.gauge("gpu_power_watts", "GPU power draw", labels, gpu.power_w)
        out.gauge("gpu_temperature_celsius", "GPU core temperature", labels, gpu.temperature_c)
        if reading.target is not None:
            out.gauge("server_gpu_memory_bytes", "GPU memory the server's process tree holds", {
                **labels, **server_labels(reading.target)}, gpu.server_memory_mib, MIB)

    @staticmethod
    def _host(out: _Families, reading: FeedReading) -> None:
        host = reading.host
        if host is not None:
            out.gauge("host_memory_total_bytes", "the host's RAM", {}, host.ram_total_mib, MIB)
            out.gauge("host_memory_available_bytes", "RAM programs can still have without swapping (cache counts as "
                      "available)", {}, host.ram_total_mib - host.ram_used_mib, MIB)
        out.gauge("host_cpu_ratio", "the host's CPU use over all cores since the previous scrape (0..1)", {},
                  reading.host_cpu_ratio)

    @staticmethod
    def _server(out: _Families, reading: FeedReading) -> None:
        target, server = reading.target, reading.server
        if target is None:
            return
        labels = server_labels(target)
        out.gauge("server_up", "1 when the server's telemetry gave figures at its last poll, else 0 (down, or it reports none now)", labels,
                  None if reading.server_up is None else int(reading.server_up))
        if server is None:
            return
        out.gauge("server_requests_running", "requests the server is working on", labels, server.requests_processing)
        out.gauge("server_requests_waiting", "requests waiting for a free slot", labels, server.requests_deferred)
        out.gauge("server_slots_total", "the server's parallel slots", labels, server.slots_total)
        out.gauge("server_slots_busy", "slots working on a request", labels, server.slots_busy)
        out.gauge("server_kv_cache_usage_ratio", "KV-cache fill (0..1) as the server reports it", labels,
                  server.kv_cache_fill)
        out.counter("server_prompt_tokens", "prompt tokens the server evaluated (cache hits excluded), its own "
                    "counter", labels, server.prompt_tokens_total)
        out.counter("server_generated_tokens", "tokens the server generated for finished requests, its own counter",
                    labels, server.predicted_tokens_total)
        out.counter("server_requests_finished", "requests the server finished, its own counter", labels,
                    server.requests_finished_total)


def make_registry(feed: ExporterFeed, version: str) -> CollectorRegistry:
    """A fresh registry holding only the deck's collector (no process or platform collectors: the figures are the
    machine's and the server's, not this Python process's)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DeckCollector(feed, version))
    return registry


# ---- where it listens ----------------------------------------------------------------------------------------


class ListenError(DeckError):
    """An unusable --listen address (the text says which part and why)."""

    hint = "Give HOST:PORT, e.g. 127.0.0.1:9464 (an IPv6 host in brackets: [::1]:9464)."


@dataclass(frozen=True)
class ListenAddress:
    """host:port the exporter binds."""

    host: str
    port: int

    @property
    def loopback(self) -> bool:
        """True when only this machine's programs can reach it."""
        return is_loopback(self.host)

    @property
    def text(self) -> str:
        """host:port as a user reads it (IPv6 in brackets)."""
        return address_text(self.host, self.port)

    def allowed(self, allowed_for: str) -> bool:
        """True when binding is allowed: loopback, or the permission names this host."""
        return self.loopback or same_host(allowed_for, self.host)

    def warning(self) -> str:
        """What binding beyond loopback means ('' on loopback)."""
        if self.loopback:
            return ""
        return (f"The exporter on {self.text} is open to others: any machine that can reach it can read this "
                "computer's GPU, host and server figures (the exporter has no authentication).")

    def refusal(self) -> str:
        """Why a bind beyond loopback without permission does not go ahead."""
        return (f"Did not listen on {self.text}: any machine that can reach it could read this computer's GPU, host "
                f"and server figures, and that was not allowed for {self.host}.")


def parse_listen(text: str) -> ListenAddress:
    """HOST:PORT (IPv6 in brackets) -> ListenAddress; ListenError saying what is wrong."""
    raw = text.strip()
    host, sep, port_text = raw.rpartition(":")
    if not sep or not host:
        raise ListenError(f"{text!r} has no host and port")
    if host.startswith("["):
        if not host.endswith("]"):
            raise ListenError(f"{text!r}: an IPv6 host needs its closing bracket")
        host = host[1:-1]
    elif ":" in host:
        raise ListenError(f"{text!r}: put an IPv6 host in brackets")
    if not host or any(c.isspace() or c in "/?#@" for c in host):
        raise ListenError(f"{text!r}: {host!r} is not a host")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ListenError(f"{text!r}: the port must be a number from 0 to 65535 (0: any free one)")
    return ListenAddress(host, int(port_text))


class BindProblem(enum.Enum):
    """Why the exporter could not listen."""

    PORT_IN_USE = "port in use"
    NO_PERMISSION = "no permission"
    NOT_AN_ADDRESS_HERE = "not an address of this machine"
    OTHER = "other"


class BindError(DeckError):
    """The exporter could not listen on its address; `problem` says why."""

    def __init__(self, message: str, hint: str, problem: BindProblem) -> None:
        super().__init__(message, hint)
        self.problem = problem


def bind_error(address: ListenAddress, exc: OSError) -> BindError:
    """The user's words for an OSError from binding `address`."""
    if exc.errno == errno.EADDRINUSE:
        holder = find_listener(address.host, address.port)
        by = f" by {holder.description}" if holder is not None else ""
        return BindError(f"Port {address.port} on {address.host} is already in use{by}.",
                         f"Stop that program or choose another port (e.g. {address.host}:{DEFAULT_PORT + 1}).",
                         BindProblem.PORT_IN_USE)
    if exc.errno == errno.EACCES:
        return BindError(f"No permission to listen on port {address.port}.",
                         "Ports below 1024 need root; choose one above 1023, e.g. 9464.", BindProblem.NO_PERMISSION)
    if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT) or isinstance(exc, socket.gaierror):
        return BindError(f"{address.host} is not an address of this machine ({exc.strerror or exc}).",
                         "Use 127.0.0.1, or an address this machine has.", BindProblem.NOT_AN_ADDRESS_HERE)
    return BindError(f"Could not listen on {address.text}: {exc.strerror or exc}.",
                     "Choose another address or port.", BindProblem.OTHER)


class ExporterServer:
    """prometheus_client's HTTP server (its WSGI app on a threading stdlib server) for one registry."""

    def __init__(self, registry: CollectorRegistry, address: ListenAddress) -> None:
        self.registry = registry
        self.address = address
        self._httpd: wsgiref.simple_server.WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Listen and serve on a daemon thread; BindError when the address cannot be had."""
        try:
            self._httpd, self._thread = start_http_server(self.address.port, self.address.host, self.registry)
        except OSError as exc:  # socket.gaierror too: a host name that does not resolve
            raise bind_error(self.address, exc) from None

    @property
    def port(self) -> int:
        """The port it listens on (the kernel's pick for port 0)."""
        return int(self._httpd.server_address[1]) if self._httpd is not None else self.address.port

    @property
    def running(self) -> bool:
        """True between start and stop."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def url(self) -> str:
        """The URL to scrape."""
        return f"http://{address_text(self.address.host, self.port)}/metrics"

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop serving and free the port."""
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join(timeout_s)
        self._httpd = self._thread = None


def scrape_config(job: str, address: str, interval_s: float = 15.0) -> str:
    """A scrape_configs entry for prometheus.yml that scrapes the exporter at host:port `address`."""
    return (f"scrape_configs:\n"
            f"  - job_name: {job}\n"
            f"    scrape_interval: {interval_s:g}s\n"
            f"    static_configs:\n"
            f"      - targets: ['{address}']\n")


# ---- the server's telemetry, polled without the GUI ------------------------------------------------------------


class ListenerPids:
    """The pids listening on a server's port, re-read at most every `refresh_s` seconds (walking the
    sockets costs more than a sample); the sampler expands them to the process tree. Thread-safe."""

    def __init__(self, host: str, port: int, refresh_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._host, self._port, self.refresh_s, self._clock = host, port, refresh_s, clock
        self._pids: list[int] = []
        self._read_at = -math.inf
        self._lock = threading.Lock()

    def __call__(self) -> Sequence[int]:
        with self._lock:
            now = self._clock()
            if now - self._read_at >= self.refresh_s:
                self._pids = sorted(listening_pids(self._host, self._port) or ())
                self._read_at = now
            return list(self._pids)


def _has_figures(sample: ServerSample) -> bool:
    """True when a sample carries at least one of the server's own figures (slots, a gauge or a counter)."""
    return any(value is not None for value in (
        sample.slots_total, sample.requests_processing, sample.requests_deferred, sample.kv_cache_fill,
        sample.prompt_tokens_total, sample.predicted_tokens_total, sample.requests_finished_total))


async def poll_server(telemetry: ServerTelemetry, feed: ExporterFeed, interval_s: float,
                      on_notice: Callable[[str], None] = lambda _text: None) -> None:
    """Sample the server every interval_s seconds into `feed` until cancelled (drift-free, late ticks skipped).
    `on_notice` gets why the telemetry is unavailable when that changes ('' when it answers again)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time()
    notice = ""
    try:
        while True:
            try:
                sample = await telemetry.sample()
            except DeckError as exc:
                feed.server_down()
                now_notice = exc.user_text()
            else:
                if _has_figures(sample):
                    feed.server_read(sample)
                else:  # answered with reasons only (e.g. an Ollama whose llama-server is not known): nothing to export
                    feed.server_down()
                now_notice = "; ".join(r for r in (sample.metrics_reason, sample.slots_reason) if r)
            if now_notice != notice:
                notice = now_notice
                on_notice(notice)
            deadline += interval_s
            now = loop.time()
            if deadline < now:
                deadline = now + interval_s
            await asyncio.sleep(deadline - now)
    finally:
        await telemetry.aclose()


__all__ = ["BindError", "BindProblem", "DEFAULT_PORT", "DeckCollector", "ExporterFeed", "ExporterServer",
           "FeedReading", "HostCpu", "ListenAddress", "ListenError", "ListenerPids", "METRIC_NAMES", "ServerTarget",
           "bind_error", "gpu_labels", "make_registry", "parse_listen", "poll_server", "scrape_config",
           "server_labels"]
