"""Capacity: the highest arrival rate a setting sustains for a scenario, and what it means per day.

A rate sweep runs the scenario at one fixed server setting again and again, each step with every open-loop
class's arrival rate multiplied by the same factor, so the class mix stays the scenario's. Closed-loop classes
are not scaled: their clients run alongside at their own concurrency in every step, as background load, and
their targets still count; a scenario without an open-loop class has no rate to raise and is refused.

The ladder (RateLadder): steps at ascending factors, geometric from a light first step (half the scenario's
rates unless asked otherwise) or at the total rates asked, until a step misses; then a few bisection steps
between the last step that met and the first that missed. A step misses (Miss, as data) when
- a class misses one of its targets (ClassTargets: TTFT and end-to-end, average and P95);
- the step misses the run's LatencyTargets (TTFT P95, TPOT P95, least share of successful requests);
- any request failed, a prompt cut by the server (truncated) included;
- the load was not reached: fewer than a third of the offered rate arrived (a request count too small for
  the rate, or a conversation's turns, each held back by its reply), so the step did not measure that rate;
- the server fell behind: it served the open-loop requests at fewer than `keep_up` (80 %) of the rate they
  arrived at. Arrival rate: (requests - 1) over the time from the first arrival to the last; served rate:
  (requests that succeeded - 1) over the time from the first reply's end to the last one's. A server that
  keeps up ends requests as fast as they arrive; one with a growing queue ends them at its own pace. A step
  with fewer than five open-loop requests is not judged on this (too few to tell a rate).
The sustainable rate is the highest step that met every target below the lowest step that missed;
requests per day is that rate times 86 400 (open-loop classes only: closed-loop clients have no rate).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from app.core.watch.events import WatchEvent, events_from_json
from app.core.bench.scenario import MAX_RATE_RPS, Scenario, parse_scenario_data
from app.core.bench.stats import (ClassStats, ClassTargets, LatencyTargets, PointStats, RequestRecord, class_stats,
                                  summarize)

SECONDS_PER_DAY = 86_400
START_FACTOR = 0.5  # the first step's share of the scenario's rates when no start is asked
GROWTH = 1.5  # each step's rate over the last one's
REFINE_STEPS = 2  # bisection steps between the last good and the first bad rate
KEEP_UP = 0.8  # least share of the arrival rate the server must serve
MAX_LADDER_STEPS = 16  # geometric steps at most (1.5^15 ≈ 440 times the first rate)
MIN_RATE_REQUESTS = 5  # fewer open-loop requests in a step say nothing about whether the server kept up
MIN_GAP = 0.02  # bisection stops when the good and bad rates are closer than this share
STEP_SECONDS = 20.0  # a step's duration when neither a request count nor a duration is asked (a few dozen at 1/s)


class CapacityError(ValueError):
    """A rate sweep that cannot run (no open-loop class, an unusable ladder); the message says why."""


class CapacityStatus(StrEnum):
    """How a rate sweep ended."""

    FOUND = "found"  # a rate met every target and a higher one did not
    NEVER_MET = "never_met"  # even the lowest rate missed
    NEVER_BROKE = "never_broke"  # every rate asked met: the sustainable rate is at least the highest one
    INCOMPLETE = "incomplete"  # cancelled or stopped before a step could be judged
    LOAD_LIMITED = "load_limited"  # the steps above the last good one could not offer their rate: at least it


REACHED = 1 / 3  # the least share of the offered rate that must arrive for a step to have measured it


class MissKind(StrEnum):
    """What a step missed."""

    CLASS_TARGET = "class_target"  # a scenario class's TTFT/E2E average or P95 target
    LATENCY_TARGET = "latency_target"  # the run's TTFT or TPOT P95 target
    SUCCESS = "success"  # fewer successful requests than the run's least share
    FAILED = "failed"  # requests failed (any)
    TRUNCATED = "truncated"  # prompts the server cut or refused as too long
    FELL_BEHIND = "fell_behind"  # served well below the arrival rate: a queue grew
    LOAD_NOT_REACHED = "load_not_reached"  # far fewer requests arrived than offered: the step could not load it
    NOT_MEASURED = "not_measured"  # the step produced no requests (the server failed before)


@dataclass(frozen=True)
class Miss:
    """One thing a step missed: `metric` of `class_name` ('' for the whole step) measured against `limit`."""

    kind: MissKind
    metric: str  # ttft_avg_ms, ttft_p95_ms, e2e_avg_ms, e2e_p95_ms, tpot_p95_ms, success_rate, failed, served_rps, …
    measured: float | None = None
    limit: float | None = None
    class_name: str = ""
    detail: str = ""  # the server's or the point's own words, where there are some

    def words(self) -> str:
        """e.g. "long-document E2E P95 9.1 s > 8 s", "3 of 40 requests failed", "served 1.1/s of 2.0/s arriving"."""
        who = f"{self.class_name} " if self.class_name else ""
        label = METRIC_WORDS.get(self.metric, self.metric)
        if self.kind in (MissKind.CLASS_TARGET, MissKind.LATENCY_TARGET):
            measured = "not measured" if self.measured is None else _duration(self.measured)
            return f"{who}{label} {measured} > {_duration(self.limit or 0.0)}"
        if self.kind is MissKind.SUCCESS:
            return (f"{who}success {_share(self.measured)} < {_share(self.limit)}")
        if self.kind in (MissKind.FAILED, MissKind.TRUNCATED):
            what = "failed" if self.kind is MissKind.FAILED else "cut by the server"
            return f"{who}{self.measured or 0:.0f} of {self.limit or 0:.0f} requests {what}" + (
                f" ({self.detail})" if self.detail else "")
        if self.kind is MissKind.FELL_BEHIND:
            return f"the server fell behind: served {self.measured or 0:.2f}/s of {self.limit or 0:.2f}/s arriving"
        if self.kind is MissKind.LOAD_NOT_REACHED:
            return (f"the load was not reached: {self.measured or 0:.2f}/s of {self.limit or 0:.2f}/s offered "
                    "arrived (too few requests for the rate, or conversations whose turns wait for replies): give "
                    "each step more requests or a duration")
        return f"not measured{': ' + self.detail if self.detail else ''}"

    def to_json(self) -> dict[str, Any]:
        """Plain dict."""
        return {"kind": self.kind.value, "metric": self.metric, "measured": _finite(self.measured),
                "limit": _finite(self.limit), "class": self.class_name, "detail": self.detail, "words": self.words()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Miss:
        """Inverse of to_json; an unknown kind reads as not measured."""
        try:
            kind = MissKind(str(data.get("kind", "")))
        except ValueError:
            kind = MissKind.NOT_MEASURED
        return cls(kind, str(data.get("metric", "")), _number(data.get("measured")), _number(data.get("limit")),
                   str(data.get("class", "")), str(data.get("detail", "")))


METRIC_WORDS = {"ttft_avg_ms": "TTFT avg", "ttft_p95_ms": "TTFT P95", "e2e_avg_ms": "E2E avg",
                "e2e_p95_ms": "E2E P95", "tpot_p95_ms": "TPOT P95"}


def _duration(ms: float) -> str:
    """640 ms, 9.1 s."""
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.3g} s"


def _share(x: float | None) -> str:
    return "?" if x is None else f"{x * 100:.3g} %"


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else x


def _number(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


# ---- the scenario at a factor -------------------------------------------------------------------------

def open_rate(scenario: Scenario) -> float:
    """The scenario's total open-loop arrival rate (requests/s); 0 without an open-loop class."""
    return sum(c.arrival.rate_rps for c in scenario.classes if c.arrival.open)


