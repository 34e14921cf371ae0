"""A whole sweep run (spec, fingerprint, point results, recommendation) and its exports: the
JSON the `bench` command writes, CSV with one row per point, and a Markdown report."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, replace
from typing import Any
from collections.abc import Mapping, Sequence

from app.core.bench.capacity import Capacity, CapacityStatus, saved_capacity
from app.core.bench.compare import BeforeAfter, Outcome, before_after, to_markdown as comparison_markdown
from app.core.bench.contention import Contention
from app.core.bench.outcome import RunStatus, failure_of_saved, saved_point_status, saved_run_status
from app.core.memory.verdict import saved_verdict
from app.core.bench.stats import LatencyTargets, PointStats, RequestRecord, summarize
from app.core.bench.waiting import wait_split, waits_markdown
from app.core.bench.balance import Balance
from app.core.bench.sweep import (Fingerprint, GpuFigures, PointResult, ServerFigures, SweepPoint, SweepSpec,
                                  server_label, server_text)
from app.core.bench.recommend import Recommendation, recommend
from app.core.bench.failed_prompts import failed_prompts, failed_prompts_json, failed_prompts_markdown
from app.core.bench.vram import card_cell, estimate_lines, peak_cell, unknown_note
from app.core.saved_format import SavedFormat
from app.core.server.settings import FIELD_LABELS
from app.core.watch.events import events_from_json, events_markdown, worst



@dataclass(frozen=True)
class SweepRun:
    """One sweep as it ran; `results` follow the plan's order (fewer while running)."""

    spec: SweepSpec
    fingerprint: Fingerprint
    points: tuple[SweepPoint, ...]
    varying: tuple[str, ...]
    results: tuple[PointResult, ...] = ()
    recommendation: Recommendation | None = None
    status: RunStatus = RunStatus.RUNNING
    started_at: str = ""  # ISO 8601 with offset
    finished_at: str = ""
    notes: tuple[str, ...] = ()
    run_id: int | None = None  # the history's id once stored
    # The targets it was measured with, once it is judged against others (spec.targets); None: not re-judged.
    ran_with: LatencyTargets | None = None
    capacity: Capacity | None = None  # a rate sweep run at one of its points after the sweep (None: none asked)
    # With a default point beside another recommended one: the same rate sweep at the server's default setting.
    default_capacity: Capacity | None = None
    # The server's default setting against the recommended one, for a run that measured a default point.
    comparison: BeforeAfter | None = None

    def with_result(self, result: PointResult) -> SweepRun:
        """A copy with one more point result."""
        return replace(self, results=self.results + (result,))

    def finished(self, status: RunStatus, finished_at: str) -> SweepRun:
        """A copy marked finished (or cancelled) with its recommendation."""
        done = replace(self, status=status, finished_at=finished_at,
                       recommendation=recommend(self.results, self.spec.targets, self.varying))
        return replace(done, comparison=compared(done))

    def with_targets(self, targets: LatencyTargets) -> SweepRun:
        """The run judged against other targets: statistics and recommendation recomputed; `ran_with` keeps
        the targets it was measured with (None again when judged against those)."""
        results = tuple(r.restat(targets) for r in self.results)
        spec = replace(self.spec, targets=targets)
        ran_with = self.ran_with or self.spec.targets
        judged = replace(self, spec=spec, results=results, recommendation=recommend(results, targets, self.varying),
                         ran_with=None if targets == ran_with else ran_with)
        return replace(judged, comparison=compared(judged))

    def result_for(self, index: int | None) -> PointResult | None:
        """The result of point `index`, or None."""
        return next((r for r in self.results if r.point.index == index), None)

    @property
    def title(self) -> str:
        """One line naming the run, e.g. "qwen3:14b · NVIDIA GeForce RTX 4090 · 2026-08-01 21:04"."""
        parts = [self.fingerprint.model or self.spec.workload.model]
        if self.fingerprint.gpu_name:
            parts.append(self.fingerprint.gpu_name)
        if self.started_at:
            parts.append(self.started_at[:16].replace("T", " "))
        return " · ".join(parts)


