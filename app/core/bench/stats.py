"""Benchmark statistics as serving benchmarks report them.

Definitions (times on the client's monotonic clock, in seconds inside records, milliseconds in
summaries):
- TTFT: from the request's *arrival* (its scheduled send time; equal to the send time in a
  closed loop) to its first output token of any kind, so client and server queueing count.
- TPOT: (end - first token) / (output tokens - 1), for requests with at least two tokens.
- ITL: every gap between two consecutive streamed lines that carried text.
- E2E: from arrival to the final line.
- Wait: TTFT minus the server's reported prompt time: what the request spent queued (in front of
  the server or inside it), loading, decoding its first token and on the wire.
- TTFT in four parts (each None where a part cannot be told): the client queue (arrival to sent: held by
  the front end's concurrency cap), the server wait (sent to the server starting its prefill: its queue,
  a free slot, loading, reading the request; the request's time from sent to its end less the server's
  own time from its prefill's start to the last token), the prefill (the server's prompt time), and the
  rest (TTFT less those three: the first token's decoding and transfer).
- Prefill rate: prompt tokens the server evaluated (those from its cache left out) over its prompt time;
  only where the server says which tokens its cache served (a count that includes cached tokens over a
  time that does not would overstate the rate). Cache-hit share: cached prompt tokens over all the prompt
  tokens used, over the requests whose server said.
- Output tokens/s (aggregate): output tokens of the successful requests over the measured
  window, from the first arrival to the last end. Per request: (tokens - 1) / (end - first token).
- Prompt lengths: requested is what the workload expected the server to count for a request's prompt (its
  text's expected tokens plus the chat template's where known); delivered is what the server counted
  (prompt tokens evaluated plus those served from its cache). Both over every counted request, failed
  ones included: a truncated request is where they part.
- Goodput: successful requests per second that met every latency target (TTFT and TPOT per
  request), as DistServe defines it.
Percentiles use linear interpolation between order statistics (numpy's default).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any
from collections.abc import Iterable, Sequence

import numpy as np

NAN = math.nan
PERCENTILES = (50, 90, 95, 99)
# RequestRecord fields later than the first saved histories, kept out of its JSON when unknown ("" or None):
# scenario requests' class, conversation and turn; the prompt tokens expected and taken from the server's cache.
# The server's time from starting a request's prompt to its last token (for the server wait).
NEWER_FIELDS = ("request_class", "conversation", "turn", "expected_prompt_tokens", "cached_prompt_tokens",
                "server_busy_s")


@dataclass(frozen=True)
class RequestRecord:
    """One measured request. Times in seconds from the run's start; `itl_s` are the gaps (s)."""

    index: int
    scheduled_s: float
    sent_s: float
    end_s: float
    first_token_s: float | None = None
    first_answer_s: float | None = None
    output_tokens: int = 0  # the server's eval_count when it sent one, else the text lines counted
    output_chunks: int = 0
    prompt_tokens: int | None = None
    itl_s: tuple[float, ...] = ()
    load_s: float | None = None  # server-reported load_duration
    prompt_eval_s: float | None = None
    eval_s: float | None = None
    total_s: float | None = None
    done_reason: str | None = None
    error: str = ""
    # oom | queue_full | timeout | connect | dropped (the connection closed mid-reply) | unfinished (the reply ended
    # properly without its final record) | server | bad_request | not_found | malformed | other
    # | truncated (the server used fewer prompt tokens than expected) | too_long (refused: longer than a slot)
    error_kind: str = ""
    warmup: bool = False
    request_class: str = ""  # the scenario class it belongs to ("" outside scenarios)
    conversation: int | None = None  # the class's conversation number, from 0
    turn: int | None = None  # its turn in that conversation, from 1
    expected_prompt_tokens: int | None = None  # what the workload expected the server to count (None: unknown)
    cached_prompt_tokens: int | None = None  # prompt tokens the server took from its cache (None: not said)
    server_busy_s: float | None = None  # the server's time from starting the prompt to the last token (None: not said)

    @property
    def delivered_prompt_tokens(self) -> int | None:
        """The prompt tokens the server used: those it evaluated plus those it had cached (None: not said)."""
        if self.prompt_tokens is None:
            return None
        return self.prompt_tokens + (self.cached_prompt_tokens or 0)

    @property
    def ok(self) -> bool:
        """True when the reply finished with its final line and no error."""
        return not self.error_kind

    @property
    def ttft_s(self) -> float | None:
        """Arrival to first token (s)."""
        return None if self.first_token_s is None else self.first_token_s - self.scheduled_s

    @property
    def e2e_s(self) -> float:
        """Arrival to the end (s)."""
        return self.end_s - self.scheduled_s

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first (s); None below two tokens."""
        if self.first_token_s is None or self.output_tokens < 2:
            return None
        return (self.end_s - self.first_token_s) / (self.output_tokens - 1)

    @property
    def queue_s(self) -> float:
        """Time the request waited on the client before it was sent (open loop with a cap)."""
        return max(0.0, self.sent_s - self.scheduled_s)

    @property
    def wait_s(self) -> float | None:
        """TTFT minus the server's prompt time (s): queueing, loading, the first decode step, transfer."""
        ttft = self.ttft_s
        if ttft is None or self.prompt_eval_s is None:
            return None
        return max(0.0, ttft - self.prompt_eval_s)

    @property
    def server_wait_s(self) -> float | None:
        """From sent to the server starting the prefill (s): its queue, waiting for a free slot, loading, reading
        the request. The time from sent to the end less the server's own time from its prefill's start to the last
        token; None where the server did not say that time or the request did not finish."""
        if self.server_busy_s is None or not self.ok:
            return None
        return max(0.0, self.end_s - self.sent_s - self.server_busy_s)

    @property
    def first_token_rest_s(self) -> float | None:
        """TTFT less the client queue, the server wait and the prefill (s): the first token's decoding and transfer."""
        ttft, wait = self.ttft_s, self.server_wait_s
        if ttft is None or wait is None or self.prompt_eval_s is None:
            return None
        return max(0.0, ttft - self.queue_s - wait - self.prompt_eval_s)

    @property
    def prefill_tokens_per_s(self) -> float | None:
        """Prompt tokens evaluated (cache hits left out) over the prompt time; None where the server did not say
        which of the prompt's tokens came from its cache."""
        if self.cached_prompt_tokens is None or not self.prompt_tokens or not self.prompt_eval_s:
            return None
        return self.prompt_tokens / self.prompt_eval_s

    @property
    def server_decode_tokens_per_s(self) -> float | None:
        """eval_count / eval_duration as the server reports it."""
        if not self.eval_s or self.output_tokens < 1:
            return None
        return self.output_tokens / self.eval_s

    def to_json(self) -> dict[str, Any]:
        """Plain dict (gaps rounded to microseconds) for the history."""
        data = asdict(self)
        data["itl_s"] = [round(g, 6) for g in self.itl_s]
        for key in NEWER_FIELDS:  # written only when known: a record without them reads and writes as before
            if data[key] in ("", None):
                del data[key]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RequestRecord:
        """Inverse of to_json."""
        values = dict(data)
        values["itl_s"] = tuple(values.get("itl_s") or ())
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in values.items() if k in known})


