"""The composition root wires the server-telemetry poller to the dashboard and the Server page, by capability."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path


from app.backends import registry
from app.backends.ollama.spec import OLLAMA
from app.core.server.state import ServerState
from app.ui.app.telemetry_poller import UNAVAILABLE_PREFIX
from tests.backends.llama_server.recorded_samples import REPORTING_SPEC

# Ollama as it was before 0.30 (no llama-server child, so no slots at all), under a name of its own.
NO_SLOTS = replace(OLLAMA, name="ollama_before_0_30", server_telemetry=None,
                   capabilities=replace(OLLAMA.capabilities, reports_slots=False))


def _args(tmp_path: Path, **kw) -> argparse.Namespace:
    base = dict(config_dir=str(tmp_path / "cfg"), url=None, page="dashboard", screenshot=None)
    base.update(kw)
    return argparse.Namespace(**base)


def test_a_backend_without_slots_gets_no_poller_no_panel_and_no_slots_tab(qtbot, tmp_path, deck_factory,
                                                                           monkeypatch) -> None:
    monkeypatch.setitem(registry._SPECS, NO_SLOTS.name, NO_SLOTS)
    deck = deck_factory(_args(tmp_path, backend=NO_SLOTS.name))
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


def test_ollama_polls_its_child_and_says_plainly_when_it_cannot_find_one(qtbot, tmp_path, fake_ollama,
                                                                       deck_factory) -> None:
    # Attached to a server whose log it cannot read and whose processes are none of Ollama's (the
    # stand-in answers from inside this process), no child port can be known.
    deck = deck_factory(_args(tmp_path, url=fake_ollama.url))
    assert deck.telemetry.enabled and deck.dashboard.server.slots_plot is not None
    assert deck.server_page.tabs.tabText(1) == "Slots"
    qtbot.waitUntil(lambda: deck.controller.status.state is ServerState.RUNNING_ATTACHED, timeout=10_000)
    qtbot.waitUntil(lambda: deck.server_page.slots_view.shown is not None, timeout=15_000)
    notice = deck.server_page.slots_view.notice.text()
    assert notice.startswith(UNAVAILABLE_PREFIX) and "without --metrics" in notice
    assert f"no llama-server of the Ollama at {fake_ollama.url} is known" in notice
    assert "slots are shown only for an Ollama whose log ollama-deck reads" in notice
    assert deck.dashboard.server.notice.text() == notice