def _found(capacity: Capacity | None) -> float | None:
    """The requests/day of a rate sweep that found a sustainable rate (None: none run, or none found)."""
    return capacity.requests_per_day if capacity is not None and capacity.status is CapacityStatus.FOUND else None


def compared(run: SweepRun) -> BeforeAfter | None:
    """The run's default point against its recommendation (None without a default point), with requests/day
    where a rate sweep at that side's setting found a sustainable rate."""
    if run.spec.default_settings is None:
        return None
    scenario = run.spec.workload.scenario
    names = [c.name for c in scenario.classes] if scenario is not None else []
    about = scenario.describe() if scenario is not None else run.spec.workload.describe(per_point_clients=True)
    comparison = before_after(run.results, run.recommendation, names, run.varying, run.spec.default_words, about)
    if comparison is None:
        return None
    if comparison.outcome is Outcome.DEFAULT_RECOMMENDED:  # one setting: its rate sweep is the default's
        return comparison.with_capacity(_found(run.capacity), None)
    if comparison.outcome in (Outcome.COMPARED, Outcome.DEFAULT_NOT_MEASURED):  # run at the recommended point
        return comparison.with_capacity(_found(run.default_capacity), _found(run.capacity))
    return comparison.with_capacity(_found(run.default_capacity), None)


def chart_title(run: SweepRun, labels: Mapping[str, str]) -> str:
    """The title an exported chart carries: model, server and version, GPU and date, e.g.
    "qwen3:14b on <server> 0.12.6 · NVIDIA GeForce RTX 4090 · 2026-08-01 21:04" (`labels`: see server_label)."""
    f = run.fingerprint
    server = server_text(f.backend_kind, f.server_version, labels)
    parts = [f"{f.model or run.spec.workload.model} on {server}", f.gpu_name or "no NVIDIA GPU readings"]
    if run.started_at:
        parts.append(run.started_at[:16].replace("T", " "))
    return " · ".join(parts)


def _num(x: float | None, digits: int = 1) -> float | None:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return None
    return round(x, digits)


