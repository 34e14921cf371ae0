"""The Server page driving a real supervisor, a real stand-in `ollama` subprocess and a real settings file."""

from __future__ import annotations


import psutil
import pytest
from PySide6.QtCore import Qt

from app.adapters.storage.apply_history import ApplyHistory
from app.services.guarded_apply import GuardedApplier
from app.backends.ollama.client import OllamaClient
from app.adapters.storage.settings_store import SettingsStore
from app.backends.ollama.supervisor import ServerSupervisor
from app.backends.ollama.tuning import OLLAMA_TUNING
from app.core.server.state import ServerState
from app.core.server.settings import ServerSettings
from app.ui.server.controller import ServerController
from app.ui.app.header import Header
from app.ui.pages.server.page import ServerPage
from tests.fakes.scripted_gpu import ScriptedGpuBackend
from tests.ui.page_context import page_context_on
from tests.fakes.ollama.server_fixtures import free_port, is_gone
from tests.fakes.ollama.recorded import real_version
from app.core.units import GIB

WAIT_MS = 10_000


@pytest.fixture
def page_factory(qtbot, supervisor_loop, standin_ollama, tmp_path):
    """Build (controller, page, store) around a supervisor with small timeouts."""
    made = []

    def make(settings: ServerSettings | None = None, **supervisor_kwargs):
        settings = (settings or ServerSettings(port=free_port())).replace(backend="ollama")  # an Ollama page
        store = SettingsStore(tmp_path / "config", OLLAMA_TUNING)
        controller = ServerController(supervisor_loop, None, OllamaClient, store.save, last_good=settings)
        options = {"start_timeout_s": 5.0, "stop_grace_s": 0.5, "health_interval_s": 0.2}
        options.update(supervisor_kwargs)
        supervisor = ServerSupervisor(
            settings, on_status=controller.on_status, on_log=controller.on_log, **options)
        no_gpu = ScriptedGpuBackend(available=False, reason="no NVIDIA driver")
        history = ApplyHistory(tmp_path / "history.sqlite3")
        controller.attach_supervisor(supervisor, GuardedApplier(supervisor, OllamaClient, no_gpu, record=history.add))
        page = ServerPage(page_context_on(supervisor_loop, server=controller))
        page.fit_panel.set_gpu(24 * GIB)  # as the composition root feeds it from NVML: a 24 GiB card
        qtbot.addWidget(page)
        page.resize(1300, 850)
        page.show()
        made.append(controller)
        return controller, page, store

    yield make
    for controller in made:
        controller.shutdown()


def wait_state(qtbot, page: ServerPage, state: ServerState, timeout: int = WAIT_MS) -> None:
    qtbot.waitUntil(lambda: page._status.state is state, timeout=timeout)


def test_start_stop_managed_server_streams_its_log(qtbot, page_factory):
    controller, page, _store = page_factory()
    controller.probe()
    wait_state(qtbot, page, ServerState.STOPPED)
    qtbot.waitUntil(lambda: page.start_button.isEnabled(), timeout=WAIT_MS)
    assert not page.stop_button.isEnabled()

    qtbot.mouseClick(page.start_button, Qt.LeftButton)
    wait_state(qtbot, page, ServerState.RUNNING_MANAGED)
    qtbot.waitUntil(lambda: "Listening on" in page.log_view.plain_text(), timeout=WAIT_MS)
    pids = controller.server_pids()
    assert pids and all(psutil.pid_exists(p) for p in pids)
    qtbot.waitUntil(lambda: page.stop_button.isEnabled(), timeout=WAIT_MS)
    assert not page.start_button.isEnabled()
    assert "managed by ollama-deck" in page.card._details["Process"].text()
    assert page.card._details["Version"].text() == real_version()

    qtbot.mouseClick(page.stop_button, Qt.LeftButton)
    wait_state(qtbot, page, ServerState.STOPPED)
    qtbot.waitUntil(lambda: all(is_gone(p) for p in pids), timeout=WAIT_MS)


def test_apply_restarts_with_new_settings_and_saves_them(qtbot, page_factory):
    controller, page, store = page_factory()
    controller.start()
    wait_state(qtbot, page, ServerState.RUNNING_MANAGED)
    qtbot.waitUntil(lambda: not controller._busy, timeout=WAIT_MS)
    assert not page.apply_button.isEnabled()  # nothing changed yet
    first_pids = controller.server_pids()

    page.form.findChild(object, "num_parallel").setValue(4)
    qtbot.waitUntil(lambda: page.apply_button.isEnabled(), timeout=WAIT_MS)
    assert page.apply_button.text() == "Apply and restart"
    qtbot.mouseClick(page.apply_button, Qt.LeftButton)

    qtbot.waitUntil(lambda: "OLLAMA_NUM_PARALLEL:4" in page.log_view.plain_text(), timeout=WAIT_MS)
    wait_state(qtbot, page, ServerState.RUNNING_MANAGED)
    qtbot.waitUntil(lambda: not controller._busy, timeout=WAIT_MS)
    assert all(is_gone(p) for p in first_pids)
    assert store.load().settings.num_parallel == 4
    assert not page.apply_button.isEnabled()


