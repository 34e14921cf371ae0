"""llama-server's own telemetry: `GET /metrics` (Prometheus text, with --metrics) and `GET /slots`
(JSON per slot, on by default, off with --no-slots; read by app/adapters/http/llama_slots.py, which
Ollama's child llama-server shares), read into the neutral ServerSample.

The parsers never raise on what a server sends: an unreadable metric line is skipped and counted,
a slot entry of an unknown shape is skipped, a missing metric is None. Field names follow the
llama-server that was recorded (tests/data/llama_server/), with the older shapes still in use
(`state` instead of `is_processing`, `n_decoded` at the top level, `next_token` as one object)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import httpx

from app.adapters.http import llama_slots
from app.adapters.http.llama_slots import error_text, parse_slots
from app.core.server_telemetry import RateTracker, ServerReading, ServerSample, SlotState, TelemetryUnavailable

PREFIX = "llamacpp:"
# What llama-server answers on an endpoint it was started without (HTTP 501).
NOT_SUPPORTED_STATUS = 501


@dataclass(frozen=True)
class Metrics:
    """Parsed Prometheus text: values by (name, sorted labels), and how many lines were skipped."""

    values: Mapping[tuple[str, tuple[tuple[str, str], ...]], float]
    skipped: int

    def get(self, name: str, **labels: str) -> float | None:
        """The value of `name` with exactly these labels; None when absent or not a finite number."""
        value = self.values.get((name, tuple(sorted(labels.items()))))
        return value if value is not None and math.isfinite(value) else None


def _parse_value(text: str) -> float:
    """A Prometheus sample value: a float, NaN, +Inf or -Inf (ValueError otherwise)."""
    low = text.lower()
    if low in ("+inf", "inf"):
        return math.inf
    if low == "-inf":
        return -math.inf
    return float(text)  # also takes "nan"


def _parse_labels(text: str) -> tuple[tuple[str, str], ...]:
    """`a="x",b="y\\"z"` (inside the braces) as sorted pairs; ValueError when malformed."""
    pairs: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " ,":
            i += 1
        if i >= n:
            break
        eq = text.find("=", i)
        if eq < 0:
            raise ValueError("label without '='")
        key = text[i:eq].strip()
        if not key.replace("_", "a").isalnum() or key[0].isdigit():
            raise ValueError(f"bad label name {key!r}")
        i = eq + 1
        if i >= n or text[i] != '"':
            raise ValueError("label value not quoted")
        i += 1
        value: list[str] = []
        while True:
            if i >= n:
                raise ValueError("unterminated label value")
            ch = text[i]
            if ch == "\\" and i + 1 < n:
                value.append({"n": "\n", "\\": "\\", '"': '"'}.get(text[i + 1], "\\" + text[i + 1]))
                i += 2
                continue
            if ch == '"':
                i += 1
                break
            value.append(ch)
            i += 1
        pairs.append((key, "".join(value)))
    return tuple(sorted(pairs))


def _parse_line(line: str) -> tuple[str, tuple[tuple[str, str], ...], float]:
    """One sample line `name{labels} value [timestamp]`; ValueError when it is not one."""
    brace = line.find("{")
    if brace >= 0:
        close = line.rfind("}")
        if close < brace:
            raise ValueError("unclosed label set")
        name, labels, rest = line[:brace].strip(), _parse_labels(line[brace + 1:close]), line[close + 1:]
    else:
        name, _, rest = line.partition(" ")
        labels = ()
    parts = rest.split()
    if not name or not parts or len(parts) > 2:
        raise ValueError("not a sample line")
    if not all(c.isalnum() or c in "_:" for c in name) or name[0].isdigit():
        raise ValueError(f"bad metric name {name!r}")
    return name, labels, _parse_value(parts[0])


def parse_metrics(text: str) -> Metrics:
    """Prometheus text exposition as Metrics; comment and HELP/TYPE lines are read past."""
    values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    skipped = 0
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            name, labels, value = _parse_line(line)
        except ValueError:
            skipped += 1
            continue
        values[(name, labels)] = value
    return Metrics(values, skipped)


def reading_from(metrics: Metrics | None, slots: tuple[SlotState, ...] | None, *, at: float,
                 metrics_reason: str = "", slots_reason: str = "", skipped_slots: int = 0) -> ServerReading:
    """The neutral reading of one poll's parsed /metrics and /slots (either may be missing)."""

    def metric(name: str) -> float | None:
        return metrics.get(PREFIX + name) if metrics is not None else None

    def count(name: str) -> int | None:
        value = metric(name)
        return None if value is None else int(value)

    ratio = metric("kv_cache_usage_ratio")  # reported by older servers only
    return ServerReading(
        at=at,
        prompt_tokens_total=metric("prompt_tokens_total"),
        predicted_tokens_total=metric("tokens_predicted_total"),
        requests_processing=count("requests_processing"),
        requests_deferred=count("requests_deferred"),
        kv_cache_ratio=None if ratio is None else min(1.0, max(0.0, ratio)),
        slots=slots, slots_reason=slots_reason, metrics_reason=metrics_reason,
        skipped_lines=(metrics.skipped if metrics is not None else 0) + skipped_slots)


class LlamaServerTelemetry:
    """Polls one llama-server's /metrics and /slots; rates come from consecutive calls' counters."""

    def __init__(self, base_url: str, *, transport: httpx.AsyncBaseTransport | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.base_url = base_url.rstrip("/")
        self._transport = transport
        self._clock = clock
        self._http: httpx.AsyncClient | None = None
        self._rates = RateTracker()

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = llama_slots.local_client(self.base_url, self._transport)
        return self._http

    async def _get(self, path: str) -> tuple[str | None, str]:
        """(body, "") on 200, else (None, why) in the server's words or the transport's."""
        return await llama_slots.fetch_text(self._client(), path, self.base_url)

    async def sample(self) -> ServerSample:
        """Read /metrics and /slots now; TelemetryUnavailable when neither answered."""
        metrics_text, metrics_reason = await self._get("/metrics")
        slots_text, slots_reason = await self._get("/slots")
        at = self._clock()
        metrics = parse_metrics(metrics_text) if metrics_text is not None else None
        slots: tuple[SlotState, ...] | None = None
        skipped_slots = 0
        if slots_text is not None:
            slots, skipped_slots, why = llama_slots.slots_from_text(slots_text, self.base_url)
            slots_reason = why or slots_reason
        if metrics is None and slots is None:
            raise TelemetryUnavailable(f"{metrics_reason}; {slots_reason}")
        reading = reading_from(metrics, slots, at=at, metrics_reason=metrics_reason, slots_reason=slots_reason,
                               skipped_slots=skipped_slots)
        return self._rates.sample(reading)

    async def aclose(self) -> None:
        """Close the pooled connection."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None


def server_telemetry(base_url: str) -> LlamaServerTelemetry:
    """The ServerTelemetryFactory of llama-server."""
    return LlamaServerTelemetry(base_url)


__all__ = ["LlamaServerTelemetry", "Metrics", "error_text", "parse_metrics", "parse_slots", "reading_from",
           "server_telemetry"]
