"""The Prompt console page driven like a user would, against the stand-in Ollama on a real socket."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.adapters.aio import LoopThread
from app.backends.ollama.client import OllamaClient
from app.backends.ollama.spec import OLLAMA
from app.adapters.storage.preset_store import PresetStore
from app.backends.ollama.supervisor import ServerSupervisor
from app.core.server.settings import ServerSettings
from app.core.throughput import TokenMeter
from app.ui.pages.prompt.page import ConsolePage
from app.ui.server.controller import ServerController
from app.core.server.url import settings_for_url
from tests.fakes.ollama.fake_ollama import FakeOllama
from tests.ui.page_context import page_context_on

WAIT_MS = 10_000


@dataclass
class Console:
    fake: FakeOllama
    page: ConsolePage
    meter: TokenMeter
    config: Path
    controller: ServerController

    def send_and_wait(self, qtbot, prompt: str = "Why is decode memory-bound?", timeout: int = WAIT_MS):
        self.page.prompt_edit.setPlainText(prompt)
        with qtbot.waitSignal(self.page.session.run_finished, timeout=timeout) as finished:
            qtbot.mouseClick(self.page.send_button, Qt.MouseButton.LeftButton)
        return finished.args[0]

    def chats(self) -> list[dict]:
        return [r.json for r in self.fake.requests if r.path == "/api/chat"]


@pytest.fixture
def console(qtbot, make_fake_ollama, tmp_path):
    made = []

    def make(**fake_kwargs) -> Console:
        fake = make_fake_ollama(**fake_kwargs)
        loop = LoopThread(name="test-console-loop")
        controller = ServerController(loop, None, OllamaClient, lambda _s: None)
        controller.attach_supervisor(ServerSupervisor(settings_for_url(ServerSettings(), fake.url),
                                                      on_status=controller.on_status, on_log=controller.on_log))
        meter = TokenMeter()
        page = ConsolePage(page_context_on(loop, server=controller, meter=meter, presets=PresetStore(tmp_path / "cfg")))
        qtbot.addWidget(page)
        page.resize(1270, 850)
        page.show()
        made.append((page, controller, loop))
        controller.probe()
        qtbot.waitUntil(lambda: page.controls.model() == "qwen3:14b"
                        and page.controls.thinking_supported is True, timeout=WAIT_MS)
        return Console(fake, page, meter, tmp_path / "cfg", controller)

    yield make
    for page, controller, loop in made:
        page.shutdown()
        controller.shutdown()
        loop.stop()


def rate(text: str) -> float:
    return float(text.split()[0].replace(",", ""))


def test_a_thinking_reply_streams_its_trace_apart_and_reports_its_figures(qtbot, console):
    c = console(tokens_per_s=250.0, thinking_tokens=16, answer_tokens=30)
    qtbot.mouseClick(c.page.controls.think_on, Qt.MouseButton.LeftButton)
    run = c.send_and_wait(qtbot)
    turn = c.page.conversation.turns[-1]
    assert turn.reply.thinking.isVisible() and turn.reply.thinking.plain_text().startswith("Okay, the user")
    assert turn.reply.answer_text().startswith("Local inference speed")
    assert "Thought for" in turn.reply.thinking.toggle.text() and "16 tokens" in turn.reply.thinking.toggle.text()
    stats = run.outcomes[0].stats
    assert (stats.thinking_tokens, stats.answer_tokens, stats.output_tokens) == (16, 30, 46)
    f = c.page.figures
    assert f.value("thinking") == "16" and f.value("answer") == "30"
    assert rate(f.value("decode")) == pytest.approx(250.0, rel=0.03)
    assert f.tiles["total"].detail == "done_reason: stop"
    assert "eval_count 46" in turn.reply.figures.text() and "done_reason stop" in turn.reply.figures.text()
    assert c.chats()[-1]["think"] is True
    assert c.meter.in_flight == 0 and c.meter.total_tokens == 46
    # The trace folds away and back.
    turn.reply.thinking.toggle.click()
    assert not turn.reply.thinking.text.isVisible()


def test_non_thinking_turns_make_a_conversation_until_cleared(qtbot, console):
    c = console(tokens_per_s=1000.0, answer_tokens=12)
    qtbot.mouseClick(c.page.controls.think_off, Qt.MouseButton.LeftButton)
    c.send_and_wait(qtbot, "First question")
    assert not c.page.conversation.turns[-1].reply.thinking.isVisible()
    assert c.page.figures.value("thinking") == "0"
    c.send_and_wait(qtbot, "Follow-up")
    body = c.chats()[-1]
    assert body["think"] is False
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][0]["content"] == "First question"
    qtbot.mouseClick(c.page.clear_button, Qt.MouseButton.LeftButton)
    assert c.page.conversation.turns == [] and c.page.history == []
    c.send_and_wait(qtbot, "Fresh start")
    assert len(c.chats()[-1]["messages"]) == 1


def test_options_and_system_prompt_are_sent(qtbot, console):
    c = console(tokens_per_s=1000.0, answer_tokens=40)
    ctl = c.page.controls
    ctl.system_edit.setPlainText("Answer in one line.")
    ctl.num_predict.setValue(7)
    ctl.temperature.setValue(0.3)
    ctl.seed.setValue(42)
    ctl.num_ctx.setValue(8192)
    run = c.send_and_wait(qtbot)
    body = c.chats()[-1]
    assert body["messages"][0] == {"role": "system", "content": "Answer in one line."}
    assert body["options"] == {"num_predict": 7, "temperature": 0.3, "seed": 42, "num_ctx": 8192}
    assert run.outcomes[0].stats.done_reason == "length" and c.page.figures.value("answer") == "7"
    note = c.page.conversation.turns[-1].reply.note
    assert note.isVisible() and "Stopped at the output cap of 7 tokens" in note.text() and "raise num_predict" in note.text()


def test_replies_are_capped_by_default_and_no_cap_is_a_choice_that_says_its_risk(qtbot, console):
    c = console(tokens_per_s=1000.0, answer_tokens=12)
    ctl = c.page.controls
    assert ctl.num_predict.value() == 2048 and "minutes" in ctl.num_predict.toolTip()
    assert not ctl.no_cap_note.isVisible()
    c.send_and_wait(qtbot)
    assert c.chats()[-1]["options"] == {"num_predict": 2048}
    assert not c.page.conversation.turns[-1].reply.note.isVisible()  # it ended by itself, under the cap
    ctl.num_predict.setValue(0)
    assert ctl.num_predict.text() == "no cap" and ctl.no_cap_note.isVisible()
    assert "generates until its context is full" in ctl.no_cap_note.message
    c.send_and_wait(qtbot)
    assert "options" not in c.chats()[-1] or "num_predict" not in c.chats()[-1]["options"]
    c.page.presets.choose("math-apples")  # a preset without its own cap gets the default one back
    assert ctl.num_predict.value() == 2048
    c.page.presets.save_current()
    assert not c.page.presets.combo.currentText().endswith("(edited)")


def test_stop_cancels_the_stream_at_once(qtbot, console):
    c = console(tokens_per_s=100.0, answer_tokens=1000)  # ten seconds if left alone
    c.page.prompt_edit.setPlainText("Write a long essay")
    qtbot.mouseClick(c.page.send_button, Qt.MouseButton.LeftButton)
    turn = c.page.conversation.turns[-1]
    qtbot.waitUntil(lambda: len(turn.reply.answer_text()) > 20, timeout=WAIT_MS)
    with qtbot.waitSignal(c.page.session.run_finished, timeout=3000):
        qtbot.mouseClick(c.page.stop_button, Qt.MouseButton.LeftButton)
        # The window is free again before anything else happens.
        assert c.page.send_button.isEnabled() and not c.page.stop_button.isEnabled()
    assert turn.reply.note.text().startswith("■ Stopped after")
    record = next(r for r in c.fake.requests if r.path == "/api/chat")
    assert record.finished.wait(5) and record.outcome == "client_gone"
    assert c.meter.in_flight == 0
    assert turn.reply.outcome.stopped and turn.reply.outcome.stats.answer_tokens < 1000


def test_an_in_band_error_is_shown_inline_with_ollamas_text(qtbot, console):
    c = console(tokens_per_s=1000.0)
    c.fake.fail_next("midstream_error", path="/api/chat", after_chunks=4)
    c.send_and_wait(qtbot)
    reply = c.page.conversation.turns[-1].reply
    assert reply.error.severity == "error"
    assert "an error was encountered while running the model: unexpected EOF" in reply.error.message
    assert reply.answer_text().startswith("Local inference")  # what came before the error stays
    assert c.page.history == []  # a failed turn is not sent back as context
    assert c.page.send_button.isEnabled()


def test_a_model_that_is_gone_gets_the_404_message(qtbot, console):
    c = console()
    c.fake.remove_model("qwen3:14b")
    c.send_and_wait(qtbot)
    reply = c.page.conversation.turns[-1].reply
    assert "model 'qwen3:14b' not found" in reply.error.message
    assert "Pull the model first" in reply.error.message and not reply.answer.isVisible()


def test_a_model_without_thinking_gets_the_switch_disabled_with_the_reason(qtbot, console):
    c = console(tokens_per_s=1000.0)
    ctl = c.page.controls
    qtbot.mouseClick(ctl.think_on, Qt.MouseButton.LeftButton)
    assert ctl.select_model("llama3.2:3b")
    qtbot.waitUntil(lambda: ctl.thinking_supported is False, timeout=WAIT_MS)
    assert not ctl.think_on.isEnabled() and not ctl.think_off.isEnabled()
    assert 'no "thinking" capability' in ctl.think_reason.text() and "completion, tools" in ctl.think_reason.text()
    c.send_and_wait(qtbot)
    assert "think" not in c.chats()[-1] and c.page.conversation.turns[-1].reply.outcome.ok
    # A/B cannot run on it: its button says why, in its tooltip and beside it.
    ab = c.page.mode_buttons["ab"]
    assert not ab.isEnabled() and "llama3.2:3b cannot think" in ab.toolTip() and "completion, tools" in ab.toolTip()
    assert c.page.ab_hint.isVisible() and c.page.ab_hint.full_text() == "A/B needs a model that can think"
    c.page.set_mode("ab")  # as a saved page state would
    assert not c.page.send_button.isEnabled() and "cannot think" in c.page.send_button.toolTip()
    assert c.page.send() is None and "A/B needs a model with the thinking capability" in c.page.message.message
    assert ctl.select_model("qwen3:14b")
    qtbot.waitUntil(lambda: ctl.thinking_supported is True, timeout=WAIT_MS)
    assert ab.isEnabled() and c.page.send_button.isEnabled() and not c.page.ab_hint.isVisible()


def test_a_thinking_preset_leaves_the_switch_of_a_model_that_cannot_think_off(qtbot, console):
    c = console(tokens_per_s=1000.0)
    ctl = c.page.controls
    assert ctl.select_model("llama3.2:3b")
    qtbot.waitUntil(lambda: ctl.thinking_supported is False, timeout=WAIT_MS)
    c.page.presets.choose("math-apples")  # "(thinking)"
    assert ctl.think_off.isChecked() and not ctl.think_on.isChecked()
    assert not ctl.think_on.isEnabled() and not ctl.think_off.isEnabled()
    assert "asks for thinking; not applied: llama3.2:3b cannot think" in c.page.presets.message.message
    assert "not applied to this model" in ctl.think_reason.text()
    c.send_and_wait(qtbot)
    assert "think" not in c.chats()[-1]
    # A model that can think gets the preset's mode back, and the user can switch it off again.
    assert ctl.select_model("qwen3:14b")
    qtbot.waitUntil(lambda: ctl.thinking_supported is True, timeout=WAIT_MS)
    assert ctl.think_on.isChecked() and ctl.think_on.isEnabled()
    qtbot.mouseClick(ctl.think_off, Qt.MouseButton.LeftButton)
    assert ctl.think_value() is False and ctl.thinking_choice() is False
    assert ctl.select_model("llama3.2:3b")
    qtbot.waitUntil(lambda: ctl.thinking_supported is False, timeout=WAIT_MS)
    c.page.presets.choose("ai-trends-essay-zh")  # a non-thinking preset applies without a word
    assert ctl.think_off.isChecked() and c.page.presets.message.message == ""


def test_effort_levels_are_offered_only_for_models_that_take_them(qtbot, console):
    from tests.fakes.ollama.fake_ollama_models import FakeModel, default_models

    c = console(models=[*default_models(), FakeModel("gpt-oss:20b", family="gptoss", think_levels=True)])
    ctl = c.page.controls
    assert not ctl.level_combo.isVisibleTo(c.page)
    c.page.refresh_models()
    qtbot.waitUntil(lambda: ctl.select_model("gpt-oss:20b"), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: ctl.thinking_supported is not None, timeout=WAIT_MS)
    # The fake's gpt-oss reports the qwen3 architecture in model_info; the family names the level-taker.
    assert ctl.level_combo.isVisibleTo(c.page)
    ctl.think_on.click()
    ctl.level_combo.setCurrentIndex(ctl.level_combo.findData("high"))
    c.send_and_wait(qtbot)
    assert c.chats()[-1]["think"] == "high"


def test_burst_sends_n_at_once_and_feeds_the_shared_meter(qtbot, console):
    c = console(tokens_per_s=400.0, answer_tokens=40, num_parallel=2)
    c.page.set_mode("burst")
    c.page.copies.setValue(6)
    peak = []
    c.page.session.run_progress.connect(lambda _run, _d: peak.append(c.meter.in_flight))
    run = c.send_and_wait(qtbot)
    view = c.page.burst_view
    assert [view.state(i) for i in range(6)] == ["done"] * 6
    summary = view.summary
    assert summary.completed == 6 and summary.output_tokens == 240
    assert summary.ttft_spread_ms >= 150  # three waves through two slots
    assert rate(view.tiles["per_reply"].value) == pytest.approx(400.0, rel=0.03)
    assert view.tiles["replies"].value == "6 / 6" and "6 of 6 replies" in view.summary_label.text()
    assert view.table.item(5, 9).text() == "stop"
    assert max(peak) == 6 and c.meter.in_flight == 0 and c.meter.total_tokens == 240
    assert len(run.outcomes) == 6 and len(c.chats()) == 6


def test_burst_stopped_midway_marks_every_unfinished_reply(qtbot, console):
    c = console(tokens_per_s=100.0, answer_tokens=500)
    c.page.set_mode("burst")
    c.page.copies.setValue(3)
    c.page.prompt_edit.setPlainText("Write a long essay")
    qtbot.mouseClick(c.page.send_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "streaming" in {c.page.burst_view.state(i) for i in range(3)}, timeout=WAIT_MS)
    with qtbot.waitSignal(c.page.session.run_finished, timeout=3000):
        c.page.stop()
    view = c.page.burst_view
    assert {view.state(i) for i in range(3)} == {"stopped"} and view.summary.stopped == 3  # queued ones too
    assert c.meter.in_flight == 0


def test_ab_puts_both_modes_side_by_side_with_the_cost_of_thinking(qtbot, console):
    c = console(tokens_per_s=500.0, thinking_tokens=30, answer_tokens=20)
    c.page.set_mode("ab")
    c.send_and_wait(qtbot)
    ab = c.page.ab_view
    assert ab.left.reply.thinking.plain_text().startswith("Okay,") and not ab.right.reply.thinking.isVisible()
    assert ab.left.values["thinking"].text() == "30" and ab.right.values["thinking"].text() == "0"
    assert ab.cost.extra_tokens == 30 and ab.cost_values["tokens"].text().startswith("+30")
    assert ab.cost.extra_first_answer_ms == pytest.approx(30 / 500 * 1e3, rel=0.5)
    assert [b["think"] for b in c.chats()] == [True, False]


def test_empty_panes_say_waiting_only_while_a_request_is_in_flight(qtbot, console):
    c = console(tokens_per_s=500.0, thinking_tokens=10, answer_tokens=10)
    ab = c.page.ab_view
    for column in (ab.left, ab.right):
        assert "Waiting" not in column.reply.answer.placeholderText()
        assert column.reply.answer.placeholderText().startswith("Nothing sent yet")
    c.page.set_mode("ab")
    c.page.prompt_edit.setPlainText("Why is decode memory-bound?")
    with qtbot.waitSignal(c.page.session.run_finished, timeout=WAIT_MS):
        assert c.page.send() is not None
        assert ab.left.reply.answer.placeholderText() == "Waiting for the first token…"
        assert ab.right.reply.answer.placeholderText().startswith("Queued")
    c.page.set_mode("chat")
    c.page.prompt_edit.setPlainText("Once more")
    with qtbot.waitSignal(c.page.session.run_finished, timeout=WAIT_MS):
        c.page.send()
        assert c.page.conversation.turns[-1].reply.answer.placeholderText() == "Waiting for the first token…"


def test_presets_fill_the_form_and_edits_are_kept(qtbot, console):
    c = console()
    bar = c.page.presets
    bar.choose("math-apples")
    assert "苹果" in c.page.prompt_edit.toPlainText() and c.page.controls.think_on.isChecked()
    bar.choose("ai-trends-essay-zh")
    assert c.page.controls.think_off.isChecked()
    c.page.prompt_edit.setPlainText("请用中文写一篇关于人工智能发展趋势的100字短文")
    c.page.controls.num_predict.setValue(256)
    bar.save_current()
    saved = c.config / "presets.json"
    qtbot.waitUntil(lambda: saved.exists() and "100字" in saved.read_text("utf-8"), timeout=WAIT_MS)
    assert json.loads(saved.read_text("utf-8"))["presets"][0]["num_predict"] == 256
    assert bar.combo.currentText().endswith("(edited)") and bar.reset_button.isEnabled()
    # A new window sees the edit; Reset brings the article's prompt back and saves that too.
    again = PresetStore(c.config).load().presets
    assert next(p for p in again if p.key == "ai-trends-essay-zh").prompt.endswith("100字短文")
    bar.reset_or_delete()
    assert c.page.prompt_edit.toPlainText() == "请用中文写一篇关于人工智能发展趋势的300字短文"
    qtbot.waitUntil(lambda: json.loads(saved.read_text("utf-8"))["presets"] == [], timeout=WAIT_MS)
    mine = bar.save_as("My check")
    assert mine is not None and bar.reset_button.text() == "Delete"
    assert bar.save_as("   ") is None and "no title" in bar.message.message


def test_a_long_document_can_be_loaded_into_the_prompt(qtbot, console, tmp_path):
    c = console()
    doc = tmp_path / "doc.txt"
    doc.write_text("第一章 " * 3000, "utf-8")
    c.page.prompt_edit.setPlainText("Summarize:")
    c.page.insert_file(doc)
    assert c.page.prompt_edit.toPlainText().startswith("Summarize:\n\n第一章")
    c.page.insert_file(tmp_path / "missing.txt")
    assert "Could not read" in c.page.message.message


def test_nothing_to_send_says_why(qtbot, console):
    c = console()
    c.page.prompt_edit.setPlainText("   ")
    assert c.page.send() is None and "Type a prompt" in c.page.message.message


def test_without_a_server_the_page_says_where_to_start_one(qtbot, tmp_path):
    loop = LoopThread(name="test-console-loop")
    controller = ServerController(loop, None, OllamaClient, lambda _s: None)
    controller.attach_supervisor(ServerSupervisor(settings_for_url(ServerSettings(), "http://127.0.0.1:9"),
                                                  on_status=controller.on_status, which=lambda _name: None))
    page = ConsolePage(page_context_on(loop, server=controller, meter=TokenMeter(), presets=PresetStore(tmp_path)))
    qtbot.addWidget(page)
    try:
        with qtbot.waitSignal(controller.status_changed, timeout=WAIT_MS):
            controller.probe()
        qtbot.waitUntil(lambda: page.controls.model_message.severity == "error", timeout=WAIT_MS)
        assert "No server answers at http://127.0.0.1:9" in page.controls.model_message.message
        page.prompt_edit.setPlainText("hello")
        assert page.send() is None and "Choose a model first" in page.message.message
    finally:
        page.shutdown()
        controller.shutdown()
        loop.stop()


def test_finished_answers_render_as_markdown_and_the_source_is_kept(qtbot):
    from app.ui.pages.prompt.reply import ReplyView

    view = ReplyView(words=OLLAMA.reply_words)
    qtbot.addWidget(view)
    source = "# Result\n\n- **391** is the product\n- check: `17 * 23`\n"
    for piece in (source[:9], source[9:30], source[30:]):
        view.append("", piece)
    assert view.answer.toPlainText() == source  # streamed as plain text
    view.finish(None, stopped=True)
    shown = view.answer.toPlainText()
    assert "# Result" not in shown and "**" not in shown and "Result" in shown and "391" in shown
    assert view.answer.document().findBlockByNumber(0).blockFormat().headingLevel() == 1
    assert view.answer_text() == source
    view.set_markdown(False)
    assert view.answer.toPlainText() == source
    view.set_markdown(True)
    assert "**" not in view.answer.toPlainText()


def test_a_conversation_exports_as_markdown_and_json(qtbot, console, tmp_path):
    c = console(tokens_per_s=1000.0, thinking_tokens=6, answer_tokens=10)
    assert not c.page.export_button.isEnabled()
    qtbot.mouseClick(c.page.controls.think_on, Qt.MouseButton.LeftButton)
    c.page.controls.system_edit.setPlainText("Be brief.")
    c.send_and_wait(qtbot, "First question")
    qtbot.mouseClick(c.page.controls.think_off, Qt.MouseButton.LeftButton)
    c.send_and_wait(qtbot, "Second question")
    assert c.page.export_button.isEnabled()
    md_path, json_path = tmp_path / "talk.md", tmp_path / "talk.json"
    assert c.page.export_conversation("md", md_path) and c.page.export_conversation("json", json_path)
    assert "talk.json" in c.page.export_status.full_text() and "2 turns" in c.page.export_status.full_text()
    text = md_path.read_text(encoding="utf-8")
    assert "## Turn 1 · qwen3:14b · Thinking" in text and "## Turn 2 · qwen3:14b · Non-thinking" in text
    assert "> First question" in text and "> Be brief." in text and "<summary>Thinking</summary>" in text
    assert "Local inference speed" in text and "done_reason stop" in text
    doc = json.loads(json_path.read_text(encoding="utf-8"))
    first, second = doc["turns"]
    assert first["think"] is True and second["think"] is False and first["system"] == "Be brief."
    assert first["figures"]["thinking_tokens"] == 6 and second["figures"]["answer_tokens"] == 10
    assert second["answer"] == c.page.conversation.turns[1].reply.answer_text()
    # A folder that cannot be written: the reason, and the conversation stays.
    assert not c.page.export_conversation("md", tmp_path / "missing" / "talk.md")
    assert "Could not export" in c.page.message.message and len(c.page.conversation.turns) == 2


def test_a_prompt_sent_during_a_sweep_goes_out_with_a_warning(qtbot, console):
    c = console(tokens_per_s=1000.0, answer_tokens=5)
    c.controller.hold("A benchmark sweep is running.")
    c.send_and_wait(qtbot, "Quick check")
    assert c.page.message.severity == "warning" and "competes with its measured requests" in c.page.message.message
    assert c.chats()[-1]["messages"][-1]["content"] == "Quick check"
    c.controller.release()
    c.send_and_wait(qtbot, "After the sweep")
    assert c.page.message.severity == ""


def test_a_finished_burst_exports_its_replies_as_csv_and_json(qtbot, console, tmp_path):
    import csv

    c = console(tokens_per_s=1000.0, answer_tokens=12, thinking_tokens=0, num_parallel=2)
    c.page.set_mode("burst")
    assert c.page.export_button.isVisible() and not c.page.export_button.isEnabled()  # nothing sent yet
    assert not c.page.markdown_check.isVisible()
    assert [a.text() for a in c.page.export_button.menu().actions()] == [
        "Burst replies as CSV…", "Burst as JSON (with the summary)…"]
    assert not c.page.export_burst("csv", tmp_path / "none.csv") and "send a burst first" in c.page.message.message
    c.page.copies.setValue(4)
    c.send_and_wait(qtbot, "Count to twelve")
    assert c.page.export_button.isEnabled()
    assert c.page.export_burst("csv", tmp_path / "burst.csv") and c.page.export_burst("json", tmp_path / "burst.json")
    assert "4 replies" in c.page.export_status.full_text()
    rows = list(csv.DictReader((tmp_path / "burst.csv").open(encoding="utf-8")))
    assert [r["reply"] for r in rows] == ["1", "2", "3", "4"] and {r["state"] for r in rows} == {"done"}
    assert all(r["eval_count"] == "12" and r["done_reason"] == "stop" and float(r["ttft_ms"]) > 0 for r in rows)
    doc = json.loads((tmp_path / "burst.json").read_text(encoding="utf-8"))
    assert (doc["model"], doc["prompt"], doc["copies"]) == ("qwen3:14b", "Count to twelve", 4)
    assert doc["summary"]["completed"] == 4 and doc["summary"]["eval_tokens"] == 48
    assert doc["replies"][0]["figures"]["answer_tokens"] == 12
    # A long file name does not squeeze the buttons beside the message: it is cut, whole in its tooltip.
    long_name = tmp_path / ("burst-replies-of-the-long-context-check-on-the-embedded-engine-" * 2 + "0130.csv")
    assert c.page.export_burst("csv", long_name)
    qtbot.waitUntil(lambda: c.page.export_status.is_elided(), timeout=WAIT_MS)
    for button in (c.page.send_button, c.page.stop_button, c.page.export_button, c.page.copies):
        assert button.width() >= button.sizeHint().width(), button.text() if hasattr(button, "text") else button
    status = c.page.export_status
    assert status.full_text() == f"Saved 4 replies to {long_name.name}" and status.full_text() in status.toolTip()
    assert str(long_name) in status.toolTip()
    c.page.set_mode("chat")  # the chat menu comes back, and the conversation is empty
    assert [a.text() for a in c.page.export_button.menu().actions()][0] == "Conversation as Markdown…"
    assert not c.page.export_button.isEnabled()


def test_an_ab_comparison_exports_both_sides_and_the_cost_of_thinking(qtbot, console, tmp_path):
    c = console(tokens_per_s=1000.0, thinking_tokens=30, answer_tokens=20)
    c.page.set_mode("ab")
    assert [a.text() for a in c.page.export_button.menu().actions()] == [
        "Comparison as Markdown…", "Comparison as JSON…"]
    assert not c.page.export_button.isEnabled()
    c.send_and_wait(qtbot, "Why is decode memory-bound?")
    assert c.page.export_button.isEnabled()
    assert c.page.export_comparison("md", tmp_path / "ab.md") and c.page.export_comparison("json", tmp_path / "ab.json")
    text = (tmp_path / "ab.md").read_text(encoding="utf-8")
    assert text.count("> Why is decode memory-bound?") == 1  # the prompt once, for both sides
    assert "## With thinking · Thinking" in text and "## Without thinking · Non-thinking" in text
    assert text.count("<summary>Thinking</summary>") == 1 and "## Cost of thinking" in text and "+30 tokens" in text
    doc = json.loads((tmp_path / "ab.json").read_text(encoding="utf-8"))
    assert doc["with_thinking"]["figures"]["thinking_tokens"] == 30 and doc["without_thinking"]["think"] is False
    assert doc["cost_of_thinking"]["extra_tokens"] == 30
    assert doc["with_thinking"]["answer"] == c.page.ab_view.left.reply.answer_text()


def test_saved_presets_this_version_cannot_use_are_shown_kept_and_their_copy_named(qtbot, console, tmp_path):
    config = tmp_path / "cfg"
    config.mkdir()
    (config / "presets.json").write_text(json.dumps({"version": 1, "presets": [
        {"key": "user-a", "title": "A", "prompt": "hi", "tags": ["x"]},
        {"key": "user-b", "title": "B", "prompt": "p", "think": "maximum"}]}), "utf-8")
    c = console()
    bar = c.page.presets
    assert "think must be" in bar.message.message and str(config / "presets.json") in bar.message.message
    bar.choose("user-a")
    bar.reset_or_delete()  # deletes the user's preset, and with it the field this version does not know
    qtbot.waitUntil(lambda: "is kept at" in bar.message.message, timeout=WAIT_MS)
    [copy] = config.glob("presets.json.backup-*")
    assert str(copy) in bar.message.message and '"tags"' in copy.read_text("utf-8")
    assert '"maximum"' in (config / "presets.json").read_text("utf-8")  # the entry it skipped stays
