"""The sweep editor's scenario: a built-in or a TOML/JSON file, its text checked as it is typed (the parser's
message under it, the line at fault marked), a factor on its lengths, "Save as…", and its classes in words."""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFontDatabase, QTextCursor, QTextFormat
from PySide6.QtWidgets import QComboBox, QFileDialog, QLabel, QPlainTextEdit, QPushButton, QTextEdit, QWidget

from app.core.bench.scenario import (BUILTIN_SCENARIOS, MIN_SCALE, Length, RequestClass, Scenario, ScenarioError,
                                     parse_scenario)
from app.core.bench.scenario_text import problem_line, scenario_toml
from app.ui.widgets import theme
from app.ui.widgets.forms import FieldGroup, RangedDoubleSpinBox, left_aligned

OPEN_FILE = "__open__"
FILE_PREFIX = "file:"
SOURCE = "the scenario"
SCALE_HINT = ("Multiplies every prompt and output length (0.05 turns a 10,200-token document into 510); "
              "rates, turns and targets stay. For a quick run on a small model.")
FAULT_BACKGROUND = "#5a1e24"


def _tokens(length: Length) -> str:
    """A length in a few characters: "80", "~80", "40–120"."""
    if length.kind == "uniform":
        return f"{length.low:,}–{length.high:,}"
    figure = f"{length.mean:,.0f}" if length.mean >= 10 else f"{length.mean:g}"
    return figure if length.kind == "fixed" else f"~{figure}"


def class_summary(c: RequestClass) -> str:
    """One class as rich text, a line each: its name and load; prompt → output tokens, turns and thinking
    share; its targets."""
    prompt = f"fixed {len(c.text)}-character prompt" if c.text else f"{_tokens(c.prompt_tokens)} prompt tokens"
    lengths = [f"{prompt} → {_tokens(c.output_tokens)} out"]
    if c.turns > 1:
        lengths.append(f"{c.turns} turns (~{c.mean_prompt_tokens():.0f} tokens with the history)")
    if c.thinking_share:
        lengths.append(f"{c.thinking_share * 100:g} % thinking")
    targets = f"targets {c.targets.describe()}" if c.targets.any else "no targets"
    return (f"<b>{html.escape(c.name)}</b> — {html.escape(c.arrival.describe())}<br>"
            f"{html.escape(', '.join(lengths))}<br>"
            f"<span style='color: {theme.DIM};'>{html.escape(targets)}</span>")