def check_scalable(scenario: Scenario) -> None:
    """CapacityError unless the scenario has an open-loop class whose rate a sweep can raise."""
    if open_rate(scenario) <= 0:
        raise CapacityError(f"scenario {scenario.name} has no open-loop class (every class is a closed loop of "
                            "clients): a rate sweep raises arrival rates, so it needs a class with arrival "
                            "kind poisson or constant")


def at_factor(scenario: Scenario, factor: float) -> Scenario:
    """The scenario with every open-loop class's rate times `factor`; closed-loop classes as they are."""
    check_scalable(scenario)
    if not factor > 0 or open_rate(scenario) * factor > MAX_RATE_RPS:
        raise CapacityError(f"a rate factor of {factor:g} is outside what a scenario can ask (above 0, at most "
                            f"{MAX_RATE_RPS:g} requests/s in all)")
    classes = tuple(replace(c, arrival=replace(c.arrival, rate_rps=c.arrival.rate_rps * factor))
                    if c.arrival.open else c for c in scenario.classes)
    return replace(scenario, classes=classes)


def class_rates(scenario: Scenario, factor: float) -> dict[str, float]:
    """Each open-loop class's arrival rate at `factor` (requests/s)."""
    return {c.name: c.arrival.rate_rps * factor for c in scenario.classes if c.arrival.open}


