"""Finding the capacity on the Benchmark page, through the real widgets: the editor's rate-sweep fields (refused
with the reason for a workload without open-loop classes, checked as typed, nothing typed lost), a run against
the stand-in `ollama` with the ladder's progress, the capacity's figures, chart and steps live, in the PNG export
and reopened from the History tab."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage

from app.core.bench.capacity import REFINE_STEPS, STEP_SECONDS, Capacity, CapacityStatus, RateLadder, judge_step
from app.core.bench.scenario import BUILTIN_SCENARIOS
from app.core.bench.stats import LatencyTargets, RequestRecord
from app.core.server.state import ServerState
from app.services.bench.capacity import CapacityProgress
from app.ui.pages.bench.capacity_view import CapacityView
from tests.ui.pages.bench.test_bench_page import WAIT_MS
from tests.ui.pages.bench.test_scenario_page import make_editor, pick, type_into
from app.ui.widgets.load_chart import BACKGROUND, chart_series
from tests.ui.widgets.test_load_chart import sweep

ONE_CLASS = """name = "questions"

[[classes]]
name = "q"
prompt_tokens = 8
output_tokens = 6
arrival = { kind = "poisson", rate_rps = 20 }
targets = { e2e_p95_ms = 60000 }
"""


def type_rates(qtbot, editor, text: str) -> None:
    box = editor.capacity.rates
    box.setFocus()
    box.selectAll()
    qtbot.keyClick(box, Qt.Key.Key_Delete)
    qtbot.keyClicks(box, text)


def test_the_capacity_fields_are_refused_with_the_reason_where_no_rate_can_rise(qtbot):
    editor = make_editor(qtbot)
    editor.model.setEditText("qwen3:0.6b")
    group = editor.capacity
    assert not editor.uses_scenario
    assert not group.enabled.isEnabled() and "one prompt at one load has no classes to raise" in \
        group.enabled_message.message
    pick(qtbot, editor, "content-generation")  # closed-loop clients only
    assert not group.enabled.isEnabled()
    assert "scenario content-generation has no open-loop class" in group.enabled_message.message
    assert "content-generation has no open-loop class" in group.enabled.toolTip()
    pick(qtbot, editor, "customer-qa")
    assert group.enabled.isEnabled() and group.enabled_message.message == ""
    assert not group.rates.isEnabled()  # until the box is ticked
    assert editor.capacity_ask() is None


def test_rates_are_checked_as_typed_and_nothing_typed_is_lost(qtbot):
    editor = make_editor(qtbot)
    editor.model.setEditText("qwen3:0.6b")
    pick(qtbot, editor, "customer-qa")
    group = editor.capacity
    qtbot.mouseClick(group.enabled, Qt.MouseButton.LeftButton)
    assert group.enabled.isChecked() and group.rates.isEnabled()
    type_rates(qtbot, editor, "8:1")
    assert group.rates_message.severity == "error"
    assert group.rates_message.message == "'8:1': the stop (1) is below the start (8)"
    qtbot.mouseClick(editor.start_button, Qt.MouseButton.LeftButton)
    assert editor.message.severity == "error" and "Capacity: '8:1': the stop (1) is below the start (8)" in \
        editor.message.message
    assert group.rates.text() == "8:1"
    # Switching to a workload without open-loop classes and back keeps what was typed, and its problem.
    pick(qtbot, editor, "content-generation")
    assert not group.enabled.isEnabled() and editor.capacity_ask() is None and group.rates.text() == "8:1"
    assert group.rates_message.message == ""
    pick(qtbot, editor, "customer-qa")
    assert group.rates.text() == "8:1" and group.rates_message.message == "'8:1': the stop (1) is below the start (8)"
    type_rates(qtbot, editor, "0.5, 1, 2")
    assert group.rates_message.message == ""
    ask = editor.capacity_ask()
    assert ask is not None and ask.ladder == RateLadder(rates=(0.5, 1.0, 2.0), refine=REFINE_STEPS)
    assert ask.step_seconds is None
    # Per point auto: each point and step lasts the CLI's default seconds, so a step's count grows with its rate.
    spec = editor.spec()
    assert spec.workload.duration_s == STEP_SECONDS and spec.workload.requests is None
    assert "Then the capacity at the recommended point: 0.5, 1, 2 req/s" in editor.summary.text()
    type_rates(qtbot, editor, "")
    assert editor.capacity_ask().ladder == RateLadder()  # automatic
    group.step_seconds.setValue(30)
    assert editor.capacity_ask().step_seconds == 30.0


def test_the_capacity_view_shows_the_rate_what_broke_and_each_step(qtbot):
    view = CapacityView()
    qtbot.addWidget(view)
    view.resize(800, 900)
    view.show()
    capacity = sweep("customer-qa")
    assert capacity.status is CapacityStatus.FOUND and capacity.broke_at is not None
    view.set_capacity(capacity)
    assert view.rate.text() == f"{capacity.sustainable_rps:.3g} requests/s"
    assert view.per_day.text().startswith("≈ ") and view.per_day.text().endswith(" requests a day")
    assert f"At {capacity.broke_at.offered_rps:.3g} requests/s: customer-qa TTFT" in view.broke.text()
    assert view.steps.rowCount() == len(capacity.steps)
    verdicts = [view.steps.item(r, view.steps.columnCount() - 1).text() for r in range(view.steps.rowCount())]
    assert [v == "✓" for v in verdicts] == [s.met for s in capacity.steps]
    assert view.chart.drawn == ["TTFT avg", "TTFT P95", "E2E avg", "E2E P95"]
    assert "log scale" not in view.chart.title.text()
    assert_all_inside(view.chart, capacity)
    legend = view.chart.title.text()
    assert f"sustainable {capacity.sustainable_rps:.3g}/s" in legend and "broke at" in legend
    # A run whose sweep recommended nothing ran no ladder: said so, not "measuring".
    none = Capacity(capacity.scenario, capacity.ladder, notes=("No rate sweep: no point of the sweep was measured "
                                                                "to run it at.",))
    view.set_capacity(none)
    assert view.rate.text() == "not measured" and view.title.text().endswith("— no rate sweep")
    assert "No rate sweep: no point" in view.notes.text() and view.steps.isHidden()
    view.set_capacity(None)
    assert not view.isVisible()


def assert_all_inside(chart, capacity) -> None:
    """Every line and marker lies inside the axes, on a linear or a logarithmic scale alike."""
    plot = chart.plot.getPlotItem()
    (x0, x1), (y0, y1) = plot.viewRange()
    lines = [i for i in plot.items if isinstance(i, pg.InfiniteLine)]
    assert len([i for i in lines if i.angle == 0]) == 2  # customer-qa's TTFT avg and P95 targets
    assert all((y0 <= i.value() <= y1) if i.angle == 0 else (x0 <= i.value() <= x1) for i in lines)
    markers = 0
    for curve in plot.listDataItems():
        xs, ys = curve.getData()  # as drawn (in log10 where the axis is logarithmic)
        assert all(x0 <= x <= x1 for x in xs) and all(y0 <= y <= y1 for y in ys)
        markers += len(curve.scatter.points())
    assert markers == sum(len(s.points) for s in chart_series(capacity)[0])


def test_latencies_that_jump_are_drawn_on_a_logarithmic_axis_with_every_line_inside(qtbot):
    scenario = BUILTIN_SCENARIOS["customer-qa"]  # 1 request/s: a factor is a rate
    targets = LatencyTargets(ttft_p95_ms=None, tpot_p95_ms=None)
    capacity = Capacity(scenario, RateLadder(rates=(0.5, 1.0, 2.0, 4.0, 8.0), refine=0), targets=targets)
    for order, factor in enumerate((0.5, 1.0, 2.0, 4.0, 8.0)):
        wait = 0.02 * 4 ** order  # 20 ms to 5 s: a queue that grows
        records = [RequestRecord(index=i, scheduled_s=i / factor, sent_s=i / factor, end_s=i / factor + 2 * wait,
                                 first_token_s=i / factor + wait, output_tokens=5, request_class="customer-qa")
                   for i in range(6)]
        capacity = capacity.with_step(judge_step(factor, records, scenario, targets, capacity.ladder, order=order))
    view = CapacityView()
    qtbot.addWidget(view)
    view.resize(800, 900)
    view.show()
    view.set_capacity(capacity)
    assert "log scale" in view.chart.title.text()
    ticks = view.chart.plot.getPlotItem().getAxis("left")._tickLevels[0]
    assert [label for _pos, label in ticks] == ["0.02", "0.05", "0.1", "0.2", "0.5", "1", "2", "5", "10"]
    assert view.chart.plot.getPlotItem().getAxis("left").labelText == "latency (s, log scale)"
    assert_all_inside(view.chart, capacity)


def test_a_capacity_run_shows_its_ladder_live_exports_it_and_history_reopens_it(qtbot, page_factory, tmp_path):
    controller, page, _store = page_factory()
    controller.probe()
    qtbot.waitUntil(lambda: controller.status.state is ServerState.STOPPED, timeout=WAIT_MS)
    editor = page.editor
    editor.model.setEditText("qwen3:0.6b")
    editor.parallel.setText("1")
    pick(qtbot, editor, "customer-qa")
    type_into(qtbot, editor, ONE_CLASS)
    editor.requests.setValue(6)
    qtbot.mouseClick(editor.capacity.enabled, Qt.MouseButton.LeftButton)
    type_rates(qtbot, editor, "10, 20")
    editor.capacity.refine.setValue(0)
    progress: list[CapacityProgress] = []
    headlines: list[str] = []
    page.sweeps.capacity_progress.connect(progress.append)
    page.sweeps.capacity_progress.connect(lambda _p: headlines.append(page.progress.headline.text()))
    live: list[int] = []
    page.sweeps.capacity_step.connect(lambda _c: live.append(page.run_view.capacity.steps.rowCount()))
    with qtbot.waitSignal(page.sweeps.finished, timeout=WAIT_MS) as finished:
        qtbot.mouseClick(editor.start_button, Qt.MouseButton.LeftButton)
    run = finished.args[0]
    capacity = run.capacity
    assert capacity is not None and [s.offered_rps for s in capacity.steps] == [10.0, 20.0]
    assert {(p.step, p.offered_rps) for p in progress} == {(0, 10.0), (1, 20.0)}
    assert "Capacity · step 1 at 10 requests/s" in headlines and "Capacity · step 2 at 20 requests/s" in headlines
    assert live == [1, 2]  # the steps table grew as each step was judged
    view = page.run_view.capacity
    qtbot.waitUntil(view.isVisible, timeout=WAIT_MS)
    rate_text = view.rate.text()
    if capacity.sustainable_rps is not None:
        assert rate_text == f"{capacity.sustainable_rps:.3g} requests/s"
        assert f"Capacity: {capacity.sustainable_rps:.3g} requests/s." in page.progress.headline.text()
    assert view.steps.rowCount() == 2 and view.chart.drawn
    # The closing line (with the capacity) wraps beside the editor instead of widening the results panel.
    assert page.progress.minimumSizeHint().width() < 500 < page.progress.headline.fontMetrics().horizontalAdvance(
        page.progress.headline.text())
    # The PNG export has the load chart under the sweep's charts.
    path = tmp_path / "charts.png"
    assert page.run_view.export_to("png", str(path))
    image = QImage(str(path))
    # The off-screen load chart (white, as the CLI's --chart draws it) fills the bottom of the page's dark charts.
    bottom = {image.pixelColor(x, image.height() - 40).name() for x in range(0, image.width(), 5)}
    top = {image.pixelColor(x, 60).name() for x in range(0, image.width(), 5)}
    assert BACKGROUND.name() in bottom and BACKGROUND.name() not in top
    # Where the requests waited, one bar per measured point, under the axes the CLI names.
    waits = page.run_view.waits
    assert waits.isVisible() and [b.label for b in waits.chart.bars] == ["1 slot · cap none"]
    assert sum(waits.chart.bars[0].means_ms) > 0

    page.tabs.setCurrentIndex(1)
    history = page.history_view
    qtbot.waitUntil(lambda: history.table.rowCount() == 1, timeout=WAIT_MS)
    history.table.selectRow(0)
    with qtbot.waitSignal(history.loaded, timeout=WAIT_MS):
        qtbot.mouseClick(history.open_button, Qt.MouseButton.LeftButton)
    reopened = history.run_view.capacity
    qtbot.waitUntil(reopened.isVisible, timeout=WAIT_MS)
    assert reopened.rate.text() == rate_text and reopened.steps.rowCount() == 2
    assert reopened.chart.drawn == view.chart.drawn
