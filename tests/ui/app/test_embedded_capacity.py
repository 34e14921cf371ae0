"""Finding the capacity from the Benchmark page on the real embedded engine (llama-server on the bundled model),
lengths scaled down and a few requests a step, so it takes seconds: the rate sweep runs at the sweep's one
setting after its point, each step judged, the figures and steps on the page."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from tests.ui.pages.bench.test_capacity_page import type_rates
from tests.ui.app.test_embedded_scenario_sweep import scenario_on_the_engine

WAIT_MS = 240_000  # a ceiling for a loaded 2-core machine; the run takes seconds


@pytest.mark.engine
def test_the_capacity_of_a_scaled_down_scenario_on_the_embedded_engine(qtbot, tmp_path, deck_factory,
                                                                       llama_server_binary, bundled_model):
    deck = scenario_on_the_engine(qtbot, tmp_path, deck_factory, "customer-qa", "0.02", 3, WAIT_MS)
    page = deck.bench_page
    editor = page.editor
    editor.capacity.enabled.setFocus()
    qtbot.keyClick(editor.capacity.enabled, Qt.Key.Key_Space)  # the window is not shown: by keyboard
    type_rates(qtbot, editor, "0.5, 1")
    editor.capacity.refine.setValue(0)
    assert editor.capacity_ask() is not None
    steps_seen = []
    page.sweeps.capacity_step.connect(lambda c: steps_seen.append(len(c.steps)))
    with qtbot.waitSignal(page.sweeps.finished, timeout=WAIT_MS) as finished:
        qtbot.mouseClick(editor.start_button, Qt.MouseButton.LeftButton)
    run = finished.args[0]
    capacity = run.capacity
    assert capacity is not None, (run.status, [(r.status, r.reason, r.detail) for r in run.results])
    assert capacity.setting  # ran at the sweep's one setting
    assert capacity.notes[0].startswith("The rate sweep ran at the sweep's one setting")
    offered = [s.offered_rps for s in capacity.steps]
    assert offered[0] == 0.5 and offered == sorted(offered) and steps_seen == list(range(1, len(offered) + 1))
    assert all(s.stats.requests == 3 for s in capacity.steps if not s.failure)
    view = page.run_view.capacity
    assert not view.isHidden() and view.steps.rowCount() == len(offered)
    big = view.rate.text()
    assert big == (f"{capacity.sustainable_rps:.3g} requests/s" if capacity.sustainable_rps is not None
                   else "not sustainable")  # a loaded CPU may miss even the lowest rate: either is said
