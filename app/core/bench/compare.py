"""Before and after: a scenario measured on the server's own default tuning and on the recommended setting,
side by side per request class and over all requests (average and P95 latency, end to end and to the first
token, with the change in %), with output tokens/s, the GPU's mean utilisation and peak VRAM, and requests
per day where a capacity was measured.

A side whose requests failed, whose prompts the server cut, or that shared its device with other programs is
shown as such: its figures are never counted as a win (nor a loss) against the other side.
Renderers: Markdown (the articles' tables), CSV (one row per figure) and JSON (to_json / from_json, which
reads documents with fields left out).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from app.core.bench.outcome import PROMPT_CUT_ERRORS, PointStatus
from app.core.bench.recommend import Recommendation
from app.core.bench.stats import RequestRecord, distribution
from app.core.bench.sweep import PointResult, SweepSpec
from app.core.server.mapping import ServerDefaults

SAME_WITHIN_PCT = 1.0  # a change smaller than this (in %) reads as no change
ALL_REQUESTS = "all requests"  # the overall row's name


class Outcome(StrEnum):
    """What the comparison could compare."""

    COMPARED = "compared"  # default and recommended are different points, both listed
    DEFAULT_RECOMMENDED = "default_recommended"  # the recommendation is the server's default itself
    NO_RECOMMENDATION = "no_recommendation"  # nothing could be recommended: only the default's figures
    DEFAULT_NOT_MEASURED = "default_not_measured"  # the default point did not run (skipped, failed to start)


class SideState(StrEnum):
    """How clean one side's measurement is; only CLEAN sides are compared."""

    CLEAN = "clean"  # every request succeeded, with its whole prompt
    TRUNCATED = "truncated"  # the server cut (or refused) prompts
    FAILURES = "failures"  # requests failed
    CONTENDED = "contended"  # other programs used the device meanwhile: not the setting's own numbers
    SPOILED = "spoiled"  # the server did something meanwhile that skews the figures (PointResult.spoiled_by)
    NOT_MEASURED = "not_measured"


class Change(StrEnum):
    """A figure's change from the default to the recommended setting."""

    BETTER = "better"
    WORSE = "worse"
    SAME = "same"  # within SAME_WITHIN_PCT
    NEUTRAL = "neutral"  # a figure that is neither better nor worse when it moves (VRAM, utilisation)
    NOT_COMPARABLE = "not_comparable"  # a side is not clean (see SideState)
    NOT_MEASURED = "not_measured"  # a figure is missing on a side


def _f(x: float | None) -> float | None:
    """None for a missing or non-finite number."""
    return None if x is None or not math.isfinite(x) else float(x)


@dataclass(frozen=True)
class Figures:
    """One side's figures for one class (or all requests): counts, latency in ms, output tokens/s."""

    requests: int = 0
    requests_ok: int = 0
    prompts_cut: int = 0  # truncated or refused as too long by the server
    e2e_mean_ms: float | None = None
    e2e_p95_ms: float | None = None
    ttft_mean_ms: float | None = None
    ttft_p95_ms: float | None = None
    tokens_per_s: float | None = None

    @property
    def failed(self) -> int:
        """Requests that did not succeed (prompts cut included)."""
        return self.requests - self.requests_ok

    def to_json(self) -> dict[str, Any]:
        """Plain dict."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Figures:
        """Inverse of to_json; absent fields take their defaults, unknown ones are ignored."""
        return cls(**{k: v for k, v in (data or {}).items() if k in cls.__dataclass_fields__})


def figures_of(records: Sequence[RequestRecord], window_s: float | None = None) -> Figures:
    """The figures of the counted (non-warm-up) records; tokens/s over `window_s` (default: their own span)."""
    counted = [r for r in records if not r.warmup]
    ok = [r for r in counted if r.ok]
    if window_s is None:
        window_s = (max(r.end_s for r in counted) - min(r.scheduled_s for r in counted)) if counted else 0.0
    e2e = distribution((r.e2e_s for r in ok), 1e3)
    ttft = distribution((r.ttft_s for r in ok), 1e3)
    return Figures(len(counted), len(ok), sum(1 for r in counted if r.error_kind in PROMPT_CUT_ERRORS),
                   _f(e2e.mean), _f(e2e.p95), _f(ttft.mean), _f(ttft.p95),
                   sum(r.output_tokens for r in ok) / window_s if ok and window_s > 0 else None)


@dataclass(frozen=True)
class Side:
    """One measured point of the comparison: which, how it went, and its point-wide figures."""

    index: int | None = None
    label: str = ""
    setting: str = ""  # its tuning in neutral words ("parallel 4, context 4096 per slot, KV f16, flash attention auto")
    status: str = ""  # the results table's "stable?" words
    state: SideState = SideState.NOT_MEASURED
    context_loaded: int | None = None  # what the server reported as loaded
    gpu_util_mean_pct: float | None = None
    vram_peak_mib: float | None = None  # the server's own peak (its processes' memory), None where not known
    requests_per_day: float | None = None  # a measured capacity, where one is known
    detail: str = ""  # the point's own words behind its status (for cut prompts: the context it needs)

    def to_json(self) -> dict[str, Any]:
        """Plain dict."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Side:
        """Inverse of to_json; absent fields take their defaults, an unknown state reads as not measured."""
        values = {k: v for k, v in (data or {}).items() if k in cls.__dataclass_fields__}
        try:
            values["state"] = SideState(values.get("state", SideState.NOT_MEASURED))
        except ValueError:
            values["state"] = SideState.NOT_MEASURED
        return cls(**values)