# ---- the ladder ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RateLadder:
    """Which rates a sweep tries, in total open-loop requests per second.

    `rates`: these rates in ascending order, up to the first that misses; else geometric from `start` (None:
    START_FACTOR of the scenario's rate) by `growth` up to `stop` (None: until a step misses, at most
    MAX_LADDER_STEPS steps). Then `refine` bisection steps between the last good and the first bad rate."""

    start: float | None = None
    stop: float | None = None
    rates: tuple[float, ...] = ()
    growth: float = GROWTH
    refine: int = REFINE_STEPS
    keep_up: float = KEEP_UP

    def problems(self) -> list[str]:
        """What makes the ladder unusable, in words; empty when it can run."""
        out = []
        for what, rate in [("the start", self.start), ("the stop", self.stop), *(("a rate", r) for r in self.rates)]:
            if rate is not None and not (math.isfinite(rate) and 0 < rate <= MAX_RATE_RPS):
                out.append(f"{what} ({rate:g}) must be above 0 and at most {MAX_RATE_RPS:g} requests/s")
        if self.start is not None and self.stop is not None and self.stop < self.start:
            out.append(f"the stop ({self.stop:g}) is below the start ({self.start:g})")
        if not (math.isfinite(self.growth) and 1.05 <= self.growth <= 10):
            out.append(f"the growth per step ({self.growth:g}) must be from 1.05 to 10")
        if not 0 <= self.refine <= 10:
            out.append(f"the refining steps ({self.refine}) must be from 0 to 10")
        if not 0 < self.keep_up <= 1:
            out.append(f"the share of arrivals to keep up with ({self.keep_up:g}) must be above 0 and at most 1")
        return out

    def ladder(self, base_rps: float) -> tuple[float, ...]:
        """The ascending factors tried before any refining, for a scenario whose open-loop rate is `base_rps`."""
        if base_rps <= 0:
            raise CapacityError("the scenario has no open-loop rate to raise")
        if self.rates:
            return tuple(sorted({r / base_rps for r in self.rates}))
        first = (self.start / base_rps) if self.start is not None else START_FACTOR
        last = (self.stop / base_rps) if self.stop is not None else MAX_RATE_RPS / base_rps
        out = [first]
        while len(out) < MAX_LADDER_STEPS and out[-1] < last:
            out.append(min(out[-1] * self.growth, last))
        return tuple(out)

    def next_factor(self, base_rps: float, tried: Sequence[tuple[float, bool]]) -> float | None:
        """The factor of the next step after the steps `tried` ((factor, met), in the order run); None: done."""
        ladder = self.ladder(base_rps)
        done = {round(f, 9) for f, _met in tried}
        missed = [f for f, met in tried if not met]
        if not missed:
            return next((f for f in ladder if round(f, 9) not in done), None)
        bad = min(missed)
        good = max((f for f, met in tried if met and f < bad), default=None)
        if good is None:
            return None  # the lowest step missed: nothing below it to refine towards
        climbed = sum(1 for f, _met in tried if any(math.isclose(f, x, rel_tol=1e-9) for x in ladder))
        if len(tried) - climbed >= self.refine or bad - good <= MIN_GAP * bad:
            return None
        return (good + bad) / 2

    def describe(self, base_rps: float) -> str:
        """e.g. "0.5, 0.75, 1.12 … req/s until a step misses, then 2 refining steps"."""
        factors = self.ladder(base_rps)
        shown = ", ".join(f"{f * base_rps:.3g}" for f in factors[:4])
        more = " …" if len(factors) > 4 else ""
        until = "" if self.rates or self.stop is not None else " until a step misses"
        return f"{shown}{more} req/s{until}, then up to {self.refine} refining step{'s' * (self.refine != 1)}"

    def to_json(self) -> dict[str, Any]:
        """Plain dict."""
        return {"start": self.start, "stop": self.stop, "rates": list(self.rates), "growth": self.growth,
                "refine": self.refine, "keep_up": self.keep_up}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> RateLadder:
        """Inverse of to_json; absent fields take their defaults."""
        data = data or {}
        rates = tuple(x for x in (_number(r) for r in data.get("rates") or ()) if x is not None)
        return cls(_number(data.get("start")), _number(data.get("stop")), rates,
                   _number(data.get("growth")) or GROWTH, int(data.get("refine", REFINE_STEPS)),
                   _number(data.get("keep_up")) or KEEP_UP)


