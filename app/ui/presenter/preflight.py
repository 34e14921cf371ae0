"""The pre-flight dialog: runs the checks of app/services/preflight.py on the app's loop thread and lists each
with its verdict, what was found and the fix; and the two facts only Qt knows (which fonts draw the script's
text, and the primary screen's size), measured on the GUI thread.

The composition root builds the target (the server the talk uses) and the probes; a button opens the dialog.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
from PySide6.QtCore import Signal
from PySide6.QtGui import QColor, QFont, QFontDatabase, QFontInfo, QFontMetrics, QGuiApplication, QRawFont, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core.demo.preflight import (
    Check,
    CheckName,
    CheckVerdict,
    FontCoverage,
    ScreenFacts,
    script_of,
    script_text,
    shown_characters,
    summary,
)
from app.core.demo.script import DemoScript
from app.core.ports.tasks import CoroutineRunner
from app.services.preflight import PreflightProbes, PreflightTarget, run_checks
from app.ui.widgets import theme

# Writing systems whose fonts are tried first for a script's characters the UI font lacks (Qt falls back to any
# installed font that has the glyph; these are only the likeliest).
_WRITING_SYSTEMS = {
    "Chinese (Han)": (QFontDatabase.WritingSystem.SimplifiedChinese, QFontDatabase.WritingSystem.TraditionalChinese,
                      QFontDatabase.WritingSystem.Japanese),
    "Japanese (kana)": (QFontDatabase.WritingSystem.Japanese,),
    "Korean (Hangul)": (QFontDatabase.WritingSystem.Korean,),
}


def font_coverage(text: str, font: QFont | None = None) -> FontCoverage:
    """Which installed fonts draw `text`. A character is drawn when Qt draws it with `font` (default the
    application's) or any fallback font it would merge in (QFontMetrics.inFontUcs4, Qt's own answer); the fonts
    named are the one Qt really picked and, for what that one lacks, the installed fonts that have those glyphs
    (QRawFont, font by font; those claiming the characters' writing system first). GUI thread only."""
    chars = shown_characters(text)
    font = font if font is not None else QGuiApplication.font()
    family = QFontInfo(font).family()  # the font Qt really picked, not the one asked for
    with_fallbacks = QFontMetrics(font)
    missing = "".join(c for c in chars if not with_fallbacks.inFontUcs4(ord(c)))
    primary = QRawFont.fromFont(font)
    lacking = [c for c in chars if c not in missing and not primary.supportsCharacter(ord(c))]
    fallbacks: list[str] = []
    preferred: list[str] = []
    for script in dict.fromkeys(script_of(c) for c in lacking):
        for system in _WRITING_SYSTEMS.get(script, ()):
            preferred += QFontDatabase.families(system)
    for candidate in dict.fromkeys([*preferred, *QFontDatabase.families()]):
        if not lacking:
            break
        raw = QRawFont.fromFont(QFont(candidate))
        if not raw.isValid() or raw.familyName() == family:
            continue
        drawn = [c for c in lacking if raw.supportsCharacter(ord(c))]
        if drawn:
            fallbacks.append(raw.familyName())
            lacking = [c for c in lacking if c not in drawn]
    return FontCoverage(family, tuple(dict.fromkeys(fallbacks)), missing, len(chars))


def screen_facts() -> ScreenFacts | None:
    """The primary screen in logical pixels (QT_SCALE_FACTOR / --scale applied), None when there is none."""
    screen = QGuiApplication.primaryScreen()
    if screen is None:
        return None
    size = screen.geometry()
    return ScreenFacts(size.width(), size.height(), scale=screen.devicePixelRatio(),
                       platform=QGuiApplication.platformName(), name=screen.name())


_COLORS = {CheckVerdict.PASS: theme.OK, CheckVerdict.WARN: theme.WARNING, CheckVerdict.FAIL: theme.ERROR}
_ROWS = {name: row for row, name in enumerate(CheckName)}


class PreflightDialog(QDialog):
    """Lists the pre-flight's checks as they end, each with its verdict, what was found and the fix; Run again
    repeats them. The checks run on the app's loop thread; closing the dialog stops a run."""

    check_done = Signal(object)  # Check (queued from the loop thread)
    run_finished = Signal(object)  # list[Check], or the exception that stopped the run

    def __init__(self, script: DemoScript, target: PreflightTarget, probes: PreflightProbes, loop: CoroutineRunner,
                 parent: QWidget | None = None, *, max_tokens: int | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Pre-flight")
        self.setModal(False)
        self.resize(1000, 580)
        self._script = script
        self._target = target
        self._probes = probes
        self._loop = loop
        self._max_tokens = max_tokens
        self._future: concurrent.futures.Future[list[Check]] | None = None
        self.checks: list[Check] = []

        layout = QVBoxLayout(self)
        self.heading = QLabel(f"Before the talk: “{script.title}” ({len(script)} steps, {script.minutes:g} min) on "
                              f"{target.label}")
        self.heading.setWordWrap(True)
        layout.addWidget(self.heading)
        self.table = QTableWidget(len(CheckName), 4)
        self.table.setHorizontalHeaderLabels(["", "Check", "What was found", "Fix"])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setWordWrap(True)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        layout.addWidget(self.table, 1)
        self.summary = QLabel("")
        self.summary.setWordWrap(True)
        layout.addWidget(self.summary)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.run_button = QPushButton("Run again")
        self.copy_button = QPushButton("Copy")
        self.copy_button.setToolTip("Copy every check's line, as `ollama-deck --preflight` prints it")
        buttons.addButton(self.run_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.reject)
        self.run_button.clicked.connect(self.run)
        self.copy_button.clicked.connect(self.copy_lines)
        layout.addWidget(buttons)
        self.check_done.connect(self._show_check)
        self.run_finished.connect(self._finish)
        self._clear_rows()

    @property
    def running(self) -> bool:
        return self._future is not None and not self._future.done()

    def _clear_rows(self) -> None:
        for name, row in _ROWS.items():
            self._set_row(row, "…", theme.DIM, name.value, "checking…", "")

    def _set_row(self, row: int, verdict: str, color: str, name: str, detail: str, fix: str) -> None:
        for column, text in enumerate((verdict, name, detail, fix)):
            item = QTableWidgetItem(text)
            item.setToolTip(text)
            if column == 0:
                item.setForeground(QColor(color))
                bold = item.font()
                bold.setBold(True)
                item.setFont(bold)
            self.table.setItem(row, column, item)

    def run(self) -> None:
        """Run every check again (the fonts and the screen are measured here, on the GUI thread)."""
        if self.running:
            return
        self.checks = []
        self._clear_rows()
        self.summary.setText("Checking… the step's timing sends one prompt to the server.")
        self.run_button.setEnabled(False)
        coverage = font_coverage(script_text(self._script, self._probes.presets))
        facts = screen_facts()
        probes = dataclasses.replace(self._probes, fonts=lambda _text: coverage, screen=lambda: facts)
        future = self._loop.submit(run_checks(self._script, self._target, probes, on_check=self._emit_check,
                                              max_tokens=self._max_tokens))
        future.add_done_callback(self._done_in_loop)
        self._future = future

    def _emit_check(self, check: Check) -> None:
        """Called on the loop thread; the signal queues it to the GUI thread (nothing once the dialog is gone)."""
        with contextlib.suppress(RuntimeError):  # the dialog was deleted while the run ended
            self.check_done.emit(check)

    def _done_in_loop(self, future: concurrent.futures.Future[list[Check]]) -> None:
        if future.cancelled():
            return
        error = future.exception()
        with contextlib.suppress(RuntimeError):
            self.run_finished.emit(error if error is not None else future.result())

    def _show_check(self, check: Check) -> None:
        self._set_row(_ROWS[check.name], check.verdict.value, _COLORS[check.verdict], check.name.value, check.detail,
                      check.fix if check.verdict is not CheckVerdict.PASS else "")
        self.table.resizeRowsToContents()

    def _finish(self, result: object) -> None:
        self.run_button.setEnabled(True)
        if isinstance(result, BaseException):
            self.summary.setText(f"The pre-flight stopped: {type(result).__name__}: {result}")
            return
        assert isinstance(result, list)
        self.checks = result
        for check in result:
            self._show_check(check)
        self.summary.setText(summary(result))

    def lines(self) -> list[str]:
        """The checks' lines as the command line prints them."""
        return [check.line() for check in self.checks]

    def copy_lines(self) -> None:
        """Put every check's line and the summary on the clipboard."""
        text = "\n".join([*self.lines(), summary(self.checks)]) if self.checks else ""
        QApplication.clipboard().setText(text)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self.checks and not self.running:  # the first show: never larger than the screen (--scale)
            room = self.screen().availableGeometry()
            self.resize(min(self.width(), int(room.width() * 0.95)), min(self.height(), int(room.height() * 0.9)))
        if not self.checks and not self.running:
            self.run()

    def done(self, result: int) -> None:
        """Closing stops a run in flight (a server it started is stopped by the run's own clean-up)."""
        if self._future is not None and not self._future.done():
            self._future.cancel()
        super().done(result)


__all__ = ["PreflightDialog", "font_coverage", "screen_facts"]