@dataclass(frozen=True)
class Delta:
    """One figure on both sides and what its change means."""

    before: float | None
    after: float | None
    change: Change
    pct: float | None = None  # (after − before) / before × 100

    @classmethod
    def of(cls, before: float | None, after: float | None, comparable: bool, lower_is_better: bool | None) -> Delta:
        """The delta; `lower_is_better` None for a figure that is neither better nor worse when it moves."""
        pct = (after - before) / before * 100 if before is not None and after is not None and before > 0 else None
        if before is None or after is None:
            return cls(before, after, Change.NOT_MEASURED, pct)
        if not comparable:
            return cls(before, after, Change.NOT_COMPARABLE, pct)
        if lower_is_better is None:
            return cls(before, after, Change.NEUTRAL, pct)
        if pct is None or abs(pct) < SAME_WITHIN_PCT:
            return cls(before, after, Change.SAME if pct is not None or before == after else Change.NEUTRAL, pct)
        better = (pct < 0) == lower_is_better
        return cls(before, after, Change.BETTER if better else Change.WORSE, pct)


@dataclass(frozen=True)
class ClassRow:
    """One scenario class (or all requests) on both sides."""

    name: str
    default: Figures = field(default_factory=Figures)
    recommended: Figures | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain dict."""
        return {"class": self.name, "default": self.default.to_json(),
                "recommended": None if self.recommended is None else self.recommended.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClassRow:
        """Inverse of to_json."""
        rec = data.get("recommended")
        return cls(str(data.get("class", "")), Figures.from_json(data.get("default")),
                   None if rec is None else Figures.from_json(rec))


# The latency figures of a class row: (label, Figures attribute); lower is better for all.
LATENCY = (("E2E avg", "e2e_mean_ms"), ("E2E P95", "e2e_p95_ms"), ("TTFT avg", "ttft_mean_ms"),
           ("TTFT P95", "ttft_p95_ms"))


@dataclass(frozen=True)
class BeforeAfter:
    """The comparison of a scenario run: the default side, the recommended side (None when nothing was
    recommended), per class and over all requests."""

    outcome: Outcome
    default: Side
    recommended: Side | None
    classes: tuple[ClassRow, ...] = ()
    overall: ClassRow = field(default_factory=lambda: ClassRow(ALL_REQUESTS))
    default_words: tuple[str, ...] = ()  # the server's defaults in its own words
    scenario: str = ""  # the scenario as one line
    why: str = ""  # the recommendation's words (why nothing could be recommended, when nothing was)

    def comparable(self, row: ClassRow) -> bool:
        """True when both sides are clean, for the points and for this row's requests."""
        rec = row.recommended
        return (self.recommended is not None and self.default.state is SideState.CLEAN
                and self.recommended.state is SideState.CLEAN and rec is not None
                and row.default.failed == 0 and rec.failed == 0 and row.default.requests > 0 and rec.requests > 0)

    def delta(self, row: ClassRow, attribute: str) -> Delta:
        """A latency figure of a row (lower is better), or tokens/s (higher is better)."""
        after = getattr(row.recommended, attribute) if row.recommended is not None else None
        return Delta.of(getattr(row.default, attribute), after, self.comparable(row),
                        attribute != "tokens_per_s")

    def point_delta(self, attribute: str) -> Delta:
        """A point-wide figure: VRAM and utilisation move neutrally, requests/day is better higher."""
        rec = self.recommended
        both = rec is not None and self.default.state is SideState.CLEAN and rec.state is SideState.CLEAN
        lower = None if attribute in ("vram_peak_mib", "gpu_util_mean_pct") else False
        return Delta.of(getattr(self.default, attribute), getattr(rec, attribute) if rec else None, both, lower)

    def with_capacity(self, default_rpd: float | None, recommended_rpd: float | None) -> BeforeAfter:
        """The comparison with requests/day from a measured capacity of either side (None: not measured)."""
        rec = replace(self.recommended, requests_per_day=recommended_rpd) if self.recommended else None
        return replace(self, default=replace(self.default, requests_per_day=default_rpd), recommended=rec)

    def to_json(self) -> dict[str, Any]:
        """Plain dict, with the changes spelled out for readers (from_json recomputes them)."""
        rows = [*self.classes, self.overall]
        return {
            "outcome": self.outcome.value, "scenario": self.scenario, "why": self.why,
            "default_words": list(self.default_words), "default": self.default.to_json(),
            "recommended": None if self.recommended is None else self.recommended.to_json(),
            "classes": [r.to_json() for r in self.classes], "overall": self.overall.to_json(),
            "changes": [{"class": r.name, "figure": attr, "change": d.change.value, "pct": _round(d.pct, 1)}
                        for r in rows for attr in (*(a for _l, a in LATENCY), "tokens_per_s")
                        for d in (self.delta(r, attr),)],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BeforeAfter:
        """Inverse of to_json; fields left out take their defaults, an unknown outcome reads as compared."""
        try:
            outcome = Outcome(data.get("outcome", Outcome.COMPARED))
        except ValueError:
            outcome = Outcome.COMPARED
        rec = data.get("recommended")
        return cls(outcome, Side.from_json(data.get("default")), None if rec is None else Side.from_json(rec),
                   tuple(ClassRow.from_json(r) for r in data.get("classes") or ()),
                   ClassRow.from_json(data["overall"]) if data.get("overall") else ClassRow(ALL_REQUESTS),
                   tuple(str(w) for w in data.get("default_words") or ()), str(data.get("scenario", "")),
                   str(data.get("why", "")))


def _round(x: float | None, digits: int) -> float | None:
    return None if x is None else round(x, digits)


def setting_words(r: PointResult) -> str:
    """A point's tuning in neutral words: parallel, context per slot, KV cache, flash attention, clients."""
    s = r.point.settings
    clients = "no client cap" if r.point.concurrency == 0 else f"{r.point.concurrency} clients"
    context = f"context {s.context_length} per slot" if s.context_length else "context: the server's default"
    return f"parallel {s.num_parallel}, {context}, KV {s.kv_cache_type}, flash attention {s.flash_attention}, {clients}"


def _state(r: PointResult) -> SideState:
    if r.stats is None or not r.stats.requests:  # a failed point that measured requests (cut prompts) has figures
        return SideState.NOT_MEASURED
    counted = [x for x in r.records if not x.warmup]
    if any(x.error_kind in PROMPT_CUT_ERRORS for x in counted):
        return SideState.TRUNCATED
    if r.stats.requests_failed or r.status not in (PointStatus.OK, PointStatus.UNSTABLE):
        return SideState.FAILURES
    if r.spoiled:
        return SideState.SPOILED
    if r.contention.contended:
        return SideState.CONTENDED
    return SideState.CLEAN


def _side(r: PointResult, varying: Sequence[str]) -> Side:
    return Side(r.point.index, r.point.label(varying), setting_words(r), r.stable_text(),
                _state(r) if r.stats is not None else SideState.NOT_MEASURED, r.context_length,
                _f(r.gpu.util_mean_pct), _f(r.gpu.server_peak_mib), detail=r.detail)


def _rows(default: PointResult, recommended: PointResult | None,
          class_names: Sequence[str]) -> tuple[tuple[ClassRow, ...], ClassRow]:
    def window(r: PointResult) -> float | None:
        return r.stats.duration_s if r.stats is not None else None

    def of(r: PointResult | None, name: str | None) -> Figures | None:
        if r is None:
            return None
        mine = [x for x in r.records if name is None or x.request_class == name]
        return figures_of(mine, window(r))

    classes = tuple(ClassRow(n, of(default, n) or Figures(), of(recommended, n)) for n in class_names)
    return classes, ClassRow(ALL_REQUESTS, of(default, None) or Figures(), of(recommended, None))


def before_after(results: Sequence[PointResult], recommendation: Recommendation | None, class_names: Sequence[str],
                 varying: Sequence[str] = ("parallel",), default_words: Sequence[str] = (),
                 scenario: str = "") -> BeforeAfter | None:
    """The comparison of a run's default point with its recommended point; None when no result is a default
    point (the run measured none)."""
    default = next((r for r in results if r.point.default), None)
    if default is None:
        return None
    best = next((r for r in results if recommendation is not None and r.point.index == recommendation.index), None)
    why = recommendation.text if recommendation is not None else ""
    if default.stats is None or not default.stats.requests:
        outcome = Outcome.DEFAULT_NOT_MEASURED
    elif best is None:
        outcome = Outcome.NO_RECOMMENDATION
    elif best is default:
        outcome = Outcome.DEFAULT_RECOMMENDED
    else:
        outcome = Outcome.COMPARED
    other = best if outcome in (Outcome.COMPARED, Outcome.DEFAULT_NOT_MEASURED) else None
    classes, overall = _rows(default, other, class_names)
    return BeforeAfter(outcome, _side(default, varying), None if other is None else _side(other, varying), classes,
                       overall, tuple(default_words), scenario, why)


def with_server_defaults(spec: SweepSpec, defaults: ServerDefaults) -> SweepSpec:
    """The sweep with the server's own default settings (`defaults` applied to the base: its host, port, model
    and options kept) measured as a point for the comparison, as the CLI's --compare and the Benchmark page ask;
    SweepPlanError when those cannot run here."""
    compared = replace(spec, default_settings=defaults.apply(spec.base), default_words=defaults.words)
    compared.plan()  # raises SweepPlanError early
    return compared


# ---- renderers ------------------------------------------------------------------------------------------------
STATE_WORDS = {SideState.CLEAN: "all requests succeeded", SideState.TRUNCATED: "prompts cut by the server",
               SideState.FAILURES: "requests failed", SideState.CONTENDED: "measured while other programs used the "
               "device", SideState.SPOILED: "measured while the server did something that skews the figures",
               SideState.NOT_MEASURED: "not measured"}


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x:.0f} ms"


