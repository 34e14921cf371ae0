"""The editors the settings form is built from: spin boxes, combo boxes that keep an unknown
value, and one editor per backend option, chosen by the option's kind."""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox, QPlainTextEdit, QSpinBox

from app.core.server.mapping import DIRECTORY, MEBIBYTES, MODEL_FILE, PROGRAM, OptionSpec
from app.ui.widgets.forms import PathEdit, RangedSpinBox

GGUF_FILTER = "GGUF models (*.gguf);;All files (*)"


def height_for_lines(edit: QPlainTextEdit, lines: int) -> int:
    """Pixels for a text box to show this many lines in its current (style-resolved) font."""
    edit.ensurePolished()
    margins = edit.contentsMargins()
    document_margin = int(edit.document().documentMargin() * 2)
    return (edit.fontMetrics().lineSpacing() * lines + document_margin + margins.top()
            + margins.bottom() + 2 * edit.frameWidth() + 4)


def spin_box(name: str, low: int, high: int, *, width: int = 130, step: int = 1) -> RangedSpinBox:
    """A named spin box over [low, high] (width in pixels) that names a typed value outside them."""
    spin = RangedSpinBox()
    spin.setObjectName(name)
    spin.setRange(low, high)
    spin.setSingleStep(step)
    spin.setFixedWidth(width)
    return spin


def option_editor(spec: OptionSpec) -> RangedSpinBox | PathEdit:
    """The editor for one backend option: a spin box for numbers, a path field with Browse… for paths."""
    if spec.kind in (DIRECTORY, PROGRAM, MODEL_FILE):
        edit = PathEdit(pick_directory=spec.kind == DIRECTORY, dialog_title=spec.label, placeholder=spec.placeholder,
                        file_filter=GGUF_FILTER if spec.kind == MODEL_FILE else "")
        edit.setObjectName(spec.name)
        return edit
    spin = spin_box(spec.name, spec.low, spec.high, step=spec.step)
    if spec.kind == MEBIBYTES:
        spin.setSuffix(" MiB")
    return spin


def editor_value(editor: QSpinBox | PathEdit) -> int | str:
    """The value an option editor shows."""
    return editor.text() if isinstance(editor, PathEdit) else editor.value()


def set_editor_value(editor: QSpinBox | PathEdit, value: int | str) -> None:
    """Show a value in an option editor."""
    if isinstance(editor, PathEdit):
        editor.set_text(str(value))
    else:
        editor.setValue(int(value))


def combo_box(name: str, choices: tuple[tuple[str, str], ...]) -> QComboBox:
    """A named combo box of (value, text) choices."""
    combo = QComboBox()
    combo.setObjectName(name)
    combo.setMaximumWidth(380)
    for value, text in choices:
        combo.addItem(text, value)
    return combo


_NOT_A_CHOICE = " (not a valid choice)"


def select_data(combo: QComboBox, value: str) -> None:
    """Select the item holding value; an unknown value gets its own item so it round-trips."""
    for stale in reversed(range(combo.count())):
        if combo.itemText(stale).endswith(_NOT_A_CHOICE) and combo.itemData(stale) != value:
            combo.removeItem(stale)
    index = combo.findData(value)
    if index < 0:
        combo.addItem(f"{value}{_NOT_A_CHOICE}", value)
        index = combo.count() - 1
    combo.setCurrentIndex(index)
