"""Scenarios on the Benchmark page, through the real widgets: picking and editing one (typed text checked
as it is typed, kept across choices, saved atomically), running it against the stand-in `ollama` with per-class
progress, and its per-class verdicts and charts live and reopened from the History tab."""

from __future__ import annotations

import json
import os

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog

from app.core.bench.scenario import BUILTIN_SCENARIOS, parse_scenario
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState
from app.ui.pages.bench.editor import SweepEditor
from tests.ui.pages.bench.test_bench_page import WAIT_MS
from tests.ui.pages.bench.measured import measured

TWO_CLASSES = """name = "support-and-review"

[[classes]]
name = "questions"
prompt_tokens = { dist = "normal", mean = 20, sd = 5, min = 5, max = 40 }
output_tokens = 6
arrival = { kind = "poisson", rate_rps = 200 }
targets = { ttft_avg_ms = 60000, e2e_p95_ms = 60000 }

[[classes]]
name = "review"
prompt_tokens = { dist = "uniform", min = 10, max = 30 }
output_tokens = 8
turns = 2
arrival = { kind = "closed", concurrency = 1 }
targets = { ttft_avg_ms = 0.001 }
"""


def make_editor(qtbot, **kwargs) -> SweepEditor:
    editor = SweepEditor(**kwargs)
    qtbot.addWidget(editor)
    editor.set_server(ServerSettings(), True, "")
    editor.show()
    return editor


def pick(qtbot, editor: SweepEditor, name: str) -> None:
    """Choose a built-in scenario as a person does: the workload combo, then the scenario combo, by keyboard."""
    kind = editor.workload_kind
    kind.setFocus()
    while kind.currentData() != "scenario":
        qtbot.keyClick(kind, Qt.Key.Key_Down)
    choice = editor.scenario.choice
    choice.setFocus()
    target = choice.findData(name)
    while choice.currentIndex() != target:
        qtbot.keyClick(choice, Qt.Key.Key_Down if choice.currentIndex() < target else Qt.Key.Key_Up)


def type_into(qtbot, editor: SweepEditor, text: str) -> None:
    """Replace the scenario's text by typing it."""
    box = editor.scenario.text
    box.setFocus()
    box.selectAll()
    qtbot.keyClick(box, Qt.Key.Key_Delete)
    type_more(qtbot, box, text)


def type_more(qtbot, box, text: str) -> None:
    """Type `text` where the cursor is, a line at a time (Return between lines)."""
    for n, line in enumerate(text.split("\n")):
        if n:
            qtbot.keyClick(box, Qt.Key.Key_Return)
        if line:
            qtbot.keyClicks(box, line)


def test_picking_a_built_in_shows_its_toml_and_its_classes_in_words(qtbot):
    editor = make_editor(qtbot)
    assert not editor.scenario.isVisible() and editor.prompts.isVisible()
    pick(qtbot, editor, "mixed")
    assert editor.uses_scenario and editor.scenario.isVisible() and not editor.prompts.isVisible()
    assert parse_scenario(editor.scenario.text.toPlainText()) == BUILTIN_SCENARIOS["mixed"]
    summary = editor.scenario.summary.text()
    for words in ("customer-qa</b> — 1 req/s Poisson", "~10,200 prompt tokens → ~320 out", "3 turns",
                  "targets TTFT avg ≤ 500 ms, TTFT P95 ≤ 600 ms"):
        assert words in summary
    editor.model.setEditText("qwen3:0.6b")
    spec = editor.spec()
    assert spec.workload.scenario == BUILTIN_SCENARIOS["mixed"]
    assert spec.workload.requests == 24  # 8 per class unless Per point says otherwise
    assert "scenario mixed (3 classes)" in editor.summary.text()


