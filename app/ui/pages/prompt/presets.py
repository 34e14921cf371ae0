"""The preset picker: the seed articles' test prompts, editable, saved in the user's config folder."""

from __future__ import annotations

from typing import Any
from collections.abc import Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QInputDialog, QLabel, QPushButton, QVBoxLayout, QWidget

from app.core.console.presets import Preset, builtin, edited, is_builtin, is_edited, new_key, validate_preset
from app.ui.widgets.forms import InlineMessage

CHOOSE_TEXT = "Test prompts…"


class PresetBar(QWidget):
    """Choose a preset to fill the prompt; Save writes the current prompt and mode into it."""

    preset_chosen = Signal(object)  # Preset

    def __init__(self, presets: list[Preset], current_fields: Callable[[], dict[str, Any]],
                 persist: Callable[[list[Preset]], None], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._presets = list(presets)
        self._current_fields = current_fields
        self._persist = persist
        self.combo = QComboBox()
        self.combo.setObjectName("preset")
        self.combo.setMinimumContentsLength(12)
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.save_button = QPushButton("Save")
        self.save_button.setToolTip("Store the current prompt, mode, system prompt and num_predict in this preset")
        self.save_as_button = QPushButton("Save as…")
        self.reset_button = QPushButton("Reset")
        self.description = QLabel()
        self.description.setObjectName("Dim")
        self.description.setWordWrap(True)
        self.message = InlineMessage()
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.combo, 1)
        for button in (self.save_button, self.save_as_button, self.reset_button):
            row.addWidget(button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addLayout(row)
        layout.addWidget(self.description)
        layout.addWidget(self.message)
        self.combo.activated.connect(self._on_activated)
        self.save_button.clicked.connect(self.save_current)
        self.save_as_button.clicked.connect(self._ask_save_as)
        self.reset_button.clicked.connect(self.reset_or_delete)
        self._fill(None)

    @property
    def presets(self) -> list[Preset]:
        """The presets as shown (built-ins with edits, then the user's own)."""
        return list(self._presets)

    def selected(self) -> Preset | None:
        """The preset picked last, or None."""
        key = self.combo.currentData()
        return next((p for p in self._presets if p.key == key), None)

    def _fill(self, select_key: str | None) -> None:
        self.combo.blockSignals(True)
        self.combo.clear()
        self.combo.addItem(CHOOSE_TEXT, None)
        for p in self._presets:
            self.combo.addItem(p.title + ("  (edited)" if is_edited(p) else ""), p.key)
        index = self.combo.findData(select_key) if select_key else 0
        self.combo.setCurrentIndex(max(index, 0))
        self.combo.blockSignals(False)
        self._refresh()

    def _refresh(self) -> None:
        preset = self.selected()
        self.save_button.setEnabled(preset is not None)
        self.reset_button.setEnabled(preset is not None and (is_edited(preset) or not is_builtin(preset.key)))
        self.reset_button.setText("Delete" if preset is not None and not is_builtin(preset.key) else "Reset")
        self.description.setText(preset.description if preset else "The seed articles' test prompts; edits are saved.")

    def _on_activated(self, _index: int) -> None:
        self.message.clear_message()
        self._refresh()
        preset = self.selected()
        if preset is not None:
            self.preset_chosen.emit(preset)

    def choose(self, key: str) -> Preset:
        """Select a preset by key and apply it, as a click would."""
        index = self.combo.findData(key)
        if index < 0:
            raise KeyError(key)
        self.combo.setCurrentIndex(index)
        self._on_activated(index)
        preset = self.selected()
        if preset is None:
            raise KeyError(key)
        return preset

    def save_current(self) -> None:
        """Overwrite the selected preset with the current fields."""
        preset = self.selected()
        if preset is None:
            return
        self._store(edited(preset, **self._current_fields()), replace_key=preset.key)

    def _ask_save_as(self) -> None:
        title, ok = QInputDialog.getText(self, "Save as a new preset", "Title:")
        if ok:
            self.save_as(title)

    def save_as(self, title: str) -> Preset | None:
        """Add the current fields as a new preset under `title`."""
        key = new_key(title, {p.key for p in self._presets})
        preset = Preset(key=key, title=title.strip(), description="Your preset.", **self._current_fields())
        return self._store(preset, replace_key=None)

    def _store(self, preset: Preset, replace_key: str | None) -> Preset | None:
        problems = validate_preset(preset)
        if problems:
            self.message.show_error("Not saved: " + "; ".join(problems) + ".")
            return None
        if replace_key is None:
            self._presets.append(preset)
        else:
            self._presets = [preset if p.key == replace_key else p for p in self._presets]
        self._fill(preset.key)
        self.message.clear_message()
        self._persist(self.presets)
        return preset

    def reset_or_delete(self) -> None:
        """Restore a shipped preset, or delete one of the user's."""
        preset = self.selected()
        if preset is None:
            return
        original = builtin(preset.key)
        if original is not None:
            self._presets = [original if p.key == preset.key else p for p in self._presets]
            self._fill(preset.key)
            self.preset_chosen.emit(original)
        else:
            self._presets = [p for p in self._presets if p.key != preset.key]
            self._fill(None)
        self._persist(self.presets)

    def show_save_error(self, text: str) -> None:
        """Say that saving failed (the edits stay in the window)."""
        self.message.show_error(text)

    def show_load_problems(self, problems: list[str]) -> None:
        """Report what was wrong with the saved presets."""
        if problems:
            self.message.show_warning(" ".join(problems))


__all__ = ["PresetBar"]
