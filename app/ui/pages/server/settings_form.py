"""The server settings form: every real knob of the server, checked inline as the user types.

The form never asks which server it edits: the backend's mapping (app.core.server.mapping),
passed in, gives its own options, the name each setting has there, the settings it cannot take
(shown disabled, with the reason), its checks and the exact lines the server gets.

The form has no Apply or Start button: the page that embeds it owns those and listens to
`validity_changed`. Widgets carry objectNames equal to the ServerSettings field or option they
edit; each one's inline message is `<name>_message` (host and port share `host_message`).
"""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import Signal
from PySide6.QtGui import QFontDatabase, QShowEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from app.core.server.exposure import exposure_of
from app.core.server.mapping import MODEL_FILE, NeutralTuning, TuningMapping
from app.core.server.settings import MAX_BATCH, MAX_PARALLEL, ServerSettings, Validation
from app.ui.pages.server import settings_fields as texts
from app.ui.pages.server.settings_editors import (
    combo_box,
    editor_value,
    height_for_lines,
    option_editor,
    select_data,
    set_editor_value,
    spin_box,
)
from app.ui.widgets.forms import (
    FieldGroup,
    InlineMessage,
    PathEdit,
    RangedSpinBox,
    align_label_columns,
    guard_form,
    left_aligned,
)

# Which shared fields each inline message reports on; the first name is the message's own.
# Every backend option has a message of its own besides these.
_MESSAGE_ROWS: tuple[tuple[str, ...], ...] = (
    ("num_parallel",), ("context_length",), ("max_queue",), ("kv_cache_type",), ("flash_attention",),
    ("batch_size",), ("micro_batch_size",), ("keep_alive",), ("host", "port", "network_allowed_for"),
    ("extra_settings",),
)
_BATCH_FIELDS = ("batch_size", "micro_batch_size")


