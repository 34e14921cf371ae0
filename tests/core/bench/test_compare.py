"""The before/after comparison: changes in %, sides that failed or were cut never win, missing figures, the
renderers, the default point in a sweep's plan and in a run document."""

from __future__ import annotations

import csv
import io
import json

import pytest

from app.core.bench.compare import (ALL_REQUESTS, BeforeAfter, Change, Delta, Outcome, SideState, before_after,
                                    figures_of, requests_per_day_words, to_csv, to_markdown)
from app.core.bench.outcome import PointStatus, RunStatus
from app.core.bench.recommend import Recommendation, recommend
from app.core.bench.run import SweepRun, compared, run_from_json, run_to_json, run_to_markdown, table_rows
from app.core.bench.stats import LatencyTargets, RequestRecord, summarize
from app.core.bench.sweep import (Fingerprint, GpuFigures, PointResult, SweepAxes, SweepPlanError, SweepPoint,
                                  SweepSpec, plan_sweep)
from app.core.bench.workload import LoadPlan
from app.core.saved_format import SavedFormat
from app.core.server.mapping import NeutralTuning, ServerDefaults
from app.core.server.settings import ServerSettings

SAVED = SavedFormat()
CLASSES = ("qa", "doc")


def _rec(i: int, cls: str, e2e: float, ttft: float = 0.1, kind: str = "", tokens: int = 10) -> RequestRecord:
    return RequestRecord(i, 0.0, 0.0, e2e, first_token_s=None if kind else ttft, output_tokens=0 if kind else tokens,
                         error=kind, error_kind=kind, request_class=cls)


def _result(index: int, parallel: int, e2e: dict[str, list[float]], *, default: bool = False, kind: str = "",
            vram: float | None = None, util: float | None = None) -> PointResult:
    records = [_rec(n, cls, t, kind=kind if n == 0 and kind else "") for cls, times in e2e.items()
               for n, t in enumerate(times)]
    stats = summarize(records)
    point = SweepPoint(index, ServerSettings(num_parallel=parallel), parallel, default=default)
    status = PointStatus.OK if not kind else PointStatus.FAILED
    return PointResult(point, status, stats=stats, records=tuple(records),
                       gpu=GpuFigures(server_peak_mib=vram, util_mean_pct=util))


def _rec_of(index: int | None) -> Recommendation:
    return Recommendation(index, "Recommended." if index is not None else "No point met your targets.")


def test_change_in_percent_down_is_better() -> None:
    d = Delta.of(924.0, 487.0, True, lower_is_better=True)
    assert d.change is Change.BETTER and d.pct == pytest.approx(-47.29, abs=0.01)
    assert Delta.of(487.0, 924.0, True, lower_is_better=True).change is Change.WORSE
    assert Delta.of(100.0, 100.5, True, lower_is_better=True).change is Change.SAME
    assert Delta.of(10.0, 20.0, True, lower_is_better=False).change is Change.BETTER  # tokens/s: up is better
    assert Delta.of(10.0, 20.0, True, lower_is_better=None).change is Change.NEUTRAL  # VRAM: a cost, not a score


def test_missing_figures_are_not_measured() -> None:
    assert Delta.of(None, 10.0, True, True).change is Change.NOT_MEASURED
    assert Delta.of(10.0, None, True, True).change is Change.NOT_MEASURED


def test_compared_per_class_and_overall() -> None:
    default = _result(0, 4, {"qa": [1.0, 1.0], "doc": [3.0, 3.0]}, default=True, vram=2048, util=40)
    best = _result(1, 2, {"qa": [0.5, 0.5], "doc": [2.0, 2.0]}, vram=3072, util=80)
    c = before_after([default, best], _rec_of(1), CLASSES)
    assert c is not None and c.outcome is Outcome.COMPARED
    assert [r.name for r in c.classes] == ["qa", "doc"] and c.overall.name == ALL_REQUESTS
    qa = c.delta(c.classes[0], "e2e_mean_ms")
    assert (qa.before, qa.after, qa.change) == (1000.0, 500.0, Change.BETTER) and qa.pct == pytest.approx(-50.0)
    assert c.delta(c.overall, "e2e_mean_ms").pct == pytest.approx((1250 - 2000) / 2000 * 100)
    assert c.point_delta("vram_peak_mib").change is Change.NEUTRAL
    assert c.default.state is SideState.CLEAN and c.recommended is not None and c.recommended.index == 1


