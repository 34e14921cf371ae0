"""On stage: presenter mode over the window — the big view, the demo director that runs the script's steps, the
presenter's keys, the one-key reset, the pre-flight dialog — and `--screenshot-each`, which runs the whole script
once and keeps a picture during and after every step.

Keys (while the presenter's view is on show, except F5 which is always there):
    F5                      presenter mode on and off
    Space, Right, PageDown  the next step (a presenter's clicker sends PageDown or Right)
    Esc                     stop everything in flight; with nothing in flight, leave presenter mode
    R, Home                 reset: the saved settings back, an empty dashboard, the first step
    P                       the pre-flight
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence, QShortcut
from PySide6.QtWidgets import QApplication, QFileDialog, QMenu, QToolButton, QWidget

from app.adapters.demo_script import load_script
from app.core.demo.live import IDLE, LiveRequests
from app.core.demo.script import DemoScript, ScriptError, StepResult, StepState
from app.ui.app.window import MainWindow
from app.ui.pages.bench.page import BenchPage
from app.ui.pages.context import PageContext
from app.ui.presenter.director import DemoDirector
from app.ui.presenter.view import PresenterView

NEXT_KEYS = (Qt.Key.Key_Space, Qt.Key.Key_Right, Qt.Key.Key_PageDown)
RESET_KEYS = (Qt.Key.Key_R, Qt.Key.Key_Home)
STAGE_MENU_TEXT = "On stage"


class Stage(QObject):
    """Presenter mode for one window and one server: built by the composition root, closed with it."""

    def __init__(self, window: MainWindow, context: PageContext, bench: BenchPage, script: DemoScript, *,
                 clear_dashboard: Callable[[], None], open_preflight: Callable[[], None],
                 show_error: Callable[[str], None], stop_others: Callable[[], bool] = lambda: False) -> None:
        super().__init__(window)
        self.window = window
        self._clear_dashboard = clear_dashboard
        self._open_preflight = open_preflight
        self._show_error = show_error
        self._stop_others = stop_others  # the Prompt page's run and a sweep of the Benchmark page: True if one ran
        self.view = PresenterView(context)
        self.view.set_script(script)
        self.director = DemoDirector(script, context, bench, parent=self)
        self.director.step_changed.connect(self.view.show_step)
        self.director.step_changed.connect(self._step_changed)
        self.director.live_changed.connect(self.view.set_live)
        self.director.notice.connect(self.view.set_notice)
        window.set_presenter(self.view)
        self._keys: list[QShortcut] = [QShortcut(QKeySequence(Qt.Key.Key_F5), window, self.toggle)]
        self._presenter_keys: list[QShortcut] = []
        for keys, slot in ((NEXT_KEYS, self.director.advance), ((Qt.Key.Key_Escape,), self.escape),
                           (RESET_KEYS, self.reset), ((Qt.Key.Key_P,), self._open_preflight)):
            for key in keys:
                shortcut = QShortcut(QKeySequence(key), window, slot)
                shortcut.setEnabled(False)
                self._presenter_keys.append(shortcut)
        self._keys.extend(self._presenter_keys)
        self.menu_button = self._menu_button()
        window.add_sidebar_tool(self.menu_button)
        window.presenting_changed.connect(self._presenting_changed)

    def _step_changed(self, _index: int, state: object, _result: object) -> None:
        """A step that starts shows its own requests only: the last step's figures go (a step that fails before
        sending anything shows none)."""
        if state is StepState.RUNNING:
            self.view.set_live(IDLE)

    # ---- the header's menu ----------------------------------------------------------------------------
    def _menu_button(self) -> QToolButton:
        button = QToolButton()
        button.setObjectName("StageMenu")
        button.setText(f"{STAGE_MENU_TEXT} ▾")
        button.setToolTip("Presenter mode, the demo script, its reset and the pre-flight check before a talk")
        button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(button)
        # The key is the window's shortcut, named here only: a second F5 binding would make the key ambiguous.
        self.presenter_action = QAction("Presenter mode (F5)", menu)
        self.presenter_action.setCheckable(True)
        self.presenter_action.triggered.connect(lambda on: self.set_presenting(bool(on)))
        menu.addAction(self.presenter_action)
        menu.addAction("Run the pre-flight check…", self._open_preflight)
        menu.addAction("Open a demo script…", self._choose_script)
        menu.addAction("Use the built-in demo script", lambda: self.load("builtin"))
        menu.addAction("Reset the demo (R)", self.reset)
        button.setMenu(menu)
        return button

    def _choose_script(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.window, "Open a demo script", "", "Demo scripts (*.toml);;All (*)")
        if path:
            self.load(path)

    def load(self, name: str) -> bool:
        """Use the script `name` (builtin or a path) from its first step; one line in the banner when it cannot be
        used, and the script in use stays."""
        try:
            script = load_script(name)
        except ScriptError as exc:
            self._show_error(f"That demo script cannot be used: {exc}")
            return False
        self.director.stop_all()
        self.director.set_script(script)
        self.view.set_script(script)
        return True

    # ---- presenter mode and its keys ------------------------------------------------------------------
    @property
    def presenting(self) -> bool:
        return self.window.presenting

    def toggle(self) -> None:
        """F5: presenter mode on or off."""
        self.set_presenting(not self.window.presenting)

    def set_presenting(self, on: bool, *, full_screen: bool = True) -> None:
        self.window.set_presenting(on, full_screen=full_screen)

    def _presenting_changed(self, on: bool) -> None:
        for shortcut in self._presenter_keys:
            shortcut.setEnabled(on)
        self.presenter_action.setChecked(on)

    def escape(self) -> None:
        """Esc: stop everything in flight (the step's requests, the Prompt page's, a sweep); with nothing in
        flight, back to the panel."""
        stepping = self.director.running
        if stepping:
            self.director.stop_all()
        if not self._stop_others() and not stepping:
            self.set_presenting(False)

    def reset(self) -> None:
        """Back to the saved settings, an empty dashboard and the first step."""
        self.director.reset()
        self._clear_dashboard()
        self.view.clear()

    def close(self) -> None:
        """Stop what runs, give the window back its panel and take the keys and the menu away (a successor in
        this window makes its own)."""
        self.director.shutdown()
        self.view.shutdown()
        self.window.set_presenter(None)
        self.view.deleteLater()
        for shortcut in self._keys:
            shortcut.setEnabled(False)
            shortcut.deleteLater()
        self.menu_button.deleteLater()
        self.window.presenting_changed.disconnect(self._presenting_changed)


def slug(text: str) -> str:
    """A file-name part for a step's title: "Parallel 1 vs 8" -> "parallel-1-vs-8"."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "step"


