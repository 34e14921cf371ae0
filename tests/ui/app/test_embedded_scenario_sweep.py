"""A scenario sweep from the Benchmark page on the real embedded engine (llama-server on the bundled model),
lengths scaled down so it takes seconds: per-class progress, verdicts and charts, with the prompt lengths the
engine counted against those asked for."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.core.server.state import ServerState
from app.ui.app.main import DeckApp
from tests.ui.pages.bench.test_scenario_page import pick

WAIT_MS = 180_000  # a ceiling for a loaded 2-core machine; the sweep takes seconds


def _args(tmp_path: Path) -> argparse.Namespace:
    return argparse.Namespace(config_dir=str(tmp_path / "cfg"), url=None, page="bench", screenshot=None,
                              backend=None, demo=True)


def scenario_on_the_engine(qtbot, tmp_path: Path, deck_factory, scenario: str, scale: str, requests: int,
                           wait_ms: int = WAIT_MS) -> DeckApp:
    """The window in demo mode with its engine running, the Benchmark page set to sweep `scenario` at parallel
    1 with its lengths times `scale` and `requests` requests, typed as a person would."""
    deck: DeckApp = deck_factory(_args(tmp_path))
    qtbot.waitUntil(lambda: deck.controller.status.state is ServerState.RUNNING_MANAGED, timeout=wait_ms)
    editor = deck.bench_page.editor
    qtbot.waitUntil(lambda: bool(editor.model.currentText()), timeout=wait_ms)  # the engine's model, listed
    editor.parallel.setText("1")
    pick(qtbot, editor, scenario)
    box = editor.scenario.scale
    box.setFocus()
    box.selectAll()
    qtbot.keyClicks(box, scale)
    editor.requests.setValue(requests)
    return deck


@pytest.mark.engine
def test_a_scaled_down_scenario_runs_on_the_embedded_engine_from_the_page(qtbot, tmp_path, deck_factory,
                                                                          llama_server_binary, bundled_model):
    deck = scenario_on_the_engine(qtbot, tmp_path, deck_factory, "mixed", "0.01", 3)  # one request of each class
    page = deck.bench_page
    editor = page.editor
    classes_seen = []
    page.sweeps.progress.connect(lambda p: p.classes and classes_seen.append(p.classes))
    with qtbot.waitSignal(page.sweeps.finished, timeout=WAIT_MS) as finished:
        qtbot.mouseClick(editor.start_button, Qt.MouseButton.LeftButton)
    run = finished.args[0]
    (result,) = run.results
    assert run.spec.workload.scenario.scale == 0.01 and result.ran  # stable or not: others share this CPU
    assert result.stats.requests_failed == 0, result.detail
    assert [(c.name, c.done, c.of) for c in classes_seen[-1]] == [("customer-qa", 1, 1), ("long-document", 1, 1),
                                                                   ("code-review", 1, 1)]
    view = page.run_view.classes
    assert not view.isHidden() and view.point_choice.isHidden()  # one point: nothing to choose
    assert [label.objectName() for label in view.verdict_labels] == ["verdict_customer-qa", "verdict_long-document",
                                                                     "verdict_code-review"]
    assert all(("targets met" in label.text()) != ("missed" in label.text()) for label in view.verdict_labels)
    (point,) = view.points
    # llama-server counts each request's messages whole: the lengths asked for are known and were used whole.
    for c in point.classes:
        assert c.requested_prompt_tokens == c.delivered_prompt_tokens > 0
    assert view.prompts.bars_drawn == 6 and view.ttft.bars_drawn == 6 and view.e2e.bars_drawn == 6
    assert view.ttft.targets_drawn == 4  # customer-qa's two, long-document's and code-review's averages
