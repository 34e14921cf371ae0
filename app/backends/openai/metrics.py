"""An OpenAI-compatible server's own Prometheus `GET /metrics`, read into the neutral ServerSample.

The server behind `/v1` may be vLLM, SGLang, TGI or a llama-server; each names its metrics its own
way (its *dialect*, told by the names present) and this module maps each onto ServerReading:

- vLLM (v1 engine, 0.8 to 0.11+): running `vllm:num_requests_running`, waiting
  `vllm:num_requests_waiting`, KV fill `vllm:kv_cache_usage_perc` (0.9 on; before it, and until
  0.10 beside it, `vllm:gpu_cache_usage_perc`), tokens `vllm:prompt_tokens_total` and
  `vllm:generation_tokens_total`, finished `vllm:request_success_total` (every finished_reason).
- SGLang: running `sglang:num_running_reqs`, waiting `sglang:num_queue_reqs`, KV fill
  `sglang:token_usage`, tokens `sglang:prompt_tokens_total` and `sglang:generation_tokens_total`,
  finished `sglang:num_requests_total`.
- TGI: running `tgi_batch_current_size`, waiting `tgi_queue_size`, no KV fill, tokens the sums of the
  histograms `tgi_request_input_length` and `tgi_request_generated_tokens`, finished
  `tgi_request_success`.
- llama.cpp (a llama-server): running `llamacpp:requests_processing`, waiting
  `llamacpp:requests_deferred`, KV fill `llamacpp:kv_cache_usage_ratio` (older servers only), tokens
  `llamacpp:prompt_tokens_total` and `llamacpp:tokens_predicted_total`, no finished count.

A metric present under several label sets (vLLM's `engine` with data parallelism, SGLang's ranks,
several `model_name` values) is summed; a ratio is averaged. vLLM's token counters grow with each
engine step; SGLang's and TGI's take a request's tokens in when it finishes (TGI's input length when
the request is validated), as llama-server's do.

A llama-server (llama.cpp dialect) also has `GET /slots`, read as the llama_server backend reads it
(the shared app/adapters/http/llama_slots.py), so its slots fill the same panels; the other servers
have no per-slot state (slots None).

The base URL may be the OpenAI API's (`http://host:8000/v1`): a trailing `/v1` is dropped, since
every one of these servers serves `/metrics` at its root. (TGI also serves it on its Prometheus port,
9000 by default.) Headers (an `Authorization: Bearer` key) go with every scrape.

Parsing is prometheus_client's own text parser. It rejects a whole exposition for one bad line, so
an exposition it rejects is read again line by line (each line with the `# TYPE` line before it,
through the same parser): the bad lines are skipped and counted, the rest kept. Nothing a server
sends makes the parse raise."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

import httpx
from prometheus_client.parser import text_string_to_metric_families

from app.adapters.http import llama_slots
from app.adapters.http.llama_slots import CONNECT_TIMEOUT_S, MAX_BODY_CHARS, READ_TIMEOUT_S
from app.core.server_telemetry import RateTracker, ServerReading, ServerSample, TelemetryUnavailable

Labels = tuple[tuple[str, str], ...]
METRICS_PATH = "/metrics"


class MetricsDialect(Enum):
    """Whose metric names a /metrics exposition uses."""

    VLLM = "vllm"
    SGLANG = "sglang"
    TGI = "tgi"
    LLAMA_CPP = "llama_cpp"
    UNKNOWN = "unknown"

    @property
    def label(self) -> str:
        """What the UI calls these figures ("vLLM metrics")."""
        return {MetricsDialect.VLLM: "vLLM metrics", MetricsDialect.SGLANG: "SGLang metrics",
                MetricsDialect.TGI: "TGI metrics", MetricsDialect.LLAMA_CPP: "llama.cpp metrics",
                MetricsDialect.UNKNOWN: "unrecognised metrics"}[self]


class MetricsFailure(Enum):
    """Why a scrape gave no figures."""

    UNREACHABLE = "unreachable"  # no HTTP answer at all
    NO_METRICS = "no_metrics"  # 404 (or llama-server's 501): the server serves no /metrics
    KEY_REFUSED = "key_refused"  # 401/403: the API key is missing or refused
    HTTP_ERROR = "http_error"  # another status
    UNRECOGNISED = "unrecognised"  # an answer, but none of the metrics this module knows


class MetricsUnavailable(TelemetryUnavailable):
    """A scrape that gave no figures; `kind` says why, the message says it in words a user can act on."""

    def __init__(self, message: str, kind: MetricsFailure, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.kind = kind


ENABLE_HINT = ("Start SGLang with --enable-metrics, llama-server with --metrics; vLLM and TGI serve /metrics by "
               "default (TGI also on its --prometheus-port, 9000)")
# vLLM keeps serving /metrics without its own figures when started with --disable-log-stats, and
# (0.10 on) when it runs more than one API server process.
UNRECOGNISED_HINT = ("Check that the URL is the inference server's, not a proxy's or another service's; vLLM started "
                     "with --disable-log-stats or --api-server-count above 1 leaves its own figures out of /metrics")


@dataclass(frozen=True)
class DialectNames:
    """The metric names one dialect reports each ServerReading field under (first present wins)."""

    running: tuple[str, ...]
    waiting: tuple[str, ...]
    kv_ratio: tuple[str, ...]
    prompt: tuple[str, ...]
    generated: tuple[str, ...]
    finished: tuple[str, ...]


DIALECTS: Mapping[MetricsDialect, DialectNames] = {
    MetricsDialect.VLLM: DialectNames(
        running=("vllm:num_requests_running",), waiting=("vllm:num_requests_waiting",),
        kv_ratio=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        prompt=("vllm:prompt_tokens_total",), generated=("vllm:generation_tokens_total",),
        finished=("vllm:request_success_total",)),
    MetricsDialect.SGLANG: DialectNames(
        running=("sglang:num_running_reqs",), waiting=("sglang:num_queue_reqs",), kv_ratio=("sglang:token_usage",),
        prompt=("sglang:prompt_tokens_total",), generated=("sglang:generation_tokens_total",),
        finished=("sglang:num_requests_total",)),
    # The parser names a counter's sample `x_total` when its TYPE line says counter; without one, `x`.
    MetricsDialect.TGI: DialectNames(
        running=("tgi_batch_current_size",), waiting=("tgi_queue_size",), kv_ratio=(),
        prompt=("tgi_request_input_length_sum",), generated=("tgi_request_generated_tokens_sum",),
        finished=("tgi_request_success_total", "tgi_request_success")),
    MetricsDialect.LLAMA_CPP: DialectNames(
        running=("llamacpp:requests_processing",), waiting=("llamacpp:requests_deferred",),
        kv_ratio=("llamacpp:kv_cache_usage_ratio",), prompt=("llamacpp:prompt_tokens_total",),
        generated=("llamacpp:tokens_predicted_total",), finished=()),
}
MODEL_LABELS = ("model_name",)  # vLLM and SGLang label each series with the served model's name
ENGINE_LABELS = ("engine", "dp_rank")  # vLLM's engine index, SGLang's data-parallel rank


@dataclass(frozen=True)
class Exposition:
    """Every sample of a parsed exposition by (name, sorted labels), and how many lines were skipped."""

    samples: Mapping[tuple[str, Labels], float]
    skipped: int = 0

    @property
    def names(self) -> frozenset[str]:
        """The sample names present."""
        return frozenset(name for name, _ in self.samples)

    def series(self, name: str) -> list[tuple[Labels, float]]:
        """(labels, value) of every finite sample named `name`."""
        return [(labels, v) for (n, labels), v in self.samples.items() if n == name and math.isfinite(v)]

    def total(self, names: Iterable[str]) -> float | None:
        """The sum over all label sets of the first of `names` present with a finite value; None if none is."""
        for name in names:
            values = [v for _, v in self.series(name)]
            if values:
                return float(sum(values))
        return None

    def mean(self, names: Iterable[str]) -> float | None:
        """The mean over all label sets of the first of `names` present (a ratio per engine); None if none is."""
        for name in names:
            values = [v for _, v in self.series(name)]
            if values:
                return float(sum(values)) / len(values)
        return None

    def label_values(self, names: Iterable[str], keys: Iterable[str]) -> tuple[str, ...]:
        """The distinct values, sorted, of any label in `keys` on the samples named in `names`."""
        wanted, keyset = set(names), set(keys)
        return tuple(sorted({value for (n, labels) in self.samples if n in wanted
                             for key, value in labels if key in keyset}))


def library_samples(text: str) -> list[tuple[str, Labels, float]] | None:
    """Every sample of `text` as prometheus_client's parser reads it, or None when it rejects the text."""
    try:
        return [(s.name, tuple(sorted(s.labels.items())), float(s.value))
                for family in text_string_to_metric_families(text) for s in family.samples]
    except Exception:  # the library raises assorted types on hostile text; each means "unreadable"
        return None