def point_row(r: PointResult) -> dict[str, Any]:
    """One point as a flat dict: the `bench --json` point object and the CSV row."""
    s = r.point.settings
    row: dict[str, Any] = {
        "index": r.point.index, "parallel": r.point.parallel, "concurrency": r.point.concurrency,
        "kv_cache_type": s.kv_cache_type if r.point.server_known else None,
        "context_length": s.context_length if r.point.server_known else None,
        "flash_attention": s.flash_attention if r.point.server_known else None,
        "status": r.status, "reason": r.reason, "detail": r.detail, "stable": r.stable_text(),
    }
    stats = r.stats.flat() if r.stats else {}
    row.update({"requests_ok": stats.get("requests_ok", 0), "requests_failed": stats.get("requests_failed", 0)})
    row.update({k: v for k, v in stats.items() if k not in row})
    row.update({
        # Peak VRAM is the server's own (its processes' memory, what the estimate prices); the card's counts every
        # program on it. vram_peak_unknown says why the server's is null where the card was read.
        "vram_peak_mib": _num(r.gpu.server_peak_mib),
        "vram_peak_unknown": r.gpu.server_unknown.value if r.gpu.server_unknown is not None else None,
        "card_vram_peak_mib": _num(r.gpu.card_peak_mib), "card_vram_baseline_mib": _num(r.gpu.card_baseline_mib),
        "estimate_error_mib": _num(r.estimate_error_mib), "estimate_error_pct": _num(r.estimate_error_pct),
        "gpu_util_mean_pct": _num(r.gpu.util_mean_pct), "power_mean_w": _num(r.gpu.power_mean_w),
        "energy_j": _num(r.gpu.energy_j), "tokens_per_joule": _num(r.tokens_per_joule, 3),
        "estimate_verdict": r.estimate_verdict, "estimate_peak_mib": _num(r.estimate_peak_mib),
        "loaded_size_mib": _num(r.loaded_size_mib), "loaded_vram_mib": _num(r.loaded_vram_mib),
        "loaded_context_length": r.context_length, "elapsed_s": _num(r.elapsed_s, 2),
        "server_slots_total": r.server.slots_total, "server_slots_busy_max": r.server.slots_busy_max,
        "server_slots_busy_mean": _num(r.server.slots_busy_mean, 2),
        "server_requests_deferred_max": r.server.requests_deferred_max,
        "server_requests_running_max": r.server.requests_running_max,
        "server_kv_fill_max_pct": _num(r.server.kv_fill_max_pct),
        "server_generated_tokens": _num(r.server.generated_tokens, 0),
        "server_generation_tokens_per_s": _num(r.server.generation_tokens_per_s),
        # What else used the device while the point was measured (kind: none, cpu, gpu or unmeasured).
        "contention": r.contention.kind.value, "contention_cpu_others_pct": r.contention.cpu_others_pct,
        "contention_cpu_idle_pct": r.contention.cpu_idle_pct, "contention_gpu_others_pct": r.contention.gpu_others_pct,
        "contention_top": r.contention.top_text or None, "contention_top_pct": r.contention.top_pct,
    })
    if r.stats:
        row.update(wait_split(r.stats, r.server.requests_deferred_max).to_json())
    # What the server did without saying so while the point ran; spoiled_by: the kinds that make it not stable.
    severity = worst(r.events)
    row.update({"event_count": len(r.events), "events_worst": severity.label if severity is not None else None,
                "spoiled_by": [k.value for k in r.spoiled_by], "events": [e.to_json() for e in r.events]})
    if r.point.default:  # the server's own default setting (only then: other rows stay as they were)
        row["default"] = True
    if r.balance is not None:  # measured at a balancer: each backend's share from its own counters
        row.update(balance_columns(r.balance))
    if not r.stats:
        row.setdefault("output_tokens_per_s", None)
        for key in ("ttft_ms_mean", "ttft_ms_p50", "ttft_ms_p95", "tpot_ms_p50", "tpot_ms_p95", "e2e_ms_p95"):
            row.setdefault(key, None)
    return row


def run_to_json(run: SweepRun, saved: SavedFormat, with_records: bool = False) -> dict[str, Any]:
    """The run as JSON: `points` (one object per point, see point_row) and `recommendation`, plus the
    fingerprint (under the keys `saved` gives), workload, axes and targets; with_records adds every request."""
    rec = run.recommendation
    data: dict[str, Any] = {
        "title": run.title, "status": run.status, "started_at": run.started_at, "finished_at": run.finished_at,
        "fingerprint": run.fingerprint.to_json(saved), "spec": run.spec.to_json(), "varying": list(run.varying),
        "workload": run.spec.workload.describe(per_point_clients=True), "targets": run.spec.targets.to_json(),
        "points": [point_row(r) for r in run.results], "notes": list(run.notes),
        "recommendation": None if rec is None else {
            **rec.to_json(), "point": point_row(best) if (best := run.result_for(rec.index)) is not None else None},
        "planned_points": [p.to_json() for p in run.points],
        # every measured request that failed, by what it sent: where, how, after how many tokens
        "failed_prompts": failed_prompts_json(failed_prompts(run.results, run.spec.workload)),
    }
    if run.ran_with is not None:
        data["ran_with_targets"] = run.ran_with.to_json()
    if run.comparison is not None:
        data["comparison"] = run.comparison.to_json()
    if with_records:
        data["results"] = [result_to_json(r) for r in run.results]
    if run.capacity is not None:
        data["capacity"] = run.capacity.to_json(with_records)
    if run.default_capacity is not None:
        data["default_capacity"] = run.default_capacity.to_json(with_records)
    return data