@dataclass(frozen=True)
class Distribution:
    """Summary of one quantity over requests; NaN everywhere when there were no values."""

    n: int
    mean: float
    p50: float
    p90: float
    p95: float
    p99: float
    min: float
    max: float

    def as_flat(self, prefix: str) -> dict[str, float | None]:
        """{prefix_mean: …, prefix_p50: …} with None for NaN (JSON has no NaN)."""
        return {f"{prefix}_{k}": _none_if_nan(getattr(self, k))
                for k in ("mean", "p50", "p90", "p95", "p99", "min", "max")}


EMPTY = Distribution(0, NAN, NAN, NAN, NAN, NAN, NAN, NAN)


def _none_if_nan(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def distribution(values: Iterable[float | None], scale: float = 1.0) -> Distribution:
    """Mean, p50/p90/p95/p99, min and max of the finite values times `scale` (1e3: seconds to ms)."""
    arr = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float) * scale
    if arr.size == 0:
        return EMPTY
    p50, p90, p95, p99 = (float(x) for x in np.percentile(arr, PERCENTILES))
    return Distribution(int(arr.size), float(arr.mean()), p50, p90, p95, p99, float(arr.min()), float(arr.max()))


@dataclass(frozen=True)
class LatencyTargets:
    """Service-level targets: a request meets them when its TTFT and TPOT are at or under the
    targets; a point meets them when its p95s do and at least `min_success` of requests succeeded."""

    ttft_p95_ms: float | None = 2000.0
    tpot_p95_ms: float | None = 100.0
    min_success: float = 0.99

    def request_meets(self, record: RequestRecord) -> bool:
        """True when one successful request is within both targets."""
        if not record.ok:
            return False
        ttft, tpot = record.ttft_s, record.tpot_s
        if self.ttft_p95_ms is not None and (ttft is None or ttft * 1e3 > self.ttft_p95_ms):
            return False
        if self.tpot_p95_ms is not None and tpot is not None and tpot * 1e3 > self.tpot_p95_ms:
            return False
        return True

    def describe(self) -> str:
        """e.g. "TTFT p95 ≤ 2000 ms, TPOT p95 ≤ 100 ms, ≥ 99 % success"."""
        parts = []
        if self.ttft_p95_ms is not None:
            parts.append(f"TTFT p95 ≤ {self.ttft_p95_ms:g} ms")
        if self.tpot_p95_ms is not None:
            parts.append(f"TPOT p95 ≤ {self.tpot_p95_ms:g} ms")
        parts.append(f"≥ {self.min_success * 100:g} % success")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """Plain dict."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LatencyTargets:
        """Inverse of to_json."""
        return cls(**{k: data[k] for k in ("ttft_p95_ms", "tpot_p95_ms", "min_success") if k in data})


@dataclass(frozen=True)
class PointStats:
    """Everything measured at one point. Rates per second, times in milliseconds."""

    requests: int
    requests_ok: int
    requests_failed: int
    duration_s: float
    output_tokens: int
    output_tokens_per_s: float
    requests_per_s: float
    goodput_rps: float
    goodput_share: float  # share of all requests that succeeded within the targets
    ttft_ms: Distribution
    tpot_ms: Distribution
    itl_ms: Distribution
    e2e_ms: Distribution
    wait_ms: Distribution
    queue_ms: Distribution
    answer_ttft_ms: Distribution  # arrival to the first answer token (after any thinking)
    request_tokens_per_s: Distribution
    server_decode_tokens_per_s: Distribution
    server_prompt_tokens_per_s: Distribution
    prompt_tokens_mean: float
    output_tokens_mean: float
    errors: dict[str, int] = field(default_factory=dict)
    first_error: str = ""
    prompt_tokens_requested: Distribution = field(default_factory=lambda: EMPTY)  # expected, per request
    prompt_tokens_delivered: Distribution = field(default_factory=lambda: EMPTY)  # counted by the server
    # TTFT's parts after the client queue (queue_ms): see the module's notes.
    server_wait_ms: Distribution = field(default_factory=lambda: EMPTY)  # sent to the server's prefill start
    prefill_ms: Distribution = field(default_factory=lambda: EMPTY)  # the server's prompt time
    first_token_rest_ms: Distribution = field(default_factory=lambda: EMPTY)  # TTFT less the three before it
    prefill_tokens_per_s: Distribution = field(default_factory=lambda: EMPTY)  # over tokens not from the cache
    cache_hit_share: float = NAN  # cached prompt tokens over all used, where the server said (NaN: it did not)

    @property
    def success_rate(self) -> float:
        """Successful requests over all requests (NaN with none)."""
        return self.requests_ok / self.requests if self.requests else NAN

    def flat(self) -> dict[str, Any]:
        """One level of keys (ttft_ms_p95, …) with None for NaN: for JSON, CSV and the history."""
        out: dict[str, Any] = {
            "requests": self.requests, "requests_ok": self.requests_ok, "requests_failed": self.requests_failed,
            "success_rate": _none_if_nan(self.success_rate), "duration_s": self.duration_s,
            "output_tokens": self.output_tokens, "output_tokens_per_s": self.output_tokens_per_s,
            "requests_per_s": self.requests_per_s, "goodput_rps": self.goodput_rps,
            "goodput_share": _none_if_nan(self.goodput_share),
            "prompt_tokens_mean": _none_if_nan(self.prompt_tokens_mean),
            "output_tokens_mean": _none_if_nan(self.output_tokens_mean),
            "errors": dict(self.errors), "first_error": self.first_error,
        }
        for name in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "wait_ms", "queue_ms", "answer_ttft_ms",
                     "request_tokens_per_s", "server_decode_tokens_per_s", "server_prompt_tokens_per_s"):
            out.update(getattr(self, name).as_flat(name))
        for name in ("prompt_tokens_requested", "prompt_tokens_delivered"):
            lengths = getattr(self, name).as_flat(name)
            out.update({f"{name}_{k}": lengths[f"{name}_{k}"] for k in ("mean", "min", "max")})
        for name in ("server_wait_ms", "prefill_ms", "first_token_rest_ms", "prefill_tokens_per_s"):
            out.update(getattr(self, name).as_flat(name))
        out["cache_hit_share"] = _none_if_nan(self.cache_hit_share)
        return out


def _server_prompt_rate(r: RequestRecord) -> float | None:
    if not r.prompt_tokens or not r.prompt_eval_s:
        return None
    return r.prompt_tokens / r.prompt_eval_s


def cache_hit_share(records: Iterable[RequestRecord]) -> float:
    """Cached prompt tokens over all the prompt tokens used, over the records whose server said what its cache
    served (NaN: none said, or no prompt tokens)."""
    cached = used = 0
    for r in records:
        if r.cached_prompt_tokens is None or r.prompt_tokens is None:
            continue
        cached += r.cached_prompt_tokens
        used += r.prompt_tokens + r.cached_prompt_tokens
    return cached / used if used else NAN


def _request_rate(r: RequestRecord) -> float | None:
    tpot = r.tpot_s
    return None if not tpot else 1.0 / tpot


def summarize(records: Sequence[RequestRecord], targets: LatencyTargets | None = None) -> PointStats:
    """Statistics over the counted (non-warm-up) records."""
    targets = targets or LatencyTargets()
    counted = [r for r in records if not r.warmup]
    ok = [r for r in counted if r.ok]
    if counted:
        start = min(r.scheduled_s for r in counted)
        duration = max(r.end_s for r in counted) - start
    else:
        duration = 0.0
    tokens = sum(r.output_tokens for r in ok)
    per_s = (lambda n: n / duration) if duration > 0 else (lambda n: 0.0)
    good = sum(1 for r in ok if targets.request_meets(r))
    errors: dict[str, int] = {}
    for r in counted:
        if not r.ok:
            errors[r.error_kind] = errors.get(r.error_kind, 0) + 1
    first_error = next((r.error for r in sorted(counted, key=lambda r: r.end_s) if not r.ok), "")
    gaps = [g for r in ok for g in r.itl_s]
    return PointStats(
        requests=len(counted), requests_ok=len(ok), requests_failed=len(counted) - len(ok),
        duration_s=duration, output_tokens=tokens, output_tokens_per_s=per_s(tokens),
        requests_per_s=per_s(len(ok)), goodput_rps=per_s(good),
        goodput_share=good / len(counted) if counted else NAN,
        ttft_ms=distribution((r.ttft_s for r in ok), 1e3),
        tpot_ms=distribution((r.tpot_s for r in ok), 1e3),
        itl_ms=distribution(gaps, 1e3),
        e2e_ms=distribution((r.e2e_s for r in ok), 1e3),
        wait_ms=distribution((r.wait_s for r in ok), 1e3),
        queue_ms=distribution((r.queue_s for r in ok), 1e3),
        answer_ttft_ms=distribution((None if r.first_answer_s is None else r.first_answer_s - r.scheduled_s
                                     for r in ok), 1e3),
        request_tokens_per_s=distribution(_request_rate(r) for r in ok),
        server_decode_tokens_per_s=distribution(r.server_decode_tokens_per_s for r in ok),
        server_prompt_tokens_per_s=distribution(_server_prompt_rate(r) for r in ok),
        prompt_tokens_mean=float(np.mean([r.prompt_tokens for r in ok if r.prompt_tokens is not None]))
        if any(r.prompt_tokens is not None for r in ok) else NAN,
        output_tokens_mean=tokens / len(ok) if ok else NAN,
        errors=errors, first_error=first_error,
        prompt_tokens_requested=distribution(r.expected_prompt_tokens for r in counted),
        prompt_tokens_delivered=distribution(r.delivered_prompt_tokens for r in counted),
        server_wait_ms=distribution((r.server_wait_s for r in ok), 1e3),
        prefill_ms=distribution((r.prompt_eval_s for r in ok), 1e3),
        first_token_rest_ms=distribution((r.first_token_rest_s for r in ok), 1e3),
        prefill_tokens_per_s=distribution(r.prefill_tokens_per_s for r in ok),
        cache_hit_share=cache_hit_share(ok),
    )


def meets_targets(stats: PointStats, targets: LatencyTargets) -> bool:
    """True when the point's TTFT and TPOT p95 are within the targets and enough requests succeeded."""
    if not stats.requests or stats.success_rate < targets.min_success:
        return False
    if targets.ttft_p95_ms is not None and not stats.ttft_ms.p95 <= targets.ttft_p95_ms:
        return False
    if targets.tpot_p95_ms is not None and stats.tpot_ms.n and not stats.tpot_ms.p95 <= targets.tpot_p95_ms:
        return False
    return True


