"""A run's view: re-judging a stored run against other targets, from its recorded requests."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.ui.pages.bench.results import RunView
from tests.adapters.storage.test_history import make_run


def test_a_run_is_rejudged_against_new_targets_without_re_running(qtbot):
    view = RunView()
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
    view = RunView()
    qtbot.addWidget(view)
    view.set_run(make_run())
    view.card.targets.ttft.setValue(50)
    view.rejudge()
    fresh = make_run(points=2)
    view.set_run(fresh)
    assert view.card.targets.targets() == fresh.spec.targets and view.run is fresh