def parse_rate_spec(text: str | None) -> RateLadder:
    """`--rate-sweep`'s value: empty (the default ladder), START:STOP, START: (no stop) or :STOP, or a list of
    total rates "0.5,1,2,4" (requests per second). CapacityError says what is wrong."""
    text = (text or "").strip()
    if not text:
        return RateLadder()

    def rate(part: str, what: str) -> float:
        try:
            value = float(part)
        except ValueError:
            raise CapacityError(f"{what} {part!r} is not a number; write e.g. 0.5:8 (from 0.5 to 8 requests/s) or "
                                "0.5,1,2,4") from None
        if not (math.isfinite(value) and 0 < value <= MAX_RATE_RPS):
            raise CapacityError(f"{what} {part} must be above 0 and at most {MAX_RATE_RPS:g} requests/s")
        return value

    if ":" in text:
        parts = text.split(":")
        if len(parts) != 2 or not any(p.strip() for p in parts):
            raise CapacityError(f"{text!r}: write START:STOP in requests/s, e.g. 0.5:8 (either side may be left out)")
        start = rate(parts[0].strip(), "the start") if parts[0].strip() else None
        stop = rate(parts[1].strip(), "the stop") if parts[1].strip() else None
        if start is not None and stop is not None and stop < start:
            raise CapacityError(f"{text!r}: the stop ({stop:g}) is below the start ({start:g})")
        return RateLadder(start=start, stop=stop)
    rates = tuple(rate(p.strip(), "the rate") for p in text.split(",") if p.strip())
    if not rates:
        raise CapacityError(f"{text!r}: give rates in requests/s, e.g. 0.5,1,2,4, or START:STOP")
    return RateLadder(rates=rates)


def make_ladder(spec: str | None, refine: int | None = None) -> RateLadder:
    """The ladder a rate spelling (parse_rate_spec) and a count of refining steps (None: REFINE_STEPS) describe,
    as the CLI's --rate-sweep/--refine and the Benchmark page take them. CapacityError says what is wrong: the
    spelling's first problem, else every problem of the ladder."""
    ladder = parse_rate_spec(spec)
    if refine is not None:
        ladder = replace(ladder, refine=refine)
    problems = ladder.problems()
    if problems:
        raise CapacityError("; ".join(problems))
    return ladder


def rate_sweep_refusal(scenario: Scenario | None) -> str:
    """Why a rate sweep cannot run on this workload ('' when it can): it needs a scenario with an open-loop
    class."""
    if scenario is None:
        return ("a rate sweep raises a scenario's arrival rates: measure a scenario (one prompt at one load has "
                "no classes to raise)")
    try:
        check_scalable(scenario)
    except CapacityError as exc:
        return str(exc)
    return ""


def step_duration(requests: int | None, duration_s: float | None) -> float | None:
    """The duration of each point and step of a sweep with a rate sweep: the one asked, else STEP_SECONDS when
    no request count is asked either (a step's request count then grows with its rate)."""
    if requests is None and duration_s is None:
        return STEP_SECONDS
    return duration_s


# ---- judging a step -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class CapacityStep:
    """One step of a rate sweep: the scenario's open-loop rates times `factor`, measured and judged."""

    factor: float
    offered_rps: float  # total open-loop rate asked
    offered_per_class: dict[str, float]
    arrival_rps: float | None  # open-loop requests per second as they arrived (None: fewer than two)
    achieved_rps: float | None  # open-loop requests served per second (see the module's words)
    stats: PointStats
    classes: tuple[ClassStats, ...]
    misses: tuple[Miss, ...]
    order: int = 0  # its place in the order the steps ran, from 0
    vram_peak_mib: float | None = None  # the server's own peak (its processes' memory), None where not known
    gpu_util_pct: float | None = None
    records: tuple[RequestRecord, ...] = ()
    failure: str = ""  # why the step could not run as asked (the server failed, …), '' when it ran
    events: tuple[WatchEvent, ...] = ()  # what the server did without saying so while the step ran
    card_peak_mib: float | None = None  # the whole card's peak use, other programs included

    @property
    def met(self) -> bool:
        """True when the step missed nothing."""
        return not self.misses

    def to_json(self, with_records: bool = False) -> dict[str, Any]:
        """Plain dict: the figures, and every request with `with_records` (for the history)."""
        out: dict[str, Any] = {
            "factor": self.factor, "offered_rps": self.offered_rps, "offered_per_class": dict(self.offered_per_class),
            "arrival_rps": _finite(self.arrival_rps), "achieved_rps": _finite(self.achieved_rps), "met": self.met,
            "misses": [m.to_json() for m in self.misses], "order": self.order,
            "vram_peak_mib": self.vram_peak_mib, "card_peak_mib": self.card_peak_mib,
            "gpu_util_pct": self.gpu_util_pct, "failure": self.failure,
            "stats": self.stats.flat(), "classes": [c.to_json() for c in self.classes]}
        if self.events:
            out["events"] = [e.to_json() for e in self.events]
        if with_records:
            out["records"] = [r.to_json() for r in self.records]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any], names: Sequence[str], targets: LatencyTargets,
                  class_targets: Mapping[str, ClassTargets]) -> CapacityStep:
        """Inverse of to_json: statistics recomputed from the records where they were kept (none: empty), the
        judgement as saved."""
        records = tuple(RequestRecord.from_json(r) for r in data.get("records") or () if isinstance(r, dict))
        per_class = data.get("offered_per_class")
        # A step saved before the card's and the server's peaks were told apart holds the card's as "vram_peak_mib".
        server, card = _number(data.get("vram_peak_mib")), _number(data.get("card_peak_mib"))
        if "card_peak_mib" not in data:
            server, card = None, server
        return cls(
            factor=_number(data.get("factor")) or 0.0, offered_rps=_number(data.get("offered_rps")) or 0.0,
            offered_per_class={str(k): float(v) for k, v in per_class.items() if _number(v) is not None}
            if isinstance(per_class, dict) else {},
            arrival_rps=_number(data.get("arrival_rps")), achieved_rps=_number(data.get("achieved_rps")),
            stats=summarize(records, targets), classes=class_stats(records, names, dict(class_targets)),
            misses=tuple(Miss.from_json(m) for m in data.get("misses") or () if isinstance(m, dict)),
            order=int(data.get("order") or 0), vram_peak_mib=server,
            gpu_util_pct=_number(data.get("gpu_util_pct")), records=records, failure=str(data.get("failure", "")),
            events=events_from_json(data.get("events")), card_peak_mib=card)


