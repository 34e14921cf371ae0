"""The contention verdict on a point's window, and what it does to the point, the recommendation and
the exports: a point measured while something else took the device says so and is not stable."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace

from app.core.bench.contention import (CPU_IDLE_SHARE_MAX, CPU_OTHERS_SHARE_MIN, GPU_OTHERS_PCT_MIN, Competitor,
                                       Contention, ContentionKind, CpuUse, GpuUse, judge)
from app.core.bench.recommend import pareto_front, recommend
from app.core.bench.run import SweepRun, point_row, result_from_json, result_to_json, run_from_json, run_to_csv, \
    run_to_json, run_to_markdown, table_rows
from app.core.bench.outcome import PointStatus
from app.adapters.storage.saved_format import SAVED_FORMAT
from app.backends import registry
from tests.core.bench.test_sweep import TARGETS, make_run, point

STRESS = Competitor("stress", 4242, 0.31)


def cpu(others_s: float, idle_s: float = 0.0, window_s: float = 10.0, cores: int = 2,
        competitors: tuple[Competitor, ...] = (STRESS,)) -> CpuUse:
    """A window where the server and the app took what others and idleness left."""
    capacity = window_s * cores
    busy = capacity - idle_s
    own = 0.5
    return CpuUse(window_s, cores, busy, busy - others_s - own, own, competitors)


def contended_cpu() -> Contention:
    return judge(cpu(others_s=6.2), None)


# ---- the verdict --------------------------------------------------------------------------------


def test_others_taking_a_saturated_cpu_is_cpu_contention_with_the_top_competitor():
    verdict = contended_cpu()
    assert verdict.kind is ContentionKind.CPU and verdict.contended
    assert verdict.cpu_others_pct == 31.0 and verdict.cpu_idle_pct == 0.0 and verdict.cores == 2
    assert (verdict.top_name, verdict.top_pid, verdict.top_pct) == ("stress", 4242, 31.0)
    assert verdict.short_text() == "CPU contended 31 %"
    assert "31 % of the 2 CPU cores" in verdict.text() and "stress (pid 4242)" in verdict.text()


def test_a_quiet_window_is_not_contended():
    # The server and the app used the machine; others a little background below the threshold.
    verdict = judge(cpu(others_s=CPU_OTHERS_SHARE_MIN * 20 * 0.5), None)
    assert verdict.kind is ContentionKind.NONE and not verdict.contended and verdict.short_text() == ""


def test_others_using_spare_cores_do_not_contend():
    # A 16-core desktop: a build takes 30 % while most cores idle; a GPU-bound server is not slowed.
    spare = judge(cpu(others_s=48.0, idle_s=80.0, cores=16), None)
    assert spare.cpu_others_pct == 30.0 and spare.cpu_idle_pct == 50.0
    assert spare.kind is ContentionKind.NONE
    busy = judge(cpu(others_s=48.0, idle_s=(CPU_IDLE_SHARE_MAX - 0.05) * 160, cores=16), None)
    assert busy.kind is ContentionKind.CPU


def test_a_server_on_the_gpu_is_judged_by_the_gpus_other_processes():
    game = Competitor("game", 777, 0.4)
    on_gpu = judge(cpu(others_s=0.1), GpuUse(True, 40.0, (game,)), on_gpu=True)
    assert on_gpu.kind is ContentionKind.GPU and on_gpu.gpu_others_pct == 40.0
    assert on_gpu.top_text == "game (pid 777)" and on_gpu.short_text() == "GPU contended 40 %"
    assert on_gpu.cpu_others_pct is not None  # the CPU figures ride along
    desktop = judge(cpu(others_s=0.1), GpuUse(True, GPU_OTHERS_PCT_MIN - 7, ()), on_gpu=True)
    assert desktop.kind is ContentionKind.NONE and desktop.gpu_others_pct == 3.0
    # A busy CPU does not make a GPU server's point contended, nor a busy GPU a CPU server's.
    assert judge(cpu(others_s=6.2), GpuUse(True, 0.0), on_gpu=True).kind is ContentionKind.NONE
    assert judge(cpu(others_s=0.1), GpuUse(True, 40.0, (game,)), on_gpu=False).kind is ContentionKind.NONE
    # Where the driver does not say which processes use the GPU, a GPU server's competition is unknown.
    unknown = judge(cpu(others_s=6.2), None, on_gpu=True)
    assert unknown.kind is ContentionKind.UNMEASURED and "does not attribute" in unknown.why_unmeasured
    assert unknown.cpu_others_pct == 31.0
    hidden = judge(cpu(others_s=0.1), GpuUse(False, 40.0, (game,)), on_gpu=True)
    assert hidden.kind is ContentionKind.UNMEASURED and "server's processes" in hidden.why_unmeasured


def test_no_readings_is_unmeasured_and_round_trips():
    assert judge(None, None).kind is ContentionKind.UNMEASURED
    verdict = contended_cpu()
    assert Contention.from_json(json.loads(json.dumps(verdict.to_json()))) == verdict
    # Points stored before contention was measured, or a damaged cell, read as not measured.
    assert Contention.from_json(None) == Contention() and Contention.from_json({"kind": "loud"}).kind is ContentionKind.UNMEASURED
    odd = Contention.from_json({"kind": "cpu", "cpu_others_pct": "a lot", "top_pid": "x", "cores": True})
    assert odd.kind is ContentionKind.CPU and odd.cpu_others_pct is None and odd.top_pid is None and odd.cores is None


# ---- the point, the recommendation, the exports ----------------------------------------------------


def contended(index: int, parallel: int, tps: float):
    return replace(point(index, parallel, tps, status=PointStatus.UNSTABLE, reason="CPU contended 31 %"),
                   contention=contended_cpu())


def test_a_contended_point_is_not_stable_and_says_why():
    r = contended(0, 1, 5.5)
    assert r.stable_text() == "⚠ CPU contended 31 %"
    assert point(1, 4, 53.3).stable_text() == "✓"


def test_the_recommendation_leaves_contended_points_out():
    # The sweep: parallel 1 measured while a competitor took the CPU, parallel 4 alone.
    results = [contended(0, 1, 5.5), point(1, 4, 53.3), point(2, 8, 50.0)]
    rec = recommend(results, TARGETS)
    assert rec.index == 1 and rec.contended == (0,)
    assert "+867 %" not in rec.text and "against parallel 1" not in rec.text  # no gain against a contended point
    assert "Left out, measured while other programs competed for the device: parallel 1 (CPU contended 31 % by " \
           "stress (pid 4242))" in rec.text
    # Without the contention the contended point would have been the baseline.
    assert "against parallel 1" in recommend([replace(r, contention=Contention()) for r in results], TARGETS).text


def test_a_contended_winner_is_not_recommended_nor_on_the_pareto_front():
    results = [point(0, 1, 40.0, ttft=100.0), contended(1, 4, 90.0)]
    rec = recommend(results, TARGETS)
    assert rec.index == 0 and rec.contended == (1,)
    assert pareto_front(results) == [0]
    assert pareto_front([replace(r, contention=Contention()) for r in results]) == [0, 1]


def test_nothing_is_recommended_when_every_point_was_contended():
    rec = recommend([contended(0, 1, 5.5), contended(1, 4, 53.3)], TARGETS)
    assert rec.index is None and rec.contended == (0, 1)
    assert "Every measured point shared its device with other programs" in rec.text


def contended_run() -> SweepRun:
    """make_run's sweep (parallel 1 and 2 measured from their records, 4 out of memory) with parallel 1
    measured while a competitor took the CPU."""
    run = make_run()
    first = replace(run.results[0], status=PointStatus.UNSTABLE, reason="CPU contended 31 %", contention=contended_cpu())
    return replace(run, results=(first, *run.results[1:]), status="running").finished("finished", run.finished_at)


def test_the_exports_carry_the_contention():
    run = contended_run()
    row = point_row(run.results[0])
    assert row["contention"] == "cpu" and row["contention_cpu_others_pct"] == 31.0
    assert row["contention_top"] == "stress (pid 4242)" and row["stable"] == "⚠ CPU contended 31 %"
    assert point_row(run.results[1])["contention"] == "unmeasured"
    assert run.recommendation is not None and run.recommendation.index == 1
    data = json.loads(json.dumps(run_to_json(run, SAVED_FORMAT)))
    assert data["recommendation"]["contended"] == [0] and data["points"][0]["contention"] == "cpu"
    rows = list(csv.DictReader(io.StringIO(run_to_csv(run))))
    assert rows[0]["contention"] == "cpu" and rows[0]["contention_cpu_others_pct"] == "31.0"
    assert rows[1]["contention"] == "unmeasured" and rows[1]["contention_top"] == ""
    md = run_to_markdown(run, registry.display_names())
    assert "⚠ CPU contended 31 %" in md and "## Contended points" in md and "31 % of the 2 CPU cores" in md
    assert table_rows(run.results)[0][-1] == "⚠ CPU contended 31 %"


def test_the_history_document_keeps_the_contention_and_reads_older_points():
    run = contended_run()
    back = run_from_json(json.loads(json.dumps(run_to_json(run, SAVED_FORMAT, with_records=True))), SAVED_FORMAT)
    assert back.results[0].contention == run.results[0].contention and back.results[0].status == PointStatus.UNSTABLE
    assert back.recommendation == run.recommendation and back.recommendation is not None
    assert back.recommendation.contended == (0,)
    older = result_to_json(point(0, 1, 40.0))
    del older["contention"]
    assert result_from_json(older, TARGETS, SAVED_FORMAT).contention.kind is ContentionKind.UNMEASURED
    assert result_from_json(older, TARGETS, SAVED_FORMAT).status == PointStatus.OK