@pytest.mark.parametrize("kind,state", [("truncated", SideState.TRUNCATED), ("timeout", SideState.FAILURES)])
def test_a_side_with_failures_or_cut_prompts_never_wins(kind: str, state: SideState) -> None:
    # The default's one cut request leaves it faster on what remains: that must not read as a loss for the
    # recommended side, nor as anything comparable.
    default = _result(0, 1, {"qa": [0.2, 0.2]}, default=True, kind=kind)
    best = _result(1, 2, {"qa": [0.5, 0.5]})
    c = before_after([default, best], _rec_of(1), ["qa"])
    assert c is not None and c.default.state is state
    for row in (*c.classes, c.overall):
        for attr in ("e2e_mean_ms", "e2e_p95_ms", "ttft_mean_ms", "ttft_p95_ms", "tokens_per_s"):
            assert c.delta(row, attr).change in (Change.NOT_COMPARABLE, Change.NOT_MEASURED)
    text = to_markdown(c)
    assert "not comparable" in text and "better" not in text and "worse" not in text
    assert "Not a like-for-like comparison" in text
    if kind == "truncated":
        assert "1 cut" in text  # the cut request is counted where people read it


def test_a_failing_recommended_side_is_not_a_win_either() -> None:
    default = _result(0, 1, {"qa": [1.0, 1.0]}, default=True)
    best = _result(1, 2, {"qa": [0.3, 0.3]}, kind="truncated")
    c = before_after([default, best], _rec_of(1), ["qa"])
    assert c is not None and c.recommended is not None and c.recommended.state is SideState.TRUNCATED
    assert c.delta(c.overall, "e2e_mean_ms").change is Change.NOT_COMPARABLE


def test_recommendation_is_the_default() -> None:
    default = _result(0, 1, {"qa": [1.0]}, default=True)
    c = before_after([default, _result(1, 2, {"qa": [2.0]})], _rec_of(0), ["qa"])
    assert c is not None and c.outcome is Outcome.DEFAULT_RECOMMENDED and c.recommended is None
    assert "The recommendation is the server's default setting itself" in to_markdown(c)


def test_no_recommendation_still_shows_the_default() -> None:
    default = _result(0, 1, {"qa": [1.0]}, default=True)
    c = before_after([default], _rec_of(None), ["qa"])
    assert c is not None and c.outcome is Outcome.NO_RECOMMENDATION
    text = to_markdown(c)
    assert "Nothing could be recommended" in text and "No point met your targets." in text and "1000 ms" in text


def test_default_not_measured() -> None:
    skipped = PointResult(SweepPoint(0, ServerSettings(), 1, default=True), PointStatus.SKIPPED, "predicted not to load")
    best = _result(1, 2, {"qa": [1.0]})
    c = before_after([skipped, best], _rec_of(1), ["qa"])
    assert c is not None and c.outcome is Outcome.DEFAULT_NOT_MEASURED and c.default.state is SideState.NOT_MEASURED
    assert c.delta(c.overall, "e2e_mean_ms").change is Change.NOT_MEASURED


def test_no_default_point_no_comparison() -> None:
    assert before_after([_result(0, 1, {"qa": [1.0]})], _rec_of(0), ["qa"]) is None