@dataclass(frozen=True)
class ClassTargets:
    """A scenario class's latency targets in ms (None: no target): TTFT and end-to-end, average and P95."""

    ttft_avg_ms: float | None = None
    ttft_p95_ms: float | None = None
    e2e_avg_ms: float | None = None
    e2e_p95_ms: float | None = None

    @property
    def any(self) -> bool:
        """True when at least one target is set."""
        return bool(self.to_json())

    def describe(self) -> str:
        """e.g. "TTFT avg ≤ 500 ms, TTFT P95 ≤ 600 ms"."""
        words = {"ttft_avg_ms": "TTFT avg", "ttft_p95_ms": "TTFT P95", "e2e_avg_ms": "E2E avg",
                 "e2e_p95_ms": "E2E P95"}
        return ", ".join(f"{words[k]} ≤ {v:g} ms" for k, v in self.to_json().items())

    def to_json(self) -> dict[str, float]:
        """The targets that are set."""
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class ClassStats:
    """One scenario class at one point: counts, latency (ms), output rate and whether its targets were met."""

    name: str
    requests: int
    requests_ok: int
    ttft_ms: Distribution
    e2e_ms: Distribution
    output_tokens_per_s: float  # the class's successful output tokens over the point's measured window
    prompt_tokens_mean: float  # as the server counted them (NaN where it did not say)
    missed: tuple[str, ...]  # the targets not met, in words
    met: bool | None  # None: the class has no targets

    def to_json(self) -> dict[str, Any]:
        """Flat dict (None for NaN) for JSON output."""
        out: dict[str, Any] = {"class": self.name, "requests": self.requests, "requests_ok": self.requests_ok,
                               "output_tokens_per_s": _none_if_nan(self.output_tokens_per_s),
                               "prompt_tokens_mean": _none_if_nan(self.prompt_tokens_mean),
                               "targets_met": self.met, "targets_missed": list(self.missed)}
        out.update(self.ttft_ms.as_flat("ttft_ms"))
        out.update(self.e2e_ms.as_flat("e2e_ms"))
        return out