def test_crash_shows_exit_code_and_last_lines(qtbot, page_factory, monkeypatch):
    monkeypatch.setenv("FAKE_OLLAMA_CRASH_AFTER_S", "1.0")
    monkeypatch.setenv("FAKE_OLLAMA_CRASH_EXIT_CODE", "3")
    controller, page, _store = page_factory()
    controller.start()
    wait_state(qtbot, page, ServerState.RUNNING_MANAGED)
    wait_state(qtbot, page, ServerState.CRASHED)
    assert page._status.exit_code == 3
    assert page.banner.isVisible()
    assert "Last log lines" in page.banner.text and "panic" in page.banner.text
    assert "exited with code 3" in page.card._details["Process"].text()
    assert page.start_button.isEnabled()


def test_attached_server_cannot_be_stopped_and_explains_how_to_apply(qtbot, page_factory, external_standin):
    external = external_standin()
    controller, page, _store = page_factory(ServerSettings(port=external.port))
    controller.probe()
    wait_state(qtbot, page, ServerState.RUNNING_ATTACHED)
    qtbot.waitUntil(lambda: not controller._busy, timeout=WAIT_MS)
    assert not page.stop_button.isEnabled() and not page.start_button.isEnabled()
    assert "never stops what it did not start" in page.reason_label.text()
    assert page.tabs.isTabVisible(page.hint_tab_index) and page.hint_text.text()

    page.form.findChild(object, "num_parallel").setValue(2)
    qtbot.waitUntil(lambda: page.apply_button.isEnabled(), timeout=WAIT_MS)
    assert "not ours" in page.reason_label.text()
    qtbot.mouseClick(page.apply_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: "OLLAMA_NUM_PARALLEL=2" in page.hint_text.text(), timeout=WAIT_MS)
    controller.shutdown()
    assert external.process.poll() is None  # still running: not ours to stop


def test_missing_binary_disables_start_with_reason(qtbot, page_factory):
    controller, page, _store = page_factory(which=lambda _name: None)
    controller.probe()
    wait_state(qtbot, page, ServerState.NOT_INSTALLED)
    assert not page.start_button.isEnabled()
    assert "Ollama program is found" in page.reason_label.text()
    assert "Install Ollama" in page.card.message.text()


def test_a_chosen_program_that_is_missing_is_named_on_the_card(qtbot, page_factory, tmp_path):
    missing = str(tmp_path / "no-such-ollama")
    controller, page, _store = page_factory(ServerSettings(port=free_port()).with_options(ollama_binary=missing))
    controller.probe()
    wait_state(qtbot, page, ServerState.NOT_INSTALLED)
    assert page.card._details["Binary"].text() == missing
    assert page.form.findChild(object, "ollama_binary_edit").text() == missing


def test_port_taken_by_something_else_is_reported_and_left_alone(qtbot, page_factory, plain_http_server):
    port = plain_http_server.server_address[1]
    controller, page, _store = page_factory(ServerSettings(port=port))
    controller.probe()
    wait_state(qtbot, page, ServerState.PORT_CONFLICT)
    assert page.banner.isVisible() and str(port) in page.banner.text
    assert not page.start_button.isEnabled()
    assert "another port" in page.reason_label.text()


def test_invalid_form_blocks_apply_and_start_with_reason(qtbot, page_factory):
    controller, page, _store = page_factory()
    controller.probe()
    wait_state(qtbot, page, ServerState.STOPPED)
    page.form.findChild(object, "keep_alive").setText("soon")
    qtbot.waitUntil(lambda: not page.apply_button.isEnabled(), timeout=WAIT_MS)
    assert not page.start_button.isEnabled()
    assert "Fix the fields marked in red" in page.reason_label.text()


def test_header_follows_status(qtbot, page_factory):
    controller, page, _store = page_factory()
    header = Header("Ollama")
    qtbot.addWidget(header)
    controller.status_changed.connect(header.set_status)
    controller.start()
    qtbot.waitUntil(lambda: header.state_pill.text() == ServerState.RUNNING_MANAGED.value, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: header.version_label.text() == f"Ollama {real_version()}", timeout=WAIT_MS)