def test_an_invalid_line_is_refused_inline_with_the_parsers_reason_and_nothing_typed_is_lost(qtbot):
    editor = make_editor(qtbot)
    editor.model.setEditText("qwen3:0.6b")
    pick(qtbot, editor, "customer-qa")
    typed = TWO_CLASSES.replace("rate_rps = 200", "rate_rps = -2")  # typed keys are ASCII
    type_into(qtbot, editor, typed)
    message = editor.scenario.text_message
    line = next(n for n, text in enumerate(typed.splitlines(), 1) if "rate_rps = -2" in text)
    assert message.severity == "error"
    assert message.message.startswith(f"Line {line}: classes[0].arrival.rate_rps = -2: must be a number above 0")
    marks = editor.scenario.text.extraSelections()
    assert [m.cursor.blockNumber() + 1 for m in marks] == [line]  # the line at fault is marked
    qtbot.mouseClick(editor.start_button, Qt.MouseButton.LeftButton)
    assert editor.message.severity == "error" and "rate_rps = -2" in editor.message.message
    # A syntax error names the line TOML's parser names.
    type_more(qtbot, editor.scenario.text, "\nturns = ")
    lines = editor.scenario.text.toPlainText().splitlines()
    assert lines[-1] == "turns = "
    assert message.message == f"Line {len(lines)}: the scenario is not valid TOML: Invalid value (at end of document)"
    # Switching to another scenario and back finds the text as it was typed.
    mine = editor.scenario.text.toPlainText()
    pick(qtbot, editor, "code-review")
    assert "code-review" in editor.scenario.text.toPlainText() and message.message == ""
    pick(qtbot, editor, "customer-qa")
    assert editor.scenario.text.toPlainText() == mine and message.severity == "error"
    # Fixing it clears the message and the mark, and the sweep can be built.
    type_into(qtbot, editor, TWO_CLASSES)
    assert message.message == "" and not editor.scenario.text.extraSelections()
    assert editor.spec().workload.scenario.name == "support-and-review"


def test_scale_lengths_scales_every_length_and_says_so(qtbot):
    editor = make_editor(qtbot)
    editor.model.setEditText("qwen3:0.6b")
    pick(qtbot, editor, "long-document")
    box = editor.scenario.scale
    box.setFocus()
    box.selectAll()
    qtbot.keyClicks(box, "0.05")
    assert box.value() == 0.05
    scenario = editor.spec().workload.scenario
    assert scenario == BUILTIN_SCENARIOS["long-document"].scaled(0.05)
    assert "lengths × 0.05" in editor.scenario.summary.text() and "~510 prompt tokens" in editor.scenario.summary.text()
    assert "Multiplies every prompt and output length" in " ".join(
        label.text() for label in editor.scenario.findChildren(type(editor.scenario.summary)))


def test_save_as_writes_the_text_atomically_and_a_saved_file_opens_again(qtbot, tmp_path, monkeypatch):
    from app.adapters.storage.atomic_json import write_atomic

    editor = make_editor(qtbot, write_file=write_atomic)
    pick(qtbot, editor, "customer-qa")
    type_into(qtbot, editor, TWO_CLASSES)
    target = tmp_path / "mine.toml"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), ""))
    qtbot.mouseClick(editor.scenario.save_button, Qt.MouseButton.LeftButton)
    assert target.read_text(encoding="utf-8") == TWO_CLASSES
    assert editor.scenario.choice.currentText() == "mine.toml" and "Saved to" in editor.scenario.text_message.message
    assert not [p for p in os.listdir(tmp_path) if p != "mine.toml"]  # no temporary file left behind
    # A folder that cannot be written: said under the text, which stays as typed.
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(tmp_path / "nope" / "x.toml"), ""))
    qtbot.mouseClick(editor.scenario.save_button, Qt.MouseButton.LeftButton)
    assert editor.scenario.text_message.severity == "error" and "Could not save" in editor.scenario.text_message.message
    assert editor.scenario.text.toPlainText() == TWO_CLASSES
    # Opening the file from another editor gives the same scenario.
    other = make_editor(qtbot)
    other.workload_kind.setCurrentIndex(other.workload_kind.findData("scenario"))
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(target), ""))
    choice = other.scenario.choice
    choice.setFocus()
    for _ in range(choice.count()):  # down to "Open a file…", which opens the file the dialog gives
        if choice.currentText() == "mine.toml":
            break
        qtbot.keyClick(choice, Qt.Key.Key_Down)
    assert choice.currentText() == "mine.toml" and other.scenario.text.toPlainText() == TWO_CLASSES
    assert not other.scenario.open_file(str(tmp_path / "missing.toml"))
    assert "Cannot read" in other.scenario.choice_message.message and choice.currentText() == "mine.toml"