def result_to_json(r: PointResult) -> dict[str, Any]:
    """A point result with its request records (no derived statistics: those are recomputed) and, where it saw
    any, its events."""
    data = {"point": r.point.to_json(), "status": r.status, "reason": r.reason,
            "records": [rec.to_json() for rec in r.records], "measured": r.stats is not None,
            "gpu": r.gpu.to_json(), "server": r.server.to_json(), "estimate_verdict": r.estimate_verdict,
            "estimate_peak_mib": r.estimate_peak_mib, "loaded_size_mib": r.loaded_size_mib,
            "loaded_vram_mib": r.loaded_vram_mib, "context_length": r.context_length, "elapsed_s": r.elapsed_s,
            "detail": r.detail, "contention": r.contention.to_json()}
    if r.events:
        data["events"] = [e.to_json() for e in r.events]
    if r.balance is not None:
        data["balance"] = r.balance.to_json()
    return data


def result_from_json(data: dict[str, Any], targets: LatencyTargets, saved: SavedFormat) -> PointResult:
    """Inverse of result_to_json; statistics are recomputed from the records (`saved`: see SweepPoint.from_json)."""
    records = tuple(RequestRecord.from_json(x) for x in data.get("records") or [])
    stats: PointStats | None = summarize(records, targets) if data.get("measured") else None
    gpu = GpuFigures.from_json(data.get("gpu"))
    status = saved_point_status(data.get("status", "failed"))
    reason = str(data.get("reason", ""))
    contention = Contention.from_json(data.get("contention"))
    return PointResult(SweepPoint.from_json(data.get("point") or {}, saved), status,
                       reason, stats, records, gpu,
                       server=ServerFigures.from_json(data.get("server")),
                       estimate_verdict=saved_verdict(data.get("estimate_verdict")), estimate_peak_mib=data.get("estimate_peak_mib"),
                       loaded_size_mib=data.get("loaded_size_mib"), loaded_vram_mib=data.get("loaded_vram_mib"),
                       context_length=data.get("context_length"), elapsed_s=float(data.get("elapsed_s") or 0.0),
                       detail=str(data.get("detail", "")),
                       # Absent in points stored before it was measured: they read as not measured.
                       contention=contention,
                       # Absent in points stored before they were watched; an entry it cannot read is skipped.
                       events=events_from_json(data.get("events")),
                       # Absent in points not measured at a balancer (and in every run kept before there were any).
                       balance=Balance.from_json(data.get("balance")),
                       # Not saved: read back from what the point holds.
                       failure=failure_of_saved(status, reason, stats.errors if stats else None,
                                                contention.short_text()))


def run_from_json(data: dict[str, Any], saved: SavedFormat, run_id: int | None = None) -> SweepRun:
    """A run saved by run_to_json(with_records=True) in the format `saved` describes; the recommendation is
    recomputed."""
    spec = SweepSpec.from_json(data.get("spec") or {}, saved)
    results = tuple(result_from_json(x, spec.targets, saved) for x in data.get("results") or [])
    points = tuple(SweepPoint.from_json(p, saved) for p in data.get("planned_points") or [])
    varying = tuple(data.get("varying") or ("parallel", "concurrency"))
    run = SweepRun(spec, Fingerprint.from_json(data.get("fingerprint") or {}, saved), points, varying, results,
                   None, saved_run_status(data.get("status", RunStatus.FINISHED)), str(data.get("started_at", "")),
                   str(data.get("finished_at", "")), tuple(data.get("notes") or ()), run_id,
                   LatencyTargets.from_json(data["ran_with_targets"]) if data.get("ran_with_targets") else None,
                   # Absent in runs without a rate sweep and in every run stored before there were any.
                   saved_capacity(data.get("capacity")), saved_capacity(data.get("default_capacity")))
    if not results:
        return run
    run = replace(run, recommendation=recommend(results, spec.targets, varying))
    return replace(run, comparison=compared(run))  # recomputed from the records, as the recommendation is