def parse_exposition(text: str) -> Exposition:
    """Prometheus text as an Exposition; never raises. When the parser rejects the whole text, each line is
    parsed on its own after its metric's `# TYPE` line, and the lines rejected are counted as skipped."""
    whole = library_samples(text)
    if whole is not None:
        return Exposition({(name, labels): value for name, labels, value in whole})
    samples: dict[tuple[str, Labels], float] = {}
    skipped = 0
    type_line = ""
    for raw in text.split("\n"):  # the parser's own line breaks (io.StringIO splits on \n only)
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if library_samples(line) is None:
                skipped += 1  # a malformed HELP or TYPE line
            elif line.split()[:2] == ["#", "TYPE"]:
                type_line = line
            continue
        parsed = library_samples(f"{type_line}\n{line}") if type_line else None
        if parsed is None:
            parsed = library_samples(line)
        if parsed is None:
            skipped += 1
            continue
        for name, labels, value in parsed:
            samples[(name, labels)] = value
    return Exposition(samples, skipped)


def detect_dialect(exposition: Exposition) -> MetricsDialect:
    """The dialect with the most of its mapped names present (UNKNOWN when none is)."""
    names = exposition.names
    best, best_count = MetricsDialect.UNKNOWN, 0
    for dialect, mapped in DIALECTS.items():
        wanted = {*mapped.running, *mapped.waiting, *mapped.kv_ratio, *mapped.prompt, *mapped.generated,
                  *mapped.finished}
        count = len(wanted & names)
        if count > best_count:
            best, best_count = dialect, count
    return best