def _running_with_prices(qtbot, page_factory, settings=None):
    controller, page, store = page_factory(settings or ServerSettings(
        port=free_port(), context_length=4096, flash_attention="on"))
    controller.start()
    wait_state(qtbot, page, ServerState.RUNNING_MANAGED)
    qtbot.waitUntil(lambda: page.fit_panel.estimate is not None, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: not controller._busy, timeout=WAIT_MS)
    return controller, page, store


def test_fit_panel_prices_the_form_as_it_changes(qtbot, page_factory):
    _controller, page, _store = _running_with_prices(qtbot, page_factory)
    panel = page.fit_panel
    assert panel.model_name == "qwen3:14b"
    assert panel.estimate.verdict == "fits"
    assert panel.verdict_label.text().startswith("Fits")
    assert panel.heatmap.cell_at(1, 4096).verdict == "fits"

    page.form.findChild(object, "num_parallel").setValue(32)  # 32 slots x 4096 tokens x 160 KiB = 20 GiB of KV
    qtbot.waitUntil(lambda: panel.estimate.verdict in ("spills", "wont_load"), timeout=WAIT_MS)
    assert panel.estimate.kv_bytes == 20 * GIB
    assert any(w in panel.verdict_label.text() for w in ("Spills", "Won't load"))

    panel.heatmap.cell_clicked.emit(2, 8192)  # as a click on that cell does
    qtbot.waitUntil(lambda: panel.estimate.verdict == "fits", timeout=WAIT_MS)
    assert (page.form.settings().num_parallel, page.form.settings().context_length) == (2, 8192)


def test_risky_apply_asks_first_and_an_oom_rolls_back(qtbot, page_factory, monkeypatch):
    monkeypatch.setenv("FAKE_OLLAMA_OOM_ABOVE_MIB", "12000")
    controller, page, store = _running_with_prices(qtbot, page_factory)
    good = controller.settings
    page.form.set_settings(page.form.settings().replace(num_parallel=16, context_length=32768))
    page.fit_panel.set_settings(page.form.settings())
    page._refresh()
    qtbot.waitUntil(lambda: page.fit_panel.estimate.verdict in ("spills", "wont_load"), timeout=WAIT_MS)

    qtbot.mouseClick(page.apply_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: page.confirm_dialog is not None and page.confirm_dialog.isVisible(), timeout=WAIT_MS)
    assert "on the CPU" in page.confirm_dialog.text() or "out-of-memory" in page.confirm_dialog.text()
    keep = [b for b in page.confirm_dialog.buttons() if b.text() == "Keep current settings"][0]
    keep.click()
    qtbot.waitUntil(lambda: page.confirm_dialog is None, timeout=WAIT_MS)
    assert controller.settings == good  # nothing applied

    qtbot.mouseClick(page.apply_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: page.confirm_dialog is not None, timeout=WAIT_MS)
    anyway = [b for b in page.confirm_dialog.buttons() if b.text() == "Apply anyway"][0]
    with qtbot.waitSignal(controller.apply_checked, timeout=30_000) as blocker:
        anyway.click()
    report = blocker.args[0]
    assert report.judgement.rollback
    qtbot.waitUntil(lambda: page.banner.isVisible() and "Rolled back" in page.banner.text, timeout=WAIT_MS)
    assert "ran out of memory" in page.banner.text
    wait_state(qtbot, page, ServerState.RUNNING_MANAGED)
    assert controller.settings == good
    qtbot.waitUntil(lambda: store.load().settings == good, timeout=WAIT_MS)
    assert page.form.settings().num_parallel == 16  # the user's values stay in the form
    qtbot.waitUntil(lambda: page.apply_button.isEnabled(), timeout=WAIT_MS)  # ... and can be edited and retried


def test_the_log_view_says_where_an_attached_servers_log_comes_from():
    from app.core.server.state import ExternalKind, ServerState, ServerStatus
    from app.ui.pages.server.page import log_placeholder

    def attached(kind):
        return ServerStatus(ServerState.RUNNING_ATTACHED, "", external_kind=kind)

    assert "journalctl -u ollama.service" in log_placeholder(attached(ExternalKind.SYSTEMD))
    assert "~/.ollama/logs/server.log" in log_placeholder(attached(ExternalKind.TRAY_APP))
    assert "writes to that terminal" in log_placeholder(attached(ExternalKind.OTHER))
    assert "started by ollama-deck" in log_placeholder(ServerStatus(ServerState.RUNNING_MANAGED, ""))