CSV_COLUMNS = ("index", "parallel", "concurrency", "kv_cache_type", "context_length", "flash_attention", "status",
               "reason", "requests", "requests_ok", "requests_failed", "success_rate", "duration_s",
               "output_tokens", "output_tokens_per_s", "requests_per_s", "goodput_rps",
               "ttft_ms_mean", "ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p95", "ttft_ms_p99",
               "tpot_ms_mean", "tpot_ms_p50", "tpot_ms_p90", "tpot_ms_p95", "tpot_ms_p99",
               "itl_ms_p50", "itl_ms_p95", "itl_ms_p99", "e2e_ms_mean", "e2e_ms_p50", "e2e_ms_p95", "e2e_ms_p99",
               "wait_ms_mean", "wait_ms_p95", "request_tokens_per_s_mean", "server_decode_tokens_per_s_mean",
               "server_prompt_tokens_per_s_mean", "vram_peak_mib", "gpu_util_mean_pct", "power_mean_w",
               "energy_j", "tokens_per_joule", "estimate_verdict", "loaded_size_mib", "loaded_vram_mib",
               "elapsed_s", "server_slots_total", "server_slots_busy_max", "server_slots_busy_mean",
               "server_requests_deferred_max", "server_requests_running_max", "server_kv_fill_max_pct",
               "server_generated_tokens", "server_generation_tokens_per_s", "contention", "contention_cpu_others_pct",
               "contention_cpu_idle_pct", "contention_gpu_others_pct", "contention_top", "contention_top_pct",
               # TTFT's parts and where requests waited (the client queue is queue_ms)
               "queue_ms_mean", "queue_ms_p95", "server_wait_ms_mean", "server_wait_ms_p95", "prefill_ms_mean",
               "prefill_ms_p95", "first_token_rest_ms_mean", "prefill_tokens_per_s_mean", "cache_hit_share",
               "waited_most", "waited_for_slot",
               # what the server did without saying so while the point ran (see the JSON's events)
               "event_count", "events_worst", "spoiled_by",
               # the server's own peak beside the estimate and the whole card's (vram_peak_mib is the server's)
               "vram_peak_unknown", "card_vram_peak_mib", "estimate_peak_mib", "estimate_error_mib",
               "estimate_error_pct",
               # measured at a balancer: each backend's share, from its own counters (see the JSON's balance)
               "balance", "balance_verdict", "balance_measure")


def balance_columns(balance: Balance) -> dict[str, Any]:
    """A point's shares behind a balancer, for its JSON object and its CSV row."""
    return {"balance": balance.to_json(), "balance_verdict": balance.verdict.value,
            "balance_measure": balance.measure.value if balance.measure is not None else None}


def run_to_csv(run: SweepRun) -> str:
    """One row per point with CSV_COLUMNS (empty cells for unknown values)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for r in run.results:
        row = point_row(r)
        row["spoiled_by"] = " ".join(row["spoiled_by"])
        if r.balance is not None:
            row["balance"] = r.balance.cell()
        writer.writerow({k: "" if row.get(k) is None else row.get(k) for k in CSV_COLUMNS})
    return out.getvalue()


def _cell(x: float | None, fmt: str) -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, fmt)


def reports_server(results: Sequence[PointResult]) -> bool:
    """True when the server's own readings (slots, waiting requests, its tokens/s) were taken at some point."""
    return any(r.server.samples for r in results)


def slots_cell(r: PointResult) -> str:
    """The most slots seen busy over the slots there are ("4/4"); for a server without slots
    the most requests it reported running at once ("12"); — when the server said neither."""
    f = r.server
    if f.slots_busy_max is None:
        return "—" if f.requests_running_max is None else str(f.requests_running_max)
    return f"{f.slots_busy_max}/{f.slots_total}" if f.slots_total is not None else str(f.slots_busy_max)


def server_cells(r: PointResult) -> list[str]:
    """The SERVER_HEADER cells of one point."""
    f = r.server
    return [slots_cell(r), _cell(None if f.requests_deferred_max is None else float(f.requests_deferred_max), ".0f"),
            _cell(f.generation_tokens_per_s, ".1f")]


