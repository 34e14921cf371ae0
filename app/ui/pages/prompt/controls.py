"""The console's settings column: model, thinking mode, system prompt and options."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QAbstractSpinBox, QButtonGroup, QComboBox, QDoubleSpinBox, QGridLayout, QGroupBox,
                               QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QSpinBox, QToolButton, QVBoxLayout,
                               QWidget)

from app.core.console.output_length import DEFAULT_NUM_PREDICT, NO_CAP
from app.core.console.reply_words import ReplyWords
from app.services.prompts import PromptOptions
from app.core.models import LocalModel, ModelDetails
from app.ui.widgets.forms import HintLabel, InlineMessage

THINK_LEVELS = ("low", "medium", "high")
# Architectures whose `think` takes an effort level instead of true/false.
LEVEL_ARCHITECTURES = ("gptoss", "gpt-oss")
SEGMENT_STYLE = """
#ThinkSegment { background: #262831; border: 1px solid #3a3d49; padding: 8px 14px; font-size: 12pt;
                font-weight: 600; color: #c9cbd3; border-radius: 0px; }
#ThinkSegment[segment="first"] { border-top-left-radius: 7px; border-bottom-left-radius: 7px; }
#ThinkSegment[segment="last"] { border-top-right-radius: 7px; border-bottom-right-radius: 7px; }
#ThinkSegment:checked { background: #1f6fa8; border-color: #4cc2ff; color: #ffffff; }
#ThinkSegment:disabled { color: #5c5f69; background: #1c1d23; border-color: #2a2c34; }
#ThinkSegment:checked:disabled { background: #1c2a35; border-color: #2a3a47; color: #8fb3cc; }
"""


def takes_levels(details: ModelDetails | None) -> bool:
    """True when the model's `think` accepts "low" | "medium" | "high" (gpt-oss)."""
    if details is None:
        return False
    family = str(details.details.get("family") or "")
    return details.architecture in LEVEL_ARCHITECTURES or family in LEVEL_ARCHITECTURES


def model_label(model: LocalModel) -> str:
    """'qwen3:14b  ·  14.8B Q4_K_M' for the picker."""
    extra = " ".join(p for p in (model.parameter_size, model.quantization_level) if p)
    return f"{model.name}  ·  {extra}" if extra else model.name


