"""Create a tuned variant (the articles' Modelfile step) through a form; the backend says how it is sent."""

from __future__ import annotations

from typing import Any
from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QComboBox, QLabel, QLineEdit, QPushButton, QSpinBox, QWidget

from app.core.ports.backend import ModelStoreRules, VariantVerdict
from app.ui.widgets.forms import FieldGroup, InlineMessage, left_aligned

KEEP = "keep the base's"


class CreatePanel(FieldGroup):
    """Base model, new name, num_ctx, num_batch and optional quantization, checked as you type."""

    create_requested = Signal(dict)  # the create-variant request body

    def __init__(self, rules: ModelStoreRules, parent: QWidget | None = None) -> None:
        super().__init__("Create a tuned variant", parent)
        self._rules = rules
        self.base = QComboBox()
        self.base.setObjectName("create_base")
        self.base.setEditable(True)
        self.base.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.name = QLineEdit()
        self.name.setObjectName("create_name")
        self.name.setPlaceholderText("e.g. qwen3-14b-16k")
        self.num_ctx = QSpinBox()
        self.num_ctx.setObjectName("create_num_ctx")
        self.num_ctx.setRange(0, 262144)
        self.num_ctx.setSingleStep(1024)
        self.num_ctx.setSpecialValueText(KEEP)
        self.num_batch = QSpinBox()
        self.num_batch.setObjectName("create_num_batch")
        self.num_batch.setRange(0, 8192)
        self.num_batch.setSingleStep(128)
        self.num_batch.setSpecialValueText(KEEP)
        self.quantize = QComboBox()
        self.quantize.setObjectName("create_quantize")
        self.quantize.setEditable(True)
        self.quantize.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.quantize.addItems(["", *rules.quantize_choices])
        if (line := self.quantize.lineEdit()) is not None:  # an editable combo always has one
            line.setPlaceholderText(KEEP)
        self.preview = QLabel()
        self.preview.setObjectName("create_preview")
        mono = QFont("DejaVu Sans Mono")
        mono.setPointSizeF(9.5)
        self.preview.setFont(mono)
        self.preview.setWordWrap(True)
        self.preview.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.create_button = QPushButton("Create")
        self.create_button.setProperty("accent", True)
        self.status = QLabel()
        self.status.setObjectName("Dim")
        self.status.setWordWrap(True)
        self.result = InlineMessage(prominent=True)

        self.messages: dict[str, InlineMessage] = {
            "base": self.add_field("From", self.base),
            "name": self.add_field("New name", self.name),
            "num_ctx": self.add_field("num_ctx", self.num_ctx,
                                      hint="Context tokens per request; the variant loads with it by default."),
            "num_batch": self.add_field("num_batch", self.num_batch,
                                        hint="Prompt-processing batch in tokens (default 512), not concurrency."),
            "quantize": self.add_field("Quantize", self.quantize,
                                       hint="Optional; only from an F16/F32 base. Ollama has no FP8."),
        }
        self.add_field("Request", self.preview, below=(left_aligned(self.create_button, self.status),
                                                         self.result))
        # (local names, base quantization, training context, parameter count, GPU bytes) for a base name.
        self.context_for: Callable[[str], dict[str, Any]] = lambda _base: {}
        self._check: VariantVerdict | None = None
        for signal in (self.base.currentTextChanged, self.name.textChanged, self.quantize.currentTextChanged):
            signal.connect(lambda _t: self.recheck())
        for spin in (self.num_ctx, self.num_batch):
            spin.valueChanged.connect(lambda _v: self.recheck())
        self.create_button.clicked.connect(self._request)
        self._busy = False
        self._name_touched = False
        self.name.textEdited.connect(self._touch_name)
        self.recheck()

    def _touch_name(self, _text: str) -> None:
        self._name_touched = True

    def set_models(self, names: list[str]) -> None:
        """The local models to start from (keeps the typed base)."""
        current = self.base.currentText()
        self.base.blockSignals(True)
        self.base.clear()
        self.base.addItems(names)
        self.base.setCurrentText(current if current else (names[0] if names else ""))
        self.base.blockSignals(False)
        self.recheck()

    def set_base(self, name: str) -> None:
        """Start from this model (and suggest a name)."""
        self.base.setCurrentText(name)
        if not self.name.text():
            stem = name.split(":")[0].replace("/", "-")
            tag = name.split(":")[1] if ":" in name else ""
            self.name.setText(f"{stem}-{tag}-tuned" if tag else f"{stem}-tuned")
        self.recheck()

    def recheck(self) -> VariantVerdict:
        """Check every field and show the request that Create would send."""
        base = self.base.currentText().strip()
        context = self.context_for(base) or {}
        check = self._check = self._rules.check_variant(
            base, self.name.text(), self.num_ctx.value() or None, self.num_batch.value() or None,
            self.quantize.currentText(), local_names=context.get("local_names", set()),
            base_quantization=context.get("base_quantization", ""),
            training_context=context.get("training_context"), parameter_count=context.get("parameter_count"),
            gpu_total_bytes=context.get("gpu_total_bytes"))
        for field, message in self.messages.items():
            if field == "name" and not self._name_touched and not self.name.text().strip():
                message.clear_message()  # no scolding before the user typed anything
            elif field in check.errors:
                message.show_error(check.errors[field])
            elif field in check.warnings:
                message.show_warning(check.warnings[field])
            else:
                message.clear_message()
        self.preview.setText(self._rules.variant_request_text(check.body) if check.body else
                             "Name the new model to see the request." if "name" in check.errors
                             and not self.name.text().strip() else "Fix the fields marked in red to see the request.")
        self.create_button.setEnabled(check.ok and not self._busy)
        return check

    def _request(self) -> None:
        check = self.recheck()
        if check.ok and check.body is not None and not self._busy:
            self.create_requested.emit(check.body)

    def set_busy(self, busy: bool) -> None:
        """Creating (button off) or idle."""
        self._busy = busy
        if busy:
            self.result.clear_message()
            self.status.setText("Sending…")
        self.recheck()

    def show_status(self, line: str) -> None:
        """Ollama's latest status line."""
        self.status.setText(line)

    def show_done(self, name: str) -> None:
        """The variant exists now."""
        self.set_busy(False)
        self.status.setText(f"✔ Created {name}.")

    def show_failed(self, text: str) -> None:
        """Creating failed; Ollama's message stays visible."""
        self.set_busy(False)
        self.status.setText("")
        self.result.show_error(text)


__all__ = ["CreatePanel"]
