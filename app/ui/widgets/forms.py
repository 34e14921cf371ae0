"""Small reusable form pieces: inline messages, dim hints, a path picker, aligned field groups, and
number fields that show their range and refuse (with the reason) what lies outside it."""

from __future__ import annotations

import html
import os
from collections.abc import Iterable

from PySide6.QtCore import QEvent, QObject, Qt, Signal, SignalInstance
from PySide6.QtGui import QValidator, QWheelEvent
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

# Chosen to read on the dark theme; also legible on a light one.
ERROR_COLOR = "#ff6b6b"
WARNING_COLOR = "#f0b429"
HINT_COLOR = "#8b96a5"
INFO_COLOR = "#9fd8ff"

_MESSAGE_STYLES = {
    "": "",
    "error": f"color: {ERROR_COLOR};",
    "warning": f"color: {WARNING_COLOR};",
    "info": f"color: {INFO_COLOR};",
}
_PROMINENT_STYLES = {
    "": "",
    "error": (
        f"color: {ERROR_COLOR}; background: rgba(255, 107, 107, 0.10);"
        f" border: 1px solid {ERROR_COLOR}; border-radius: 4px; padding: 6px 8px;"
    ),
    "warning": (
        f"color: {WARNING_COLOR}; background: rgba(240, 180, 41, 0.12);"
        f" border: 1px solid {WARNING_COLOR}; border-radius: 4px; padding: 6px 8px;"
    ),
    "info": (
        f"color: {INFO_COLOR}; background: rgba(76, 194, 255, 0.08);"
        " border: 1px solid #2f6f9a; border-radius: 4px; padding: 6px 8px;"
    ),
}
_PREFIX = {"error": "✖ ", "warning": "⚠ "}


class InlineMessage(QLabel):
    """A wrapped line under a field: a red error, an amber warning, a blue note, or nothing (hidden)."""

    def __init__(self, parent: QWidget | None = None, *, prominent: bool = False) -> None:
        super().__init__(parent)
        self._severity = ""
        self._prominent = prominent
        self.setWordWrap(True)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        self.hide()

    @property
    def severity(self) -> str:
        """'error', 'warning', 'info' or '' when nothing is shown."""
        return self._severity

    @property
    def message(self) -> str:
        """The message without its severity mark."""
        return self.text()[len(_PREFIX.get(self._severity, "")):]

    def show_error(self, text: str) -> None:
        """Show text as an error (blocks Apply)."""
        self._show("error", text)

    def show_warning(self, text: str) -> None:
        """Show text as a warning (allowed, but worth reading)."""
        self._show("warning", text)

    def show_info(self, text: str) -> None:
        """Show text as a note (how something went, nothing to fix)."""
        self._show("info", text)

    def clear_message(self) -> None:
        """Hide the message."""
        self._show("", "")

    def _show(self, severity: str, text: str) -> None:
        self._severity = severity
        self.setProperty("severity", severity)
        styles = _PROMINENT_STYLES if self._prominent else _MESSAGE_STYLES
        self.setStyleSheet(f"QLabel {{ {styles[severity]} }}" if severity else "")
        self.setText(_PREFIX.get(severity, "") + text if severity else "")
        self.setVisible(bool(severity))


class HintLabel(QLabel):
    """Dim explanatory text under a field; an environment variable name is shown in monospace."""

    def __init__(self, text: str = "", env_name: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.RichText)
        # In the widget's own sheet so that an application-wide font-size rule does not undo it.
        size_pt = QApplication.font().pointSizeF() * 0.9
        self.setStyleSheet(f"QLabel {{ color: {HINT_COLOR}; font-size: {size_pt:.1f}pt; }}")
        parts = []
        if env_name:
            parts.append(f"<span style='font-family: monospace;'>{html.escape(env_name)}</span>")
        if text:
            parts.append(html.escape(text))
        self.setText(" · ".join(parts))


def _number_text(value: float, decimals: int) -> str:
    return f"{value:.{decimals}f}".rstrip("0").rstrip(".") if decimals else str(int(value))