# How long into a step the "during" picture waits for its requests to stream (seconds), and how long after the
# step ended its picture is taken (ms: the view's next redraw).
LIVE_AFTER_S = 1.5
SETTLE_MS = 700
READY_SAMPLES = 3


class StepRecorder(QObject):
    """--screenshot-each: once the server runs, the whole script, one step after another, with a picture of the
    window while each step's requests stream and one when it has ended; prints a line per step and quits the
    application (exit 0 when every picture was written)."""

    def __init__(self, stage: Stage, folder: Path, app: QApplication, *, ready: Callable[[], bool],
                 redraw: Callable[[], None], grab: Callable[[], QWidget]) -> None:
        super().__init__(stage)
        self.stage = stage
        self.folder = folder
        self.app = app
        self._ready = ready
        self._redraw = redraw
        self._grab = grab
        self.written: list[Path] = []
        self.failed_writes: list[Path] = []
        self._step_started = 0.0
        self._live_taken = False
        self._current = -1
        script = stage.director.script
        self._deadline = time.monotonic() + 120.0 + sum(step.timeout_s for step in script.steps) * 1.5
        self._poll = QTimer(self)
        self._poll.setInterval(200)
        self._poll.timeout.connect(self._tick)
        director = stage.director
        director.step_changed.connect(self._step_changed)
        director.live_changed.connect(self._live)
        director.script_finished.connect(self._finished)

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._poll.start()

    def _tick(self) -> None:
        if time.monotonic() > self._deadline:
            self._poll.stop()
            print(f"ollama-deck: the demo script did not finish in time; pictures so far are in {self.folder}",
                  file=sys.stderr)
            self._capture("99-timed-out")
            self.app.exit(1)
            return
        if self._current < 0 and self._ready():
            self._current = 0
            self._capture("00-ready")
            self.stage.director.advance()

    def _step_changed(self, index: int, state: object, result: object) -> None:
        script = self.stage.director.script
        step = script.steps[index]
        name = f"{index + 1:02d}-{slug(step.title)}"
        if state is StepState.RUNNING:
            self._current = index
            self._step_started = time.monotonic()
            self._live_taken = False
            return
        if state is StepState.WAITING:
            return
        outcome = result if isinstance(result, StepResult) else None
        words = (outcome.headline or outcome.reason) if outcome else ""
        print(f"step {index + 1}/{len(script)} {step.title}: {getattr(state, 'value', state)}"
              + (f" — {words}" if words else "") + f" ({name}.png)", flush=True)
        QTimer.singleShot(SETTLE_MS, lambda: self._after_step(name, index))

    def _after_step(self, name: str, index: int) -> None:
        self._capture(name)
        if index + 1 < len(self.stage.director.script) and self.stage.director.index == index + 1:
            self.stage.director.advance()

    def _live(self, live: object) -> None:
        if self._live_taken or not isinstance(live, LiveRequests) or live.in_flight < 1:
            return
        if time.monotonic() - self._step_started < LIVE_AFTER_S or live.per_request_tps is None:
            return
        self._live_taken = True
        step = self.stage.director.script.steps[self._current]
        self._capture(f"{self._current + 1:02d}-{slug(step.title)}-live")

    def _finished(self) -> None:
        QTimer.singleShot(SETTLE_MS * 2, self._done)

    def _done(self) -> None:
        self._poll.stop()
        self._capture("99-end")
        print(f"{len(self.written)} pictures in {self.folder}", flush=True)
        for path in self.failed_writes:
            print(f"ollama-deck: could not write {path}", file=sys.stderr)
        self.app.exit(1 if self.failed_writes else 0)

    def _capture(self, name: str) -> None:
        self._redraw()
        self.app.processEvents()
        path = self.folder / f"{name}.png"
        if self._grab().grab().save(str(path)):
            self.written.append(path)
        else:
            self.failed_writes.append(path)