def requests_per_day_words(c: BeforeAfter) -> str:
    """One sentence on each side's capacity, e.g. "Requests a day (capacity): default 10,800, recommended
    65,600 (↑507.5 % better)." — or that none was measured."""
    rec = c.recommended if c.outcome is not Outcome.DEFAULT_RECOMMENDED else None
    sides = [("default", c.default.requests_per_day)] + ([("recommended", rec.requests_per_day)] if rec else [])
    if all(value is None for _, value in sides):
        return "Requests a day: not measured (bench --rate-sweep measures each side's capacity)."
    figures = ", ".join(f"{name} {'—' if value is None else f'{value:,.0f}'}" for name, value in sides)
    change = change_text(c.point_delta("requests_per_day")) if rec is not None else "—"
    return f"Requests a day (capacity): {figures}" + (f" ({change})." if change != "—" else ".")


def change_text(d: Delta, unit_pp: bool = False) -> str:
    """A change for a table cell: "↓47.3 %" (better or worse, by the arrow and the word), "≈ (+0.4 %)", or why
    there is none ("not comparable", "—")."""
    if d.change is Change.NOT_MEASURED:
        return "—"
    if d.change is Change.NOT_COMPARABLE:
        return "not comparable"
    if unit_pp and d.before is not None and d.after is not None:
        diff = d.after - d.before
        return f"{'↑' if diff > 0 else '↓' if diff < 0 else '±'}{abs(diff):.0f} points"
    if d.pct is None:
        return "—"
    arrow = "↓" if d.pct < 0 else "↑"
    if d.change is Change.SAME:
        return f"≈ ({d.pct:+.1f} %)"
    word = {Change.BETTER: " better", Change.WORSE: " worse"}.get(d.change, "")
    return f"{arrow}{abs(d.pct):.1f} %{word}"


