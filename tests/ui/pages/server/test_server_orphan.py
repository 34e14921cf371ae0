"""The Server page on a server left behind by a killed ollama-deck: a real app-like parent started the
stand-in `ollama` and was SIGKILLed; the page drives a real supervisor through the real controller."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.adapters.storage.apply_history import ApplyHistory
from app.adapters.storage.settings_store import SettingsStore
from app.backends.ollama.client import OllamaClient
from app.backends.ollama.supervisor import ServerSupervisor
from app.backends.ollama.tuning import OLLAMA_TUNING
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState
from app.services.guarded_apply import GuardedApplier
from app.ui.server.controller import ServerController
from app.ui.pages.server.page import ServerPage
from tests.fakes.ollama.app_like_parent import is_gone, start_app_like_parent, wait_gone
from tests.fakes.ollama.server_fixtures import free_port
from tests.fakes.scripted_gpu import ScriptedGpuBackend
from tests.ui.page_context import page_context_on

WAIT_MS = 10_000


def test_the_page_names_the_orphan_and_its_stop_button_stops_it(qtbot, supervisor_loop, standin_ollama, tmp_path):
    port = free_port()
    runtime_dir = tmp_path / "config" / "run"
    parent = start_app_like_parent(port, runtime_dir, die_with_app=False)
    parent.kill()

    settings = ServerSettings(port=port)
    store = SettingsStore(tmp_path / "config", OLLAMA_TUNING)
    controller = ServerController(supervisor_loop, None, OllamaClient, store.save, last_good=settings)
    supervisor = ServerSupervisor(settings, on_status=controller.on_status, on_log=controller.on_log,
                                  start_timeout_s=5.0, stop_grace_s=0.5, health_interval_s=0.2,
                                  runtime_dir=runtime_dir)
    no_gpu = ScriptedGpuBackend(available=False, reason="no NVIDIA driver")
    controller.attach_supervisor(supervisor, GuardedApplier(supervisor, OllamaClient, no_gpu,
                                                            record=ApplyHistory(tmp_path / "h.sqlite3").add))
    page = ServerPage(page_context_on(supervisor_loop, server=controller))
    qtbot.addWidget(page)
    page.show()
    try:
        controller.probe()
        qtbot.waitUntil(lambda: page._status.orphan, timeout=WAIT_MS)

        assert page._status.state is ServerState.RUNNING_MANAGED
        message = page.card.message.text()
        assert f"pid {parent.server_pid}" in message and "closed without stopping it" in message
        assert "left behind by an earlier ollama-deck" in page.card.title.text()
        assert f"pid {parent.server_pid}" in page.card._details["Process"].text()
        assert "log file" in page.log_view.text.placeholderText()
        qtbot.waitUntil(lambda: "Listening on" in page.log_view.plain_text(), timeout=WAIT_MS)
        qtbot.waitUntil(page.stop_button.isEnabled, timeout=WAIT_MS)
        assert not page.start_button.isEnabled()
        assert all(not is_gone(pid) for pid in parent.tree)

        qtbot.mouseClick(page.stop_button, Qt.MouseButton.LeftButton)

        qtbot.waitUntil(lambda: page._status.state is ServerState.STOPPED, timeout=WAIT_MS)
        assert wait_gone(parent.tree) == []
        assert f"pid {parent.server_pid}" in page.card.message.text() and not page.stop_button.isEnabled()
        qtbot.waitUntil(page.start_button.isEnabled, timeout=WAIT_MS)
    finally:
        controller.shutdown()