def test_the_log_follows_the_newest_line_with_the_start_of_long_lines_in_view(qtbot):
    from app.ui.pages.server.page import LogView

    view = LogView()
    qtbot.addWidget(view)
    view.resize(600, 300)
    view.show()
    long_line = "time=2026-11-30T01:00:00 level=INFO source=server.go:411 msg=\"starting runner\" " + "x" * 400
    view.append_lines([f"{i} {long_line}" for i in range(300)])
    vertical, horizontal = view.text.verticalScrollBar(), view.text.horizontalScrollBar()
    assert vertical.value() == vertical.maximum() > 0 and horizontal.maximum() > 0 and horizontal.value() == 0
    view.follow.setChecked(False)
    vertical.setValue(0)
    view.append_lines(["one more"])
    assert vertical.value() == 0  # not following: the reader's place is kept


@pytest.mark.parametrize("settings, opened_by", [
    (ServerSettings(host="0.0.0.0", network_allowed_for="0.0.0.0"), "anyone who can reach 0.0.0.0:"),
    (ServerSettings(extra_settings="OLLAMA_ORIGINS=*", network_allowed_for="127.0.0.1"), "any web page you open"),
], ids=["all-interfaces", "any-web-origin"])
def test_every_start_open_to_others_shows_a_warning_banner(qtbot, page_factory, settings, opened_by):
    port = free_port()
    controller, page, _store = page_factory(settings.replace(port=port))
    controller.probe()
    qtbot.waitUntil(lambda: page.start_button.isEnabled(), timeout=WAIT_MS)
    assert page.banner.isHidden()

    qtbot.mouseClick(page.start_button, Qt.LeftButton)
    wait_state(qtbot, page, ServerState.RUNNING_MANAGED)
    assert page.banner.isVisible() and page.banner.property("level") == "warning"
    assert f":{port}" in page.banner.text and opened_by in page.banner.text
    assert "delete your models" in page.banner.text and "127.0.0.1" in page.banner.text
    page.banner.clear()

    # A guarded apply restarts the server: it is said again, beside the apply's own result.
    qtbot.waitUntil(lambda: not controller._busy, timeout=WAIT_MS)
    page.form.findChild(object, "num_parallel").setValue(2)
    qtbot.waitUntil(lambda: page.apply_button.isEnabled(), timeout=WAIT_MS)
    qtbot.mouseClick(page.apply_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: page.banner.text.startswith("Applied."), timeout=WAIT_MS)
    assert opened_by in page.banner.text and page.banner.property("level") == "warning"


def test_a_start_on_loopback_shows_no_exposure_banner(qtbot, page_factory):
    controller, page, _store = page_factory()
    controller.start()
    wait_state(qtbot, page, ServerState.RUNNING_MANAGED)
    assert page.banner.isHidden()


def test_without_the_permission_the_page_cannot_start_an_exposed_server(qtbot, page_factory):
    controller, page, _store = page_factory(ServerSettings(host="0.0.0.0", port=free_port()))
    controller.probe()
    wait_state(qtbot, page, ServerState.STOPPED)
    assert not page.start_button.isEnabled() and "Fix the fields" in page.reason_label.text()
    # Asked anyway (a stale button, a script), the supervisor refuses and says why.
    controller.start()
    qtbot.waitUntil(lambda: "Did not start the server on 0.0.0.0:" in page.card.message.text(), timeout=WAIT_MS)
    assert controller.status.state is ServerState.STOPPED and controller.server_pids() == []


def test_settings_applied_elsewhere_reach_the_form_and_pending_edits_stay(qtbot, page_factory):
    controller, page, store = page_factory(ServerSettings(port=free_port(), num_parallel=8))
    controller.start()
    wait_state(qtbot, page, ServerState.RUNNING_MANAGED)
    qtbot.waitUntil(lambda: not controller._busy, timeout=WAIT_MS)
    page.form.findChild(object, "keep_alive").setText("1h")  # an edit the user has not applied yet
    assert page.apply_button.isEnabled()

    # What the Benchmark page's Apply does with a sweep's winner: the app's one apply path.
    with qtbot.waitSignal(controller.apply_checked, timeout=30_000):
        controller.apply(controller.settings.replace(num_parallel=4), model="qwen3:0.6b")
    qtbot.waitUntil(lambda: not controller._busy, timeout=WAIT_MS)
    assert store.load().settings.num_parallel == 4
    assert page.form.settings().num_parallel == 4  # not the 8 it showed before
    assert page.form.settings() == controller.settings.replace(keep_alive="1h")
    qtbot.waitUntil(lambda: "Applied." in page.banner.text, timeout=WAIT_MS)
    page.form.findChild(object, "keep_alive").setText("5m")
    assert not page.apply_button.isEnabled()  # nothing left to apply: no "Apply and restart" for what runs

    controller.hold("A benchmark sweep is running.")  # a sweep starts: the last apply's outcome is gone
    assert not page.banner.isVisible()
    controller.release()
