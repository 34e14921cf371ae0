"""The settings form on the llama-server backend: a GGUF file picker, the fields llama-server cannot
take shown unused with the reason, and the exact command line in the preview."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from PySide6.QtWidgets import QCheckBox, QFileDialog, QLineEdit, QPlainTextEdit, QPushButton, QSpinBox

from app.backends.llama_server.tuning import LLAMA_SERVER_TUNING, UNSUPPORTED, command, llama_server_settings
from app.core.server.settings import ServerSettings
from app.ui.pages.server.settings_form import SettingsForm
from app.ui.widgets.forms import InlineMessage, PathEdit


@pytest.fixture
def form(qtbot) -> SettingsForm:
    widget = SettingsForm(llama_server_settings(), mapping=LLAMA_SERVER_TUNING)
    qtbot.addWidget(widget)
    return widget


def _message(form: SettingsForm, name: str) -> InlineMessage:
    message = form.findChild(InlineMessage, f"{name}_message")
    assert message is not None, name
    return message


def _preview(form: SettingsForm) -> str:
    return form.findChild(QPlainTextEdit, "env_preview").toPlainText()


def test_without_a_model_file_the_form_says_to_choose_one(form: SettingsForm) -> None:
    assert not form.is_valid()
    assert _message(form, "model_path").message == "Choose a GGUF model file to serve."
    assert _preview(form).splitlines()[:2] == ["# Not valid yet: fix the fields marked in red.",
                                               "# Choose a GGUF model file to serve."]


def test_browse_picks_a_gguf_file_and_the_preview_is_the_command_line(qtbot, form: SettingsForm, monkeypatch,
                                                                       tmp_path: Path) -> None:
    model = tmp_path / "SmolLM2 135M.gguf"
    model.write_bytes(b"GGUF" + bytes(60))
    asked: list[tuple[object, ...]] = []

    def pick(*args: object) -> tuple[str, str]:
        asked.append(args)
        return str(model), "GGUF models (*.gguf)"

    monkeypatch.setattr(QFileDialog, "getOpenFileName", pick)
    assert isinstance(form.findChild(PathEdit, "model_path"), PathEdit)
    with qtbot.waitSignal(form.edited) as blocker:
        form.findChild(QPushButton, "model_path_browse").click()

    assert "*.gguf" in str(asked[0][-1])  # the dialog's filter
    chosen = blocker.args[0]
    assert chosen.option("model_path") == str(model) and form.is_valid()
    assert _message(form, "model_path").isHidden()
    lines = [line for line in _preview(form).splitlines() if not line.startswith("#")]  # comments: the form's
    assert _preview(form).splitlines()[-1] == "# every other flag: llama-server's default"
    assert shlex.split(" ".join(line.removesuffix(" \\") for line in lines)) == command(chosen)
    assert f"-m {shlex.quote(str(model))} \\" in lines


def test_context_per_slot_shows_as_the_total_in_the_preview(qtbot, tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + bytes(60))
    form = SettingsForm(llama_server_settings(ServerSettings(num_parallel=4, context_length=4096),
                                              model_path=str(model)), mapping=LLAMA_SERVER_TUNING)
    qtbot.addWidget(form)
    assert "-np 4 \\" in _preview(form).splitlines() and "-c 16384 \\" in _preview(form).splitlines()
    form.findChild(QSpinBox, "num_parallel").setValue(2)
    assert "-c 8192 \\" in _preview(form).splitlines()


def test_keep_alive_and_max_queue_are_shown_unused_with_the_reason(form: SettingsForm) -> None:
    keep_alive = form.findChild(QLineEdit, "keep_alive")
    max_queue = form.findChild(QSpinBox, "max_queue")
    assert not keep_alive.isEnabled() and not max_queue.isEnabled()
    assert keep_alive.toolTip() == UNSUPPORTED["keep_alive"] and max_queue.toolTip() == UNSUPPORTED["max_queue"]
    assert form.settings().keep_alive == "5m" and form.settings().max_queue == 512  # kept as saved


def test_an_unknown_extra_flag_is_refused_with_the_nearest_real_one(qtbot, form: SettingsForm) -> None:
    extra = form.findChild(QPlainTextEdit, "extra_settings")
    extra.setPlainText("--paralel 4")
    assert "did you mean --parallel?" in _message(form, "extra_settings").message


def test_a_field_with_a_default_says_so_in_its_range(form: SettingsForm) -> None:
    batch = form.findChild(QSpinBox, "batch_size")
    assert batch.isEnabled() and batch.toolTip().endswith("Takes Default, or 1 to 65536.")
    assert "max_queue" in UNSUPPORTED and "Takes" not in form.findChild(QSpinBox, "max_queue").toolTip()


def test_a_host_flag_after_another_on_one_line_is_refused_and_the_preview_keeps_the_forms(
        qtbot, form: SettingsForm) -> None:
    extra = form.findChild(QPlainTextEdit, "extra_settings")
    extra.setPlainText("--cache-reuse 256 --host 0.0.0.0")

    message = _message(form, "extra_settings").message
    assert "--host is set by the form (host and port); set it there" in message
    assert "--host 127.0.0.1" in _preview(form) and "0.0.0.0" not in _preview(form)
    assert not form.findChild(QCheckBox, "allow_network").isEnabled()  # nothing is open to others


def test_a_cors_line_for_any_site_asks_for_the_permission(qtbot, form: SettingsForm) -> None:
    extra = form.findChild(QPlainTextEdit, "extra_settings")
    assert "--cors-origins localhost" in _preview(form)
    extra.setPlainText("--cors-origins '*'")

    message = _message(form, "host")
    assert message.severity == "error" and "lets web pages from other sites call the server" in message.message
    box = form.findChild(QCheckBox, "allow_network")
    assert box.isEnabled()
    box.click()
    assert form.settings().network_allowed_for == "127.0.0.1"
    assert "network_allowed_for" not in LLAMA_SERVER_TUNING.validate(form.settings()).errors
    assert _message(form, "extra_settings").severity == "warning"
    assert "--cors-origins '*'" in _preview(form) and "localhost" not in _preview(form)
