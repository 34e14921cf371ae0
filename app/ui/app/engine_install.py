"""The guided install of the real engine for those who installed without the `engine` extra: runs
`pip install` for each step (through app.adapters.process.pip_install, on the asyncio loop), streams
pip's log, shows the phase with the time spent in it, and offers Cancel, which stops that pip's
process tree only. The GUI thread only receives queued signals."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Sequence

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app.adapters.aio import LoopThread
from app.adapters.process.install_step import InstallStep
from app.adapters.process.pip_install import InstallProgress, InstallResult, Outcome, Phase, PipInstaller

LOG_MAX_LINES = 20_000  # a llama.cpp build prints a few thousand; older lines scroll away
BUILD_HINT = ("building from source takes about 20 minutes on 2 cores (pip keeps the built wheel, so "
              "installing it again is quick)")
_PHASE_ROWS = ((Phase.COLLECTING, "Collecting packages"),
               (Phase.BUILDING, "Building wheels"),
               (Phase.INSTALLING, "Installing"))
_ORDER = {Phase.STARTING: 0, Phase.COLLECTING: 1, Phase.BUILDING: 2, Phase.INSTALLING: 3, Phase.INSTALLED: 4}


def format_elapsed(seconds: float) -> str:
    """'3:07' for 187 seconds, '1:02:03' past an hour."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class _Bridge(QObject):
    """Carries the installer's callbacks from the loop thread to the GUI thread (queued)."""

    line = Signal(str)
    progress = Signal(object)
    result = Signal(object)