def _open_records(records: Sequence[RequestRecord], scenario: Scenario) -> list[RequestRecord]:
    open_names = {c.name for c in scenario.classes if c.arrival.open}
    return [r for r in records if not r.warmup and r.request_class in open_names]


def arrival_and_served(records: Sequence[RequestRecord], scenario: Scenario) -> tuple[float | None, float | None]:
    """The open-loop classes' arrival rate and served rate (requests/s) over a step; None with fewer than
    MIN_RATE_REQUESTS requests."""
    mine = _open_records(records, scenario)
    if len(mine) < MIN_RATE_REQUESTS:
        return None, None
    first = min(r.scheduled_s for r in mine)
    span = max(r.scheduled_s for r in mine) - first
    arrival = (len(mine) - 1) / span if span > 0 else None
    ok = [r for r in mine if r.ok]
    if len(ok) < 2:
        return arrival, 0.0
    window = max(r.end_s for r in ok) - min(r.end_s for r in ok)
    served = (len(ok) - 1) / window if window > 0 else None
    return arrival, served


def judge_step(factor: float, records: Sequence[RequestRecord], scenario: Scenario, targets: LatencyTargets,
               ladder: RateLadder = RateLadder(), *, order: int = 0, failure: str = "", failure_detail: str = "",
               vram_peak_mib: float | None = None, gpu_util_pct: float | None = None,
               card_peak_mib: float | None = None) -> CapacityStep:
    """A step measured at `factor` of `scenario` (the unscaled one), judged: every miss as data. `failure`:
    why the step's point did not run cleanly (its records still count where there are some)."""
    names = [c.name for c in scenario.classes]
    goals = {c.name: c.targets for c in scenario.classes}
    stats = summarize(records, targets)
    classes = class_stats(records, names, goals)
    arrival, served = arrival_and_served(records, scenario)
    misses: list[Miss] = []
    if failure and not stats.requests:
        misses.append(Miss(MissKind.NOT_MEASURED, "requests", detail=failure + (
            f": {failure_detail}" if failure_detail else "")))
    elif not stats.requests:
        misses.append(Miss(MissKind.NOT_MEASURED, "requests", detail="no request was sent"))
    counted = [r for r in records if not r.warmup]
    cut = [r for r in counted if r.error_kind in ("truncated", "too_long")]
    if cut:
        misses.append(Miss(MissKind.TRUNCATED, "truncated", len(cut), len(counted), detail=cut[0].error))
    failed = [r for r in counted if not r.ok and r.error_kind not in ("truncated", "too_long")]
    if failed:
        kinds = sorted({r.error_kind for r in failed})
        misses.append(Miss(MissKind.FAILED, "failed", len(failed), len(counted), detail=", ".join(kinds)))
    if stats.requests and stats.success_rate < targets.min_success:
        misses.append(Miss(MissKind.SUCCESS, "success_rate", stats.success_rate, targets.min_success))
    if stats.requests_ok:
        for metric, limit, figure in (("ttft_p95_ms", targets.ttft_p95_ms, stats.ttft_ms.p95),
                                      ("tpot_p95_ms", targets.tpot_p95_ms, stats.tpot_ms.p95 if stats.tpot_ms.n
                                       else None)):
            if limit is not None and figure is not None and not figure <= limit:
                misses.append(Miss(MissKind.LATENCY_TARGET, metric, _finite(figure), limit))
    for c in classes:
        if not c.requests_ok:
            continue  # no latency to judge: its failures are counted above
        goal = goals[c.name]
        for metric, limit, figure in (("ttft_avg_ms", goal.ttft_avg_ms, c.ttft_ms.mean),
                                      ("ttft_p95_ms", goal.ttft_p95_ms, c.ttft_ms.p95),
                                      ("e2e_avg_ms", goal.e2e_avg_ms, c.e2e_ms.mean),
                                      ("e2e_p95_ms", goal.e2e_p95_ms, c.e2e_ms.p95)):
            if limit is not None and not figure <= limit:
                misses.append(Miss(MissKind.CLASS_TARGET, metric, _finite(figure), limit, c.name))
    if arrival is not None and served is not None and served < ladder.keep_up * arrival:
        misses.append(Miss(MissKind.FELL_BEHIND, "served_rps", served, arrival))
    offered = sum(class_rates(scenario, factor).values())
    if arrival is not None and arrival < REACHED * offered:
        # Poisson arrivals of five or more requests come this far below their rate about once in a thousand
        # steps; a fixed request count that a high rate spends at once, or turns held back by replies, always do.
        misses.append(Miss(MissKind.LOAD_NOT_REACHED, "arrival_rps", arrival, offered))
    if failure and stats.requests and not misses:
        misses.append(Miss(MissKind.NOT_MEASURED, "point", detail=failure + (
            f": {failure_detail}" if failure_detail else "")))
    rates = class_rates(scenario, factor)
    return CapacityStep(factor, sum(rates.values()), rates, arrival, served, stats, classes, tuple(misses), order,
                        vram_peak_mib, gpu_util_pct, tuple(records), failure, card_peak_mib=card_peak_mib)


