"""The latency-against-load chart: the lines and targets it draws, and a real image of them."""

from __future__ import annotations

from PySide6.QtGui import QColor

from app.core.bench.capacity import Capacity, RateLadder, judge_step
from app.core.bench.scenario import BUILTIN_SCENARIOS
from app.core.bench.stats import LatencyTargets, RequestRecord
from app.ui.widgets.load_chart import BACKGROUND, GOOD, chart_series, load_chart_image

TARGETS = LatencyTargets(ttft_p95_ms=None, tpot_p95_ms=None)


def sweep(name: str) -> Capacity:
    scenario = BUILTIN_SCENARIOS[name]
    capacity = Capacity(scenario, RateLadder(refine=1), setting="parallel 2 · no client cap", targets=TARGETS)
    order = 0
    while (factor := capacity.next_factor()) is not None:
        records = [RequestRecord(index=i, scheduled_s=i / factor, sent_s=i / factor, end_s=i / factor + factor,
                                 first_token_s=i / factor + 0.2 * factor, output_tokens=5, request_class=c.name)
                   for c in scenario.classes for i in range(6)]
        capacity = capacity.with_step(judge_step(factor, records, scenario, TARGETS, capacity.ladder, order=order))
        order += 1
    return capacity


def test_one_class_draws_its_four_latencies_and_its_targets(qapp):
    capacity = sweep("customer-qa")  # TTFT avg ≤ 500 ms and P95 ≤ 600 ms: 0.2 × factor s breaks them
    series, targets = chart_series(capacity)
    assert [s.name for s in series] == ["TTFT avg", "TTFT P95", "E2E avg", "E2E P95"]
    assert all(len(s.points) == len(capacity.steps) for s in series)
    assert [(t.label, t.ms) for t in targets] == [("TTFT avg target 500 ms", 500), ("TTFT P95 target 600 ms", 600)]
    assert [met for _r, _v, met in series[0].points] == [s.met for s in capacity.steps]
    image = load_chart_image(capacity, "a run", 1200, 720)
    assert (image.width(), image.height()) == (1200, 720)
    colours = {image.pixelColor(x, y).name() for x in range(0, 1200, 7) for y in range(0, 720, 7)}
    assert BACKGROUND.name() in colours and QColor(series[1].colour).name() in colours
    assert capacity.sustainable_rps is not None
    row = {image.pixelColor(x, 400).name() for x in range(1200)}
    assert GOOD.name() in row  # the sustainable rate's vertical line


def test_several_classes_draw_their_p95s_in_their_own_colours(qapp):
    capacity = sweep("mixed")
    series, targets = chart_series(capacity)
    assert [s.name for s in series] == [f"{c} {m}" for c in ("customer-qa", "long-document", "code-review")
                                        for m in ("TTFT P95", "E2E P95")]
    assert len({s.colour for s in series}) == 3
    assert {t.label.split()[0] for t in targets} == {"customer-qa", "long-document", "code-review"}
    assert not load_chart_image(capacity).isNull()