class EngineInstallDialog(QDialog):
    """Installs the given pip steps with progress, the log, Cancel and a clear result."""

    installed = Signal(object)  # InstallResult, after every step succeeded

    def __init__(self, steps: Sequence[InstallStep], intro: str = "", python: str | None = None, note: str = "",
                 pip_options: Sequence[str] = (), env: dict[str, str] | None = None,
                 loop: LoopThread | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Install the llama.cpp engine")
        self.setObjectName("EngineInstallDialog")
        self.resize(820, 560)
        self._bridge = _Bridge(self)
        self._bridge.line.connect(self._append_line)
        self._bridge.progress.connect(self._show_progress)
        self._bridge.result.connect(self._finish)
        self._owns_loop = loop is None
        self._loop = loop
        self.installer = PipInstaller(steps, python=python, pip_options=pip_options, env=env,
                                      on_line=self._bridge.line.emit, on_progress=self._bridge.progress.emit)
        self._future: concurrent.futures.Future[InstallResult] | None = None
        self._progress: InstallProgress | None = None
        self._phase_started = 0.0
        self._close_when_done = False
        self.install_result: InstallResult | None = None

        lay = QVBoxLayout(self)
        commands = "\n".join(self.installer.command_text(step) for step in self.installer.steps)
        self.intro = QLabel((intro + "\n\n" if intro else "") + "This runs:\n" + commands
                            + ("\n\n" + note if note else ""))
        self.intro.setWordWrap(True)
        # Never shorter than its wrapped text needs: with the default policy the layout may give it a line
        # less than heightForWidth, cutting off the end of the commands.
        self.intro.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        self.intro.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.intro)
        self.step_label = QLabel("Not started.")
        lay.addWidget(self.step_label)
        self.phase_labels: dict[Phase, QLabel] = {}
        for phase, text in _PHASE_ROWS:
            label = QLabel()
            label.setProperty("text_base", text)
            self.phase_labels[phase] = label
            lay.addWidget(label)
        self.elapsed_label = QLabel("")
        self.elapsed_label.setWordWrap(True)
        lay.addWidget(self.elapsed_label)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1)
        self.bar.setValue(0)
        self.bar.setTextVisible(False)
        lay.addWidget(self.bar)
        self.log = QPlainTextEdit()
        self.log.setReadOnly(True)
        self.log.setMaximumBlockCount(LOG_MAX_LINES)
        self.log.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        lay.addWidget(self.log, 1)
        self.result_label = QLabel("")
        self.result_label.setWordWrap(True)
        self.result_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.result_label)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.install_button = QPushButton("Install")
        self.cancel_button = QPushButton("Cancel")
        self.close_button = QPushButton("Close")
        self.cancel_button.setEnabled(False)
        self.install_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(self.cancel)
        self.close_button.clicked.connect(self.close)
        for button in (self.install_button, self.cancel_button, self.close_button):
            buttons.addWidget(button)
        lay.addLayout(buttons)
        self._tick = QTimer(self)
        self._tick.setInterval(1000)
        self._tick.timeout.connect(self._show_elapsed)
        self._render_phases(None)

    @property
    def running(self) -> bool:
        """True from Install until the result arrives."""
        return self._future is not None and self.install_result is None

    def start(self) -> None:
        """Start the install on the asyncio loop (never blocks the GUI thread)."""
        if self.running:
            return
        if self._loop is None:
            self._loop = LoopThread(name="deck-engine-install")
        self.install_result = None
        self.result_label.clear()
        self.install_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.bar.setRange(0, 0)  # busy: pip gives no overall fraction
        self._phase_started = time.monotonic()
        self._tick.start()
        future = self._loop.submit(self.installer.run())
        self._future = future
        future.add_done_callback(self._deliver)

    def cancel(self) -> None:
        """Stop the running install: its pip process tree is killed; the result says so."""
        if self.running:
            self.cancel_button.setEnabled(False)
            self.step_label.setText(self.step_label.text() + " — cancelling…")
            self.installer.cancel()

    def _deliver(self, future: concurrent.futures.Future[InstallResult]) -> None:
        # Runs on the loop thread (or here, when the loop refused the work): only emit.
        if future.cancelled():
            result = InstallResult(Outcome.FAILED, None, "The install did not run: the app's background loop "
                                   "has stopped. Close this window and start the install again.")
        elif future.exception() is not None:
            result = InstallResult(Outcome.FAILED, None, f"The install stopped with an error: {future.exception()}. "
                                   "Run the commands above in a terminal to see more.")
        else:
            result = future.result()
        self._bridge.result.emit(result)

    def _append_line(self, line: str) -> None:
        self.log.appendPlainText(line)

    def _show_progress(self, progress: InstallProgress) -> None:
        previous = self._progress
        if previous is None or (previous.step, previous.phase, previous.building) != (
                progress.step, progress.phase, progress.building):
            self._phase_started = time.monotonic()
        self._progress = progress
        self.step_label.setText(f"Step {progress.step + 1} of {progress.steps}: {progress.label}")
        self._render_phases(progress.phase)
        self._show_elapsed()

    def _render_phases(self, current: Phase | None) -> None:
        rank = _ORDER[current] if current is not None else 0
        for phase, label in self.phase_labels.items():
            mark = "✓" if _ORDER[phase] < rank else ("▶" if phase is current else "·")
            label.setText(f"{mark} {label.property('text_base')}")
            label.setProperty("state", "done" if mark == "✓" else ("current" if mark == "▶" else "pending"))

    def _show_elapsed(self) -> None:
        progress = self._progress
        if progress is None or self.install_result is not None:
            return
        spent = format_elapsed(time.monotonic() - self._phase_started)
        if progress.phase is Phase.BUILDING:
            what = progress.building or "the packages"
            self.elapsed_label.setText(f"Building wheel for {what}: {spent} elapsed — {BUILD_HINT}.")
        else:
            self.elapsed_label.setText(f"{progress.phase.value.capitalize()}: {spent} elapsed.")

    def _finish(self, result: InstallResult) -> None:
        self.install_result = result
        self._tick.stop()
        self.bar.setRange(0, 1)
        self.bar.setValue(1 if result.outcome is Outcome.SUCCEEDED else 0)
        self.cancel_button.setEnabled(False)
        self.install_button.setEnabled(result.outcome is not Outcome.SUCCEEDED)
        self.install_button.setText("Install again" if result.outcome is not Outcome.SUCCEEDED else "Install")
        level = {Outcome.SUCCEEDED: "info", Outcome.FAILED: "error", Outcome.CANCELLED: "warning"}[result.outcome]
        self.result_label.setProperty("level", level)
        took = f" ({format_elapsed(result.elapsed_s)})" if result.elapsed_s else ""
        self.result_label.setText(f"{result.outcome.value.capitalize()}{took}: {result.message}")
        if result.outcome is Outcome.SUCCEEDED:
            self._render_phases(Phase.INSTALLED)
            self.elapsed_label.setText("Done.")
            self.installed.emit(result)
        if self._close_when_done:
            self.close()

    def reject(self) -> None:
        """Esc or the window's close: a running install is cancelled first, then the window closes."""
        if self.running:
            self._close_when_done = True
            self.cancel()
            return
        super().reject()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt's name
        """Closing while pip runs cancels it and closes once its tree is gone."""
        if self.running:
            self._close_when_done = True
            self.cancel()
            event.ignore()
            return
        if self._owns_loop and self._loop is not None:
            self._loop.stop()
            self._loop = None
        super().closeEvent(event)
