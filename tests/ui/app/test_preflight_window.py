"""The window's pre-flight: preflight_dialog checks the window's own server (its supervisor, so the server it is
attached to holds the port as itself) and lists the checks, with the GUI's loop doing the work."""

from __future__ import annotations

import argparse
from pathlib import Path

from app.core.demo.preflight import CheckName, CheckVerdict
from app.core.server.state import ServerState
from app.ui.app.preflight import preflight_dialog

WAIT_MS = 30_000


def test_the_windows_dialog_checks_the_server_the_window_uses(qtbot, tmp_path: Path, deck_factory,
                                                              make_fake_ollama) -> None:
    fake = make_fake_ollama(tokens_per_s=400.0)
    args = argparse.Namespace(config_dir=str(tmp_path / "cfg"), url=fake.url, page="dashboard", screenshot=None,
                              backend=None, demo=False)
    deck = deck_factory(args)
    qtbot.waitUntil(lambda: deck.controller.status.state is ServerState.RUNNING_ATTACHED, timeout=WAIT_MS)
    dialog = preflight_dialog(deck)
    qtbot.addWidget(dialog)
    assert dialog.parent() is deck.window and "on Ollama" in dialog.heading.text()
    dialog.show()
    qtbot.waitUntil(lambda: len(dialog.checks) == len(CheckName), timeout=WAIT_MS)
    by = {c.name: c for c in dialog.checks}
    assert by[CheckName.SERVER].verdict is CheckVerdict.PASS and fake.url in by[CheckName.SERVER].detail
    assert "in use by the server itself" in by[CheckName.PORT].detail
    assert by[CheckName.MODEL].verdict is CheckVerdict.PASS
    assert by[CheckName.STEP_TIME].verdict in (CheckVerdict.PASS, CheckVerdict.WARN)
    assert deck.controller.status.state is ServerState.RUNNING_ATTACHED  # left as it was
