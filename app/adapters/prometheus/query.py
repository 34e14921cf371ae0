"""A reader of a Prometheus server's HTTP API: instant queries (`GET /api/v1/query`) and the scrape targets
(`GET /api/v1/targets`), and from them the figures of a fleet server's host, each with the exact PromQL
that gave it (the Fleet page shows the queries).

Where a host's figures come from, first found wins:
- GPU: NVIDIA's DCGM exporter (dcgm-exporter's default counters DCGM_FI_DEV_FB_USED and DCGM_FI_DEV_FB_FREE
  in MiB, DCGM_FI_DEV_GPU_UTIL in percent; labels gpu, UUID, modelName, Hostname), else the app's own
  exporter (ollama_deck_gpu_memory_used_bytes / _total_bytes, ollama_deck_gpu_utilization_ratio 0..1;
  labels gpu, name, uuid). DCGM's default counters have no total: it is used + free, so the driver's
  own reserve (a few hundred MiB) is not in it.
- RAM: the node exporter (node_memory_MemTotal_bytes, node_memory_MemAvailable_bytes), else the app's
  exporter (ollama_deck_host_memory_total_bytes / _available_bytes).
- The server's own metrics as Prometheus scraped them (llama-server's llamacpp:*, vLLM's vllm:*,
  SGLang's sglang:*, TGI's tgi_*), where present.

Matching a fleet server to its host's series (the rule):
- host series (GPU, RAM) match when DCGM's `Hostname` label equals the server's host label, or the host
  part of the `instance` label does ("box-a:9400" and "box-a" both give box-a; "[::1]:9100" gives ::1).
  The host label is the fleet entry's `host`, else the host of its URL. Several hosts' exporters scraped
  through one address (one `instance` host) cannot be told apart by instance: give each server its
  `host` as DCGM's Hostname labels it, or label the targets' instance in Prometheus's configuration.
- the server's own series match when `instance` is the server's port on the URL's host or on `host`
  ("127.0.0.1:8081" or "box-a:8081"): the target Prometheus scrapes is the server itself.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from app.core.errors import DeckError
from app.core.fleet import FleetServer
from app.core.fleet_status import GpuFigures, HostFigures, HostSource, ScrapeTarget

MIB = 1024 * 1024
SERVER_METRIC_NAMES = r"llamacpp:.+|vllm:.+|sglang:.+|tgi_.+"
# The servers' own gauges of requests decoding and waiting, in the order looked for (llama-server, vLLM, SGLang,
# TGI): the Fleet page's slots and queue where the app cannot read the server itself.
RUNNING_NAMES = ("llamacpp:requests_processing", "vllm:num_requests_running", "sglang:num_running_reqs",
                 "tgi_batch_current_size")
WAITING_NAMES = ("llamacpp:requests_deferred", "vllm:num_requests_waiting", "sglang:num_queue_reqs",
                 "tgi_queue_size")


class PrometheusError(DeckError):
    """Prometheus's HTTP API did not give what was asked."""

    hint = "Check the [prometheus] url in the fleet file and that Prometheus runs (its /-/ready answers)."


class PrometheusUnreachable(PrometheusError):
    """Nothing answered at the URL, or not in time."""


class PrometheusBadStatus(PrometheusError):
    """An HTTP status other than 200, or a body that is not the API's JSON."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class PrometheusQueryError(PrometheusError):
    """The API's own error document: {"status": "error", "errorType": …, "error": …}."""

    hint = "The query was refused by Prometheus; its words are quoted."

    def __init__(self, message: str, error_type: str, error: str) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.error = error


class PrometheusEmptyResult(PrometheusError):
    """The query answered, with no series."""

    hint = "Prometheus has no such series: check that it scrapes the exporter and that the labels match."

    def __init__(self, query: str) -> None:
        super().__init__(f"no series for {query}")
        self.query = query


@dataclass(frozen=True)
class VectorSample:
    """One series of an instant vector: its labels (with __name__) and value."""

    labels: Mapping[str, str]
    value: float


