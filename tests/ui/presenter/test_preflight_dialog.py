"""The pre-flight dialog lists every check as the run ends them, off the GUI thread, against the stand-in
`ollama serve` seen through the real supervisor; Run again repeats; closing stops a run."""

from __future__ import annotations

import psutil
import pytest

from app.adapters.demo_script import load_script
from app.adapters.process.procs import loopback_port_holder
from app.backends.llama_server.engine import embedded_settings, engine_status
from app.backends.llama_server.spec import LLAMA_SERVER
from app.backends.ollama.spec import OLLAMA
from app.core.demo.preflight import CheckName, CheckVerdict
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState, ServerStatus
from app.services.preflight import EngineFacts, PreflightProbes, PreflightTarget
from app.ui.presenter.preflight import PreflightDialog
from tests.fakes.scripted_gpu import ScriptedGpuBackend

WAIT_MS = 30_000


def _dialog(qtbot, make_fake_ollama, make_supervisor) -> PreflightDialog:
    fake = make_fake_ollama(tokens_per_s=400.0)
    harness = make_supervisor(ServerSettings(port=fake.port))
    target = PreflightTarget(OLLAMA, harness.supervisor, "Ollama")
    probes = PreflightProbes(port_holder=loopback_port_holder, gpu=ScriptedGpuBackend())
    dialog = PreflightDialog(load_script("builtin"), target, probes, harness.loop, max_tokens=8)
    qtbot.addWidget(dialog)
    return dialog


def _cell(dialog: PreflightDialog, row: int, column: int) -> str:
    item = dialog.table.item(row, column)
    assert item is not None
    return item.text()


def test_the_dialog_lists_each_check_with_its_verdict_detail_and_fix(qtbot, make_fake_ollama, make_supervisor) -> None:
    dialog = _dialog(qtbot, make_fake_ollama, make_supervisor)
    assert [_cell(dialog, row, 1) for row in range(dialog.table.rowCount())] == [n.value for n in CheckName]
    dialog.show()  # showing it starts the run
    assert not dialog.run_button.isEnabled()
    qtbot.waitUntil(lambda: len(dialog.checks) == len(CheckName), timeout=WAIT_MS)
    assert dialog.run_button.isEnabled()
    by = {c.name: c for c in dialog.checks}
    for row, name in enumerate(CheckName):
        check = by[name]
        assert _cell(dialog, row, 0) == check.verdict.value
        assert _cell(dialog, row, 2) == check.detail
        assert _cell(dialog, row, 3) == ("" if check.verdict is CheckVerdict.PASS else check.fix)
    assert by[CheckName.SERVER].verdict is CheckVerdict.PASS and "Ollama" in by[CheckName.SERVER].detail
    assert "in use by the server itself" in by[CheckName.PORT].detail
    assert by[CheckName.GPU].verdict is CheckVerdict.PASS and "RTX 4090" in by[CheckName.GPU].detail
    assert by[CheckName.SCREEN].verdict is CheckVerdict.WARN  # the tests' offscreen platform: no real screen
    assert by[CheckName.STEP_TIME].verdict in (CheckVerdict.PASS, CheckVerdict.WARN)
    assert dialog.summary.text().startswith(f"{sum(c.verdict is CheckVerdict.PASS for c in dialog.checks)} passed")
    assert dialog.lines() == [c.line() for c in dialog.checks]
    # Run again: the rows go back to checking, then fill again.
    dialog.run_button.click()
    assert _cell(dialog, 0, 2) == "checking…" and dialog.checks == []
    qtbot.waitUntil(lambda: len(dialog.checks) == len(CheckName), timeout=WAIT_MS)
    dialog.copy_lines()
    from PySide6.QtWidgets import QApplication

    assert QApplication.clipboard().text().splitlines()[0] == dialog.checks[0].line()


def test_closing_the_dialog_stops_a_run_in_flight(qtbot, make_fake_ollama, make_supervisor) -> None:
    dialog = _dialog(qtbot, make_fake_ollama, make_supervisor)
    dialog.run()
    future = dialog._future
    assert future is not None and dialog.running
    dialog.reject()
    qtbot.waitUntil(future.done, timeout=WAIT_MS)
    assert future.cancelled() or len(future.result()) == len(CheckName)  # it may have ended just before
    assert not dialog.running


@pytest.mark.engine
@pytest.mark.slow
def test_closing_while_the_embedded_engine_starts_for_the_timing_stops_it(qtbot, tmp_path, supervisor_loop,
                                                                         llama_server_binary, bundled_model) -> None:
    status = engine_status()
    engine = EngineFacts(status.ready, str(status.server), str(status.model), status.problems, status.commands)
    settings = embedded_settings()
    heard: list[ServerStatus] = []
    server = LLAMA_SERVER.server(settings, on_status=heard.append, on_log=lambda line: None,
                                 runtime_dir=tmp_path / "run")
    target = PreflightTarget(LLAMA_SERVER.bound(lambda: settings), server, "llama-server (embedded)", engine)
    dialog = PreflightDialog(load_script("builtin"), target, PreflightProbes(loopback_port_holder,
                                                                             ScriptedGpuBackend()), supervisor_loop)
    qtbot.addWidget(dialog)
    try:
        dialog.show()
        qtbot.waitUntil(lambda: any(s.state is ServerState.STARTING for s in heard), timeout=WAIT_MS)
        future = dialog._future
        assert future is not None
        dialog.reject()  # mid-start, or mid-reply on a fast machine: either way what it started is stopped
        qtbot.waitUntil(future.done, timeout=WAIT_MS)
        qtbot.waitUntil(lambda: server.status.state is ServerState.STOPPED, timeout=WAIT_MS)
        pids = {s.pid for s in heard if s.pid is not None}
        _gone, alive = psutil.wait_procs([psutil.Process(p) for p in pids if psutil.pid_exists(p)], timeout=30)
        assert not alive
        assert loopback_port_holder(settings.port) is None
    finally:
        supervisor_loop.run(server.close(), 30)