def test_requests_per_day_optional() -> None:
    c = before_after([_result(0, 1, {"qa": [1.0]}, default=True), _result(1, 2, {"qa": [0.5]})], _rec_of(1), ["qa"])
    assert c is not None
    assert "Requests/day (capacity) | — | — | —" in to_markdown(c)
    assert "measured no capacity" in to_markdown(c)
    with_capacity = c.with_capacity(5000.0, 7000.0)
    d = with_capacity.point_delta("requests_per_day")
    assert d.change is Change.BETTER and d.pct == pytest.approx(40.0)
    assert "7,000" in to_markdown(with_capacity)


def test_json_round_trip_and_tolerance() -> None:
    c = before_after([_result(0, 1, {"qa": [1.0], "doc": [2.0]}, default=True, vram=100.0),
                      _result(1, 2, {"qa": [0.5], "doc": [1.0]}, vram=200.0)], _rec_of(1), CLASSES, default_words=("w",))
    assert c is not None
    again = BeforeAfter.from_json(json.loads(json.dumps(c.to_json())))
    assert again == c
    sparse = BeforeAfter.from_json({"default": {"label": "x"}})  # fields left out: defaults
    assert sparse.outcome is Outcome.COMPARED and sparse.recommended is None and sparse.default.label == "x"
    assert sparse.default.state is SideState.NOT_MEASURED and sparse.overall.name == ALL_REQUESTS


def test_csv_rows() -> None:
    c = before_after([_result(0, 1, {"qa": [1.0]}, default=True), _result(1, 2, {"qa": [0.5]})], _rec_of(1), ["qa"])
    assert c is not None
    rows = list(csv.DictReader(io.StringIO(to_csv(c))))
    e2e = next(r for r in rows if r["scope"] == "qa" and r["figure"] == "e2e_mean_ms")
    assert (float(e2e["default"]), float(e2e["recommended"]), float(e2e["change_pct"]), e2e["change"]) == \
        (1000.0, 500.0, -50.0, "better")
    vram = next(r for r in rows if r["scope"] == "point" and r["figure"] == "vram_peak_mib")
    assert vram["default"] == "" and vram["change"] == "not_measured"


def test_figures_skip_warmups() -> None:
    records = [_rec(0, "qa", 1.0), RequestRecord(1, 0.0, 0.0, 9.0, first_token_s=0.1, warmup=True)]
    f = figures_of(records)
    assert f.requests == 1 and f.e2e_mean_ms == pytest.approx(1000.0)


# ---- the default point in a plan and in a run ---------------------------------------------------------------
def test_plan_adds_the_default_point_first() -> None:
    base = ServerSettings(num_parallel=2, context_length=4096)
    default = ServerDefaults(num_parallel=1).apply(base)
    plan = plan_sweep(base, SweepAxes(parallel=(2, 4)), True, default)
    assert [p.default for p in plan.points] == [True, False, False]
    assert [p.index for p in plan.points] == [0, 1, 2]
    assert plan.points[0].settings.context_length is None and plan.points[0].settings.num_parallel == 1
    assert "server default" in plan.points[0].label(plan.varying)


def test_plan_marks_a_point_that_is_the_default() -> None:
    base = ServerSettings(num_parallel=2)
    plan = plan_sweep(base, SweepAxes(parallel=(1, 2)), True, ServerDefaults(num_parallel=1).apply(base))
    assert len(plan.points) == 2 and [p.default for p in plan.points] == [True, False]


def test_plan_refuses_a_default_on_an_attached_server() -> None:
    with pytest.raises(SweepPlanError, match="cannot be restarted on its default"):
        plan_sweep(ServerSettings(), SweepAxes(parallel=None), False, ServerSettings())


