"""A run's view: re-judging a stored run against other targets, from its recorded requests."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.ui.pages.bench.results import RunView
from tests.adapters.storage.test_history import make_run
from tests.ui.page_context import run_documents


def test_a_run_is_rejudged_against_new_targets_without_re_running(qtbot):
    view = RunView(**run_documents())
    qtbot.addWidget(view)
    view.resize(1200, 900)
    run = make_run()  # TTFT 100 ms for every request; judged against TTFT p95 ≤ 1000 ms
    view.set_run(run)
    card = view.card
    assert card.targets.targets() == run.spec.targets
    assert run.recommendation.index is not None and "no point met" not in card.flags.text()
    assert "re-judged" not in view.facts.text()

    card.targets.ttft.setValue(50)  # tighter than any request's first token
    qtbot.mouseClick(card.rejudge_button, Qt.MouseButton.LeftButton)
    assert view.run.recommendation.index is None and "no point met the targets" in card.flags.text()
    assert "re-judged: TTFT p95 ≤ 50 ms" in view.facts.text() and "ran with TTFT p95 ≤ 1000 ms" in view.facts.text()
    assert all(r.stats.goodput_rps == 0 for r in view.run.results if r.stats)  # goodput recomputed, too
    assert view.measured is run and view.run.results[0].records == run.results[0].records
    assert not card.apply_button.isEnabled()

    card.targets.set_targets(run.spec.targets)
    qtbot.mouseClick(card.rejudge_button, Qt.MouseButton.LeftButton)
    assert view.run is run and "re-judged" not in view.facts.text()


def test_a_new_run_resets_the_targets_to_its_own(qtbot):
    view = RunView(**run_documents())
    qtbot.addWidget(view)
    view.set_run(make_run())
    view.card.targets.ttft.setValue(50)
    view.rejudge()
    fresh = make_run(points=2)
    view.set_run(fresh)
    assert view.card.targets.targets() == fresh.spec.targets and view.run is fresh


def test_a_run_on_a_server_that_reports_its_slots_shows_them_and_no_empty_gpu_columns(qtbot):
    from dataclasses import replace

    from app.core.bench.sweep import GpuFigures, ServerFigures

    view = RunView(**run_documents())
    qtbot.addWidget(view)
    run = make_run()
    results = tuple(replace(r, gpu=GpuFigures(), server=ServerFigures(samples=5, slots_total=r.point.parallel,
                                                                       slots_busy_max=r.point.parallel,
                                                                       requests_deferred_max=0, generated_tokens=64.0,
                                                                       window_s=2.0))
                    for r in run.results)
    run = replace(run, results=results, fingerprint=replace(run.fingerprint, backend_kind="llama_server",
                                                            server_version="b6123"))
    view.set_run(run)
    table = view.table
    headers = [table.horizontalHeaderItem(i).text() for i in range(table.columnCount())]
    assert "Peak VRAM\n(GiB)" not in headers and "Tokens/J" not in headers  # no GPU readings anywhere
    assert headers[-4:] == ["Slots\nbusy", "Waiting", "Server\ntok/s", "Stable?"]
    busy = headers.index("Slots\nbusy")
    first = run.results[0]
    assert table.item(0, busy).text() == f"{first.point.parallel}/{first.point.parallel}"
    assert table.item(0, headers.index("Server\ntok/s")).text() == "32.0"
    assert "/slots" in table.horizontalHeaderItem(busy).toolTip()
    assert view.facts.text().startswith("llama-server b6123")


def test_a_contended_point_is_marked_with_its_numbers_in_the_tooltip_and_left_out_of_the_recommendation(qtbot):
    from dataclasses import replace

    from app.core.bench.contention import Competitor, CpuUse, judge
    from app.core.bench.outcome import PointStatus, RunStatus

    view = RunView(**run_documents())
    qtbot.addWidget(view)
    run = make_run()
    contention = judge(CpuUse(10.0, 2, 20.0, 13.0, 0.8, (Competitor("stress", 4242, 0.31),)), None)
    first = replace(run.results[0], status=PointStatus.UNSTABLE, reason=contention.short_text(), detail=contention.text(),
                    contention=contention)
    run = replace(run, results=(first, *run.results[1:]), status=RunStatus.RUNNING).finished(RunStatus.FINISHED, run.finished_at)
    view.set_run(run)
    table = view.table
    stable = table.item(0, table.columnCount() - 1)
    assert stable.text() == "⚠ CPU contended"
    tip = stable.toolTip()
    assert "31 % of the 2 CPU cores" in tip and "stress (pid 4242)" in tip and "0 % idle" in tip
    assert "★" not in table.item(0, 0).text() and "★" in table.item(1, 0).text()  # the recommendation is measured alone
    assert "1 contended point left out" in view.card.flags.text()
    assert "Left out, measured while other programs competed" in view.card.text.text()


def test_long_flags_wrap_inside_the_card_instead_of_widening_it(qtbot):
    view = RunView(**run_documents())
    qtbot.addWidget(view)
    view.resize(560, 900)  # the right panel beside the editor at 1280×720
    view.show()
    view.set_run(make_run())
    flags = [("nothing measured alone: every point shared the device", "#f0b429"),
             ("3 contended points left out of the recommendation", "#f0b429"), ("edge of range", "#f0b429")]
    view.card.set_text("One sentence. Another one.", flags)
    assert view.card.minimumSizeHint().width() <= 560
    assert view.minimumSizeHint().width() <= 560
    qtbot.waitUntil(lambda: view.card.flags.height() > view.card.flags.fontMetrics().height() * 1.5)  # two lines
    assert view.card.flags.geometry().right() <= view.card.width()


def test_a_servers_own_memory_that_is_not_known_says_so_and_the_card_does_not_stand_in(qtbot):
    import os
    from dataclasses import replace
    from pathlib import Path

    from app.core.bench.sweep import GpuFigures, ServerPeakUnknown

    view = RunView(**run_documents())
    qtbot.addWidget(view)
    view.resize(1200, 500)
    run = make_run(points=2)
    figures = GpuFigures(card_peak_mib=134_758.0, util_mean_pct=90.0, server_unknown=ServerPeakUnknown.NOT_ATTRIBUTED)
    results = tuple(replace(r, gpu=figures, estimate_peak_mib=15_360.0) if r.ran else r for r in run.results)
    view.set_run(replace(run, results=results))
    table = view.table
    headers = [table.horizontalHeaderItem(i).text() for i in range(table.columnCount())]
    peak, card = headers.index("Peak VRAM\n(GiB)"), headers.index("Card VRAM\n(GiB)")
    assert (table.item(0, peak).text(), table.item(0, card).text()) == ("n/a", "131.6")
    tip = table.item(0, peak).toolTip()
    assert "the server's own peak not known (the driver does not report each process's memory)" in tip
    assert "The whole card peaked at 131.6 GiB, other programs included." in tip
    assert "n/a where the driver does not say" in table.horizontalHeaderItem(peak).toolTip()
    folder = os.environ.get("DECK_SHOTS", "").strip()
    if folder:
        view.show()
        assert table.grab().save(str(Path(folder) / "bench-table-server-memory-not-known.png"))
