"""The server-telemetry poller on the real asyncio loop thread: against the real llama-server, a closed
port, and a backend without the capability."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from app.adapters.aio import LoopThread
from app.core.telemetry_buffers import TelemetryBuffers
from app.backends.ollama.spec import OLLAMA
from app.core.server.state import ServerState, ServerStatus
from app.core.server_telemetry import ServerColumn
from app.ui.app.telemetry_poller import UNAVAILABLE_PREFIX, ServerTelemetryPoller
from app.ui.pages.dashboard.page import DashboardPage
from app.ui.pages.server.slots_view import SlotsView
from tests.backends.llama_server.engine_server import llama_server, post_json
from tests.backends.llama_server.recorded_samples import REPORTING_SPEC
from tests.fakes.scripted_gpu import gpu_with
from tests.fakes.raw_http import closed_port

RUNNING = ServerStatus(ServerState.RUNNING_MANAGED)
STOPPED = ServerStatus(ServerState.STOPPED)
LOAD_WAIT_MS = 240_000


@pytest.fixture
def loop():
    with LoopThread() as running:
        yield running


def test_a_closed_port_is_said_once_however_many_polls_fail(qtbot, loop) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    poller = ServerTelemetryPoller(loop, REPORTING_SPEC, lambda: url, interval_s=0.05)
    notices: list[str] = []
    poller.notice_changed.connect(notices.append)
    poller.on_status(RUNNING)
    qtbot.waitUntil(lambda: len(poller.ring) >= 6, timeout=10_000)
    poller.close()
    qtbot.waitUntil(lambda: not poller.polling and bool(notices), timeout=5000)
    assert len(notices) == 1 and notices[0].startswith(UNAVAILABLE_PREFIX)
    assert f"/metrics at {url} did not answer" in notices[0] and poller.latest is None


def test_a_backend_without_the_capability_is_never_polled(qtbot, loop) -> None:
    no_slots = replace(OLLAMA, capabilities=replace(OLLAMA.capabilities, reports_slots=False))
    poller = ServerTelemetryPoller(loop, no_slots, lambda: "http://127.0.0.1:11434")
    assert not poller.enabled
    poller.on_status(RUNNING)
    assert not poller.polling and len(poller.ring) == 0


@pytest.mark.engine
def test_dashboard_and_slot_table_follow_the_real_server_under_load(qtbot, page_context, loop, llama_server_binary: Path,
                                                                   bundled_model: Path, tmp_path: Path) -> None:
    flags = ("-np", "2", "-c", "2048", "-t", "2", "--metrics")
    with llama_server(llama_server_binary, bundled_model, tmp_path, flags) as server:
        poller = ServerTelemetryPoller(loop, REPORTING_SPEC, lambda: server.base_url, interval_s=0.5)
        page = DashboardPage(page_context(backend=REPORTING_SPEC, loop=loop, samples=TelemetryBuffers(interval_s=0.5),
                                          server_ring=poller.ring, gpu=gpu_with(None, "no NVIDIA driver")))
        slots = SlotsView()
        poller.sample_ready.connect(slots.set_sample)
        for widget in (page, slots):
            qtbot.addWidget(widget)
            widget.show()
        poller.on_status(RUNNING)
        qtbot.waitUntil(lambda: page.tiles["slots"].value == "0 / 2 busy", timeout=30_000)
        assert poller.latest is not None and poller.latest.predicted_tokens_total is not None
        counted_before = poller.latest.predicted_tokens_total
        body = {"messages": [{"role": "user", "content": "Tell a long story about a lighthouse keeper."}],
                "max_tokens": 48, "temperature": 0}
        replies: list[dict] = []
        threads = [threading.Thread(target=lambda: replies.append(post_json(f"{server.base_url}/v1/chat/completions",
                                                                            body))) for _ in range(3)]
        for thread in threads:
            thread.start()
        qtbot.waitUntil(lambda: page.tiles["slots"].value == "2 / 2 busy"
                        and page.tiles["slots"].detail.startswith("1 waiting"), timeout=LOAD_WAIT_MS)
        assert slots.summary.text() == "2 of 2 slots busy · 1 request waiting"
        assert [slots.cell_text(r, 1) for r in range(2)] == ["busy", "busy"]
        qtbot.waitUntil(lambda: len(replies) == 3 and slots.summary.text().startswith("0 of 2"), timeout=LOAD_WAIT_MS)
        for thread in threads:
            thread.join()
        # llama-server adds a reply to its counter a moment after it frees the slot: poll until it has
        # taken in all three (the server's own count), then stop.
        generated = sum(r["timings"]["predicted_n"] for r in replies)
        qtbot.waitUntil(lambda: poller.latest.predicted_tokens_total - counted_before == generated,
                        timeout=LOAD_WAIT_MS)
        poller.on_status(STOPPED)
        assert poller.notice == ""
        qtbot.waitUntil(lambda: not poller.polling, timeout=5000)
    t, rows = poller.ring.view()
    rates = rows[:, ServerColumn.GENERATION_TOKENS_PER_S]
    assert np.isnan(rates[0]) and not np.isnan(rates[1:]).any() and (rates[1:] >= 0).all()
    # The rates drawn add up to exactly what the replies say was generated: nothing lost, nothing twice.
    assert float(np.sum(rates[1:] * np.diff(t))) == pytest.approx(sum(r["timings"]["predicted_n"] for r in replies))


def test_a_restart_empties_the_slot_table_until_the_server_runs_again(qtbot, loop) -> None:
    from tests.backends.llama_server.recorded_samples import recorded_samples

    url = f"http://127.0.0.1:{closed_port()}"
    poller = ServerTelemetryPoller(loop, REPORTING_SPEC, lambda: url, interval_s=0.05)
    view = SlotsView()
    qtbot.addWidget(view)
    poller.stopped.connect(view.clear)
    view.set_sample(recorded_samples()[1])  # two busy slots from the last run
    poller.on_status(RUNNING)
    qtbot.waitUntil(lambda: poller.polling, timeout=5000)
    with qtbot.waitSignal(poller.stopped, timeout=5000) as stopped:
        poller.on_status(ServerStatus(ServerState.STARTING))
    assert stopped.args == ["starting"]
    assert view.table.rowCount() == 0 and view.shown is None
    assert view.summary.text() == "The server is starting: slots are read while it runs."
    poller.close()