@dataclass(frozen=True)
class Scrape:
    """One /metrics answer read: its dialect, the neutral reading, and what was summed to get it."""

    dialect: MetricsDialect
    reading: ServerReading
    models: tuple[str, ...] = ()  # model_name values seen (vLLM, SGLang)
    engines: tuple[str, ...] = ()  # engine indices / data-parallel ranks seen

    @property
    def summary(self) -> str:
        """The dialect in words, and what was summed ("vLLM metrics, summed over 2 engines")."""
        parts = []
        if len(self.engines) > 1:
            parts.append(f"{len(self.engines)} engines")
        if len(self.models) > 1:
            parts.append(f"{len(self.models)} models ({', '.join(self.models)})")
        return self.dialect.label + (f", summed over {' and '.join(parts)}" if parts else "")


def read_exposition(text: str, *, at: float) -> Scrape:
    """The neutral reading of one /metrics body (a figure the server does not report is None)."""
    exposition = parse_exposition(text)
    dialect = detect_dialect(exposition)
    if dialect is MetricsDialect.UNKNOWN:
        return Scrape(dialect, ServerReading(at=at, skipped_lines=exposition.skipped,
                                             metrics_reason="none of the metrics of vLLM, SGLang, TGI or llama.cpp"))
    names = DIALECTS[dialect]

    def count(metric: tuple[str, ...]) -> int | None:
        value = exposition.total(metric)
        return None if value is None else int(value)

    ratio = exposition.mean(names.kv_ratio)
    mapped = {*names.running, *names.waiting, *names.prompt, *names.generated, *names.finished}
    reading = ServerReading(
        at=at,
        prompt_tokens_total=exposition.total(names.prompt),
        predicted_tokens_total=exposition.total(names.generated),
        requests_finished_total=exposition.total(names.finished),
        requests_processing=count(names.running),
        requests_deferred=count(names.waiting),
        kv_cache_ratio=None if ratio is None else min(1.0, max(0.0, ratio)),
        slots=None,  # no per-slot state in any of these dialects; the spec says so, not each sample
        skipped_lines=exposition.skipped)
    return Scrape(dialect, reading, models=exposition.label_values(mapped, MODEL_LABELS),
                  engines=exposition.label_values(mapped, ENGINE_LABELS))


