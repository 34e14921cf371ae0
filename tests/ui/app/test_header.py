"""The header names the server by its backend's display name."""

from __future__ import annotations

from app.core.server.state import ServerState, ServerStatus
from app.ui.app.header import Header


def test_the_header_names_the_backend_it_was_given(qtbot):
    header = Header("llama-server")
    qtbot.addWidget(header)
    assert header.version_label.text() == "llama-server —"
    header.set_status(ServerStatus(ServerState.RUNNING_MANAGED, version="b6000"))
    assert header.version_label.text() == "llama-server b6000"
    header.set_status(ServerStatus(ServerState.STOPPED))
    assert header.version_label.text() == "llama-server —"