class SettingsForm(QWidget):
    """Edits a ServerSettings; reports each field's problem next to it."""

    edited = Signal(object)  # the new ServerSettings, after every user change that alters it
    validity_changed = Signal(bool)

    def __init__(
        self, settings: ServerSettings | None = None, *, columns: int = 1,
        mapping: TuningMapping | None = None, parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("settings_form")
        self._mapping: TuningMapping = mapping if mapping is not None else NeutralTuning()
        self._unsupported = dict(self._mapping.unsupported())
        self._base = settings or ServerSettings()
        self._last_emitted = self._base
        self._loading = False
        self._valid = True
        self._messages: dict[str, InlineMessage] = {}
        self._build(columns)
        self._connect()
        self.set_settings(self._base)

    # ---- public --------------------------------------------------------------------------

    def settings(self) -> ServerSettings:
        """The settings as the form shows them (an unparsable context length keeps its last value)."""
        context = self._base.context_length
        if self._context_default.isChecked():
            context = None
        else:
            parsed = texts.parse_context_text(self._context_value.currentText())
            if parsed is not None:
                context = parsed
        batches = {name: self._batch_value(name) for name in _BATCH_FIELDS}
        options: dict[str, int | str | None] = {}
        for spec in self._mapping.options:
            value = editor_value(self._option_editors[spec.name])
            # An option left at its default stays unset unless the settings named it: equal settings stay equal.
            options[spec.name] = None if value == spec.default and self._base.option(spec.name) is None else value
        return self._base.replace(
            num_parallel=self._num_parallel.value(),
            context_length=context,
            kv_cache_type=self._kv_cache_type.currentData(),
            flash_attention=self._flash_attention.currentData(),
            keep_alive=self._keep_alive.text().strip(),
            max_queue=self._max_queue.value(),
            host=self._host.text().strip(),
            port=self._port.value(),
            # The permission names the host it was ticked for; editing the host unticks it.
            network_allowed_for=self._host.text().strip() if self._allow_network.isChecked() else "",
            extra_settings=self._extra.toPlainText(),
            **batches,
        ).with_options(**options)

    def _batch_value(self, name: str) -> int | None:
        if name in self._unsupported:  # shown disabled; whatever the settings hold is kept (and refused)
            value: int | None = getattr(self._base, name)
            return value
        spin = self._batch_editors[name]
        return spin.value() if spin.value() else None

    def set_settings(self, settings: ServerSettings) -> None:
        """Show settings; does not emit `edited` (it is not a user change), may emit `validity_changed`."""
        self._loading = True
        try:
            self._base = settings
            self._num_parallel.setValue(settings.num_parallel)
            self._context_default.setChecked(settings.context_length is None)
            if settings.context_length is not None:
                self._context_value.setCurrentText(str(settings.context_length))
            select_data(self._kv_cache_type, settings.kv_cache_type)
            select_data(self._flash_attention, settings.flash_attention)
            self._keep_alive.setText(settings.keep_alive)
            self._max_queue.setValue(settings.max_queue)
            for name, spin in self._batch_editors.items():
                spin.setValue(getattr(settings, name) or 0)
            self._host.setText(settings.host)
            self._port.setValue(settings.port)
            self._allow_network.setChecked(settings.allow_network)
            for spec in self._mapping.options:
                set_editor_value(self._option_editors[spec.name], spec.value_in(settings))
            if self._extra.toPlainText() != settings.extra_settings:
                self._extra.setPlainText(settings.extra_settings)
        finally:
            self._loading = False
        self._last_emitted = self.settings()
        self._refresh()

    def validation(self) -> Validation:
        """The backend's validation of settings(), plus what the form itself cannot turn into a value:
        a context length that is not a number, a number typed outside its field's range (an error while
        it is shown, then a warning naming the value kept)."""
        result = self._mapping.validate(self.settings())
        errors, warnings = dict(result.errors), dict(result.warnings)
        if not self._context_default.isChecked():
            if texts.parse_context_text(self._context_value.currentText()) is None:
                errors["context_length"] = texts.CONTEXT_PARSE_ERROR
                warnings.pop("context_length", None)
        for name, spin in self._spin_boxes().items():
            if spin.problem():
                errors[name] = spin.problem()
                warnings.pop(name, None)
            elif spin.refused() and name not in errors:
                warnings[name] = spin.refused()
        return Validation(errors, warnings)

    def _spin_boxes(self) -> dict[str, RangedSpinBox]:
        return {name: editor for name, editor in self._editors_by_field().items()
                if isinstance(editor, RangedSpinBox)}

    def is_valid(self) -> bool:
        """True when nothing blocks applying these settings."""
        return self._valid

    # ---- building ------------------------------------------------------------------------

    def _build(self, columns: int) -> None:
        texts_of = self._mapping.texts
        self._num_parallel = spin_box("num_parallel", 1, MAX_PARALLEL)
        self._context_default = QCheckBox(texts_of.context_default)
        self._context_default.setObjectName("context_default")
        self._context_value = QComboBox()
        self._context_value.setObjectName("context_length")
        self._context_value.setEditable(True)
        self._context_value.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self._context_value.addItems([str(n) for n in texts.CONTEXT_PRESETS])
        self._context_value.setCurrentText(str(texts.DEFAULT_CUSTOM_CONTEXT))
        self._context_value.setFixedWidth(110)
        context_editor = QWidget()
        context_layout = QVBoxLayout(context_editor)
        context_layout.setContentsMargins(0, 0, 0, 0)
        context_layout.setSpacing(4)
        context_layout.addWidget(self._context_default)
        context_layout.addWidget(left_aligned(self._context_value, QLabel("tokens")))
        self._max_queue = spin_box("max_queue", 1, 1_000_000)
        self._option_editors = {spec.name: option_editor(spec) for spec in self._mapping.options}

        self._kv_cache_type = combo_box("kv_cache_type", texts.KV_CACHE_CHOICES)
        self._flash_attention = combo_box("flash_attention", (("auto", texts_of.flash_auto),
                                                           *texts.FLASH_ATTENTION_CHOICES))
        self._batch_editors = {name: spin_box(name, 0, MAX_BATCH, step=256) for name in _BATCH_FIELDS}
        for name, spin in self._batch_editors.items():
            spin.setSpecialValueText(texts.BATCH_DEFAULT_TEXT)  # 0 shows as Default: the server decides
            spin.setEnabled(name not in self._unsupported)
        self._keep_alive = QLineEdit()
        self._keep_alive.setObjectName("keep_alive")
        self._keep_alive.setPlaceholderText("5m")
        self._keep_alive.setFixedWidth(130)

        self._host = QLineEdit()
        self._host.setObjectName("host")
        self._host.setPlaceholderText("127.0.0.1")
        self._host.setMinimumWidth(130)
        self._port = spin_box("port", 1, 65535, width=90)
        self._port.setGroupSeparatorShown(False)
        self._allow_network = QCheckBox(texts.ALLOW_NETWORK_TEXT)
        self._allow_network.setObjectName("allow_network")
        self._allow_network.setToolTip(texts.ALLOW_NETWORK_TOOLTIP)

        mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        self._extra = QPlainTextEdit()
        self._extra.setObjectName("extra_settings")
        self._extra.setFont(mono)
        self._extra.setPlaceholderText(texts_of.extra_placeholder)
        self._extra.setTabChangesFocus(True)

        self._max_queue.setEnabled("max_queue" not in self._unsupported)  # kept as saved, shown as unused
        self._keep_alive.setEnabled("keep_alive" not in self._unsupported)

        memory = FieldGroup("Concurrency && memory")
        memory.setObjectName("group_memory")
        self._row(memory, "num_parallel", texts.PARALLEL_LABEL, self._num_parallel, texts.PARALLEL_HINT)
        self._row(memory, "context_length", "Context length", context_editor, texts_of.context_hint)
        self._option_rows(memory, "memory")
        self._row(memory, "max_queue", "Max queue", self._max_queue, self._unsupported.get("max_queue",
                                                                                        texts.MAX_QUEUE_HINT))

        runtime = FieldGroup("Model runtime")
        runtime.setObjectName("group_runtime")
        self._row(runtime, "kv_cache_type", "KV-cache type", self._kv_cache_type, texts.KV_HINT)
        self._row(runtime, "flash_attention", "Flash attention", self._flash_attention, texts.FLASH_HINT)
        for name, label, hint in (("batch_size", "Batch", texts.BATCH_HINT),
                                  ("micro_batch_size", "Micro-batch", texts.MICRO_BATCH_HINT)):
            # A setting this server cannot take says why instead of offering a knob that does nothing.
            self._row(runtime, name, label, self._batch_editors[name], self._unsupported.get(name, hint))
        self._row(runtime, "keep_alive", "Keep-alive", self._keep_alive, self._unsupported.get("keep_alive",
                                                                                           texts.KEEP_ALIVE_HINT))

        network = FieldGroup("Network")
        network.setObjectName("group_network")
        self._messages["host"] = network.add_field(
            "Host and port", left_aligned(self._host, QLabel(":"), self._port, spacing=4),
            env_name=self._mapping.setting_name("host"), hint=texts.HOST_HINT, below=[self._allow_network],
            prominent_message=True,
        )
        self._messages["host"].setObjectName("host_message")

        paths = FieldGroup("Paths && advanced")
        paths.setObjectName("group_paths")
        self._option_rows(paths, "paths")
        self._row(paths, "extra_settings", texts_of.extra_label, self._extra, texts_of.extra_hint)

        self._preview = QPlainTextEdit()
        self._preview.setObjectName("env_preview")
        self._preview.setReadOnly(True)
        self._preview.setFont(mono)
        self._preview.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        preview = FieldGroup(texts_of.mapping_title)
        preview.setObjectName("group_preview")
        preview_grid = preview.layout()
        assert isinstance(preview_grid, QGridLayout)  # FieldGroup lays its rows out on a grid
        preview_grid.addWidget(self._preview, 0, 0, 1, 2)

        for name, editor in self._editors_by_field().items():
            tip = self._unsupported.get(name) or self._mapping.setting_name(name)
            parent = editor.parentWidget()
            target = parent if isinstance(parent, PathEdit) else editor
            target.setToolTip(tip)
        self._port.setToolTip(self._mapping.setting_name("port"))
        parallel_name = self._mapping.setting_name("num_parallel")
        self._num_parallel.setToolTip(f"{parallel_name}\n\n{texts.PARALLEL_HINT}" if parallel_name
                                      else texts.PARALLEL_HINT)

        if columns >= 2:
            stacks = [[memory, runtime], [network, paths, preview]]
        else:
            stacks = [[memory, runtime, network, paths, preview]]
        outer = QHBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(16)
        for stack in stacks:
            column = QVBoxLayout()
            column.setSpacing(12)
            for group in stack:
                column.addWidget(group)
            column.addStretch(1)
            outer.addLayout(column, 1)
            align_label_columns(g for g in stack if g is not preview)
        guard_form(self)

    def _editors_by_field(self) -> dict[str, QWidget]:
        editors: dict[str, QWidget] = {
            "num_parallel": self._num_parallel, "context_length": self._context_value,
            "max_queue": self._max_queue, "kv_cache_type": self._kv_cache_type,
            "flash_attention": self._flash_attention, "keep_alive": self._keep_alive,
            "host": self._host, "port": self._port, "extra_settings": self._extra, **self._batch_editors,
        }
        for name, editor in self._option_editors.items():
            editors[name] = editor.line_edit if isinstance(editor, PathEdit) else editor
        return editors

    def set_recent_files(self, paths: Iterable[str]) -> None:
        """Offer these files (newest first) in the Recent menu of every model-file field."""
        chosen = list(paths)
        for spec in self._mapping.options:
            editor = self._option_editors[spec.name]
            if spec.kind == MODEL_FILE and isinstance(editor, PathEdit):
                editor.set_recent(chosen)

    def model_files(self, settings: ServerSettings) -> list[str]:
        """The model files `settings` name (their model-file options that are set)."""
        return [str(spec.value_in(settings)) for spec in self._mapping.options
                if spec.kind == MODEL_FILE and str(spec.value_in(settings)).strip()]

    def _option_rows(self, group: FieldGroup, where: str) -> None:
        for spec in self._mapping.options:
            if spec.group == where:
                self._row(group, spec.name, spec.label, self._option_editors[spec.name], spec.hint)

    def _row(self, group: FieldGroup, name: str, label: str, editor: QWidget, hint: str) -> None:
        self._messages[name] = group.add_field(
            label, editor, env_name=self._mapping.setting_name(name), hint=hint
        )
        self._messages[name].setObjectName(f"{name}_message")

    def _connect(self) -> None:
        changed = self._on_user_change
        for spin in (self._num_parallel, self._max_queue, self._port, *self._batch_editors.values()):
            spin.valueChanged.connect(changed)
        for combo in (self._kv_cache_type, self._flash_attention):
            combo.currentIndexChanged.connect(changed)
        self._context_value.currentTextChanged.connect(changed)
        self._context_default.toggled.connect(self._on_context_mode)
        self._host.textChanged.connect(self._on_host_edited)  # first, so `changed` sees the box unticked
        for edit in (self._keep_alive, self._host):
            edit.textChanged.connect(changed)
        self._allow_network.toggled.connect(changed)
        for editor in self._option_editors.values():
            if isinstance(editor, PathEdit):
                editor.text_changed.connect(changed)
            else:
                editor.valueChanged.connect(changed)
        self._extra.textChanged.connect(changed)
        for spin in self._spin_boxes().values():
            spin.problem_changed.connect(changed)  # the value may stay as it was: the message still changes

    # ---- reacting ------------------------------------------------------------------------

    def _on_context_mode(self, _default_checked: bool) -> None:
        self._context_value.setEnabled(not self._context_default.isChecked())
        self._on_user_change()

    def _on_host_edited(self, _text: str) -> None:
        # Access by others was confirmed for the old host; another host must be confirmed again.
        if not self._loading and self._allow_network.isChecked():
            self._allow_network.blockSignals(True)  # the host's own change handler refreshes once
            self._allow_network.setChecked(False)
            self._allow_network.blockSignals(False)

    def _on_user_change(self, *_args: object) -> None:
        if self._loading:
            return
        self._refresh()
        current = self.settings()
        if current != self._last_emitted:
            self._last_emitted = current
            self.edited.emit(current)

    def _refresh(self) -> None:
        self._context_value.setEnabled(not self._context_default.isChecked())
        self._refresh_permission()
        result = self.validation()
        for fields in _MESSAGE_ROWS + tuple((spec.name,) for spec in self._mapping.options):
            message = self._messages[fields[0]]
            errors = [result.errors[f] for f in fields if f in result.errors]
            warnings = [result.warnings[f] for f in fields if f in result.warnings]
            if errors:
                message.show_error(" ".join(errors))
            elif warnings:
                message.show_warning(" ".join(warnings))
            else:
                message.clear_message()
        for name, editor in self._editors_by_field().items():
            # The app stylesheet draws a red border on [invalid="true"] editors.
            invalid = name in result.errors
            if editor.property("invalid") != invalid:
                editor.setProperty("invalid", invalid)
                editor.style().unpolish(editor)
                editor.style().polish(editor)
        self._update_preview(result)
        if result.ok != self._valid:
            self._valid = result.ok
            self.validity_changed.emit(result.ok)

    def _refresh_permission(self) -> None:
        """The checkbox names the host it allows, and is offered only where something is open to others."""
        host = self._host.text().strip()
        self._allow_network.setText(texts.allow_network_text(host))
        exposed = exposure_of(self.settings(), self._mapping).exposed
        self._allow_network.setEnabled(exposed or self._allow_network.isChecked())

    def _update_preview(self, result: Validation) -> None:
        lines = [] if result.ok else [texts.PREVIEW_INVALID_NOTE]
        lines += self._mapping.mapping_text(self.settings())
        lines.append(self._mapping.texts.defaults_note)
        text = "\n".join(lines)
        if self._preview.toPlainText() != text:
            self._preview.setPlainText(text)
            self._fit_text_boxes()

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt's spelling
        """Fit the text boxes once the stylesheet has given them their real font."""
        super().showEvent(event)
        self._fit_text_boxes()

    def _fit_text_boxes(self) -> None:
        self._extra.setFixedHeight(height_for_lines(self._extra, 4))
        shown = max(6, self._preview.blockCount())
        self._preview.setFixedHeight(height_for_lines(self._preview, shown))
