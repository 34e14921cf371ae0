"""Sweep planning, the recommendation rules, the Pareto front, and the run's exports."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import replace

import pytest

from app.core.bench.stats import Distribution, LatencyTargets, PointStats, RequestRecord, summarize
from app.core.bench.workload import LoadPlan
from app.core.server.settings import ServerSettings
from app.core.bench.outcome import FailureKind, PointStatus
from app.core.bench.sweep import (Fingerprint, GpuFigures, PointResult, ServerFigures, SweepAxes, SweepPlanError,
                                  SweepPoint, SweepSpec, parse_int_list, plan_sweep)
from app.core.bench.recommend import pareto_front, recommend
from app.adapters.storage.saved_format import SAVED_FORMAT
from app.backends import registry
from app.core.bench.run import (CSV_COLUMNS, TABLE_HEADER, SweepRun, point_row, run_from_json, run_to_csv,
                                run_to_json, run_to_markdown, table_header, table_rows, value_text)

BASE = ServerSettings(num_parallel=1, context_length=8192)
TARGETS = LatencyTargets(ttft_p95_ms=1000, tpot_p95_ms=100, min_success=0.99)


# ---- planning -----------------------------------------------------------------------------------------


def test_plan_restarts_once_per_server_setting_and_ties_clients_to_parallel():
    plan = plan_sweep(BASE, SweepAxes(parallel=(1, 2, 4), kv_cache_types=("f16", "q8_0")), managed=True)
    got = [(p.settings.kv_cache_type, p.settings.num_parallel, p.concurrency) for p in plan.points]
    assert got == [("f16", 1, 1), ("f16", 2, 2), ("f16", 4, 4), ("q8_0", 1, 1), ("q8_0", 2, 2), ("q8_0", 4, 4)]
    assert [p.index for p in plan.points] == list(range(6))
    assert plan.varying == ("parallel", "kv_cache_types")  # clients follow parallel: not a label of their own
    assert plan.points[4].label(plan.varying) == "parallel 2 · KV q8_0"
    assert all(p.settings.context_length == 8192 for p in plan.points)  # the base is kept where nothing varies


def test_client_concurrency_above_parallel_is_its_own_axis():
    plan = plan_sweep(BASE, SweepAxes(parallel=(2,), concurrency=(2, 8)), managed=True)
    assert [(p.parallel, p.concurrency) for p in plan.points] == [(2, 2), (2, 8)]
    assert "concurrency" in plan.varying
    assert plan.points[1].label(plan.varying) == "8 clients"


def test_invalid_combinations_are_left_out_with_a_note():
    plan = plan_sweep(BASE, SweepAxes(parallel=(1,), kv_cache_types=("f16", "q8_0"), flash_attention=("off",)),
                      managed=True)
    assert [p.settings.kv_cache_type for p in plan.points] == ["f16"]
    assert "needs flash attention" in plan.notes[0]
    with pytest.raises(SweepPlanError, match="No combination"):
        plan_sweep(BASE, SweepAxes(parallel=(1,), kv_cache_types=("q4_0",), flash_attention=("off",)), managed=True)


def test_an_attached_server_only_varies_the_client_side():
    with pytest.raises(SweepPlanError, match="only client concurrency"):
        plan_sweep(BASE, SweepAxes(parallel=(1, 2)), managed=False)
    plan = plan_sweep(BASE, SweepAxes(parallel=None, concurrency=(1, 4)), managed=False)
    assert [(p.parallel, p.concurrency, p.server_known) for p in plan.points] == [(None, 1, False), (None, 4, False)]
    assert plan.varying == ("concurrency",)
    # Without a concurrency list an attached server gets one client.
    assert [p.concurrency for p in plan_sweep(BASE, SweepAxes(parallel=None), managed=False).points] == [1]


def test_parse_int_list():
    assert parse_int_list("1, 2,4;8 8", "Parallel") == (1, 2, 4, 8)
    for bad, words in (("", "at least one"), ("1, two", "'two' is not"), ("0", "0 is below the minimum 1")):
        with pytest.raises(SweepPlanError, match=words):
            parse_int_list(bad, "Parallel")


def test_parse_int_list_names_every_value_outside_the_range():
    with pytest.raises(SweepPlanError) as caught:
        parse_int_list("-1, 0, 99999", low=1, high=64)
    assert str(caught.value) == ("-1 is below the minimum 1; 0 is below the minimum 1; "
                                 "99999 is above the maximum 64.")
    with pytest.raises(SweepPlanError, match="^'abc' is not a whole number"):
        parse_int_list("abc")


def test_too_many_points_are_refused():
    with pytest.raises(SweepPlanError, match="too many"):
        plan_sweep(BASE, SweepAxes(parallel=tuple(range(1, 40)), concurrency=tuple(range(1, 10))), managed=True)


# ---- recommendation -----------------------------------------------------------------------------------


def dist(p95: float, mean: float | None = None) -> Distribution:
    m = p95 if mean is None else mean
    return Distribution(10, m, m, p95, p95, p95, m, p95)


def stats(tps: float, ttft_p95: float, tpot_p95: float = 50.0, ok: int = 100, failed: int = 0) -> PointStats:
    nan = Distribution(0, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan)
    return PointStats(requests=ok + failed, requests_ok=ok, requests_failed=failed, duration_s=10.0,
                      output_tokens=int(tps * 10), output_tokens_per_s=tps, requests_per_s=ok / 10, goodput_rps=0.0,
                      goodput_share=0.0, ttft_ms=dist(ttft_p95), tpot_ms=dist(tpot_p95), itl_ms=nan, e2e_ms=nan,
                      wait_ms=nan, queue_ms=nan, answer_ttft_ms=nan, request_tokens_per_s=nan,
                      server_decode_tokens_per_s=nan, server_prompt_tokens_per_s=nan, prompt_tokens_mean=math.nan,
                      output_tokens_mean=math.nan, errors={"oom": failed} if failed else {})


def point(index: int, parallel: int, tps: float | None, ttft: float = 300.0, status: PointStatus = PointStatus.OK, reason: str = "",
          vram: float | None = None, **kw) -> PointResult:
    p = SweepPoint(index, BASE.replace(num_parallel=parallel), parallel)
    s = stats(tps, ttft, **kw) if tps is not None else None
    return PointResult(p, status, reason, s, gpu=GpuFigures(server_peak_mib=vram))


def test_the_fastest_point_within_the_targets_wins_and_the_paragraph_has_the_numbers():
    results = [point(0, 1, 42, 180, vram=14200), point(1, 4, 68, 210, vram=15100), point(2, 8, 83, 260, vram=16300),
               point(3, 16, 91, 1400, vram=18700), point(4, 32, None, status=PointStatus.FAILED, reason="out of memory at load")]
    rec = recommend(results, TARGETS)
    assert rec.index == 2 and rec.meets_targets and rec.output_tokens_per_s == 83
    assert not rec.plateau and rec.edge == ""  # parallel 32 was tried (and failed): 8 is not at the edge
    text = rec.text
    assert "Recommended: parallel 8" in text and "83.0 output tokens/s" in text and "TTFT p95 260 ms" in text
    assert "+98 % against parallel 1" in text
    assert "parallel 16 was faster (91.0 tokens/s) but TTFT p95 1400 ms is above 1000 ms" in text
    assert "parallel 32 (out of memory at load)" in text
    assert "peak VRAM 15.9 GiB" in text


def test_too_many_failures_exclude_a_point():
    results = [point(0, 1, 40), point(1, 2, 60, ok=97, failed=3, status=PointStatus.UNSTABLE, reason="3 of 100 failed")]
    rec = recommend(results, TARGETS)
    assert rec.index == 0
    assert "only 97 % of requests succeeded" in rec.text


def test_a_plateau_is_flagged_with_the_cheaper_point():
    results = [point(0, 1, 40, vram=10000), point(1, 2, 70, vram=11000), point(2, 4, 72, vram=13048)]
    rec = recommend(results, TARGETS)
    assert rec.index == 2 and rec.plateau and rec.plateau_index == 1
    assert "Plateau: parallel 2 reaches 97 % of that" in rec.text and "2.0 GiB less VRAM" in rec.text
    assert rec.edge == "upper" and "highest parallel tried" in rec.text


def test_no_plateau_at_five_percent_or_more():
    rec = recommend([point(0, 1, 40), point(1, 2, 70), point(2, 4, 73.5)], TARGETS)
    assert rec.index == 2 and not rec.plateau


def test_a_lower_edge_says_more_parallel_did_not_pay():
    rec = recommend([point(0, 1, 40, 200), point(1, 2, 60, 2000), point(2, 4, 70, 4000)], TARGETS)
    assert rec.index == 0 and rec.edge == "lower" and "did not pay off" in rec.text


def test_ties_go_to_the_cheaper_point():
    assert recommend([point(0, 4, 50.0), point(1, 2, 50.0)], TARGETS).index == 1


def test_no_point_meets_the_targets():
    rec = recommend([point(0, 1, 40, 3000), point(1, 2, 60, 5000)], TARGETS)
    assert rec.index is None and not rec.meets_targets
    assert "No point met your targets" in rec.text
    assert "parallel 2, reached 60.0 tokens/s but TTFT p95 5000 ms is above 1000 ms" in rec.text
    assert "lowest TTFT p95 was 3000 ms at parallel 1" in rec.text


def test_nothing_measured():
    rec = recommend([point(0, 1, None, status=PointStatus.SKIPPED, reason="predicted not to fit")], TARGETS)
    assert rec.index is None and "nothing to recommend" in rec.text and "predicted not to fit" in rec.text


def test_pareto_front():
    results = [point(0, 1, 40, 100), point(1, 2, 60, 150), point(2, 4, 55, 300), point(3, 8, 80, 400),
               point(4, 16, 80, 500), point(5, 32, None, status=PointStatus.FAILED)]
    assert pareto_front(results) == [0, 1, 3]  # 2 and 4 are dominated; 5 was not measured


# ---- the run and its exports --------------------------------------------------------------------------


def make_run() -> SweepRun:
    spec = SweepSpec(BASE, SweepAxes(parallel=(1, 2, 4)), LoadPlan("qwen3:14b", requests=2), TARGETS)
    plan = spec.plan()
    results = []
    for p, (first, end, clients) in zip(plan.points[:2], ((0.1, 1.1, 2), (0.2, 1.2, 4))):
        records = tuple(RequestRecord(i, 0.0, 0.0, end, first_token_s=first, output_tokens=11, output_chunks=11,
                                      itl_s=(0.1,) * 10) for i in range(clients))
        results.append(PointResult(p, PointStatus.OK, stats=summarize(records, TARGETS), records=records,
                                   gpu=GpuFigures(server_peak_mib=12000.0, power_mean_w=300.0, energy_j=330.0)))
    results.append(PointResult(plan.points[2], PointStatus.FAILED, "out of memory at load", detail="cudaMalloc failed",
                               failure=FailureKind.OUT_OF_MEMORY))
    run = SweepRun(spec, Fingerprint(gpu_name="NVIDIA GeForce RTX 4090", server_version="0.12.6", model="qwen3:14b",
                                     model_digest="ab" * 32, base_settings=BASE.to_json(), backend_kind="ollama"),
                   plan.points, plan.varying, tuple(results), started_at="2026-08-01T12:00:00+02:00")
    return run.finished("finished", "2026-08-01T12:03:00+02:00")


def test_point_row_has_what_the_bench_json_promises():
    run = make_run()
    row = point_row(run.results[0])
    for key in ("parallel", "concurrency", "requests_ok", "requests_failed", "output_tokens_per_s", "ttft_ms_mean",
                "ttft_ms_p50", "ttft_ms_p95", "tpot_ms_p50", "tpot_ms_p95", "e2e_ms_p95", "vram_peak_mib", "status"):
        assert key in row
    assert row["tokens_per_joule"] == pytest.approx(22 / 330, abs=1e-3)  # output tokens over GPU joules
    failed = point_row(run.results[2])
    assert failed["output_tokens_per_s"] is None and failed["ttft_ms_p95"] is None and failed["status"] == PointStatus.FAILED


def test_run_json_round_trip_recomputes_the_same_statistics():
    run = make_run()
    data = json.loads(json.dumps(run_to_json(run, SAVED_FORMAT, with_records=True)))  # through real JSON
    back = run_from_json(data, SAVED_FORMAT)
    assert [r.status for r in back.results] == [PointStatus.OK, PointStatus.OK, PointStatus.FAILED]
    assert back.results[0].stats == run.results[0].stats
    assert back.recommendation == run.recommendation
    assert back.fingerprint == run.fingerprint and back.spec == run.spec
    assert data["recommendation"]["point"]["parallel"] == 2


def test_changing_targets_recomputes_the_recommendation():
    run = make_run()
    assert run.recommendation.index == 1  # parallel 2 is faster
    strict = run.with_targets(LatencyTargets(ttft_p95_ms=150, tpot_p95_ms=100))
    assert strict.recommendation.index == 0  # parallel 2's TTFT of 200 ms is now too slow


def test_a_rejudged_run_keeps_the_targets_it_ran_with_through_json():
    run = make_run()
    strict = run.with_targets(LatencyTargets(ttft_p95_ms=150, tpot_p95_ms=100))
    assert strict.ran_with == run.spec.targets
    again = strict.with_targets(LatencyTargets(ttft_p95_ms=170, tpot_p95_ms=100))
    assert again.ran_with == run.spec.targets  # still the targets it was measured with
    assert strict.with_targets(run.spec.targets).ran_with is None  # judged as it ran: not re-judged
    back = run_from_json(json.loads(json.dumps(run_to_json(strict, SAVED_FORMAT, with_records=True))), SAVED_FORMAT)
    assert back.ran_with == run.spec.targets and back.spec.targets == strict.spec.targets
    assert back.recommendation == strict.recommendation


def test_csv_has_a_row_per_point_and_empty_cells_for_unknowns():
    rows = list(csv.DictReader(io.StringIO(run_to_csv(make_run()))))
    assert list(rows[0]) == list(CSV_COLUMNS)
    assert [r["parallel"] for r in rows] == ["1", "2", "4"]
    assert rows[2]["output_tokens_per_s"] == "" and rows[2]["reason"] == "out of memory at load"


def test_markdown_report_has_the_articles_table_and_the_reasoning():
    md = run_to_markdown(make_run(), registry.display_names())
    assert "| Parallel | Clients | Tokens/s | TTFT avg (ms) | TTFT p95 (ms) |" in md
    assert "| **2** | **2** |" in md  # the recommended row in bold
    assert "✖ OOM at load" in md
    assert "## Recommendation" in md and "Recommended: parallel 2" in md
    assert "NVIDIA GeForce RTX 4090" in md and "0.12.6" in md
    assert "- **Server:** Ollama 0.12.6, " in md  # which kind of server measured it (as people write it), its version


def test_markdown_base_settings_are_written_for_people_not_as_python_values():
    run = make_run()
    base = BASE.replace(context_length=None, extra_settings="--cache-reuse 256\n--mlock").with_options(binary="/opt/llama/llama-server")
    run = replace(run, fingerprint=replace(run.fingerprint, base_settings=base.to_json()))
    section = run_to_markdown(run, registry.display_names()).split("## Base settings", 1)[1]
    assert "None" not in section and "{" not in section and "'" not in section
    assert "- **Parallel requests:** 1" in section
    assert "- **Context length:** —" in section  # not set: the server's default
    assert "- **Server options:** binary: /opt/llama/llama-server" in section
    assert "- **Extra settings:** --cache-reuse 256; --mlock" in section
    assert value_text(True) == "on" and value_text({}) == "—" and value_text({"a": None, "b": 2}) == "a: —; b: 2"


def test_the_servers_own_readings_ride_along_in_json_csv_and_the_table():
    run = make_run()
    figures = ServerFigures(samples=9, slots_total=2, slots_busy_max=2, slots_busy_mean=1.5, requests_deferred_max=2,
                            kv_fill_max_pct=12.5, generated_tokens=44.0, prompt_tokens=80.0, window_s=1.1)
    run = replace(run, results=(replace(run.results[0], server=figures), *run.results[1:]))
    assert figures.generation_tokens_per_s == pytest.approx(40.0)
    back = run_from_json(json.loads(json.dumps(run_to_json(run, SAVED_FORMAT, with_records=True))), SAVED_FORMAT)
    assert back.results[0].server == figures and back.results[1].server == ServerFigures()
    row = point_row(run.results[0])
    assert (row["server_slots_busy_max"], row["server_requests_deferred_max"], row["server_generation_tokens_per_s"]) \
        == (2, 2, 40.0)
    csv_row = next(csv.DictReader(io.StringIO(run_to_csv(run))))
    assert csv_row["server_slots_busy_max"] == "2" and csv_row["server_slots_total"] == "2"
    header = table_header(run.results)
    assert header[-4:] == ("Slots busy", "Waiting", "Server tok/s", "Stable?")
    rows = table_rows(run.results)
    assert rows[0][-4:-1] == ["2/2", "2", "40.0"] and rows[1][-4:-1] == ["—", "—", "—"]
    # A server that reports nothing of its own (Ollama's API) keeps the articles' table as it was.
    assert table_header(make_run().results) == TABLE_HEADER and len(table_rows(make_run().results)[0]) == len(TABLE_HEADER)
    assert "| Slots busy | Waiting | Server tok/s | Stable? |" in run_to_markdown(run, registry.display_names())
