"""What the Fleet page shows of each endpoint and its host, in backend-neutral terms: health as an enum with
the reason, the server's own figures, and the host's GPU and RAM with where each figure came from (and the
exact PromQL where Prometheus gave it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from app.core.errors import DeckError, MalformedResponse, ServerError, ServerTimeout, ServerUnreachable


class Health(Enum):
    """An endpoint's health at its last poll."""

    PENDING = "not polled yet"
    UP = "up"
    UNREACHABLE = "unreachable"  # nothing answers on its port (refused, no route, name not found)
    TIMEOUT = "timed out"  # connected, no answer in time
    ERROR_STATUS = "answered with an error"  # an HTTP error status
    NOT_ITS_API = "not the expected API"  # it answers, but not as the backend named in the fleet file
    FAILED = "failed"  # any other error the client raised

    @property
    def is_up(self) -> bool:
        return self is Health.UP

    @property
    def is_down(self) -> bool:
        return self not in (Health.UP, Health.PENDING)


def health_of(error: DeckError) -> Health:
    """The health a typed client error means."""
    if isinstance(error, ServerUnreachable):
        return Health.UNREACHABLE
    if isinstance(error, ServerTimeout):
        return Health.TIMEOUT
    if isinstance(error, MalformedResponse):
        return Health.NOT_ITS_API
    if isinstance(error, ServerError) and error.status is not None:
        return Health.ERROR_STATUS
    return Health.FAILED


class HostSource(Enum):
    """Where an endpoint's host figures (GPU memory and utilisation, RAM) came from."""

    PROMETHEUS_DCGM = "Prometheus: DCGM"
    PROMETHEUS_EXPORTER = "Prometheus: ollama-deck exporter"
    THIS_MACHINE = "this machine: NVML"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class GpuFigures:
    """One GPU of a host: memory in bytes, utilisation 0..1 (None where not known)."""

    gpu: str  # the GPU's index on its host, as the source labels it
    name: str = ""
    uuid: str = ""
    used_bytes: float | None = None
    total_bytes: float | None = None
    utilization: float | None = None


@dataclass(frozen=True)
class HostFigures:
    """A host's GPUs and RAM, where they came from, and why they are missing when they are."""

    source: HostSource
    gpus: tuple[GpuFigures, ...] = ()
    ram_total_bytes: float | None = None
    ram_available_bytes: float | None = None
    ram_source: str = ""  # e.g. "Prometheus: node exporter"
    reason: str = ""  # why there are no GPU figures (source UNKNOWN) or what is partial
    queries: tuple[str, ...] = ()  # the PromQL used, in the order asked
    server_metrics: tuple[tuple[str, float], ...] = ()  # the server's own series as Prometheus scraped them
    scraped_running: float | None = None  # requests the server is decoding, from those series (None: not there)
    scraped_waiting: float | None = None  # requests waiting for a slot, from those series

    @property
    def source_text(self) -> str:
        """"Prometheus: DCGM", … or "unknown: why"."""
        if self.source is HostSource.UNKNOWN:
            return f"unknown: {self.reason}" if self.reason else "unknown"
        return str(self.source.value)

    @property
    def gpu_used_bytes(self) -> float | None:
        values = [g.used_bytes for g in self.gpus]
        return None if not values or None in values else sum(v for v in values if v is not None)

    @property
    def gpu_total_bytes(self) -> float | None:
        values = [g.total_bytes for g in self.gpus]
        return None if not values or None in values else sum(v for v in values if v is not None)

    @property
    def gpu_utilization(self) -> float | None:
        """The busiest GPU's utilisation (an average would hide a saturated card)."""
        values = [g.utilization for g in self.gpus if g.utilization is not None]
        return max(values) if values else None


def unknown_host(reason: str, queries: tuple[str, ...] = ()) -> HostFigures:
    return HostFigures(HostSource.UNKNOWN, reason=reason, queries=queries)


@dataclass(frozen=True)
class EndpointStatus:
    """One fleet endpoint at its last poll."""

    name: str
    kind: str  # the backend's display name
    url: str
    health: Health = Health.PENDING
    why: str = ""  # what the client said when it is down (what happened and what to do)
    version: str = ""
    model: str = ""
    tokens_per_s: float | None = None  # generated tokens/s since the previous poll, from the server's counters
    slots_busy: int | None = None
    slots_total: int | None = None
    queue: int | None = None  # requests waiting for a slot
    telemetry_note: str = ""  # why slots/queue/tokens are missing while it is up
    host: HostFigures | None = None
    at: float = 0.0  # monotonic seconds of the poll
    behind: tuple[str, ...] = ()  # a balancer: the servers behind it


@dataclass(frozen=True)
class ScrapeTarget:
    """One target a Prometheus server scrapes, as its /api/v1/targets lists it."""

    job: str
    instance: str
    scrape_url: str
    health: str  # Prometheus's word: "up", "down" or "unknown"
    last_error: str

    @property
    def is_up(self) -> bool:
        return self.health == "up"


@dataclass(frozen=True)
class FleetSnapshot:
    """Every endpoint (the balancer last) and the PromQL in use."""

    endpoints: tuple[EndpointStatus, ...]
    balancer: EndpointStatus | None = None
    queries: tuple[str, ...] = ()
    prometheus_url: str = ""
    prometheus_problem: str = ""  # why Prometheus gave nothing (unreachable, an error), empty when it answered
    notes: tuple[str, ...] = field(default=())  # what the fleet file does worth saying (traffic beyond loopback)
    targets: tuple[ScrapeTarget, ...] = ()  # what Prometheus scrapes, with each target's health

    @property
    def targets_down(self) -> tuple[ScrapeTarget, ...]:
        return tuple(t for t in self.targets if not t.is_up)


__all__ = ["EndpointStatus", "FleetSnapshot", "GpuFigures", "Health", "HostFigures", "HostSource", "ScrapeTarget",
           "health_of", "unknown_host"]
