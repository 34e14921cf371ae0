"""Before and after on the Benchmark page, through the real widgets against the stand-in `ollama`: the server's
own defaults measured as one more point and set against the recommended setting, as the CLI's --compare."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.core.bench.compare import Outcome
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState
from tests.ui.pages.bench.test_bench_page import WAIT_MS
from tests.ui.pages.bench.test_scenario_page import make_editor, pick, type_into
from tests.ui.pages.bench.test_capacity_page import ONE_CLASS
from app.backends.ollama.spec import OLLAMA


def test_before_after_needs_a_server_ollama_deck_starts_and_says_so(qtbot):
    editor = make_editor(qtbot, server_defaults=OLLAMA.tuning.server_defaults)
    assert editor.compare.isEnabled() and editor.compare_message.message == ""
    editor.set_server(ServerSettings(), False, "attached")
    assert not editor.compare.isEnabled()
    assert "needs a server ollama-deck starts" in editor.compare_message.message


def test_the_defaults_are_measured_and_set_against_the_recommendation(qtbot, page_factory):
    controller, page, _store = page_factory()
    controller.probe()
    qtbot.waitUntil(lambda: controller.status.state is ServerState.STOPPED, timeout=WAIT_MS)
    editor = page.editor
    editor.model.setEditText("qwen3:0.6b")
    editor.parallel.setText("2")
    pick(qtbot, editor, "customer-qa")
    type_into(qtbot, editor, ONE_CLASS)
    editor.requests.setValue(6)
    qtbot.mouseClick(editor.compare, Qt.MouseButton.LeftButton, pos=editor.compare.rect().center())
    assert editor.compare.isChecked()
    spec = editor.spec()
    assert spec.default_settings is not None and any(p.default for p in spec.plan().points)
    with qtbot.waitSignal(page.sweeps.finished, timeout=WAIT_MS) as finished:
        qtbot.mouseClick(editor.start_button, Qt.MouseButton.LeftButton)
    run = finished.args[0]
    comparison = run.comparison
    assert comparison is not None and any(r.point.default for r in run.results)
    view = page.run_view.compare
    qtbot.waitUntil(view.isVisible, timeout=WAIT_MS)
    assert "Default" in view.sides.text() and view.table.rowCount() > 0
    names = {view.table.item(r, 1).text() for r in range(view.table.rowCount())}
    assert {"E2E avg (ms)", "TTFT P95 (ms)", "output tokens/s", "requests/day"} <= names
    if comparison.outcome is Outcome.COMPARED:
        assert view.table.columnCount() == 5 and "Recommended" in view.sides.text()
    assert view.chart.pixmap() is not None and not view.chart.pixmap().isNull()