class ConsoleControls(QWidget):
    """Model picker, Thinking / Non-thinking switch (and effort level), system prompt, options."""

    model_changed = Signal(str)
    refresh_requested = Signal()
    thinking_changed = Signal()  # what the chosen model can do about thinking is known anew

    def __init__(self, parent: QWidget | None = None, *, words: ReplyWords) -> None:
        super().__init__(parent)
        self.setStyleSheet(SEGMENT_STYLE)
        self._details: ModelDetails | None = None
        self._details_for = ""
        self._levels = False
        # The mode asked for (by a click or a preset). A model that cannot think shows the switch off
        # and disabled without forgetting it: a model that can think gets it back.
        self._wanted_on = False
        self._syncing = False

        model_box = QGroupBox("Model")
        ml = QVBoxLayout(model_box)
        row = QHBoxLayout()
        self.model_combo = QComboBox()
        self.model_combo.setObjectName("model")
        self.model_combo.setMinimumContentsLength(18)
        self.model_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.refresh_button = QToolButton()
        self.refresh_button.setText("⟳")
        self.refresh_button.setToolTip("Read the server's local models again")
        row.addWidget(self.model_combo, 1)
        row.addWidget(self.refresh_button)
        ml.addLayout(row)
        self.model_info = QLabel()
        self.model_info.setObjectName("Dim")
        self.model_info.setWordWrap(True)
        ml.addWidget(self.model_info)
        self.model_message = InlineMessage()
        ml.addWidget(self.model_message)

        think_box = QGroupBox("Thinking")
        tl = QVBoxLayout(think_box)
        seg = QHBoxLayout()
        seg.setSpacing(0)
        self.think_on = QPushButton("Thinking")
        self.think_off = QPushButton("Non-thinking")
        self.think_group = QButtonGroup(self)
        for button, position in ((self.think_on, "first"), (self.think_off, "last")):
            button.setObjectName("ThinkSegment")
            button.setProperty("segment", position)
            button.setCheckable(True)
            self.think_group.addButton(button)
            seg.addWidget(button)
        self.think_off.setChecked(True)
        seg.addStretch(1)
        tl.addLayout(seg)
        level_row = QHBoxLayout()
        self.level_label = QLabel("Effort")
        self.level_combo = QComboBox()
        self.level_combo.addItem("on (model default)", True)
        for level in THINK_LEVELS:
            self.level_combo.addItem(level, level)
        level_row.addWidget(self.level_label)
        level_row.addWidget(self.level_combo, 1)
        tl.addLayout(level_row)
        self.think_reason = QLabel()
        self.think_reason.setObjectName("Dim")
        self.think_reason.setWordWrap(True)
        tl.addWidget(self.think_reason)
        tl.addWidget(HintLabel(words.think_hint))

        self.system_edit = QPlainTextEdit()
        self.system_edit.setObjectName("system")
        self.system_edit.setPlaceholderText("Optional system prompt")
        self.system_edit.setFixedHeight(64)
        system_box = QGroupBox("System prompt")
        QVBoxLayout(system_box).addWidget(self.system_edit)

        options_box = QGroupBox("Options")
        grid = QGridLayout(options_box)
        grid.setVerticalSpacing(8)
        self.num_predict = QSpinBox()
        self.num_predict.setRange(NO_CAP, 131072)
        self.num_predict.setSingleStep(128)
        self.num_predict.setSpecialValueText("no cap")  # short: the box sets the column's width; the risk is below
        self.num_predict.setValue(DEFAULT_NUM_PREDICT)
        self.num_predict.setToolTip(
            f"The most tokens a reply may generate, thinking included (default {DEFAULT_NUM_PREDICT:,d}). At 0, "
            "\"no cap\", the model's own default applies: a model that never stops generates until its context "
            "is full, which takes minutes on a small engine.")
        self.temperature = QDoubleSpinBox()
        self.temperature.setRange(-0.05, 2.0)
        self.temperature.setSingleStep(0.05)
        self.temperature.setDecimals(2)
        self.temperature.setSpecialValueText("model default")
        self.temperature.setValue(-0.05)
        self.seed = QSpinBox()
        self.seed.setRange(-1, 2_147_483_647)
        self.seed.setSpecialValueText("random")
        self.seed.setValue(-1)
        self.num_ctx = QSpinBox()
        self.num_ctx.setRange(0, 262144)
        self.num_ctx.setSingleStep(1024)
        self.num_ctx.setSpecialValueText("server default")
        spin_boxes: tuple[tuple[str, QAbstractSpinBox], ...] = (
            ("num_predict", self.num_predict), ("temperature", self.temperature),
            ("seed", self.seed), ("num_ctx", self.num_ctx))
        for name, widget in spin_boxes:
            widget.setObjectName(name)
        for r, (label, widget) in enumerate(spin_boxes):
            caption = QLabel(label)
            caption.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            grid.addWidget(caption, r, 0)
            grid.addWidget(widget, r, 1)
        self.num_ctx_note = HintLabel("Changing num_ctx reloads the model (seconds) and changes its memory "
                                      "use; the Models page prices it.")
        grid.addWidget(self.num_ctx_note, 4, 0, 1, 2)
        self.no_cap_note = InlineMessage()
        grid.addWidget(self.no_cap_note, 5, 0, 1, 2)
        self.num_predict.valueChanged.connect(self._show_cap_risk)
        grid.setColumnStretch(1, 1)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(10)
        for box in (model_box, think_box, system_box, options_box):
            layout.addWidget(box)
        layout.addStretch(1)

        self.model_combo.currentIndexChanged.connect(lambda _i: self.model_changed.emit(self.model()))
        self.refresh_button.clicked.connect(self.refresh_requested)
        self.think_group.buttonToggled.connect(self._on_think_toggled)
        self._refresh_think()

    # --- models -------------------------------------------------------------------------
    def set_models(self, models: list[LocalModel]) -> None:
        """Fill the picker, keeping the current choice when it still exists."""
        current = self.model()
        self.model_combo.blockSignals(True)
        self.model_combo.clear()
        for m in models:
            self.model_combo.addItem(model_label(m), m.name)
        index = self.model_combo.findData(current)
        self.model_combo.setCurrentIndex(index if index >= 0 else (0 if models else -1))
        self.model_combo.blockSignals(False)
        self.model_message.clear_message()
        if not models:
            self.model_message.show_warning("The server has no local models; pull one on the Models page.")
        if self.model() != current:
            self.model_changed.emit(self.model())

    def show_models_error(self, text: str) -> None:
        """Say why the model list could not be read."""
        self.model_message.show_error(text)

    def model(self) -> str:
        """The chosen model name, or ''."""
        return str(self.model_combo.currentData() or "")

    def select_model(self, name: str) -> bool:
        """Pick a model by name; False when the list does not have it."""
        index = self.model_combo.findData(name)
        if index >= 0:
            self.model_combo.setCurrentIndex(index)
        return index >= 0

    def set_details(self, model: str, details: ModelDetails | None, error: str = "") -> None:
        """What the server showed of the chosen model (None while unknown)."""
        self._details_for = model
        self._details = details
        if details is not None:
            caps = ", ".join(details.capabilities) or "none listed"
            ctx = details.arch_value("context_length")
            self.model_info.setText(f"{details.architecture or '?'} · capabilities: {caps}"
                                    + (f" · trained for {ctx:,} tokens" if isinstance(ctx, int) else ""))
        else:
            self.model_info.setText(error)
        self._refresh_think()

    # --- thinking -------------------------------------------------------------------------
    @property
    def thinking_supported(self) -> bool | None:
        """True/False from the model's capabilities; None while they are unknown."""
        if self._details is None or self._details_for != self.model():
            return None
        return self._details.supports_thinking

    def _on_think_toggled(self, button: QPushButton, checked: bool) -> None:
        if checked and not self._syncing:  # the user's click (the switch is enabled only where it applies)
            self._wanted_on = button is self.think_on
        self._refresh_think()

    def _refresh_think(self) -> None:
        supported = self.thinking_supported
        levels = self._levels = supported is True and takes_levels(self._details)
        self._syncing = True
        try:
            shown = self.think_on if self._wanted_on and supported is not False else self.think_off
            shown.setChecked(True)
        finally:
            self._syncing = False
        self.think_on.setEnabled(supported is not False)
        self.think_off.setEnabled(supported is not False)
        self.level_label.setVisible(levels)
        self.level_combo.setVisible(levels)
        self.level_combo.setEnabled(self.think_on.isChecked())
        if supported is False:
            caps = ", ".join(self._details.capabilities) if self._details else ""
            # A backend that knows why (llama-server: what the chat template lacks) says so in details.
            why = self._details.details.get("thinking_reason") if self._details else None
            self.think_reason.setText((f"Disabled: {self.model()}: {why}" if isinstance(why, str) and why else
                                       f"Disabled: {self.model()} has no \"thinking\" capability "
                                       f"(the server lists: {caps}), so think is not sent.")
                                      + (" Thinking mode was asked for but is not applied to this model; a "
                                         "model that can think gets it back." if self._wanted_on else ""))
        elif supported is None and self.model():
            self.think_reason.setText("Reading the model's capabilities…")
        else:
            self.think_reason.setText("")
        self.think_reason.setVisible(bool(self.think_reason.text()))
        self.thinking_changed.emit()

    def thinking_reason(self) -> str:
        """Why the chosen model cannot think, in the server's words where it gave them ('' when it can
        or while that is unknown)."""
        if self.thinking_supported is not False or self._details is None:
            return ""
        return self._details.why_no_thinking()

    def set_think(self, think: bool | str | None) -> bool:
        """Ask for a mode: True/False, or an effort level. False when thinking was asked for but the
        model cannot think: the switch stays off (and disabled) and nothing about thinking is sent."""
        self._wanted_on = think not in (False, None)
        if isinstance(think, str):
            index = self.level_combo.findData(think)
            self.level_combo.setCurrentIndex(max(index, 0))
        else:
            self.level_combo.setCurrentIndex(0)
        self._refresh_think()
        return not (self._wanted_on and self.thinking_supported is False)

    def think_value(self) -> bool | str | None:
        """The `think` field to send: None for a model without the capability."""
        if self.thinking_supported is False:
            return None
        if not self.think_on.isChecked():
            return False
        if self._levels:
            level: str = self.level_combo.currentData()
            return level
        return True

    def thinking_choice(self) -> bool | str:
        """The mode asked for (what a preset saves), whatever the model supports."""
        if not self._wanted_on:
            return False
        level = self.level_combo.currentData()
        return level if isinstance(level, str) else True

    # --- options --------------------------------------------------------------------------
    def _show_cap_risk(self, value: int) -> None:
        if value == NO_CAP:
            self.no_cap_note.show_warning("No cap on num_predict: the model's default applies, and a model that "
                                          "never stops generates until its context is full (minutes on a small "
                                          "engine). Stop ends it at any time.")
        else:
            self.no_cap_note.clear_message()

    def system(self) -> str:
        """The system prompt."""
        return self.system_edit.toPlainText()

    def options(self) -> PromptOptions:
        """The request's options; unset ones are left out."""
        return PromptOptions(
            num_predict=self.num_predict.value() or None,
            temperature=None if self.temperature.value() < 0 else round(self.temperature.value(), 2),
            seed=None if self.seed.value() < 0 else self.seed.value(),
            num_ctx=self.num_ctx.value() or None,
        )


__all__ = ["ConsoleControls", "model_label", "takes_levels"]