def label_value(text: str) -> str:
    """`text` as a PromQL double-quoted string's content."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def instance_pattern(hosts: Sequence[str], port: str = "[0-9]+", *, port_optional: bool = True) -> str:
    """An RE2 pattern matching an instance label on any of `hosts` (IPv6 in brackets) with a port."""
    alternatives = []
    for host in dict.fromkeys(hosts):
        escaped = re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\1", host)
        alternatives.append(f"\\[{escaped}\\]" if ":" in host else escaped)
    tail = f"(:{port})?" if port_optional else f":{port}"
    return f"({'|'.join(alternatives)}){tail}"


def host_selector(host: str, *, hostname_label: bool) -> list[str]:
    """Label matchers selecting `host`'s series: by DCGM's Hostname (when asked) and by instance host part."""
    matchers = [f'instance=~"{label_value(instance_pattern([host]))}"']
    if hostname_label:
        matchers.insert(0, f'Hostname="{label_value(host)}"')
    return matchers


def on_host(metric: str, host: str, *, hostname_label: bool = False) -> str:
    """The PromQL for `metric` on `host`: `m{Hostname="h"} or m{instance=~"h(:[0-9]+)?"}`."""
    return " or ".join(f"{metric}{{{matcher}}}" for matcher in host_selector(host, hostname_label=hostname_label))


def server_query(server: FleetServer) -> str:
    """The server's own series as scraped: any of the servers' metric families, on the server's instance."""
    hosts = [server.url.host, *([server.host] if server.host else [])]
    pattern = instance_pattern(hosts, str(server.url.port), port_optional=False)
    return f'{{__name__=~"{SERVER_METRIC_NAMES}", instance=~"{label_value(pattern)}"}}'