def class_stats(records: Sequence[RequestRecord], names: Sequence[str],
                targets: dict[str, ClassTargets] | None = None) -> tuple[ClassStats, ...]:
    """Statistics per class over the counted records, in the order of `names`. A class meets its targets when
    every request succeeded and each set target (average and P95 of TTFT and end-to-end) holds."""
    counted = [r for r in records if not r.warmup]
    if counted:
        window = max(r.end_s for r in counted) - min(r.scheduled_s for r in counted)
    else:
        window = 0.0
    out = []
    for name in names:
        mine = [r for r in counted if r.request_class == name]
        ok = [r for r in mine if r.ok]
        ttft = distribution((r.ttft_s for r in ok), 1e3)
        e2e = distribution((r.e2e_s for r in ok), 1e3)
        goal = (targets or {}).get(name, ClassTargets())
        missed: list[str] = []
        if len(ok) < len(mine) or not mine:
            missed.append(f"{len(mine) - len(ok)} of {len(mine)} requests failed" if mine else "no requests")
        for key, value, figure in (("ttft_avg_ms", goal.ttft_avg_ms, ttft.mean), ("ttft_p95_ms", goal.ttft_p95_ms, ttft.p95),
                                   ("e2e_avg_ms", goal.e2e_avg_ms, e2e.mean), ("e2e_p95_ms", goal.e2e_p95_ms, e2e.p95)):
            if value is not None and not figure <= value:
                label = ClassTargets(**{key: value}).describe()
                missed.append(f"{label} (measured {figure:.0f} ms)" if math.isfinite(figure) else f"{label} (not measured)")
        prompts = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
        out.append(ClassStats(
            name=name, requests=len(mine), requests_ok=len(ok), ttft_ms=ttft, e2e_ms=e2e,
            output_tokens_per_s=sum(r.output_tokens for r in ok) / window if window > 0 else 0.0,
            prompt_tokens_mean=float(np.mean(prompts)) if prompts else NAN,
            missed=tuple(missed), met=(not missed) if goal.any else None))
    return tuple(out)


__all__ = ["ClassStats", "ClassTargets", "Distribution", "EMPTY", "LatencyTargets", "PERCENTILES", "PointStats", "RequestRecord",
           "cache_hit_share", "class_stats", "distribution", "meets_targets", "summarize"]