def _count(f: Figures | None) -> str:
    if f is None:
        return "—"
    cut = f", {f.prompts_cut} cut" if f.prompts_cut else ""
    return f"{f.requests_ok}/{f.requests}{cut}"


def _headline(c: BeforeAfter) -> str:
    d, r = c.default, c.recommended
    if c.outcome is Outcome.DEFAULT_RECOMMENDED:
        return (f"The recommendation is the server's default setting itself ({d.label}): there is nothing to "
                "change; the figures below are that one point's.")
    if c.outcome is Outcome.NO_RECOMMENDATION:
        state = "" if d.state is SideState.CLEAN else f" The default: {STATE_WORDS[d.state]} ({d.status})."
        fix = f" {d.detail}" if d.state is SideState.TRUNCATED and d.detail else ""
        return f"Nothing could be recommended, so only the default's figures are shown. {c.why}{state}{fix}".strip()
    if c.outcome is Outcome.DEFAULT_NOT_MEASURED:
        return (f"The server's default setting was not measured ({d.status}), so there is nothing to compare "
                "the recommendation with.")
    assert r is not None
    dirty = [f"the {name} side: {STATE_WORDS[s.state]} ({s.status})" for name, s in (("default", d), ("recommended", r))
             if s.state is not SideState.CLEAN]
    if dirty:
        fixes = " ".join(s.detail for s in (d, r) if s.state is SideState.TRUNCATED and s.detail)
        return ("Not a like-for-like comparison — " + "; ".join(dirty) + ". Such a side is shown as it was, never "
                "as a gain." + (f" {fixes}" if fixes else ""))
    return "Both sides ran every request with its whole prompt."