class _RangeCheck:
    """What a ranged spin box adds to Qt's: typed text outside the range stays as typed and is named, not
    silently cut (Qt's validator would drop the keystroke: 100 → 10, -3 → 3).

    `problem()` is the typed text's fault (an error: the field cannot be used as shown); when editing ends
    Qt puts the last good value back and `refused()` then says what was refused and what was kept."""

    problem_changed: SignalInstance  # emitted with problem() or refused() whenever either changes

    def _init_range_check(self) -> None:
        self._problem = ""
        self._refused = ""
        box = self._box()
        line = box.lineEdit()
        assert line is not None  # a spin box always has its line edit
        line.textEdited.connect(self._on_text_edited)
        box.editingFinished.connect(self._on_editing_finished)

    def _box(self) -> QAbstractSpinBox:
        assert isinstance(self, QAbstractSpinBox)
        return self

    def _decimals(self) -> int:
        return self.decimals() if isinstance(self, QDoubleSpinBox) else 0

    def _bounds(self) -> tuple[float, float]:
        assert isinstance(self, (QSpinBox, QDoubleSpinBox))
        return float(self.minimum()), float(self.maximum())

    def range_text(self) -> str:
        """The values this field takes, e.g. "1 to 64" or "Default, or 1 to 65536" (suffix included)."""
        assert isinstance(self, (QSpinBox, QDoubleSpinBox))
        low, high = self._bounds()
        decimals, suffix = self._decimals(), self.suffix()
        special = self.specialValueText()
        if special:
            step = 10 ** -decimals if decimals else 1
            return f"{special}, or {_number_text(low + step, decimals)} to {_number_text(high, decimals)}{suffix}"
        return f"{_number_text(low, decimals)} to {_number_text(high, decimals)}{suffix}"

    def problem(self) -> str:
        """Why the text shown is not a value of this field ('' when it is)."""
        return self._problem

    def refused(self) -> str:
        """What was refused when editing last ended and which value was kept ('' when nothing was)."""
        return self._refused

    def _problem_of(self, text: str) -> str:
        assert isinstance(self, (QSpinBox, QDoubleSpinBox))
        shown = text.strip()
        if self.specialValueText() and shown == self.specialValueText():
            return ""
        bare = shown.removeprefix(self.prefix().strip()).removesuffix(self.suffix().strip()).strip()
        low, high = self._bounds()
        decimals = self._decimals()
        if not bare:
            return f"Enter a number from {self.range_text()}."
        kind = "number" if decimals else "whole number"
        locale = self.locale()
        number, ok = locale.toDouble(bare) if decimals else locale.toLongLong(bare)
        if not ok:
            return f"'{bare}' is not a {kind}; this field takes {self.range_text()}."
        if number < low:
            return f"{bare} is below the minimum {_number_text(low, decimals)}{self.suffix()}."
        if number > high:
            return f"{bare} is above the maximum {_number_text(high, decimals)}{self.suffix()}."
        return ""

    def _validate_in_range(self, state: QValidator.State, text: str, pos: int) -> tuple[QValidator.State, str, int]:
        # Qt refuses the keystroke that leaves the range; keep the text so that it can be named.
        if state == QValidator.State.Invalid:
            return QValidator.State.Intermediate, text, pos
        return state, text, pos

    def _on_text_edited(self, text: str) -> None:
        self._set(self._problem_of(text), "")

    def _on_editing_finished(self) -> None:
        if self._problem:
            kept = self._box().text()
            self._set("", f"{self._problem[:-1]}: {kept} was kept.")

    def _forget(self) -> None:
        """A value set by the program or stepped with the arrows replaces whatever was typed."""
        self._set("", "")

    def _set(self, problem: str, refused: str) -> None:
        if (problem, refused) != (self._problem, self._refused):
            self._problem, self._refused = problem, refused
            self.problem_changed.emit(problem or refused)


class RangedSpinBox(_RangeCheck, QSpinBox):
    """A whole-number field over [minimum, maximum] that names an out-of-range entry instead of cutting it."""

    problem_changed = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        QSpinBox.__init__(self, parent)
        self._init_range_check()

    def validate(self, text: str, pos: int) -> tuple[QValidator.State, str, int]:  # noqa: D102 - Qt's hook
        state, text, pos = QSpinBox.validate(self, text, pos)
        return self._validate_in_range(state, text, pos)

    def setValue(self, value: int) -> None:  # noqa: N802 - Qt's spelling
        """Show value (Qt's own reverts do not come here, so a refusal stays named until then)."""
        self._forget()
        QSpinBox.setValue(self, value)

    def stepBy(self, steps: int) -> None:  # noqa: N802 - Qt's spelling
        """Arrow keys and buttons step from the value kept."""
        self._forget()
        QSpinBox.stepBy(self, steps)


class RangedDoubleSpinBox(_RangeCheck, QDoubleSpinBox):
    """A decimal field over [minimum, maximum] that names an out-of-range entry instead of cutting it."""

    problem_changed = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        QDoubleSpinBox.__init__(self, parent)
        self._init_range_check()

    def validate(self, text: str, pos: int) -> tuple[QValidator.State, str, int]:  # noqa: D102 - Qt's hook
        state, text, pos = QDoubleSpinBox.validate(self, text, pos)
        return self._validate_in_range(state, text, pos)

    def setValue(self, value: float) -> None:  # noqa: N802 - Qt's spelling
        """Show value (Qt's own reverts do not come here, so a refusal stays named until then)."""
        self._forget()
        QDoubleSpinBox.setValue(self, value)

    def stepBy(self, steps: int) -> None:  # noqa: N802 - Qt's spelling
        """Arrow keys and buttons step from the value kept."""
        self._forget()
        QDoubleSpinBox.stepBy(self, steps)


