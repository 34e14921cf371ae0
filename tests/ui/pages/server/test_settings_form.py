"""The settings form as a user drives it: typing, choosing, ticking, and what it reports back."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import (
    QApplication,
    QLabel,
    QScrollArea,
    QCheckBox,
    QComboBox,
    QFileDialog,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
)

from app.backends.ollama.tuning import OLLAMA_TUNING, environment, ollama_settings
from app.core.server.settings import ServerSettings
from app.ui.pages.server.settings_form import SettingsForm
from app.ui.widgets.forms import ERROR_COLOR, WARNING_COLOR, InlineMessage

TUNED = ollama_settings(ServerSettings(
    num_parallel=4, context_length=16384, kv_cache_type="q8_0", flash_attention="on",
    keep_alive="-1", max_queue=64, host="0.0.0.0",
    port=11500, extra_settings="OLLAMA_DEBUG=1", network_allowed_for="0.0.0.0",
), max_loaded_models=2, gpu_overhead_mib=512, models_dir="/srv/models", ollama_binary="/opt/ollama/bin/ollama")


@pytest.fixture
def form(qtbot) -> SettingsForm:
    widget = SettingsForm(mapping=OLLAMA_TUNING)
    qtbot.addWidget(widget)
    return widget


def _message(form: SettingsForm, name: str) -> InlineMessage:
    message = form.findChild(InlineMessage, f"{name}_message")
    assert message is not None, name
    return message


def _type_into(qtbot, edit: QLineEdit, text: str) -> None:
    edit.selectAll()
    qtbot.keyClick(edit, Qt.Key.Key_Backspace)
    qtbot.keyClicks(edit, text)


def _preview(form: SettingsForm) -> str:
    return form.findChild(QPlainTextEdit, "env_preview").toPlainText()


def test_defaults_are_valid_and_previewed(form: SettingsForm) -> None:
    assert form.is_valid() and form.validation().ok
    assert form.settings() == ServerSettings()
    assert _preview(form).splitlines()[:2] == ["OLLAMA_HOST=127.0.0.1:11434", "OLLAMA_NUM_PARALLEL=1"]
    assert all(m.isHidden() for m in form.findChildren(InlineMessage))


def test_typing_a_bad_keep_alive_shows_the_reason_and_flips_validity(qtbot, form: SettingsForm) -> None:
    keep_alive = form.findChild(QLineEdit, "keep_alive")
    flips: list[bool] = []
    form.validity_changed.connect(flips.append)

    _type_into(qtbot, keep_alive, "soon")

    message = _message(form, "keep_alive")
    assert not message.isHidden() and message.severity == "error"
    assert "duration like 5m" in message.message
    assert ERROR_COLOR in message.styleSheet()
    assert keep_alive.property("invalid") is True  # the stylesheet's red border
    assert not form.is_valid() and flips == [False]

    with qtbot.waitSignal(form.validity_changed) as blocker:
        _type_into(qtbot, keep_alive, "10m")
    assert blocker.args == [True]
    assert message.isHidden() and form.settings().keep_alive == "10m"
    assert keep_alive.property("invalid") is False
    assert flips == [False, True]


def test_context_length_default_or_custom_value(qtbot, form: SettingsForm) -> None:
    combo = form.findChild(QComboBox, "context_length")
    assert not combo.isEnabled()  # Default is chosen
    form.findChild(QCheckBox, "context_default").click()
    assert combo.isEnabled() and form.settings().context_length == 8192

    _type_into(qtbot, combo.lineEdit(), "32kb")
    assert not form.is_valid()
    assert "whole number of tokens" in _message(form, "context_length").message

    _type_into(qtbot, combo.lineEdit(), "32k")
    assert form.is_valid() and form.settings().context_length == 32768
    assert "OLLAMA_CONTEXT_LENGTH=32768" in _preview(form)

    _type_into(qtbot, combo.lineEdit(), "100")
    assert "between 256 and 1048576" in _message(form, "context_length").message

    form.findChild(QCheckBox, "context_default").click()
    assert form.is_valid() and form.settings().context_length is None
    assert "OLLAMA_CONTEXT_LENGTH" not in _preview(form)


def test_quantized_kv_with_flash_attention_off_is_refused(form: SettingsForm) -> None:
    kv = form.findChild(QComboBox, "kv_cache_type")
    flash = form.findChild(QComboBox, "flash_attention")
    kv.setCurrentIndex(kv.findData("q8_0"))
    message = _message(form, "kv_cache_type")
    assert message.severity == "warning" and WARNING_COLOR in message.styleSheet()
    assert "choose On" in message.message and form.is_valid()

    flash.setCurrentIndex(flash.findData("off"))
    assert message.severity == "error" and "needs flash attention" in message.message
    assert not form.is_valid()
    assert _preview(form).startswith("# Not valid yet")

    flash.setCurrentIndex(flash.findData("on"))
    assert message.isHidden() and form.is_valid()
    assert environment(form.settings())["OLLAMA_FLASH_ATTENTION"] == "1"


def test_binding_to_the_network_needs_the_checkbox(qtbot, form: SettingsForm) -> None:
    _type_into(qtbot, form.findChild(QLineEdit, "host"), "0.0.0.0")
    message = _message(form, "host")
    assert message.severity == "error" and "Allow network access" in message.message
    assert not form.is_valid()

    with qtbot.waitSignal(form.edited) as blocker:
        form.findChild(QCheckBox, "allow_network").click()
    assert blocker.args[0].allow_network and blocker.args[0].host == "0.0.0.0"
    assert message.severity == "warning" and "no authentication" in message.message
    assert WARNING_COLOR in message.styleSheet() and "border" in message.styleSheet()
    assert form.is_valid()
    assert "OLLAMA_HOST=0.0.0.0:11434" in _preview(form)


def test_privileged_port_is_warned_on_the_host_row(qtbot, form: SettingsForm) -> None:
    port = form.findChild(QSpinBox, "port")
    port.setValue(80)
    assert _message(form, "host").severity == "warning"
    assert "administrator" in _message(form, "host").message


def test_invented_variable_is_refused_with_the_real_alternative(qtbot, form: SettingsForm) -> None:
    extra = form.findChild(QPlainTextEdit, "extra_settings")
    extra.setFocus()
    qtbot.keyClicks(extra, "OLLAMA_MAX_BATCH_SIZE=8")
    message = _message(form, "extra_settings")
    assert message.severity == "error"
    assert "OLLAMA_MAX_BATCH_SIZE does not exist in Ollama" in message.message
    assert "OLLAMA_NUM_PARALLEL" in message.message
    assert not form.is_valid()


@pytest.mark.parametrize("settings", [
    ServerSettings(),
    TUNED,
    TUNED.replace(context_length=None, kv_cache_type="q4_0", flash_attention="off", host="::1",
                  network_allowed_for="", extra_settings="# only a comment\n"),
    ServerSettings(kv_cache_type="fp8"),  # not a choice, still shown and refused, not lost
])
def test_settings_round_trip_through_the_form(qtbot, settings: ServerSettings) -> None:
    form = SettingsForm(mapping=OLLAMA_TUNING)
    qtbot.addWidget(form)
    with qtbot.assertNotEmitted(form.edited):
        form.set_settings(settings)
    assert form.settings() == settings
    assert form.is_valid() is form.validation().ok


def test_an_invalid_choice_is_shown_then_dropped(qtbot, form: SettingsForm) -> None:
    kv = form.findChild(QComboBox, "kv_cache_type")
    form.set_settings(ServerSettings(kv_cache_type="fp8"))
    assert kv.currentText() == "fp8 (not a valid choice)" and not form.is_valid()
    assert "must be one of f16, q8_0, q4_0" in _message(form, "kv_cache_type").message
    form.set_settings(ServerSettings())
    assert kv.count() == 3 and form.is_valid()


def test_initial_settings_and_validity_of_a_loaded_invalid_set(qtbot) -> None:
    form = SettingsForm(ServerSettings(host="0.0.0.0"), mapping=OLLAMA_TUNING)
    qtbot.addWidget(form)
    assert not form.is_valid()
    with qtbot.waitSignal(form.validity_changed) as blocker:
        form.set_settings(ServerSettings())
    assert blocker.args == [True]


def test_edited_carries_the_new_settings_once_per_change(qtbot, form: SettingsForm) -> None:
    seen: list[ServerSettings] = []
    form.edited.connect(seen.append)
    spin = form.findChild(QSpinBox, "num_parallel")
    qtbot.keyClick(spin, Qt.Key.Key_Up)
    qtbot.keyClick(spin, Qt.Key.Key_Up)
    assert [s.num_parallel for s in seen] == [2, 3]
    form.findChild(QSpinBox, "gpu_overhead_mib").setValue(2048)
    assert seen[-1].gpu_overhead_mib == 2048
    assert _message(form, "gpu_overhead_mib").severity == "warning"


def test_browse_fills_the_models_directory(qtbot, form: SettingsForm, monkeypatch) -> None:
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *args: "/srv/models")
    with qtbot.waitSignal(form.edited) as blocker:
        form.findChild(QPushButton, "models_dir_browse").click()
    assert blocker.args[0].option("models_dir") == "/srv/models"
    assert "OLLAMA_MODELS=/srv/models" in _preview(form)

    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *args: ("/opt/ollama", ""))
    form.findChild(QPushButton, "ollama_binary_browse").click()
    assert form.settings().option("ollama_binary") == "/opt/ollama"


def test_cancelled_browse_changes_nothing(qtbot, form: SettingsForm, monkeypatch) -> None:
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *args: "")
    with qtbot.assertNotEmitted(form.edited):
        form.findChild(QPushButton, "models_dir_browse").click()


def test_models_dir_with_tilde_is_refused(qtbot, form: SettingsForm) -> None:
    _type_into(qtbot, form.findChild(QLineEdit, "models_dir_edit"), "~/models")
    assert "does not expand ~" in _message(form, "models_dir").message


def test_every_field_names_its_variable(form: SettingsForm) -> None:
    tips = {name: form.findChild(object, name).toolTip() for name in (
        "num_parallel", "context_length", "kv_cache_type", "flash_attention", "keep_alive",
        "max_loaded_models", "max_queue", "gpu_overhead_mib", "host", "port", "models_dir",
    )}
    assert tips["num_parallel"].startswith("OLLAMA_NUM_PARALLEL") and "num_batch" in tips["num_parallel"]
    assert tips["gpu_overhead_mib"] == "OLLAMA_GPU_OVERHEAD\n\nTakes 0 to 1048576 MiB."
    assert all(tip.startswith("OLLAMA_") for tip in tips.values())


def test_single_column_layout_builds_the_same_form(qtbot) -> None:
    form = SettingsForm(TUNED, columns=1, mapping=OLLAMA_TUNING)
    qtbot.addWidget(form)
    assert form.settings() == TUNED and form.is_valid()


def test_batch_sizes_say_why_ollama_cannot_take_them(form: SettingsForm) -> None:
    for name in ("batch_size", "micro_batch_size"):
        spin = form.findChild(QSpinBox, name)
        assert not spin.isEnabled() and spin.text() == "Default"
        assert spin.toolTip() == OLLAMA_TUNING.unsupported()[name]
    assert "Models page" in form.findChild(QSpinBox, "batch_size").toolTip()
    # A value a hand-edited file carries is kept, shown refused, and never reaches the environment.
    form.set_settings(ServerSettings(batch_size=1024))
    assert form.settings().batch_size == 1024 and not form.is_valid()
    assert "num_batch is a per-model option" in _message(form, "batch_size").message
    assert "BATCH" not in _preview(form)


def test_a_server_that_takes_batch_sizes_gets_them_from_the_form(qtbot) -> None:
    form = SettingsForm()  # no particular server: every shared knob is editable, nothing is translated
    qtbot.addWidget(form)
    batch, micro = form.findChild(QSpinBox, "batch_size"), form.findChild(QSpinBox, "micro_batch_size")
    assert batch.isEnabled() and micro.isEnabled()
    assert form.findChild(QSpinBox, "gpu_overhead_mib") is None  # Ollama's own option is not there
    batch.setValue(1024)
    micro.setValue(2048)
    assert form.settings().batch_size == 1024
    assert "cannot be larger than the batch (1024)" in _message(form, "micro_batch_size").message
    micro.setValue(512)
    assert form.is_valid() and form.settings().micro_batch_size == 512
    assert _preview(form).splitlines()[:2] == ["batch_size = 1024", "micro_batch_size = 512"]
    batch.setValue(0)
    assert form.settings().batch_size is None


def test_the_preview_is_titled_by_the_backend(form: SettingsForm) -> None:
    from app.ui.widgets.forms import FieldGroup

    assert form.findChild(FieldGroup, "group_preview").title() == "Environment for ollama serve"
    assert _preview(form).splitlines()[-1] == "# every other variable: Ollama's default"


def test_the_permission_names_its_host_and_changing_the_host_unticks_it(qtbot, form: SettingsForm) -> None:
    host, box = form.findChild(QLineEdit, "host"), form.findChild(QCheckBox, "allow_network")
    assert not box.isEnabled() and box.text() == "Allow network access on 127.0.0.1"  # nothing to allow here
    _type_into(qtbot, host, "0.0.0.0")
    assert box.isEnabled() and box.text() == "Allow network access on 0.0.0.0"
    box.click()
    assert form.is_valid() and form.settings().network_allowed_for == "0.0.0.0"

    _type_into(qtbot, host, "192.168.1.5")
    assert not box.isChecked() and box.text() == "Allow network access on 192.168.1.5"
    assert form.settings().network_allowed_for == "" and not form.is_valid()
    assert "Allow network access on 192.168.1.5" in _message(form, "host").message

    # Saved settings with a permission show it ticked, and read back unchanged.
    allowed = ServerSettings(host="0.0.0.0", network_allowed_for="0.0.0.0")
    form.set_settings(allowed)
    assert box.isChecked() and box.isEnabled() and form.settings() == allowed and form.is_valid()


def test_a_wildcard_origin_needs_the_permission_even_on_loopback(qtbot, form: SettingsForm) -> None:
    box = form.findChild(QCheckBox, "allow_network")
    extra = form.findChild(QPlainTextEdit, "extra_settings")
    extra.setFocus()
    qtbot.keyClicks(extra, "OLLAMA_ORIGINS=*")
    message = _message(form, "host")
    assert message.severity == "error" and "any web page you open" in message.message
    assert "Allow network access on 127.0.0.1" in message.message and not form.is_valid()
    assert box.isEnabled()
    box.click()
    assert form.is_valid() and form.settings().network_allowed_for == "127.0.0.1"
    assert _message(form, "extra_settings").severity == "warning"
    assert "delete your models" in _message(form, "extra_settings").message


def test_a_number_typed_outside_its_range_is_named_by_its_field_not_cut(qtbot, form: SettingsForm) -> None:
    form.show()
    parallel = form.findChild(QSpinBox, "num_parallel")
    assert "Takes 1 to 64." in parallel.toolTip()
    hints = [label.text() for label in parallel.parentWidget().findChildren(QLabel)]
    assert any("Takes 1 to 64." in text for text in hints)  # in view, not only on hover
    parallel.setFocus()
    _type_into(qtbot, parallel.lineEdit(), "100")
    assert parallel.text() == "100"  # as typed: Qt alone drops the last 0 and shows 10
    assert _message(form, "num_parallel").severity == "error"
    assert _message(form, "num_parallel").message == "100 is above the maximum 64."
    assert not form.is_valid()
    qtbot.keyClick(parallel, Qt.Key.Key_Return)  # refused: the last good value stays, and it says so
    kept = parallel.value()
    assert 1 <= kept <= 64 and form.is_valid()
    assert _message(form, "num_parallel").severity == "warning"
    assert _message(form, "num_parallel").message == f"100 is above the maximum 64: {kept} was kept."
    _type_into(qtbot, parallel.lineEdit(), "-3")
    assert parallel.text() == "-3" and _message(form, "num_parallel").message == "-3 is below the minimum 1."
    _type_into(qtbot, parallel.lineEdit(), "4")
    assert parallel.value() == 4 and _message(form, "num_parallel").isHidden() and form.is_valid()


def _wheel(widget, steps: int = -1) -> None:
    centre = QPointF(widget.rect().center())
    event = QWheelEvent(centre, QPointF(widget.mapToGlobal(centre.toPoint())), QPoint(0, 0), QPoint(0, 120 * steps),
                        Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(widget, event)


def test_the_wheel_scrolls_the_form_and_leaves_a_field_without_focus_alone(qtbot) -> None:
    form = SettingsForm(TUNED, mapping=OLLAMA_TUNING)
    area = QScrollArea()
    area.setWidgetResizable(True)
    area.setWidget(form)
    qtbot.addWidget(area)
    area.resize(600, 300)
    area.show()
    qtbot.waitExposed(area)
    parallel = form.findChild(QSpinBox, "num_parallel")
    kv = form.findChild(QComboBox, "kv_cache_type")
    assert parallel.focusPolicy() == Qt.FocusPolicy.StrongFocus == kv.focusPolicy()
    bar = area.verticalScrollBar()
    assert bar.value() == 0 and bar.maximum() > 0
    _wheel(parallel)
    _wheel(kv)
    assert parallel.value() == 4 and kv.currentData() == "q8_0"  # unchanged
    assert bar.value() > 0  # the form scrolled instead
    assert form.settings() == TUNED
    parallel.setFocus()
    qtbot.waitUntil(parallel.hasFocus)
    _wheel(parallel, steps=1)
    assert parallel.value() == 5  # a field the user chose takes the wheel