def test_defaults_keep_the_users_other_settings() -> None:
    base = ServerSettings(num_parallel=8, context_length=8192, kv_cache_type="q8_0", flash_attention="on",
                          batch_size=1024, host="127.0.0.2", port=9000, extra_settings="--no-warmup",
                          backend="x").with_options(model_path="/m.gguf")
    out = ServerDefaults(num_parallel=4, extra_lines=("--kv-unified",)).apply(base)
    assert (out.num_parallel, out.context_length, out.kv_cache_type, out.flash_attention, out.batch_size) == \
        (4, None, "f16", "auto", None)
    assert (out.host, out.port, out.backend, out.option("model_path")) == ("127.0.0.2", 9000, "x", "/m.gguf")
    assert out.extra_settings == "--no-warmup\n--kv-unified"
    assert ServerDefaults(extra_lines=("--kv-unified",)).apply(out).extra_settings == out.extra_settings  # once
    assert NeutralTuning.server_defaults.words  # every mapping says its defaults in words


def _run(results: tuple[PointResult, ...], default_settings: ServerSettings | None) -> SweepRun:
    spec = SweepSpec(ServerSettings(num_parallel=2), SweepAxes(parallel=(2,)), LoadPlan(model="m"),
                     LatencyTargets(ttft_p95_ms=None, tpot_p95_ms=None), default_settings=default_settings,
                     default_words=("parallel 1 (the server's default)",))
    run = SweepRun(spec, Fingerprint(model="m"), tuple(r.point for r in results), ("parallel",), results)
    return run.finished(RunStatus.FINISHED, "2026-12-02T07:00:00+00:00")


def test_run_document_keeps_the_comparison() -> None:
    default = _result(0, 1, {"": [1.0, 1.0]}, default=True)
    other = _result(1, 2, {"": [0.4, 0.4]})
    run = _run((default, other), ServerSettings(num_parallel=1))
    assert run.comparison is not None and run.comparison.outcome is Outcome.COMPARED
    doc = json.loads(json.dumps(run_to_json(run, SAVED, with_records=True)))
    assert doc["comparison"]["default"]["index"] == 0 and doc["points"][0]["default"] is True
    assert doc["spec"]["default_words"] == ["parallel 1 (the server's default)"]
    back = run_from_json(doc, SAVED)
    assert back.comparison == run.comparison  # recomputed from the records, as the recommendation is
    assert back.results[0].point.default and back.comparison.default_words == ("parallel 1 (the server's default)",)
    assert "## Before/after" in run_to_markdown(back, {})
    assert table_rows(back.results)[0][0] == "1 (default)"


def test_documents_without_a_default_load_as_before() -> None:
    run = _run((_result(0, 2, {"": [1.0]}),), None)
    doc = run_to_json(run, SAVED, with_records=True)
    assert "comparison" not in doc and "default_settings" not in doc["spec"] and "default" not in doc["points"][0]
    assert "default" not in doc["planned_points"][0]
    back = run_from_json(doc, SAVED)
    assert back.comparison is None and compared(back) is None


def test_rejudged_run_recomputes_the_comparison() -> None:
    run = _run((_result(0, 1, {"": [1.0]}, default=True), _result(1, 2, {"": [0.4]})), ServerSettings(num_parallel=1))
    strict = run.with_targets(LatencyTargets(ttft_p95_ms=0.001, tpot_p95_ms=None))
    assert strict.comparison is not None and strict.comparison.outcome is Outcome.NO_RECOMMENDATION
    assert recommend(strict.results, strict.spec.targets, strict.varying).index is None


def test_cut_prompts_name_the_fix() -> None:
    default = _result(0, 1, {"doc": [0.2, 0.2]}, default=True, kind="truncated")
    default = PointResult(default.point, PointStatus.FAILED, "prompts cut by the server", default.stats,
                          default.records, detail="Give it a context of 1024 tokens per slot.")
    for rec in (_rec_of(1), _rec_of(None)):
        c = before_after([default, _result(1, 2, {"doc": [0.5, 0.5]})], rec, ["doc"])
        assert c is not None and c.default.state is SideState.TRUNCATED
        text = to_markdown(c)
        assert "prompts cut by the server" in text and "Give it a context of 1024 tokens per slot." in text


