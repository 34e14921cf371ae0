"""The thinking switch says the backend's own reason when a model cannot think (llama-server: what
its chat template lacks), built from the details the llama-server client returns."""

from __future__ import annotations

import json

from app.backends.llama_server.catalog import details_from_server, served_model
from app.backends.llama_server.wire import parse_models, parse_props
from app.backends.llama_server.spec import LLAMA_SERVER
from app.ui.pages.prompt.controls import ConsoleControls
from tests.fakes.llama_server.replay import recorded


def test_a_template_without_thinking_disables_the_switch_with_its_reason(qtbot) -> None:
    entry = parse_models(json.loads(recorded("models.json")))[0]
    props = parse_props(json.loads(recorded("props.json")))
    model = served_model(entry, "")
    controls = ConsoleControls(words=LLAMA_SERVER.reply_words)
    qtbot.addWidget(controls)
    controls.set_models([model])
    assert controls.select_model(model.name)
    controls.set_details(model.name, details_from_server(entry, props["chat_template"]))
    assert controls.thinking_supported is False and not controls.think_on.isEnabled()
    assert "chat template has no thinking mode" in controls.think_reason.text()
    assert controls.think_value() is None  # nothing about thinking is sent

    thinking = parse_props(json.loads(recorded("props_thinking.json")))
    controls.set_details(model.name, details_from_server(entry, thinking["chat_template"]))
    assert controls.thinking_supported is True and controls.think_on.isEnabled()
    assert controls.think_reason.text() == ""