def behind_balancer(results: Sequence[PointResult]) -> bool:
    """True when some point was measured at a balancer, with its backends' shares."""
    return any(r.balance is not None for r in results)


def table_header(results: Sequence[PointResult]) -> tuple[str, ...]:
    """TABLE_HEADER, with the server's own columns before "Stable?" when it reported them, and the backends'
    shares behind a balancer."""
    extra = (SERVER_HEADER if reports_server(results) else ()) + (BALANCE_HEADER if behind_balancer(results) else ())
    return TABLE_HEADER[:-1] + extra + TABLE_HEADER[-1:]


def table_rows(results: Sequence[PointResult]) -> list[list[str]]:
    """The articles' table as text cells: setting, tokens/s, TTFT avg/p95, TPOT p95, the server's peak VRAM and the
    card's, tokens/J, stable?
    (with the server's slots busy, requests waiting and its own tokens/s before "stable?" when it reported them)."""
    rows = []
    server = reports_server(results)
    balanced = behind_balancer(results)
    for r in results:
        s = r.stats if r.ran else None
        rows.append([
            ("—" if r.point.parallel is None else str(r.point.parallel)) + (" (default)" if r.point.default else ""),
            str(r.point.concurrency),
            _cell(s.output_tokens_per_s if s else None, ".1f"), _cell(s.ttft_ms.mean if s else None, ".0f"),
            _cell(s.ttft_ms.p95 if s else None, ".0f"), _cell(s.tpot_ms.p95 if s else None, ".1f"),
            peak_cell(r), card_cell(r), _cell(r.tokens_per_joule, ".2f"),
            *(server_cells(r) if server else []),
            *([r.balance.cell() if r.balance is not None else "—"] if balanced else []), r.stable_text()])
    return rows


TABLE_HEADER = ("Parallel", "Clients", "Tokens/s", "TTFT avg (ms)", "TTFT p95 (ms)", "TPOT p95 (ms)",
                "Peak VRAM (GiB)", "Card VRAM (GiB)", "Tokens/J", "Stable?")
# The server's own view, where it reports one: the most slots busy at once (of all), the most requests
# waiting for a free slot, and its generated-tokens counter over the measured window per second.
SERVER_HEADER = ("Slots busy", "Waiting", "Server tok/s")
# Each backend's share of the work at a balancer (of requests where every backend counts them, else of tokens).
BALANCE_HEADER = ("Behind the balancer",)


