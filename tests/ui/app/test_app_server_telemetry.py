"""The composition root wires the server-telemetry poller to the dashboard and the Server page, by capability."""

from __future__ import annotations

import argparse
from pathlib import Path


from app.backends import registry
from app.core.server.state import ServerState
from app.ui.app.telemetry_poller import UNAVAILABLE_PREFIX
from tests.backends.llama_server.recorded_samples import REPORTING_SPEC


def _args(tmp_path: Path, **kw) -> argparse.Namespace:
    base = dict(config_dir=str(tmp_path / "cfg"), url=None, page="dashboard", screenshot=None)
    base.update(kw)
    return argparse.Namespace(**base)


def test_ollama_gets_no_poller_no_panel_and_no_slots_tab(qtbot, tmp_path, deck_factory) -> None:
    deck = deck_factory(_args(tmp_path))
    assert not deck.telemetry.enabled
    assert deck.dashboard.server.slots_plot is None
    assert "Slots" not in [deck.server_page.tabs.tabText(i) for i in range(deck.server_page.tabs.count())]


def test_a_reporting_backend_polls_once_running_and_says_a_failing_endpoint_once(
        qtbot, tmp_path, fake_ollama, deck_factory, monkeypatch) -> None:
    # The stand-in answers like Ollama: it has no /metrics and no /slots, so the reader fails on both.
    monkeypatch.setitem(registry._SPECS, REPORTING_SPEC.name, REPORTING_SPEC)
    deck = deck_factory(_args(tmp_path, url=fake_ollama.url, backend=REPORTING_SPEC.name))
    assert deck.telemetry.enabled and deck.dashboard.server.slots_plot is not None
    assert deck.server_page.tabs.tabText(1) == "Slots"
    notices: list[str] = []
    deck.telemetry.notice_changed.connect(notices.append)
    qtbot.waitUntil(lambda: deck.controller.status.state is ServerState.RUNNING_ATTACHED, timeout=10_000)
    qtbot.waitUntil(lambda: len(deck.telemetry.ring) >= 3, timeout=15_000)
    assert len(notices) == 1 and notices[0].startswith(UNAVAILABLE_PREFIX)
    assert f"/metrics at {fake_ollama.url}" in notices[0] and "HTTP 404" in notices[0]
    panel_notice = deck.dashboard.server.notice
    assert panel_notice.text() == notices[0] and not panel_notice.isHidden()
    assert deck.server_page.slots_view.notice.text() == notices[0]