class PrometheusReader:
    """Reads one Prometheus server's HTTP API (base URL like http://127.0.0.1:9090); every call on the loop."""

    def __init__(self, base_url: str, *, timeout_s: float = 5.0, transport: httpx.AsyncBaseTransport | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._client = httpx.AsyncClient(base_url=self.base_url, timeout=timeout_s, transport=transport,
                                         headers=dict(headers or {}))

    async def __aenter__(self) -> PrometheusReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _get(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        """The `data` of a successful API answer; a typed PrometheusError otherwise."""
        try:
            response = await self._client.get(path, params=params)
        except httpx.TimeoutException as exc:
            raise PrometheusUnreachable(f"Prometheus at {self.base_url} did not answer in time ({exc!r})") from None
        except httpx.HTTPError as exc:
            raise PrometheusUnreachable(f"Prometheus at {self.base_url} cannot be reached: {exc}") from None
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict) and body.get("status") == "error":
            error_type, error = str(body.get("errorType", "")), str(body.get("error", ""))
            raise PrometheusQueryError(f"Prometheus refused {path}: {error_type}: {error}", error_type, error)
        if response.status_code != 200:
            raise PrometheusBadStatus(f"Prometheus at {self.base_url} answered {path} with HTTP "
                                      f"{response.status_code}: {response.text.strip()[:160]!r}", response.status_code)
        if not isinstance(body, dict) or body.get("status") != "success" or "data" not in body:
            raise PrometheusBadStatus(f"{self.base_url}{path} did not answer Prometheus's API JSON: "
                                      f"{response.text.strip()[:160]!r}", response.status_code)
        return body["data"]

    async def query(self, promql: str) -> list[VectorSample]:
        """An instant query's vector (an empty list when no series match)."""
        data = await self._get("/api/v1/query", {"query": promql})
        if not isinstance(data, dict) or data.get("resultType") not in ("vector", "scalar"):
            raise PrometheusBadStatus(f"{promql} gave a {data.get('resultType') if isinstance(data, dict) else data!r}"
                                      " result, not an instant vector")
        if data["resultType"] == "scalar":
            return [VectorSample({}, _number(data.get("result")))]
        samples = []
        for entry in data.get("result") or []:
            if not isinstance(entry, dict) or not isinstance(entry.get("metric"), dict):
                raise PrometheusBadStatus(f"{promql} gave a series without labels: {str(entry)[:120]!r}")
            samples.append(VectorSample({str(k): str(v) for k, v in entry["metric"].items()},
                                        _number(entry.get("value"))))
        return samples

    async def query_some(self, promql: str) -> list[VectorSample]:
        """An instant query that must match something: PrometheusEmptyResult when it matches nothing."""
        samples = await self.query(promql)
        if not samples:
            raise PrometheusEmptyResult(promql)
        return samples

    async def targets(self) -> list[ScrapeTarget]:
        """The active scrape targets with their health and last error."""
        data = await self._get("/api/v1/targets", {"state": "active"})
        active = data.get("activeTargets") if isinstance(data, dict) else None
        if not isinstance(active, list):
            raise PrometheusBadStatus(f"{self.base_url}/api/v1/targets listed no activeTargets")
        return [ScrapeTarget(str(t.get("labels", {}).get("job", "")), str(t.get("labels", {}).get("instance", "")),
                             str(t.get("scrapeUrl", "")), str(t.get("health", "unknown")), str(t.get("lastError", "")))
                for t in active if isinstance(t, dict)]

    # ---- a fleet server's host ----------------------------------------------------------------
    async def host_figures(self, server: FleetServer) -> HostFigures:
        """The GPU, RAM and server figures of `server`'s host, with every query asked; PrometheusError only
        when Prometheus itself fails (no series is a figure left out, said in `reason`)."""
        host = server.host_label
        dcgm = [on_host(m, host, hostname_label=True)
                for m in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_UTIL")]
        deck = [on_host(m, host) for m in ("ollama_deck_gpu_memory_used_bytes", "ollama_deck_gpu_memory_total_bytes",
                                           "ollama_deck_gpu_utilization_ratio")]
        node = [on_host(m, host) for m in ("node_memory_MemTotal_bytes", "node_memory_MemAvailable_bytes")]
        deck_ram = [on_host(m, host) for m in ("ollama_deck_host_memory_total_bytes",
                                               "ollama_deck_host_memory_available_bytes")]
        own = server_query(server)
        first = [*dcgm, *node, own]
        results = dict(zip(first, await asyncio.gather(*(self.query(q) for q in first))))
        asked = list(first)
        gpus = _gpus(*(results[q] for q in dcgm), dcgm=True)
        source = HostSource.PROMETHEUS_DCGM
        if not gpus:
            asked += deck
            results.update(zip(deck, await asyncio.gather(*(self.query(q) for q in deck))))
            gpus = _gpus(*(results[q] for q in deck), dcgm=False)
            source = HostSource.PROMETHEUS_EXPORTER
        ram_total, ram_available = (_one(results[q]) for q in node)
        ram_source = "Prometheus: node exporter" if ram_total is not None else ""
        if ram_total is None:
            asked += deck_ram
            results.update(zip(deck_ram, await asyncio.gather(*(self.query(q) for q in deck_ram))))
            ram_total, ram_available = (_one(results[q]) for q in deck_ram)
            ram_source = "Prometheus: ollama-deck exporter" if ram_total is not None else ""
        metrics = tuple(sorted((s.labels.get("__name__", "?"), s.value) for s in results[own]))
        running, waiting = (_first(metrics, names) for names in (RUNNING_NAMES, WAITING_NAMES))
        if not gpus:
            reason = (f"Prometheus has no DCGM_FI_DEV_FB_USED or ollama_deck_gpu_memory_used_bytes series for host "
                      f"{host!r} (matched against the Hostname label and the instance's host)")
            return HostFigures(HostSource.UNKNOWN, (), ram_total, ram_available, ram_source, reason, tuple(asked),
                               metrics, running, waiting)
        return HostFigures(source, gpus, ram_total, ram_available, ram_source, "", tuple(asked), metrics, running,
                           waiting)


def _first(metrics: Sequence[tuple[str, float]], names: Sequence[str]) -> float | None:
    """The summed value of the first of `names` among the scraped series (a server's gauge may be per model)."""
    for name in names:
        values = [v for n, v in metrics if n == name and math.isfinite(v)]
        if values:
            return sum(values)
    return None


def _number(value: Any) -> float:
    """The value of a [timestamp, "text"] pair (NaN when it is none)."""
    if isinstance(value, list) and len(value) == 2:
        try:
            return float(value[1])
        except (TypeError, ValueError):
            return math.nan
    return math.nan


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _one(samples: list[VectorSample]) -> float | None:
    """The sum of a host's series (one per host normally); None when there are none."""
    values = [s.value for s in samples if math.isfinite(s.value)]
    return sum(values) if values else None


def _gpus(used: list[VectorSample], other: list[VectorSample], util: list[VectorSample], *, dcgm: bool,
          ) -> tuple[GpuFigures, ...]:
    """One GpuFigures per GPU (by index and UUID). DCGM: used and free in MiB, utilisation in percent, labels
    UUID and modelName; the app's exporter: used and total in bytes, utilisation 0..1, labels uuid and name."""
    uuid_label, name_label = ("UUID", "modelName") if dcgm else ("uuid", "name")
    memory_scale, util_scale = (MIB, 0.01) if dcgm else (1.0, 1.0)
    used_by, other_by, util_by = ({(s.labels.get("gpu", ""), s.labels.get(uuid_label, "")): s for s in samples}
                                  for samples in (used, other, util))
    gpus = []
    for key in sorted(used_by.keys() | other_by.keys(), key=lambda k: (len(k[0]), k)):
        u, o, p = used_by.get(key), other_by.get(key), util_by.get(key)
        labels = next(s.labels for s in (u, o, p) if s is not None)
        used_b = _finite(u.value * memory_scale) if u else None
        second = _finite(o.value * memory_scale) if o else None
        total = (used_b + second if used_b is not None and second is not None else None) if dcgm else second
        gpus.append(GpuFigures(key[0], labels.get(name_label, ""), key[1], used_b, total,
                               _finite(p.value * util_scale) if p else None))
    return tuple(gpus)


__all__ = ["PrometheusBadStatus", "PrometheusEmptyResult", "PrometheusError", "PrometheusQueryError",
           "PrometheusReader", "PrometheusUnreachable", "ScrapeTarget", "VectorSample", "host_selector",
           "instance_pattern", "label_value", "on_host", "server_query"]
