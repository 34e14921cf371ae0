"""The Prompt page feeds each finished reply to the app's watchdog and shows the reply's events under it, with real
widgets against the stand-in Ollama on a real socket: a prompt the server cut to fit a short context shows as a red
"prompt cut short" line with both numbers, its evidence and advice in the tooltip and behind Details."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from PySide6.QtCore import Qt

from app.adapters.aio import LoopThread
from app.backends.ollama.client import OllamaClient
from app.backends.ollama.supervisor import ServerSupervisor
from app.core.server.settings import ServerSettings
from app.core.server.url import settings_for_url
from app.core.watch.events import EventKind, Severity
from app.services.watchdog import Watchdog
from app.ui.pages.prompt.page import ConsolePage
from app.ui.server.controller import ServerController
from tests.fakes.ollama.fake_ollama import FakeOllama
from tests.ui.page_context import page_context_on

WAIT_MS = 20_000
CONTEXT = 256
LONG_PROMPT = " ".join(f"Paragraph {i} says the cache holds every token the model has seen." for i in range(60))


@dataclass
class Console:
    fake: FakeOllama
    page: ConsolePage
    watchdog: Watchdog

    def send_and_wait(self, qtbot, prompt: str):
        self.page.prompt_edit.setPlainText(prompt)
        with qtbot.waitSignal(self.page.session.run_finished, timeout=WAIT_MS) as finished:
            qtbot.mouseClick(self.page.send_button, Qt.MouseButton.LeftButton)
        return finished.args[0]


@pytest.fixture
def console(qtbot, make_fake_ollama):
    made = []

    def make(**fake_kwargs) -> Console:
        fake = make_fake_ollama(**fake_kwargs)
        loop = LoopThread(name="test-console-events-loop")
        controller = ServerController(loop, None, OllamaClient, lambda _s: None)
        controller.attach_supervisor(ServerSupervisor(settings_for_url(ServerSettings(), fake.url),
                                                      on_status=controller.on_status, on_log=controller.on_log))
        watchdog = Watchdog(subject=fake.url)
        page = ConsolePage(page_context_on(loop, server=controller, watchdog=watchdog))
        qtbot.addWidget(page)
        page.resize(1280, 720)
        page.show()
        made.append((page, controller, loop))
        controller.probe()
        qtbot.waitUntil(lambda: page.controls.model() == "qwen3:14b", timeout=WAIT_MS)
        page.controls.set_think(False)
        return Console(fake, page, watchdog)

    yield make
    for page, controller, loop in made:
        page.shutdown()
        controller.shutdown()
        loop.stop()


def test_a_cut_prompt_shows_under_its_reply_and_reaches_the_watchdog(qtbot, console) -> None:
    c = console(context_length=CONTEXT, tokens_per_s=2000.0, prompt_tokens_per_s=1e6, answer_tokens=6)
    run = c.send_and_wait(qtbot, LONG_PROMPT)
    outcome = run.outcomes[0]
    assert outcome.ok and outcome.stats.prompt_tokens == CONTEXT // 2 + 2
    reply = c.page.conversation.turns[-1].reply
    events = reply.events
    assert events.isVisible()
    (row,) = events.rows
    assert row.watch_event.kind is EventKind.PROMPT_TRUNCATED and row.watch_event.severity is Severity.SEVERE
    assert c.watchdog.events() == (row.watch_event,)  # the app's watchdog has it for the dashboard and the history
    text = row.line.text()
    assert "SEVERE" in text and "prompt cut short" in text and f"used {CONTEXT // 2 + 2} of the " in text
    assert f"at a context of {CONTEXT} tokens per slot" in text  # read from the loaded models after the reply
    assert events.note.isVisible() and "Not a clean reply: prompt cut short" in events.note.text()
    assert "prompt tokens sent" in row.line.toolTip() and "What to do:" in row.line.toolTip()
    assert not row.detail.isVisible()
    qtbot.waitUntil(lambda: row.toggle.height() > 0, timeout=WAIT_MS)  # laid out
    qtbot.mouseClick(row.toggle, Qt.MouseButton.LeftButton)
    assert row.detail.isVisible() and "used by the server" in row.detail.text()
    assert row.toggle.text() == "Details ▾"
    # the line fits the page's width: it wraps instead of widening the conversation
    assert row.line.width() <= c.page.conversation.viewport().width()

    # The next turn carries the cut one in its history: cut again, its own event; the earlier reply keeps its own
    c.send_and_wait(qtbot, "Summarise it.")
    (again,) = c.page.conversation.turns[-1].reply.events.rows
    assert again.watch_event.kind is EventKind.PROMPT_TRUNCATED and again.watch_event != row.watch_event
    assert events.rows == [row] and len(c.watchdog.events()) == 2
    # After Clear, a short prompt has nothing cut: its reply shows no events
    qtbot.mouseClick(c.page.clear_button, Qt.MouseButton.LeftButton)
    c.send_and_wait(qtbot, "hi")
    clean = c.page.conversation.turns[-1].reply.events
    assert clean.rows == [] and not clean.isVisible() and len(c.watchdog.events()) == 2


def test_an_ab_comparison_shows_each_replys_events(qtbot, console) -> None:
    c = console(context_length=CONTEXT, tokens_per_s=2000.0, prompt_tokens_per_s=1e6, thinking_tokens=4,
                answer_tokens=4)
    c.page.set_mode("ab")
    c.send_and_wait(qtbot, LONG_PROMPT)
    for index in (0, 1):
        (row,) = c.page.ab_view.column(index).reply.events.rows
        assert row.watch_event.kind is EventKind.PROMPT_TRUNCATED
    assert len(c.watchdog.events()) == 2


def test_a_burst_shows_one_line_per_kind_saying_how_many_replies_saw_it(qtbot, console) -> None:
    c = console(context_length=CONTEXT, tokens_per_s=2000.0, prompt_tokens_per_s=1e6, answer_tokens=4)
    c.page.set_mode("burst")
    c.page.copies.setValue(3)
    c.send_and_wait(qtbot, LONG_PROMPT)
    events = c.page.burst_view.events
    (row,) = events.rows
    assert row.watch_event.kind is EventKind.PROMPT_TRUNCATED and "(in 3 replies)" in row.line.text()
    assert events.isVisible() and len(c.watchdog.events()) == 3
    c.page.burst_view.reset(2)  # the next burst starts clean
    assert events.rows == [] and not events.isVisible()
