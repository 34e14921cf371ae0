"""Where requests waited, on the Benchmark page: a stacked bar per measured point (client queue, server wait,
prefill, rest; averages), named by the article's two axes as the CLI's table names them."""

from __future__ import annotations

import pytest

from app.core.bench.outcome import PointStatus, RunStatus
from app.core.bench.run import SweepRun
from app.core.bench.stats import LatencyTargets, RequestRecord, summarize
from app.core.bench.sweep import Fingerprint, PointResult, SweepAxes, SweepSpec
from app.core.bench.waiting import PARTS
from app.core.bench.workload import LoadPlan
from app.core.server.settings import ServerSettings
from app.ui.pages.bench.results import RunView
from app.ui.pages.bench.waits_chart import PART_COLOURS
from tests.ui.page_context import run_documents

TARGETS = LatencyTargets(ttft_p95_ms=None, tpot_p95_ms=None)


def capped_run() -> SweepRun:
    """Parallel 1, 2 × a front-end cap of 2, 4 (open loop): each point's requests wait 100 ms more in the client
    queue than the last point's, then 200 ms in the server, 300 ms of prefill and 100 ms more to the first token."""
    spec = SweepSpec(ServerSettings(backend="ollama"), SweepAxes(parallel=(1, 2), concurrency=(2, 4)),
                     LoadPlan("qwen3:14b", mode="open", rate_rps=2.0, requests=4), TARGETS)
    plan = spec.plan()
    results = []
    for p in plan.points:
        queue = 0.1 * (p.index + 1)
        recs = tuple(RequestRecord(i, 0.0, queue, queue + 2.0, first_token_s=queue + 0.6, output_tokens=20,
                                   output_chunks=20, prompt_tokens=50, prompt_eval_s=0.3, server_busy_s=1.8,
                                   cached_prompt_tokens=0) for i in range(4))
        results.append(PointResult(p, PointStatus.OK, stats=summarize(recs, TARGETS), records=recs))
    run = SweepRun(spec, Fingerprint(model="qwen3:14b", backend_kind="ollama"), plan.points, plan.varying,
                   tuple(results), started_at="2026-08-01T12:00:00+02:00")
    return run.finished(RunStatus.FINISHED, "2026-08-01T12:05:00+02:00")


def test_each_point_is_a_stacked_bar_of_where_its_requests_waited(qtbot):
    view = RunView(**run_documents())
    qtbot.addWidget(view)
    view.resize(900, 1400)
    view.show()
    assert not view.waits.isVisible()
    run = capped_run()
    view.set_run(run)
    waits = view.waits
    qtbot.waitUntil(waits.isVisible)
    chart = waits.chart
    assert [b.label for b in chart.bars] == ["1 slot · cap 2", "1 slot · cap 4", "2 slots · cap 2", "2 slots · cap 4"]
    for n, bar in enumerate(chart.bars):
        client, server, prefill, rest = bar.means_ms
        assert client == pytest.approx(100 * (n + 1))
        assert server == pytest.approx(200) and prefill == pytest.approx(300) and rest == pytest.approx(100)
    assert "front-end concurrency cap × server parallel slots" in chart.title.text()
    for part, colour in zip(PARTS, PART_COLOURS, strict=True):
        assert part in chart.title.text() and colour in chart.title.text()
    ticks = chart.plot.getPlotItem().getAxis("bottom")._tickLevels
    assert [label for _x, label in ticks[0]] == [b.label for b in chart.bars]
    assert "front-end concurrency cap" in chart.plot.getPlotItem().getAxis("bottom").labelText
    # 100 ms queued is less than the 300 ms prefill; 400 ms is more.
    assert "<b>1 slot · cap 2</b> prefill" in waits.most.text()
    assert "<b>2 slots · cap 4</b> front-end queue" in waits.most.text()
    view.set_run(None)
    assert not waits.isVisible()