class ScenarioGroup(FieldGroup):
    """The scenario fields; `changed` whenever the scenario (or its problem) changes."""

    changed = Signal()

    def __init__(self, write_file: Callable[[Path, bytes], None] | None = None, parent: QWidget | None = None) -> None:
        """`write_file` writes a file atomically (Save as…); without it Save as… is hidden."""
        super().__init__("Scenario", parent)
        self._write_file = write_file
        self._texts: dict[str, str] = {}  # what was typed per choice: switching back finds it again
        self._key = ""
        self._scenario: Scenario | None = None
        self._problem = ""
        self._thinking_control = True
        self._why_no_thinking = ""

        self.choice = QComboBox()
        self.choice.setObjectName("scenario_choice")
        self.choice.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.choice.setMinimumContentsLength(14)
        for name, scenario in BUILTIN_SCENARIOS.items():
            self.choice.addItem(name, name)
            self.choice.setItemData(self.choice.count() - 1, scenario.description, Qt.ItemDataRole.ToolTipRole)
        self.choice.addItem("Open a file…", OPEN_FILE)
        self.choice_message = self.add_field(
            "Scenario", self.choice, hint="The articles' workloads, or your own file. Edit it below; your edits "
                                          "stay with the choice until you switch back.")
        self.text = QPlainTextEdit()
        self.text.setObjectName("scenario_text")
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.text.setMinimumHeight(self.text.fontMetrics().lineSpacing() * 16)
        self.save_button = QPushButton("Save as…")
        self.save_button.setObjectName("scenario_save")
        self.save_button.setVisible(write_file is not None)
        self.text_message = self.add_wide_field(
            "Definition", self.text, below=[left_aligned(self.save_button)],
            hint="TOML: name, then one [[classes]] table per kind of request (prompt_tokens, output_tokens, "
                 "arrival, turns, thinking_share, system, targets). Checked as you type.")
        self.scale = RangedDoubleSpinBox()
        self.scale.setObjectName("scale_lengths")
        self.scale.setDecimals(4)
        self.scale.setRange(MIN_SCALE, 1.0)
        self.scale.setSingleStep(0.05)
        self.scale.setValue(1.0)
        self.scale.setPrefix("× ")
        self.scale_message = self.add_field("Scale lengths", self.scale, hint=SCALE_HINT)
        self.summary = QLabel()
        self.summary.setObjectName("scenario_summary")
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        self.add_field("Classes", self.summary)

        self.choice.activated.connect(self._chosen)
        self.text.textChanged.connect(self._check)
        self.scale.valueChanged.connect(self._show_summary)
        self.scale.problem_changed.connect(self._scale_problem)
        self.save_button.clicked.connect(self._save_dialog)
        self.use(next(iter(BUILTIN_SCENARIOS)))

    # ---- the scenario ------------------------------------------------------------------------------
    @property
    def problem(self) -> str:
        """Why the text is not a scenario ('' when it is one)."""
        return self._problem

    def scenario(self) -> Scenario:
        """The scenario as typed, its lengths scaled; ValueError with the reason when there is none."""
        if self._scenario is None:
            raise ValueError(f"The scenario cannot be used: {self._problem}")
        if self.scale.problem():
            raise ValueError(f"Scale lengths: {self.scale.problem()}")
        factor = self.scale.value()
        scenario = self._scenario.scaled(factor) if factor != 1.0 else self._scenario
        return scenario if self._thinking_control else scenario.without_thinking()

    def set_thinking_control(self, can: bool, why: str = "") -> None:
        """Whether the server can switch thinking per request; without it the thinking shares are not used."""
        self._thinking_control = can
        self._why_no_thinking = why
        self._show_summary()

    def use(self, key: str) -> None:
        """Show a built-in by name (or an opened file's entry), with what was typed for it before."""
        index = self.choice.findData(key)
        if index < 0:
            raise KeyError(key)
        if self._key:
            self._texts[self._key] = self.text.toPlainText()
        self._key = key
        self.choice.setCurrentIndex(index)
        text = self._texts.get(key)
        if text is None:
            text = scenario_toml(BUILTIN_SCENARIOS[key])
        self.text.setPlainText(text)  # checked by _check

    def open_file(self, path: str) -> bool:
        """Load a scenario file into the editor (as a choice of its own); a file that cannot be read is
        named under the choice and False returned (the text shown stays as it was)."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self.choice_message.show_error(f"Cannot read {path}: {getattr(exc, 'strerror', None) or exc}.")
            self.choice.setCurrentIndex(max(0, self.choice.findData(self._key)))
            return False
        self.choice_message.clear_message()
        key = FILE_PREFIX + str(Path(path).resolve())
        if self.choice.findData(key) < 0:
            self.choice.insertItem(self.choice.count() - 1, Path(path).name, key)
            self.choice.setItemData(self.choice.findData(key), str(path), Qt.ItemDataRole.ToolTipRole)
        if self._key:
            self._texts[self._key] = self.text.toPlainText()
        self._texts[key] = text  # the file as it is now
        self._key = ""  # already kept: use() shows the file's text
        self.use(key)
        return True

    def save_to(self, path: str) -> bool:
        """Write the text as typed to `path` atomically (it becomes this choice's file); False on failure,
        said under the text (nothing typed is lost)."""
        if self._write_file is None:
            return False
        try:
            self._write_file(Path(path), self.text.toPlainText().encode("utf-8"))
        except OSError as exc:
            self.text_message.show_error(f"Could not save to {path}: {getattr(exc, 'strerror', None) or exc}.")
            return False
        key = FILE_PREFIX + str(Path(path).resolve())
        text = self.text.toPlainText()
        if self.choice.findData(key) < 0:
            self.choice.insertItem(self.choice.count() - 1, Path(path).name, key)
            self.choice.setItemData(self.choice.findData(key), str(path), Qt.ItemDataRole.ToolTipRole)
        self._texts[self._key] = text
        self._texts[key] = text
        self._key = key
        self.choice.setCurrentIndex(self.choice.findData(key))
        self._check()
        if not self._problem:
            self.text_message.show_info(f"Saved to {path}.")
        return True

    # ---- reacting ------------------------------------------------------------------------------------
    def _chosen(self) -> None:
        key = self.choice.currentData()
        if key == OPEN_FILE:
            self.choice.setCurrentIndex(max(0, self.choice.findData(self._key)))  # until a file is read
            path, _ = QFileDialog.getOpenFileName(self, "Open a scenario", "", "Scenarios (*.toml *.json);;All files (*)")
            if path:
                self.open_file(path)
            return
        if key != self._key:
            self.use(key)

    def _check(self) -> None:
        text = self.text.toPlainText()
        try:
            self._scenario = parse_scenario(text, SOURCE)
            self._problem = ""
        except ScenarioError as exc:
            self._scenario = None
            message = str(exc).removeprefix(f"{SOURCE}: ")
            line = problem_line(text, str(exc))
            self._problem = f"line {line}: {message}" if line else message
            self._mark(line)
            self.text_message.show_error(self._problem[:1].upper() + self._problem[1:])
        if self._scenario is not None:
            self._mark(None)
            self.text_message.clear_message()
        self._show_summary()

    def _mark(self, line: int | None) -> None:
        """Mark the line at fault (1-based; None: clear)."""
        marks = []
        if line is not None:
            block = self.text.document().findBlockByNumber(line - 1)
            if block.isValid():
                mark = QTextEdit.ExtraSelection()
                mark.format.setBackground(QColor(FAULT_BACKGROUND))
                mark.format.setProperty(QTextFormat.Property.FullWidthSelection, True)
                mark.cursor = QTextCursor(block)
                marks.append(mark)
                QTimer.singleShot(0, lambda: self._bring_into_view(line))  # once the text is laid out
        self.text.setExtraSelections(marks)

    def _bring_into_view(self, line: int) -> None:
        """Scroll the line at fault into view, without moving the cursor being typed with."""
        bar = self.text.verticalScrollBar()  # a QPlainTextEdit scrolls by lines
        shown = max(1, self.text.viewport().height() // max(1, self.text.fontMetrics().lineSpacing()))
        if not bar.value() <= line - 1 < bar.value() + shown:
            bar.setValue(max(0, line - 1 - shown // 3))

    def _scale_problem(self, problem: str) -> None:
        self.scale_message.show_error(problem) if problem else self.scale_message.clear_message()
        self.changed.emit()

    def _show_summary(self) -> None:
        if self._scenario is None:
            self.summary.setText(f"<span style='color: {theme.DIM};'>Fix the definition above to see its "
                                 "classes.</span>")
        else:
            try:
                scenario = self.scenario()
            except ValueError:
                scenario = self._scenario
            lines = [class_summary(c) for c in scenario.classes]
            head = html.escape(scenario.description or scenario.name)
            if scenario.scale != 1.0:
                head += f" — lengths × {scenario.scale:g}"
            notes = []
            if not self._thinking_control and any(c.thinking_share for c in self._scenario.classes):
                notes.append(html.escape(self._why_no_thinking or
                                         "This server cannot switch thinking per request: the thinking shares "
                                         "are not used."))
            self.summary.setText("<br><br>".join([f"<i>{head}</i>", *lines, *(f"<i>{n}</i>" for n in notes)]))
        self.changed.emit()

    def _save_dialog(self) -> None:
        name = (self._scenario.name if self._scenario is not None else "scenario").replace("/", "-")
        path, _ = QFileDialog.getSaveFileName(self, "Save the scenario", f"{name}.toml",
                                              "TOML (*.toml);;JSON (*.json);;All files (*)")
        if path:
            self.save_to(path)


__all__ = ["ScenarioGroup", "class_summary"]
