"""The sweep editor's own fields as a user types into them: every problem is named next to its field."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.core.server.settings import ServerSettings
from app.ui.pages.bench.editor import FIELDS_MARKED, SweepEditor


@pytest.fixture
def editor(qtbot) -> SweepEditor:
    widget = SweepEditor()
    qtbot.addWidget(widget)
    widget.set_server(ServerSettings(), True, "managed")
    widget.model.setEditText("qwen3:0.6b")
    widget.show()
    return widget


def _type(qtbot, line, text: str) -> None:
    line.selectAll()
    qtbot.keyClick(line, Qt.Key.Key_Backspace)
    qtbot.keyClicks(line, text)


def test_each_sweep_list_names_its_bad_values_next_to_itself(qtbot, editor: SweepEditor) -> None:
    started = []
    editor.start_requested.connect(started.append)
    _type(qtbot, editor.parallel, "-1, 0, 99999")
    _type(qtbot, editor.clients, "abc")
    _type(qtbot, editor.context, "128")
    assert editor.parallel_message.severity == "error"
    assert editor.parallel_message.message.startswith(
        "-1 is below the minimum 1; 0 is below the minimum 1; 99999 is above the maximum 64")
    assert editor.clients_message.message.startswith("'abc' is not a whole number")
    assert editor.context_message.message.startswith("128 is below the minimum 256")
    assert editor.message.message == FIELDS_MARKED  # the bottom line points up, it does not repeat them
    editor.start_button.click()
    assert not started and editor.message.severity == "error"
    for line, good in ((editor.parallel, "1, 2"), (editor.clients, ""), (editor.context, "")):
        _type(qtbot, line, good)
    assert all(m.isHidden() for m in (editor.parallel_message, editor.clients_message, editor.context_message))
    editor.start_button.click()
    assert len(started) == 1


def test_a_number_outside_its_range_is_named_not_cut(qtbot, editor: SweepEditor) -> None:
    requests = editor.requests
    assert requests.toolTip().endswith("Takes auto, or 1 to 100000.")
    requests.setFocus()
    _type(qtbot, requests.lineEdit(), "200000")
    assert requests.text() == "200000"
    assert editor.requests_message.message == "200000 is above the maximum 100000."
    assert editor.message.message == FIELDS_MARKED
    qtbot.keyClick(requests, Qt.Key.Key_Return)
    assert editor.requests_message.severity == "warning"
    assert editor.requests_message.message.startswith("200000 is above the maximum 100000: ")
    editor.targets.success.setFocus()
    _type(qtbot, editor.targets.success.lineEdit(), "120")
    ttft_message, _tpot_message, success_message = editor.target_messages
    assert success_message.message == "120 is above the maximum 100 %."
    assert editor.targets.ttft.toolTip().endswith("Takes 10 to 600000 ms.") and ttft_message.isHidden()