def test_a_scenario_sweep_reports_each_class_and_history_reopens_it(qtbot, page_factory, tmp_path):
    controller, page, _store = page_factory()
    controller.probe()
    qtbot.waitUntil(lambda: controller.status.state is ServerState.STOPPED, timeout=WAIT_MS)
    editor = page.editor
    editor.model.setEditText("qwen3:0.6b")
    editor.parallel.setText("1, 2")
    pick(qtbot, editor, "customer-qa")
    type_into(qtbot, editor, TWO_CLASSES)
    editor.requests.setValue(8)
    seen = []
    page.sweeps.progress.connect(lambda p: seen.append(p))
    shown_classes = []
    page.sweeps.progress.connect(lambda p: p.classes and shown_classes.append(page.progress.classes.text()))
    with qtbot.waitSignal(page.sweeps.finished, timeout=WAIT_MS) as finished:
        qtbot.mouseClick(editor.start_button, Qt.MouseButton.LeftButton)
    run = finished.args[0]
    assert [measured(r) for r in run.results] == [True, True], [(r.status, r.reason, [e.summary for e in r.events])
                                                                 for r in run.results]
    # Progress named each class's requests done, of its share of the 8 (200 req/s against one client: 7 and 1).
    last = [p for p in seen if p.classes and p.point == 0][-1]
    assert [(c.name, c.done, c.of) for c in last.classes] == [("questions", 7, 7), ("review", 1, 1)]
    assert any("<b>questions</b> 7 of 7 done" in text for text in shown_classes)
    assert any("<b>review</b> 1 of 1 done" in text for text in shown_classes)
    view = page.run_view.classes
    qtbot.waitUntil(lambda: view.isVisible(), timeout=WAIT_MS)
    assert view.point_choice.count() == 2 and view.point_choice.isVisible()
    verdicts = [label.text() for label in view.verdict_labels]
    assert "questions" in verdicts[0] and "targets met (TTFT avg ≤ 60000 ms, E2E P95 ≤ 60000 ms)" in verdicts[0]
    assert "review" in verdicts[1] and "missed TTFT avg ≤ 0.001 ms" in verdicts[1]
    assert view.ttft.bars_drawn == 4 and view.ttft.targets_drawn == 2 and view.e2e.targets_drawn == 1
    # The stand-in counts every prompt; the lengths asked for are known where the server could count them.
    point = view.current_point()
    known = [c.requested_prompt_tokens for c in point.classes] + [c.delivered_prompt_tokens for c in point.classes]
    assert all(c.delivered_prompt_tokens > 0 for c in point.classes)
    assert view.prompts.bars_drawn == sum(1 for x in known if x == x) >= 2
    # The JSON export carries the scenario and its classes as the CLI writes them.
    assert page.run_view.export_to("json", str(tmp_path / "run.json"))
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["scenario"]["name"] == "support-and-review"
    assert [[c["class"] for c in p["classes"]] for p in data["classes"]] == [["questions", "review"]] * 2

    page.tabs.setCurrentIndex(1)
    history = page.history_view
    qtbot.waitUntil(lambda: history.table.rowCount() == 1, timeout=WAIT_MS)
    history.table.selectRow(0)
    with qtbot.waitSignal(history.loaded, timeout=WAIT_MS):
        qtbot.mouseClick(history.open_button, Qt.MouseButton.LeftButton)
    reopened = history.run_view.classes
    assert history.run_view.run.spec.workload.scenario.name == "support-and-review"
    assert [label.text() for label in reopened.verdict_labels] == verdicts
    assert reopened.ttft.bars_drawn == 4 and reopened.prompts.bars_drawn == view.prompts.bars_drawn