def metrics_root(base_url: str) -> str:
    """The server's root for `/metrics`: `base_url` without a trailing slash or `/v1`."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def _failure(status: int, body: str, url: str, with_key: bool) -> MetricsUnavailable:
    """The MetricsUnavailable of a non-200 answer, in words a user can act on."""
    detail = " ".join(body.split())[:120]
    said = f"HTTP {status}" + (f": {detail}" if detail else "")
    if status in (401, 403):
        what = "refused the API key" if with_key else "wants an API key and none was given"
        return MetricsUnavailable(f"{url} {what} ({said})", MetricsFailure.KEY_REFUSED,
                                  "Check the API key stored for this server.")
    if status in (404, 501):  # 501: llama-server started without --metrics
        return MetricsUnavailable(f"this server has no /metrics ({url}: {said})", MetricsFailure.NO_METRICS,
                                  ENABLE_HINT + ".")
    return MetricsUnavailable(f"{url}: {said}", MetricsFailure.HTTP_ERROR)


class OpenAiTelemetry:
    """Scrapes one OpenAI-compatible server's /metrics; rates come from consecutive calls' counters.

    After a sample, `dialect` and `last` say whose metrics these were and what was summed."""

    def __init__(self, base_url: str, *, headers: Mapping[str, str] | None = None,
                 transport: httpx.AsyncBaseTransport | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.base_url = metrics_root(base_url)
        self._headers = dict(headers or {})
        self._transport = transport
        self._clock = clock
        self._http: httpx.AsyncClient | None = None
        self._rates = RateTracker()
        self.last: Scrape | None = None

    @property
    def dialect(self) -> MetricsDialect:
        """The dialect of the last scrape (UNKNOWN before one)."""
        return self.last.dialect if self.last is not None else MetricsDialect.UNKNOWN

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            timeout = httpx.Timeout(connect=CONNECT_TIMEOUT_S, read=READ_TIMEOUT_S, write=READ_TIMEOUT_S,
                                    pool=READ_TIMEOUT_S)
            # trust_env=False: a desktop's HTTP(S)_PROXY must not reroute the scrape.
            self._http = httpx.AsyncClient(base_url=self.base_url, headers=self._headers, timeout=timeout,
                                           transport=self._transport, trust_env=False)
        return self._http

    async def sample(self) -> ServerSample:
        """Scrape /metrics now; MetricsUnavailable (a TelemetryUnavailable) when it gave no figures."""
        url = self.base_url + METRICS_PATH
        try:
            response = await self._client().get(METRICS_PATH)
        except httpx.HTTPError as exc:
            raise MetricsUnavailable(f"{url} did not answer ({type(exc).__name__}: {exc or 'no detail'})",
                                     MetricsFailure.UNREACHABLE) from exc
        text = response.text[:MAX_BODY_CHARS]
        if response.status_code != 200:
            raise _failure(response.status_code, text, url, "authorization" in {k.lower() for k in self._headers})
        scrape = read_exposition(text, at=self._clock())
        self.last = scrape
        if scrape.dialect is MetricsDialect.UNKNOWN:
            raise MetricsUnavailable(f"{url} answered, but with {scrape.reading.metrics_reason} "
                                     f"({scrape.reading.skipped_lines} unreadable lines)", MetricsFailure.UNRECOGNISED,
                                     UNRECOGNISED_HINT + ".")
        reading = scrape.reading
        if scrape.dialect is MetricsDialect.LLAMA_CPP:
            reading = await self._with_slots(reading)
        return self._rates.sample(reading)

    async def _with_slots(self, reading: ServerReading) -> ServerReading:
        """A llama-server's reading with its /slots (as its own backend reads them), or the reason there are none."""
        text, why = await llama_slots.fetch_text(self._client(), "/slots", self.base_url)
        if text is None:
            return dataclasses.replace(reading, slots_reason=why)
        slots, skipped, why = llama_slots.slots_from_text(text, self.base_url)
        return dataclasses.replace(reading, slots=slots, slots_reason=why,
                                   skipped_lines=reading.skipped_lines + skipped)

    async def aclose(self) -> None:
        """Close the pooled connection."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None


def server_telemetry(base_url: str) -> OpenAiTelemetry:
    """The ServerTelemetryFactory of the openai backend (no API key; build OpenAiTelemetry with headers for one)."""
    return OpenAiTelemetry(base_url)


__all__ = ["DIALECTS", "DialectNames", "Exposition", "MetricsDialect", "MetricsFailure", "MetricsUnavailable",
           "OpenAiTelemetry", "Scrape", "detect_dialect", "library_samples", "metrics_root", "parse_exposition",
           "read_exposition", "server_telemetry"]