def test_a_contended_side_is_not_a_win() -> None:
    from dataclasses import replace as copy

    from app.core.bench.contention import Contention, ContentionKind

    best = _result(1, 2, {"qa": [0.3, 0.3]})
    busy = copy(best, status=PointStatus.UNSTABLE, contention=Contention(ContentionKind.CPU, cpu_others_pct=60.0))
    assert busy.contention.contended
    c = before_after([_result(0, 1, {"qa": [1.0, 1.0]}, default=True), busy], _rec_of(1), ["qa"])
    assert c is not None and c.recommended is not None and c.recommended.state is SideState.CONTENDED
    assert c.delta(c.overall, "e2e_mean_ms").change is Change.NOT_COMPARABLE
    assert "measured while other programs used the device" in to_markdown(c)


def test_requests_per_day_come_from_the_rate_sweep_at_the_recommended_point() -> None:
    from dataclasses import replace as copy

    from app.core.bench.capacity import RateLadder, SECONDS_PER_DAY
    from tests.core.bench.test_capacity import served_by, sweep

    capacity = sweep(RateLadder(refine=2), served_by(2.0))
    run = _run((_result(0, 1, {"": [1.0]}, default=True), _result(1, 2, {"": [0.4]})), ServerSettings(num_parallel=1))
    assert run.comparison is not None and run.comparison.recommended is not None
    assert run.comparison.recommended.requests_per_day is None  # no rate sweep: not measured, not invented
    with_rates = copy(run, capacity=capacity).finished(RunStatus.FINISHED, run.finished_at)
    c = with_rates.comparison
    assert c is not None and c.recommended is not None and c.default.requests_per_day is None
    assert c.recommended.requests_per_day == pytest.approx(2.25 * SECONDS_PER_DAY)
    assert "194,400" in to_markdown(c)
    back = run_from_json(json.loads(json.dumps(run_to_json(with_rates, SAVED, with_records=True))), SAVED)
    assert back.comparison is not None and back.comparison.recommended is not None
    assert back.comparison.recommended.requests_per_day == pytest.approx(2.25 * SECONDS_PER_DAY)


def test_requests_per_day_of_each_side_come_from_its_own_rate_sweep() -> None:
    from dataclasses import replace as copy

    from app.core.bench.capacity import RateLadder, SECONDS_PER_DAY
    from tests.core.bench.test_capacity import served_by, sweep

    at_recommended = sweep(RateLadder(refine=2), served_by(2.0))
    at_default = sweep(RateLadder(refine=2), served_by(1.0))
    run = _run((_result(0, 1, {"": [1.0]}, default=True), _result(1, 2, {"": [0.4]})), ServerSettings(num_parallel=1))
    both = copy(run, capacity=at_recommended, default_capacity=at_default).finished(RunStatus.FINISHED, run.finished_at)
    c = both.comparison
    assert c is not None and c.recommended is not None
    assert c.default.requests_per_day == pytest.approx(at_default.requests_per_day)
    assert c.recommended.requests_per_day == pytest.approx(at_recommended.requests_per_day)
    assert c.point_delta("requests_per_day").change is Change.BETTER
    assert at_default.requests_per_day < at_recommended.requests_per_day <= 2.25 * SECONDS_PER_DAY
    back = run_from_json(json.loads(json.dumps(run_to_json(both, SAVED, with_records=True))), SAVED)
    assert back.default_capacity == at_default and back.comparison == c


def test_requests_per_day_in_one_sentence_for_the_chart() -> None:
    c = before_after([_result(0, 1, {"qa": [1.0]}, default=True), _result(1, 2, {"qa": [0.5]})], _rec_of(1), ["qa"])
    assert c is not None
    assert requests_per_day_words(c).startswith("Requests a day: not measured")
    assert requests_per_day_words(c.with_capacity(10_800.0, None)) == \
        "Requests a day (capacity): default 10,800, recommended —."
    assert requests_per_day_words(c.with_capacity(10_800.0, 65_610.0)) == \
        "Requests a day (capacity): default 10,800, recommended 65,610 (↑507.5 % better)."
