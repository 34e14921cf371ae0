"""Several servers in one window: poll each endpoint of a fleet file concurrently, on the app's asyncio loop.

Per endpoint, through its backend's spec (the composition root hands the specs in by registry name; this
module never picks a backend): health from the catalog's `version()` (up, or down with why: a Health and
the client's own words), the model(s) it has loaded (`ps()`), and from its server telemetry (where the spec
has a factory) tokens/s from the server's counters, slots busy/total and the queue. Per host: the figures
of a HostFiguresReader (Prometheus) when the fleet file names one, else for a server on this machine the
local GPU (NVML) and RAM, else "unknown" with the reason. The balancer's row: its health through the
backend of the servers behind it, and their sums.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from app.core.errors import DeckError
from app.core.fleet import FleetFile, FleetServer
from app.core.fleet_status import (
    EndpointStatus,
    FleetSnapshot,
    GpuFigures,
    Health,
    HostFigures,
    HostSource,
    ScrapeTarget,
    health_of,
    unknown_host,
)
from app.core.ports.backend import BackendSpec
from app.core.ports.catalog import ModelCatalog
from app.core.ports.fleet import HostFiguresReader, HostFiguresReaderFactory
from app.core.ports.telemetry import ServerTelemetry
from app.core.telemetry import GpuInfo
from app.core.telemetry_buffers import Channel, TelemetryBuffers

log = logging.getLogger(__name__)

T = TypeVar("T")
POLL_INTERVAL_S = 1.0
CALL_TIMEOUT_S = 5.0
MIB = 1024 * 1024


@dataclass
class _Endpoint:
    """One polled URL and the clients kept open across polls (the telemetry's rates need consecutive samples)."""

    status: EndpointStatus
    spec: BackendSpec
    catalog: ModelCatalog
    telemetry: ServerTelemetry | None
    server: FleetServer | None  # None for the balancer


class FleetMonitor:
    """Polls every endpoint of `fleet`; `backends` maps the fleet file's backend names to their specs."""

    def __init__(self, fleet: FleetFile, backends: Mapping[str, BackendSpec], *,
                 host_reader: HostFiguresReaderFactory | None = None,
                 local_host: Callable[[], HostFigures] | None = None,
                 timeout_s: float = CALL_TIMEOUT_S, clock: Callable[[], float] = time.monotonic) -> None:
        missing = sorted({s.backend for s in fleet.servers} - set(backends))
        if missing:
            raise ValueError(f"no backend spec for {', '.join(missing)}")
        self.fleet = fleet
        self._backends = backends
        self._host_reader_factory = host_reader
        self._local_host = local_host
        self._timeout_s = timeout_s
        self._clock = clock
        self._reader: HostFiguresReader | None = None
        self._servers: list[_Endpoint] | None = None
        self._balancer: _Endpoint | None = None

    # ---- the clients, made on the loop thread at the first poll ----------------------------------
    def _endpoint(self, name: str, url: str, spec: BackendSpec, server: FleetServer | None) -> _Endpoint:
        telemetry = spec.server_telemetry(url) if spec.server_telemetry is not None and server is not None else None
        return _Endpoint(EndpointStatus(name, spec.display_name, url), spec, spec.catalog(url), telemetry, server)

    def _open(self) -> list[_Endpoint]:
        if self._servers is None:
            self._servers = [self._endpoint(s.name, s.base_url, self._backends[s.backend], s)
                             for s in self.fleet.servers]
            balancer = self.fleet.balancer
            if balancer is not None:
                first = self.fleet.server(balancer.servers[0]) if balancer.servers else None
                spec = self._backends[first.backend if first else self.fleet.servers[0].backend]
                self._balancer = self._endpoint(balancer.name, balancer.base_url, spec, None)
                self._balancer.status = replace(self._balancer.status, behind=balancer.servers)
            if self.fleet.prometheus is not None and self._host_reader_factory is not None:
                self._reader = self._host_reader_factory(self.fleet.prometheus.base_url)
        return self._servers

    async def aclose(self) -> None:
        """Close every client (on the loop thread)."""
        endpoints = [*(self._servers or []), *([self._balancer] if self._balancer else [])]
        closers = [e.catalog.aclose() for e in endpoints] + [e.telemetry.aclose() for e in endpoints if e.telemetry]
        if self._reader is not None:
            closers.append(self._reader.aclose())
        await asyncio.gather(*closers, return_exceptions=True)
        self._servers, self._balancer, self._reader = None, None, None

    # ---- polling -----------------------------------------------------------------------------------
    async def run(self, on_snapshot: Callable[[FleetSnapshot], None], interval_s: float = POLL_INTERVAL_S) -> None:
        """Poll every interval_s seconds, handing each snapshot to `on_snapshot`, until cancelled."""
        try:
            while True:
                started = self._clock()
                on_snapshot(await self.poll())
                await asyncio.sleep(max(0.0, interval_s - (self._clock() - started)))
        finally:
            await self.aclose()

    async def poll(self) -> FleetSnapshot:
        """Every endpoint's status now (they are asked concurrently), the balancer's, and the queries in use."""
        servers = self._open()
        statuses, hosts, (targets, problem) = await asyncio.gather(
            asyncio.gather(*(self._poll_server(e) for e in servers)),
            asyncio.gather(*(self._host(e.server) for e in servers if e.server is not None)),
            self._targets())
        for endpoint, status, host in zip(servers, statuses, hosts):
            endpoint.status = _with_scraped(replace(status, host=host))
        balancer = await self._poll_balancer(servers) if self._balancer is not None else None
        queries = tuple(dict.fromkeys(q for e in servers if e.status.host for q in e.status.host.queries))
        prometheus = self.fleet.prometheus
        return FleetSnapshot(tuple(e.status for e in servers), balancer, queries,
                             prometheus.base_url if prometheus else "", problem,
                             tuple(note.text for note in self.fleet.notes), targets)

    async def _targets(self) -> tuple[tuple[ScrapeTarget, ...], str]:
        """What Prometheus scrapes, and its problem when it cannot say."""
        if self._reader is None:
            return (), ""
        try:
            return tuple(await self._call(self._reader.targets())), ""
        except DeckError as exc:
            return (), exc.user_text()
        except TimeoutError:
            return (), f"Prometheus did not answer within {self._timeout_s:g} s"

    async def _call(self, call: Awaitable[T]) -> T:
        return await asyncio.wait_for(call, self._timeout_s)

    async def _health(self, endpoint: _Endpoint) -> EndpointStatus:
        """The endpoint's status with its health and version (down: why, in the client's words)."""
        status = replace(endpoint.status, at=self._clock())
        try:
            version = await self._call(endpoint.catalog.version())
        except DeckError as exc:
            return replace(status, health=health_of(exc), why=exc.user_text(), version="", model="",
                           tokens_per_s=None, slots_busy=None, slots_total=None, queue=None)
        except TimeoutError:
            return replace(status, health=Health.TIMEOUT, why=f"no answer within {self._timeout_s:g} s",
                           tokens_per_s=None, slots_busy=None, slots_total=None, queue=None)
        return replace(status, health=Health.UP, why="", version=str(version))

    async def _poll_server(self, endpoint: _Endpoint) -> EndpointStatus:
        status = await self._health(endpoint)
        if not status.health.is_up:
            return status
        model, figures = await asyncio.gather(self._model(endpoint), self._telemetry(endpoint))
        return replace(status, model=model, **figures)

    async def _model(self, endpoint: _Endpoint) -> str:
        try:
            loaded = await self._call(endpoint.catalog.ps())
        except (DeckError, TimeoutError):
            return ""
        return ", ".join(m.name for m in loaded) if loaded else "none loaded"

    async def _telemetry(self, endpoint: _Endpoint) -> dict[str, Any]:
        if endpoint.telemetry is None:
            return {"telemetry_note": endpoint.spec.why_not("server_metrics")}
        try:
            sample = await self._call(endpoint.telemetry.sample())
        except DeckError as exc:
            return {"telemetry_note": exc.user_text(), "tokens_per_s": None, "slots_busy": None,
                    "slots_total": None, "queue": None}
        except TimeoutError:
            return {"telemetry_note": f"its telemetry did not answer within {self._timeout_s:g} s"}
        return {"tokens_per_s": sample.generation_tokens_per_s, "slots_busy": sample.slots_busy,
                "slots_total": sample.slots_total, "queue": sample.requests_deferred,
                "telemetry_note": sample.metrics_reason or sample.slots_reason}

    async def _host(self, server: FleetServer) -> HostFigures:
        """The host's figures (a source that fails leaves them unknown, with why)."""
        if self._reader is not None:
            try:
                return await self._call(self._reader.host_figures(server))
            except DeckError as exc:
                return unknown_host(f"Prometheus failed: {exc.user_text()}")
            except TimeoutError:
                return unknown_host(f"Prometheus did not answer within {self._timeout_s:g} s")
        if self._local_host is not None and server.loopback:
            return self._local_host()
        if server.loopback:
            return unknown_host("no [prometheus] in the fleet file, and no GPU readings here")
        return unknown_host(f"{server.host_label} is another machine: add a [prometheus] url to the fleet file "
                            "for its GPU")

    async def _poll_balancer(self, servers: list[_Endpoint]) -> EndpointStatus:
        assert self._balancer is not None
        status = await self._health(self._balancer)
        behind = [e.status for e in servers if e.status.name in status.behind and e.status.health.is_up]
        status = replace(status, tokens_per_s=_total([s.tokens_per_s for s in behind]),
                         slots_busy=_count([s.slots_busy for s in behind]),
                         slots_total=_count([s.slots_total for s in behind]), queue=_count([s.queue for s in behind]),
                         model=", ".join(dict.fromkeys(s.model for s in behind if s.model)))
        self._balancer.status = status
        return status


def local_host_figures(info: GpuInfo | None, no_gpu: str, samples: TelemetryBuffers) -> Callable[[], HostFigures]:
    """This machine's GPU (`info`, None: none, `no_gpu` says why) and RAM from the sampler's latest row (the app's
    own NVML and psutil readings: the GPU is not read a second time from another thread)."""

    def read() -> HostFigures:
        last = samples.last()
        row = last[1] if last is not None else None
        ram_total = _bytes(float(row[Channel.RAM_TOTAL_MIB])) if row is not None else None
        ram_used = _bytes(float(row[Channel.RAM_USED_MIB])) if row is not None else None
        available = ram_total - ram_used if ram_total is not None and ram_used is not None else None
        if info is None:
            return HostFigures(HostSource.UNKNOWN, (), ram_total, available, "this machine",
                               f"no GPU readings on this machine: {no_gpu or 'no NVIDIA GPU'}")
        if row is None:
            return HostFigures(HostSource.UNKNOWN, (), reason="this machine's GPU has not been sampled yet")
        figures = GpuFigures(str(info.index), info.name, info.uuid, _bytes(float(row[Channel.GPU_MEM_USED_MIB])),
                             _bytes(float(row[Channel.GPU_MEM_TOTAL_MIB])), _ratio(float(row[Channel.GPU_UTIL_PCT])))
        return HostFigures(HostSource.THIS_MACHINE, (figures,), ram_total, available, "this machine")

    return read


def _with_scraped(status: EndpointStatus) -> EndpointStatus:
    """An up server whose own telemetry gave no queue (or busy count) takes them from its series as Prometheus
    scraped them, saying so in the note."""
    host = status.host
    if not status.health.is_up or host is None:
        return status
    queue = status.queue if status.queue is not None else _int(host.scraped_waiting)
    busy = status.slots_busy if status.slots_busy is not None else _int(host.scraped_running)
    if (queue, busy) == (status.queue, status.slots_busy):
        return status
    note = "queue and requests decoding as Prometheus scraped them" + (
        f"; {status.telemetry_note}" if status.telemetry_note else "")
    return replace(status, queue=queue, slots_busy=busy, telemetry_note=note)


def _int(value: float | None) -> int | None:
    return None if value is None else round(value)


def _total(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _count(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _bytes(mib: float) -> float | None:
    return mib * MIB if mib == mib else None  # NaN: the driver said N/A, or no reading


def _ratio(pct: float) -> float | None:
    return pct / 100.0 if pct == pct else None


__all__ = ["CALL_TIMEOUT_S", "FleetMonitor", "POLL_INTERVAL_S", "local_host_figures"]
