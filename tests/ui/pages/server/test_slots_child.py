"""The Slots tab and the "command as logged" box fed by what the real Ollama 0.32.15 logged about its
llama-server child and that child's recorded /slots (tests/data/ollama/)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QPushButton

from app.adapters.aio import LoopThread
from app.adapters.http.llama_slots import parse_slots
from app.backends.ollama.child import ChildWatch
from app.backends.ollama.child_telemetry import NO_METRICS, source_text
from app.backends.ollama.client import OllamaClient
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState, ServerStatus
from app.core.server_telemetry import RateTracker, ServerReading, ServerSample
from app.ui.server.controller import ServerController
from app.ui.pages.server.logged_command import LoggedCommand
from app.ui.pages.server.page import ServerPage
from app.ui.pages.server.slots_view import SlotsView
from tests.ui.page_context import page_context_on

DATA = Path(__file__).resolve().parents[3] / "data" / "ollama"
OLLAMA_URL = "http://127.0.0.1:11434"


def recorded_child() -> ChildWatch:
    watch = ChildWatch()
    lines = (DATA / "log_starting_llama_server.txt").read_text().splitlines()
    second_server = [i for i, line in enumerate(lines) if "Listening on" in line][1]
    for line in lines[:second_server]:  # the first server: -np 2, -c 2048
        watch.feed(line)
    return watch


def child_sample(name: str, watch: ChildWatch, at: float = 0.0) -> ServerSample:
    slots, skipped = parse_slots(json.loads((DATA / f"child_slots_{name}.json").read_text()))
    state = watch.state
    reading = ServerReading(at=at, slots=slots, metrics_reason=NO_METRICS, skipped_lines=skipped)
    return replace(RateTracker().sample(reading), source=source_text(state, OLLAMA_URL),
                   server_command=state.command.text)


def test_the_childs_slots_show_busy_then_idle_with_where_they_come_from(qtbot) -> None:
    view = SlotsView()
    qtbot.addWidget(view)
    commands: list[str] = []
    view.command_logged.connect(commands.append)
    watch = recorded_child()
    busy = child_sample("busy", watch)
    view.set_sample(busy)
    assert view.summary.text() == "1 of 2 slots busy"  # no queue length: the child has no /metrics
    decoded = busy.slots[1].decoded
    assert [view.cell_text(1, c) for c in range(6)] == ["1", "busy", "18", "0", str(decoded), "26 / 1,024 tokens"]
    assert not view.source.isHidden()
    assert view.source.text() == ("Ollama's llama-server at 127.0.0.1:35195 · -np 2 · -c 2048 (1024 per slot) · "
                                  "-b 512 -ub 512 · flash-attn auto · KV f16 · loaded in 5.68 s")
    view.set_sample(child_sample("after", watch, at=1.0))
    assert view.summary.text() == "0 of 2 slots busy"
    assert [view.cell_text(r, 1) for r in range(2)] == ["idle", "idle"]
    assert commands == [watch.state.command.text]  # said once, not once a sample
    assert "--port 35195" in commands[0] and "-np 2" in commands[0]


def test_a_child_that_exited_is_named_and_its_slots_are_gone(qtbot) -> None:
    view = SlotsView()
    qtbot.addWidget(view)
    watch = recorded_child()
    view.set_sample(child_sample("busy", watch))
    watch.mark_gone(watch.state.generation, "llama-server on port 35195 no longer answers")
    state = watch.state
    gone = replace(RateTracker().sample(ServerReading(at=2.0, slots=None, slots_reason=state.gone)),
                   source=source_text(state, OLLAMA_URL), server_command=state.command.text)
    view.set_sample(gone)
    assert view.table.rowCount() == 0 and view.summary.text() == "No slots to show now"
    assert view.source.text().startswith("Ollama's last llama-server (127.0.0.1:35195) has exited")


def test_the_server_page_shows_the_command_as_logged_and_when_its_run_ended(qtbot) -> None:
    with LoopThread() as loop:
        controller = ServerController(loop, None, OllamaClient, lambda _s: None, last_good=ServerSettings())
        page = ServerPage(page_context_on(loop, server=controller))
        qtbot.addWidget(page)
        view = SlotsView()
        page.show_slots(view)
        box = page.logged_command
        assert box.isHidden()  # nothing logged yet: only the form's prediction is shown
        box.set_running(True)  # as set_status does for a running server (which would also list its models)
        watch = recorded_child()
        view.set_sample(child_sample("idle", watch))
        assert not box.isHidden() and box.title.text() == LoggedCommand.TITLE
        assert box.text.text() == watch.state.command.text
        page.set_status(ServerStatus(ServerState.STOPPED, "stopped"))
        assert box.title.text() == LoggedCommand.ENDED_TITLE and box.text.text() == watch.state.command.text
        box.set_running(True)  # started again: the old command stays marked as the ended run's
        assert box.title.text() == LoggedCommand.ENDED_TITLE
        view.set_sample(replace(child_sample("idle", watch), server_command=""))  # no child of the new run yet
        assert box.title.text() == LoggedCommand.ENDED_TITLE and not box.isHidden()
        controller.shutdown()


def test_copy_takes_the_command_word_for_word(qtbot) -> None:
    box = LoggedCommand()
    qtbot.addWidget(box)
    command = recorded_child().state.command.text
    box.set_command(command)
    box.findChild(QPushButton).click()
    assert QGuiApplication.clipboard().text() == command