def to_markdown(c: BeforeAfter, title: str = "") -> str:
    """The article's tables: latency per class (average and P95, end to end and to the first token, with the
    change), then the point-wide figures (tokens/s, peak VRAM, GPU utilisation, requests/day)."""
    rec = c.recommended
    lines = [f"## Before/after{': ' + title if title else ''}", ""]
    if c.scenario:
        lines.append(f"- **Workload:** {c.scenario}")
    default_terms = "; ".join(c.default_words)
    lines.append(f"- **Default:** {c.default.label} — {c.default.setting}"
                 + (f" (the server's own: {default_terms})" if default_terms else "")
                 + (f"; loaded context {c.default.context_loaded}" if c.default.context_loaded else ""))
    if rec is not None:
        lines.append(f"- **Recommended:** {rec.label} — {rec.setting}"
                     + (f"; loaded context {rec.context_loaded}" if rec.context_loaded else ""))
    lines += ["", _headline(c), ""]
    rows = [*c.classes, c.overall]
    same = c.outcome is Outcome.DEFAULT_RECOMMENDED
    for title_words, mean_attr, p95_attr in (("End-to-end latency", "e2e_mean_ms", "e2e_p95_ms"),
                                             ("Time to first token", "ttft_mean_ms", "ttft_p95_ms")):
        lines += [f"### {title_words} per class", ""]
        if rec is None:
            lines += ["| Class | Requests ok | Default avg | Default P95 |", "|---|---|---|---|"]
            lines += [f"| {r.name} | {_count(r.default)} | {_ms(getattr(r.default, mean_attr))} | "
                      f"{_ms(getattr(r.default, p95_attr))} |" for r in rows]
        else:
            lines += ["| Class | Requests ok (default / recommended) | Default avg | Recommended avg | Change | "
                      "Default P95 | Recommended P95 | Change |", "|---|---|---|---|---|---|---|---|"]
            for r in rows:
                lines.append(f"| {r.name} | {_count(r.default)} / {_count(r.recommended)} | "
                             f"{_ms(getattr(r.default, mean_attr))} | {_ms(getattr(r.recommended, mean_attr))} | "
                             f"{change_text(c.delta(r, mean_attr))} | {_ms(getattr(r.default, p95_attr))} | "
                             f"{_ms(getattr(r.recommended, p95_attr))} | {change_text(c.delta(r, p95_attr))} |")
        if same:
            lines.append("")
            lines.append("(The recommended setting is the default: one point, no change.)")
        lines.append("")
    lines += ["### Throughput and resources", "",
              "| Figure | Default | Recommended | Change |" if rec is not None else "| Figure | Default |",
              "|---|---|---|---|" if rec is not None else "|---|---|"]
    tps = c.delta(c.overall, "tokens_per_s")
    figures = [("Output tokens/s", _num(c.overall.default.tokens_per_s, ".1f"),
                _num(c.overall.recommended.tokens_per_s if c.overall.recommended else None, ".1f"), change_text(tps)),
               ("Peak VRAM", _gib(c.default.vram_peak_mib), _gib(rec.vram_peak_mib if rec else None),
                _gib_change(c.point_delta("vram_peak_mib"))),
               ("GPU utilisation (mean)", _num(c.default.gpu_util_mean_pct, ".0f", " %"),
                _num(rec.gpu_util_mean_pct if rec else None, ".0f", " %"),
                change_text(c.point_delta("gpu_util_mean_pct"), unit_pp=True)),
               ("Requests/day (capacity)", _num(c.default.requests_per_day, ",.0f"),
                _num(rec.requests_per_day if rec else None, ",.0f"), change_text(c.point_delta("requests_per_day"))),
               ("Measurement", STATE_WORDS[c.default.state], STATE_WORDS[rec.state] if rec else "—", "")]
    for name, before, after, change in figures:
        lines.append(f"| {name} | {before} | {after} | {change} |" if rec is not None else f"| {name} | {before} |")
    notes = []
    if c.default.vram_peak_mib is None and (rec is None or rec.vram_peak_mib is None):
        notes.append("Peak VRAM is the server's own (its processes' memory); it and GPU utilisation are — where no "
                     "GPU could be read (no NVIDIA GPU or NVML), and Peak VRAM also where the driver does not say "
                     "what each process holds or the server runs elsewhere.")
    if c.default.requests_per_day is None and (rec is None or rec.requests_per_day is None):
        notes.append("Requests/day: — because this run measured no capacity (bench --rate-sweep measures the "
                     "sustainable rate at the recommended point).")
    elif c.default.requests_per_day is None:
        notes.append("Requests/day of the default: — (the rate sweep ran at the recommended point only).")
    notes.append(f"Changes within {SAME_WITHIN_PCT:g} % read as ≈; a side with failed or cut requests, or measured "
                 "while other programs used the device, is \"not comparable\".")
    lines += [""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def _num(x: float | None, fmt: str, unit: str = "") -> str:
    return "—" if x is None else format(x, fmt) + unit


def _gib(mib: float | None) -> str:
    return "—" if mib is None else f"{mib / 1024:.2f} GiB"


def _gib_change(d: Delta) -> str:
    if d.change in (Change.NOT_MEASURED, Change.NOT_COMPARABLE) or d.before is None or d.after is None:
        return change_text(d)
    diff = (d.after - d.before) / 1024
    return f"{'↑' if diff > 0 else '↓' if diff < 0 else '±'}{abs(diff):.2f} GiB"


CSV_COLUMNS = ("scope", "figure", "unit", "default", "recommended", "change_pct", "change")


def to_csv(c: BeforeAfter) -> str:
    """One row per class and figure (and per point-wide figure, scope "point"); empty cells where unknown."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)

    def row(scope: str, figure: str, unit: str, d: Delta) -> None:
        writer.writerow([scope, figure, unit, "" if d.before is None else round(d.before, 3),
                         "" if d.after is None else round(d.after, 3), "" if d.pct is None else round(d.pct, 2),
                         d.change.value])

    for r in [*c.classes, c.overall]:
        writer.writerow([r.name, "requests_ok", "requests", r.default.requests_ok,
                         "" if r.recommended is None else r.recommended.requests_ok, "", ""])
        writer.writerow([r.name, "prompts_cut", "requests", r.default.prompts_cut,
                         "" if r.recommended is None else r.recommended.prompts_cut, "", ""])
        for attr in (*(a for _l, a in LATENCY), "tokens_per_s"):
            row(r.name, attr, "tokens/s" if attr == "tokens_per_s" else "ms", c.delta(r, attr))
    for attr, unit in (("vram_peak_mib", "MiB"), ("gpu_util_mean_pct", "%"), ("requests_per_day", "requests")):
        row("point", attr, unit, c.point_delta(attr))
    return out.getvalue()


__all__ = ["with_server_defaults", "ALL_REQUESTS", "BeforeAfter", "CSV_COLUMNS", "Change", "ClassRow", "Delta", "Figures", "LATENCY",
           "Outcome", "SAME_WITHIN_PCT", "STATE_WORDS", "Side", "SideState", "before_after", "change_text", "figures_of",
           "setting_words", "to_csv", "to_markdown"]