def run_to_markdown(run: SweepRun, labels: Mapping[str, str]) -> str:
    """A report: what was measured where, the table, and the recommendation (`labels`: see server_label)."""
    f = run.fingerprint
    lines = [f"# Sweep: {run.title}", ""]
    about = ", ".join(x for x in (" ".join(y for y in (f.model_parameters, f.model_quantization) if y),
                                   f"digest {f.model_digest[:12]}" if f.model_digest else "") if x)
    facts = [("Model", f"{f.model} ({about})" if about else f.model),
             ("GPU", f"{f.gpu_name or 'no NVIDIA GPU readings'}" + (f", driver {f.gpu_driver}" if f.gpu_driver else "")
              + (f", {f.gpu_memory_mib:.0f} MiB" if f.gpu_memory_mib else "")),
             ("Server", f"{server_label(f.backend_kind, labels)} {f.server_version or '(unknown version)'}, "
                        + ("managed by ollama-deck (restarted per point)" if f.managed else "attached (server settings fixed)")),
             ("Workload", run.spec.workload.describe(per_point_clients=True)), ("Targets", run.spec.targets.describe()),
             ("Status", run.status + (f", {run.started_at} – {run.finished_at}" if run.finished_at else ""))]
    lines += [f"- **{k}:** {v}" for k, v in facts]
    header = table_header(run.results)
    lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    rec_index = run.recommendation.index if run.recommendation else None
    for r, cells in zip(run.results, table_rows(run.results)):
        if r.point.index == rec_index:
            cells = [f"**{c}**" for c in cells]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    note = unknown_note(run.results)
    lines += ["", note] if note else []
    lines += waits_markdown(run.results, run.varying, closed_loop(run))
    lines += balance_markdown(run.results, run.varying)
    estimates = estimate_lines(run.results, run.varying)
    if estimates:
        lines += ["", "## VRAM: the estimate against the server's own peak", "",
                  *[f"- {line}" for line in estimates]]
    lines += failed_prompts_markdown(failed_prompts(run.results, run.spec.workload))
    if run.recommendation:
        lines += ["", "## Recommendation", "", run.recommendation.text]
    contended = [r for r in run.results if r.contention.contended]
    if contended:
        lines += ["", "## Contended points", ""] + [f"- {r.point.label(run.varying)}: {r.contention.text()}"
                                                     for r in contended]
    watched = [r for r in run.results if r.events]
    if watched:
        lines += ["", "## Server events", "", "What the server did without saying so while each point ran; a point "
                  "with a prompt cut short, layers on the CPU, a cold load, a restart or a GPU slowdown is not stable "
                  "and is not recommended."]
        for r in watched:
            lines += ["", f"### {r.point.label(run.varying)}", "", *events_markdown(r.events)]
    if run.notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in run.notes]
    if run.comparison is not None:
        lines += ["", comparison_markdown(run.comparison).rstrip("\n")]
    base = f.base_settings
    if base:
        lines += ["", "## Base settings", ""] + [f"- **{setting_label(k)}:** {value_text(v)}" for k, v in base.items()]
    return "\n".join(lines) + "\n"


def balance_markdown(results: Sequence[PointResult], varying: Sequence[str]) -> list[str]:
    """The report's section on each backend's share behind the balancer, per point ([] when none was measured
    at one)."""
    points = [r for r in results if r.balance is not None]
    if not points:
        return []
    lines = ["", "## Behind the balancer", "", "Each backend's share of the point's work, read from that backend's "
             "own counters right before and after the counted window (never from what the client saw)."]
    for r in points:
        assert r.balance is not None
        warn = " ⚠" if r.balance.warns else ""
        lines += ["", f"### {r.point.label(varying)}: {r.balance.cell()}{warn}", "",
                  *[f"- {line}" for line in r.balance.lines()]]
    return lines


def closed_loop(run: SweepRun) -> bool:
    """True when the run's concurrency is a number of clients (a closed loop), not a cap on requests in flight."""
    return run.spec.workload.scenario is None and run.spec.workload.mode == "closed"


def setting_label(name: str) -> str:
    """A settings file's key as the form labels it ("num_parallel" -> "Parallel requests")."""
    return FIELD_LABELS.get(name, name.replace("_", " ").capitalize())


def value_text(value: object) -> str:
    """A setting's value for people: "—" for none or empty, on/off for flags, "key: value" pairs for
    a mapping (e.g. "binary: /opt/server/bin/serve"), never a Python repr."""
    if value is None or value == "" or value == {} or value == [] or value == ():
        return "—"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, Mapping):
        shown = [f"{k}: {value_text(v)}" for k, v in value.items()]
        return "; ".join(shown)
    if isinstance(value, (list, tuple)):
        return ", ".join(value_text(v) for v in value)
    if isinstance(value, str) and "\n" in value:
        return "; ".join(line for line in value.splitlines() if line.strip()) or "—"
    return str(value)


__all__ = ["chart_title", "closed_loop", "compared", "CSV_COLUMNS", "SERVER_HEADER",
           "SweepRun", "TABLE_HEADER", "point_row", "reports_server", "result_from_json", "result_to_json",
           "run_from_json", "run_to_csv", "run_to_json", "run_to_markdown", "server_cells", "slots_cell",
           "setting_label", "table_header", "table_rows", "value_text"]