# ---- the whole sweep ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Capacity:
    """A rate sweep's steps (ascending by rate) and its judgement."""

    scenario: Scenario  # as written (rates at factor 1)
    ladder: RateLadder
    steps: tuple[CapacityStep, ...] = ()
    setting: str = ""  # the server setting it ran at, in words
    targets: LatencyTargets = field(default_factory=LatencyTargets)
    cancelled: bool = False
    notes: tuple[str, ...] = ()

    def with_step(self, step: CapacityStep) -> Capacity:
        """A copy with one more step, the steps kept in ascending order."""
        return replace(self, steps=tuple(sorted((*self.steps, step), key=lambda s: s.factor)))

    @property
    def base_rps(self) -> float:
        """The scenario's own open-loop rate (factor 1)."""
        return open_rate(self.scenario)

    @property
    def broke_at(self) -> CapacityStep | None:
        """The lowest step that missed, None when none did."""
        return next((s for s in self.steps if not s.met), None)

    @property
    def sustained(self) -> CapacityStep | None:
        """The highest step that met every target below the lowest step that missed."""
        bad = self.broke_at
        good = [s for s in self.steps if s.met and (bad is None or s.factor < bad.factor)]
        return good[-1] if good else None

    @property
    def status(self) -> CapacityStatus:
        """Found, never met, never broke, or incomplete."""
        if not self.steps:
            return CapacityStatus.INCOMPLETE
        if self.sustained is None:
            return CapacityStatus.NEVER_MET
        if self.broke_at is None:
            return CapacityStatus.INCOMPLETE if self.cancelled else CapacityStatus.NEVER_BROKE
        if all(m.kind is MissKind.LOAD_NOT_REACHED for m in self.broke_at.misses):
            return CapacityStatus.LOAD_LIMITED  # what broke was the workload's reach, not the server
        return CapacityStatus.FOUND

    @property
    def sustainable_rps(self) -> float | None:
        """The sustainable total open-loop rate (requests/s); None when no step met the targets."""
        step = self.sustained
        return None if step is None else step.offered_rps

    @property
    def requests_per_day(self) -> float | None:
        """The sustainable rate times 86 400."""
        rate = self.sustainable_rps
        return None if rate is None else rate * SECONDS_PER_DAY

    @property
    def class_mix(self) -> dict[str, float]:
        """Each open-loop class's rate at the sustainable rate (requests/s); empty when none."""
        step = self.sustained
        return {} if step is None else dict(step.offered_per_class)

    @property
    def broke_by(self) -> tuple[Miss, ...]:
        """What the lowest missing step missed."""
        bad = self.broke_at
        return () if bad is None else bad.misses

    @property
    def unscaled(self) -> tuple[str, ...]:
        """The closed-loop classes, which run alongside unscaled."""
        return tuple(c.name for c in self.scenario.classes if not c.arrival.open)

    def next_factor(self) -> float | None:
        """The factor of the step to run next; None when the sweep is done."""
        if self.cancelled:
            return None
        return self.ladder.next_factor(self.base_rps, [(s.factor, s.met) for s in
                                                       sorted(self.steps, key=lambda s: s.order)])

    def summary(self) -> str:
        """One line, e.g. "sustainable: 2.4 requests/s ≈ 207,000 requests a day (customer-qa 1.2/s, …); broke at
        3.0/s: long-document E2E P95 9.1 s > 8 s"."""
        status = self.status
        rate = self.sustainable_rps
        bad = self.broke_at
        broke = (f"; broke at {bad.offered_rps:.3g}/s: " + "; ".join(m.words() for m in bad.misses)) if bad else ""
        if status is CapacityStatus.NEVER_MET:
            assert bad is not None
            return (f"not sustainable even at the lowest rate tried, {bad.offered_rps:.3g} requests/s: "
                    + "; ".join(m.words() for m in bad.misses))
        if rate is None:
            return "no step was measured" + (" (cancelled)" if self.cancelled else "")
        mix = ", ".join(f"{name} {r:.3g}/s" for name, r in self.class_mix.items())
        at_least = "at least " if status is not CapacityStatus.FOUND else ""
        line = (f"sustainable: {at_least}{rate:.3g} requests/s ≈ {at_least}{day_words(rate)} requests a day"
                f"{f' ({mix})' if len(self.class_mix) > 1 or self.unscaled else ''}")
        if status is CapacityStatus.NEVER_BROKE:
            line += "; no step up to the highest rate asked missed a target"
        if status is CapacityStatus.INCOMPLETE:
            line += "; cancelled before a step missed"
        if status is CapacityStatus.LOAD_LIMITED:
            line += "; no higher rate could be measured"
        if self.unscaled:
            line += f"; closed-loop {', '.join(self.unscaled)} ran alongside, not scaled"
        return line + broke

    def to_json(self, with_records: bool = False) -> dict[str, Any]:
        """Plain dict: the judgement's figures, the steps (with their requests when `with_records`)."""
        return {"scenario": self.scenario.to_json(), "ladder": self.ladder.to_json(), "setting": self.setting,
                "targets": self.targets.to_json(), "cancelled": self.cancelled, "notes": list(self.notes),
                "status": self.status.value, "base_rps": self.base_rps, "sustainable_rps": self.sustainable_rps,
                "requests_per_day": self.requests_per_day, "class_mix": self.class_mix,
                "broke_at_rps": self.broke_at.offered_rps if self.broke_at else None,
                "broke_by": [m.to_json() for m in self.broke_by], "summary": self.summary(),
                "unscaled_classes": list(self.unscaled),
                "steps": [s.to_json(with_records) for s in self.steps]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Capacity:
        """Inverse of to_json; the judgement (status, rate, what broke) follows from the steps as saved."""
        scenario = parse_scenario_data(data.get("scenario"), "the saved capacity's scenario")
        targets = LatencyTargets.from_json(data.get("targets") or {})
        names = [c.name for c in scenario.classes]
        goals = {c.name: c.targets for c in scenario.classes}
        steps = tuple(sorted((CapacityStep.from_json(s, names, targets, goals) for s in data.get("steps") or ()
                              if isinstance(s, dict)), key=lambda s: s.factor))
        return cls(scenario, RateLadder.from_json(data.get("ladder")), steps, str(data.get("setting", "")), targets,
                   bool(data.get("cancelled", False)), tuple(str(n) for n in data.get("notes") or ()))


def saved_capacity(data: Any) -> Capacity | None:
    """A run document's capacity section read back; None where there is none, or it is too damaged to read (its
    scenario unusable): the run itself still loads."""
    if not isinstance(data, dict):
        return None
    try:
        return Capacity.from_json(data)
    except (ValueError, TypeError, AttributeError):
        return None


def day_words(rate: float) -> str:
    """Requests a day, rounded to three figures: 207,000."""
    per_day = rate * SECONDS_PER_DAY
    if per_day < 1:
        return f"{per_day:.2g}"
    digits = max(0, int(math.floor(math.log10(per_day))) - 2)
    return f"{round(per_day, -digits):,.0f}"


CSV_COLUMNS = ("setting", "factor", "offered_rps", "arrival_rps", "achieved_rps", "requests", "requests_ok", "success_rate",
               "ttft_ms_mean", "ttft_ms_p95", "e2e_ms_mean", "e2e_ms_p95", "tpot_ms_p95", "output_tokens_per_s",
               "vram_peak_mib", "card_peak_mib", "gpu_util_pct", "met", "missed")


def capacity_rows(capacity: Capacity) -> list[dict[str, Any]]:
    """One flat row per step (CSV_COLUMNS), for CSV and tables."""
    rows = []
    for s in capacity.steps:
        flat = s.stats.flat()
        rows.append({"setting": capacity.setting, "factor": round(s.factor, 4), "offered_rps": round(s.offered_rps, 4),
                     "arrival_rps": None if s.arrival_rps is None else round(s.arrival_rps, 4),
                     "achieved_rps": None if s.achieved_rps is None else round(s.achieved_rps, 4),
                     "requests": s.stats.requests, "requests_ok": s.stats.requests_ok,
                     "success_rate": flat["success_rate"],
                     **{k: None if flat[k] is None else round(flat[k], 1) for k in
                        ("ttft_ms_mean", "ttft_ms_p95", "e2e_ms_mean", "e2e_ms_p95", "tpot_ms_p95")},
                     "output_tokens_per_s": round(s.stats.output_tokens_per_s, 2),
                     "vram_peak_mib": s.vram_peak_mib, "card_peak_mib": s.card_peak_mib,
                     "gpu_util_pct": s.gpu_util_pct, "met": s.met,
                     "missed": "; ".join(m.words() for m in s.misses)})
    return rows




def capacity_to_csv(*capacities: Capacity) -> str:
    """One row per step of each rate sweep (CSV_COLUMNS, the setting first; empty cells for unknown values)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for capacity in capacities:
        for row in capacity_rows(capacity):
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return out.getvalue()


def step_cells(step: CapacityStep) -> list[str]:
    """A step as table cells: offered, arrived, served (req/s), TTFT avg/P95, E2E avg/P95 (ms), ok, met?."""
    s = step.stats

    def ms(x: float) -> str:
        return f"{x:.0f}" if math.isfinite(x) else "–"

    def rps(x: float | None) -> str:
        return "–" if x is None else f"{x:.3g}"

    verdict = "✓" if step.met else "✖ " + "; ".join(m.words() for m in step.misses)
    return [rps(step.offered_rps), rps(step.arrival_rps), rps(step.achieved_rps), ms(s.ttft_ms.mean),
            ms(s.ttft_ms.p95), ms(s.e2e_ms.mean), ms(s.e2e_ms.p95), f"{s.requests_ok}/{s.requests}", verdict]


STEP_HEADER = ("offered/s", "arrived/s", "served/s", "TTFT avg", "TTFT P95", "E2E avg", "E2E P95", "ok", "met?")


def capacity_lines(capacity: Capacity) -> list[str]:
    """The rate sweep as an aligned text table (ms; per class under each step when the scenario has several),
    then the capacity line and the notes."""
    rows = [list(STEP_HEADER)]
    several = len(capacity.scenario.classes) > 1
    for step in capacity.steps:
        rows.append(step_cells(step))
        if several:
            for c in step.classes:
                cells = ["", "", f"  {c.name}", *(f"{x:.0f}" if math.isfinite(x) else "–" for x in
                                                    (c.ttft_ms.mean, c.ttft_ms.p95, c.e2e_ms.mean, c.e2e_ms.p95)),
                         f"{c.requests_ok}/{c.requests}", ""]
                rows.append(cells)
    widths = [max(len(r[i]) for r in rows) for i in range(len(STEP_HEADER) - 1)]
    table = ["  ".join([*(r[i].rjust(widths[i]) for i in range(len(widths))), r[-1]]).rstrip() for r in rows]
    head = f"Capacity of {capacity.scenario.name} at {capacity.setting or 'one setting'} (latency in ms):"
    return [head, *table, "", capacity.summary(), *(f"note: {n}" for n in capacity.notes)]


def capacity_markdown(capacity: Capacity) -> str:
    """A Markdown section: the steps' table and the capacity line."""
    lines = [f"## Capacity at {capacity.setting}" if capacity.setting else "## Capacity", "", f"Scenario {capacity.scenario.name} at {capacity.setting or 'one setting'}; "
             f"rates are the open-loop classes' total, latencies in ms.", "",
             "| " + " | ".join(STEP_HEADER) + " |", "|" + "---|" * len(STEP_HEADER)]
    lines += ["| " + " | ".join(step_cells(s)) + " |" for s in capacity.steps]
    lines += ["", f"**{capacity.summary()}**", *(f"- {n}" for n in capacity.notes)]
    return "\n".join(lines) + "\n"


__all__ = ["CSV_COLUMNS", "Capacity", "CapacityError", "CapacityStatus", "CapacityStep", "Miss", "MissKind",
           "RateLadder", "SECONDS_PER_DAY", "STEP_HEADER", "STEP_SECONDS", "make_ladder", "rate_sweep_refusal",
           "step_duration", "arrival_and_served", "at_factor", "capacity_lines",
           "capacity_markdown", "capacity_rows", "capacity_to_csv", "check_scalable", "class_rates", "day_words", "judge_step",
           "open_rate", "parse_rate_spec", "saved_capacity", "step_cells"]