RangedField = RangedSpinBox | RangedDoubleSpinBox


class _WheelGuard(QObject):
    """Scrolling a form scrolls the form: a wheel over a number or choice field that has no focus goes
    to the scroll area holding the field, instead of changing the value under the pointer."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's spelling
        if event.type() != QEvent.Type.Wheel or not isinstance(watched, QWidget) or watched.hasFocus():
            return False
        assert isinstance(event, QWheelEvent)
        area = _scroll_area_of(watched)
        if area is None:
            event.ignore()  # ignored and filtered: Qt passes a real wheel on to the parent widgets
            return True
        # Handed to the area itself: a wheel sent by the program (or a test) is not passed on by Qt.
        viewport = area.viewport()
        global_pos = event.globalPosition()
        QApplication.sendEvent(viewport, QWheelEvent(
            viewport.mapFromGlobal(global_pos), global_pos, event.pixelDelta(), event.angleDelta(),
            event.buttons(), event.modifiers(), event.phase(), event.inverted()))
        return True


def _scroll_area_of(widget: QWidget) -> QAbstractScrollArea | None:
    parent = widget.parentWidget()
    while parent is not None and not isinstance(parent, QAbstractScrollArea):
        parent = parent.parentWidget()
    return parent


_WHEEL_GUARD: _WheelGuard | None = None


def guard_form(root: QWidget) -> None:
    """Make a built form safe to scroll and honest about its numbers, in one place for every form:
    spin and combo boxes take focus by click or Tab only and ignore the wheel until focused, and every
    ranged number field says its range in its tooltip."""
    global _WHEEL_GUARD
    if _WHEEL_GUARD is None:
        _WHEEL_GUARD = _WheelGuard(QApplication.instance())
    for field in (*root.findChildren(QAbstractSpinBox), *root.findChildren(QComboBox)):
        field.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        field.removeEventFilter(_WHEEL_GUARD)
        field.installEventFilter(_WHEEL_GUARD)
        if isinstance(field, (RangedSpinBox, RangedDoubleSpinBox)) and field.isEnabled():
            tip = field.toolTip()
            line = f"Takes {field.range_text()}."
            if line not in tip:
                field.setToolTip(f"{tip}\n\n{line}" if tip else line)


class PathEdit(QWidget):
    """A line edit with a Browse… button that picks a directory or a file."""

    text_changed = Signal(str)

    def __init__(
        self, *, pick_directory: bool, dialog_title: str, placeholder: str = "",
        parent: QWidget | None = None, file_filter: str = "",
    ) -> None:
        super().__init__(parent)
        self._pick_directory = pick_directory
        self._dialog_title = dialog_title
        self.file_filter = file_filter  # e.g. "GGUF models (*.gguf)"; "" = any file
        self.line_edit = QLineEdit(self)
        self.line_edit.setPlaceholderText(placeholder)
        self.line_edit.setClearButtonEnabled(True)
        self.browse_button = QPushButton("Browse…", self)
        self.browse_button.setAutoDefault(False)
        # Files chosen before, newest first (set_recent); hidden until there are some.
        self.recent_button = QToolButton(self)
        self.recent_button.setText("Recent")
        self.recent_button.setToolTip("Files served lately")
        self.recent_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.recent_menu = QMenu(self.recent_button)
        self.recent_button.setMenu(self.recent_menu)
        self.recent_button.hide()
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addWidget(self.line_edit, 1)
        layout.addWidget(self.recent_button)
        layout.addWidget(self.browse_button)
        self.line_edit.textChanged.connect(self.text_changed)
        self.browse_button.clicked.connect(self._browse)

    def setObjectName(self, name: str) -> None:  # noqa: N802 - Qt's spelling
        """Name this widget and its parts (<name>_edit, <name>_browse) for tests and stylesheets."""
        super().setObjectName(name)
        self.line_edit.setObjectName(f"{name}_edit")
        self.browse_button.setObjectName(f"{name}_browse")

    def text(self) -> str:
        """The path as typed, trimmed."""
        return self.line_edit.text().strip()

    def set_recent(self, paths: Iterable[str]) -> None:
        """Offer these paths (newest first) in the Recent menu; a path no longer on disk is shown disabled."""
        self.recent_menu.clear()
        for path in paths:
            action = self.recent_menu.addAction(path)
            exists = os.path.exists(path)
            action.setEnabled(exists)
            action.setToolTip("" if exists else f"{path} is no longer there")
            action.triggered.connect(lambda _checked=False, chosen=path: self.line_edit.setText(chosen))
        self.recent_button.setVisible(not self.recent_menu.isEmpty())

    def recent(self) -> list[str]:
        """The paths the Recent menu offers, newest first."""
        return [action.text() for action in self.recent_menu.actions()]

    def set_text(self, text: str) -> None:
        """Replace the path."""
        self.line_edit.setText(text)

    def _browse(self) -> None:
        start = self.text()
        if self._pick_directory:
            chosen = QFileDialog.getExistingDirectory(self, self._dialog_title, start)
        else:
            chosen, _filter = QFileDialog.getOpenFileName(self, self._dialog_title, start, self.file_filter)
        if chosen:
            self.line_edit.setText(chosen)


class FieldGroup(QGroupBox):
    """A titled group of label | field rows; each field has a hint and an inline message under it."""

    def __init__(self, title: str, parent: QWidget | None = None) -> None:
        super().__init__(title, parent)
        self._grid = QGridLayout(self)
        self._grid.setContentsMargins(10, 14, 10, 10)
        self._grid.setHorizontalSpacing(12)
        self._grid.setVerticalSpacing(12)
        self._grid.setColumnStretch(1, 1)
        self.labels: list[QLabel] = []

    def add_field(
        self, label: str, editor: QWidget, *, env_name: str = "", hint: str = "",
        below: Iterable[QWidget] = (), prominent_message: bool = False,
    ) -> InlineMessage:
        """Add one row and return the message widget that reports on it."""
        row = self._grid.rowCount()
        caption = QLabel(label, self)
        caption.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        # Centre the caption on the editor's first line, not on the hint and message below it.
        caption.setMinimumHeight(min(editor.sizeHint().height(), _line_height(editor)))
        caption.setBuddy(editor)
        self.labels.append(caption)

        column = QWidget(self)
        stack = QVBoxLayout(column)
        stack.setContentsMargins(0, 0, 0, 0)
        stack.setSpacing(4)
        stack.addWidget(editor)
        for widget in below:
            stack.addWidget(widget)
        ranged: list[RangedField] = [editor] if isinstance(editor, (RangedSpinBox, RangedDoubleSpinBox)) else [
            *editor.findChildren(RangedSpinBox), *editor.findChildren(RangedDoubleSpinBox)]
        if len(ranged) == 1 and ranged[0].isEnabled():  # the range in view; a disabled field says why instead
            hint = " ".join(t for t in (hint, f"Takes {ranged[0].range_text()}.") if t)
        if env_name or hint:
            stack.addWidget(HintLabel(hint, env_name, column))
        message = InlineMessage(column, prominent=prominent_message)
        stack.addWidget(message)

        self._grid.addWidget(caption, row, 0, Qt.AlignmentFlag.AlignTop)
        self._grid.addWidget(column, row, 1, Qt.AlignmentFlag.AlignTop)
        return message


    def add_wide_field(self, label: str, editor: QWidget, *, hint: str = "",
                       below: Iterable[QWidget] = ()) -> InlineMessage:
        """Add a row whose editor spans the group's width (a text to edit), its caption on the line above;
        return the message widget that reports on it."""
        row = self._grid.rowCount()
        caption = QLabel(label, self)
        caption.setBuddy(editor)
        column = QWidget(self)
        stack = QVBoxLayout(column)
        stack.setContentsMargins(0, 0, 0, 0)
        stack.setSpacing(4)
        stack.addWidget(editor)
        message = InlineMessage(column)  # right under the text it is about
        stack.addWidget(message)
        for widget in below:
            stack.addWidget(widget)
        if hint:
            stack.addWidget(HintLabel(hint, "", column))
        self._grid.addWidget(caption, row, 0, 1, 2)
        self._grid.addWidget(column, row + 1, 0, 1, 2)
        return message


def _line_height(widget: QWidget) -> int:
    """Height of a one-line editor (a QLineEdit) in widget's font."""
    probe = QLineEdit()
    probe.setFont(widget.font())
    height = probe.sizeHint().height()
    probe.deleteLater()
    return height


def align_label_columns(groups: Iterable[FieldGroup]) -> None:
    """Give every group's captions one width so fields line up from group to group."""
    groups = list(groups)
    width = max((label.sizeHint().width() for g in groups for label in g.labels), default=0)
    for group in groups:
        for label in group.labels:
            label.setMinimumWidth(width)


def left_aligned(*widgets: QWidget, stretch: bool = True, spacing: int = 6) -> QWidget:
    """A row holding widgets at their natural width, packed to the left."""
    row = QWidget()
    layout = QHBoxLayout(row)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(spacing)
    for widget in widgets:
        layout.addWidget(widget)
    if stretch:
        layout.addStretch(1)
    return row
