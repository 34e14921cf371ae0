"""The Server page's slot table fed by samples of the real llama-server (recorded, and live)."""

from __future__ import annotations

from app.adapters.aio import LoopThread
from app.backends.ollama.client import OllamaClient
from app.core.server.settings import ServerSettings
from app.core.server_telemetry import ServerSample
from app.ui.server.controller import ServerController
from app.ui.pages.server.page import ServerPage
from app.ui.pages.server.slots_view import SlotsView
from tests.ui.page_context import page_context_on
from tests.backends.llama_server.recorded_samples import recorded_samples


def test_busy_slots_show_their_progress(qtbot) -> None:
    view = SlotsView()
    qtbot.addWidget(view)
    _idle, busy, after = recorded_samples()
    view.set_sample(busy)
    assert view.summary.text() == "2 of 2 slots busy · 1 request waiting"
    assert view.table.rowCount() == 2
    assert [view.cell_text(0, c) for c in range(6)] == ["0", "busy", "41", "0", "1", "42 / 1,024 tokens"]
    assert [view.cell_text(1, c) for c in range(5)] == ["1", "busy", "41", "0", "2"]
    assert view.bars[1].value() == 43 and view.bars[1].maximum() == 1024
    view.set_sample(after)
    assert view.summary.text() == "0 of 2 slots busy · 0 requests waiting"
    assert [view.cell_text(0, c) for c in range(6)] == ["0", "idle", "—", "—", "—", "0 / 1,024 tokens"]


def test_a_server_without_slots_says_so(qtbot) -> None:
    view = SlotsView()
    qtbot.addWidget(view)
    no_slots = ServerSample(at=0.0, slots_total=None, slots_busy=None, requests_processing=0, requests_deferred=0,
                            kv_cache_fill=None, prompt_tokens_per_s=None, generation_tokens_per_s=None,
                            prompt_tokens_total=0.0, predicted_tokens_total=0.0,
                            slots_reason="/slots at http://127.0.0.1:8080: HTTP 501: This server does not support "
                                         "slots endpoint. Start it with `--slots`")
    view.set_sample(recorded_samples()[1])
    view.set_sample(no_slots)
    assert view.table.rowCount() == 0
    assert view.summary.text() == "The server does not report its slots · 0 requests waiting"
    view.set_notice("server metrics unavailable: " + no_slots.slots_reason)
    assert not view.notice.isHidden() and "Start it with `--slots`" in view.notice.text()


def test_the_server_page_shows_slots_in_a_tab(qtbot) -> None:
    with LoopThread() as loop:
        controller = ServerController(loop, None, OllamaClient, lambda _s: None, last_good=ServerSettings())
        page = ServerPage(page_context_on(loop, server=controller))
        qtbot.addWidget(page)
        tabs_before = page.tabs.count()
        view = SlotsView()
        page.show_slots(view)
        assert page.tabs.count() == tabs_before + 1 and page.tabs.tabText(1) == "Slots"
        assert page.tabs.widget(1) is view
        controller.shutdown()
