"""The composition root's watchdog: one for the window, given to every page, following the server the app
attaches to, its events on the dashboard and a severe one said in the window (offscreen has no tray)."""

from __future__ import annotations

import argparse
from pathlib import Path

from app.core.server.state import ServerState
from app.core.watch.events import EventKind
from app.ui.widgets.notify import Toast


def _args(tmp_path: Path, **kw) -> argparse.Namespace:
    base = dict(config_dir=str(tmp_path / "cfg"), url=None, page="dashboard", screenshot=None)
    base.update(kw)
    return argparse.Namespace(**base)


def test_an_attached_server_that_goes_away_is_a_severe_event_on_the_dashboard_and_a_toast(
        qtbot, tmp_path, fake_ollama, deck_factory):
    deck = deck_factory(_args(tmp_path, url=fake_ollama.url))
    qtbot.waitUntil(lambda: deck.controller.status.state is ServerState.RUNNING_ATTACHED, timeout=10_000)
    assert deck.watchdog.subject == deck.controller.settings.base_url
    assert deck.console_page is not None and deck.dashboard.bridge is not None
    fake_ollama.stop()
    qtbot.waitUntil(lambda: any(e.kind is EventKind.SERVER_CRASHED for e in deck.dashboard.events.events),
                    timeout=30_000)
    toast = deck.notifier.toast
    assert deck.notifier.tray is None and isinstance(toast, Toast)
    qtbot.waitUntil(toast.isVisible, timeout=5000)
    assert toast.title.text() == "ollama-deck: server crashed"
    tab = deck.dashboard.tabs
    assert tab.tabText(tab.indexOf(deck.dashboard.events)) == f"Events ({len(deck.dashboard.events.events)})"


def test_turning_notifications_off_is_remembered(qtbot, tmp_path, deck_factory):
    deck = deck_factory(_args(tmp_path, url="http://127.0.0.1:9"))
    assert deck.notifier.enabled and deck.dashboard.events.notify_check.isChecked()
    deck.dashboard.events.notify_check.setChecked(False)
    assert not deck.notifier.enabled
    deck.close()
    again = deck_factory(_args(tmp_path, url="http://127.0.0.1:9"))
    assert not again.notifier.enabled and not again.dashboard.events.notify_check.isChecked()


def test_the_events_tab_fits_a_1280x720_window_without_sideways_scrolling(qtbot, tmp_path, deck_factory):
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QScrollArea

    from app.core.watch.signals import EngineExited

    deck = deck_factory(_args(tmp_path, url="http://127.0.0.1:9"))
    deck.window.resize(1280, 720)
    deck.watchdog.feed_signal(EngineExited('level=ERROR msg="llama runner terminated" error="exit status 2"'))
    qtbot.waitUntil(lambda: bool(deck.dashboard.events.events), timeout=5000)
    deck.window.show_page("dashboard")
    deck.dashboard.show_event(deck.dashboard.events.events[0])
    holder = deck.window.stack.currentWidget()
    qtbot.waitUntil(lambda: deck.dashboard.events.tree.isVisible(), timeout=5000)
    assert isinstance(holder, QScrollArea)
    if holder.horizontalScrollBarPolicy() == Qt.ScrollBarPolicy.ScrollBarAlwaysOff:
        assert holder.widget().minimumSizeHint().width() <= holder.viewport().width()
    else:
        assert holder.horizontalScrollBar().maximum() == 0
    clear = deck.dashboard.events.clear_button
    assert clear.mapTo(deck.window, clear.rect().topRight()).x() <= deck.window.width()


def test_a_window_taken_over_for_the_embedded_engine_keeps_its_events(qtbot, tmp_path, deck_factory, monkeypatch):
    from app.core.watch.signals import EngineExited
    from app.ui.app import embedded
    from tests.ui.app.test_embedded_engine import _offer_shown, _ready_engine

    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    monkeypatch.setattr(embedded, "engine_status", _ready_engine)
    deck = deck_factory(argparse.Namespace(**{**vars(_args(tmp_path, url="http://127.0.0.1:9")), "backend": None,
                                              "demo": False}))
    _offer_shown(qtbot, deck)
    deck.watchdog.feed_signal(EngineExited('level=ERROR msg="llama runner terminated" error="exit status 2"'))
    qtbot.waitUntil(lambda: len(deck.dashboard.events.events) == 1, timeout=5000)
    deck.window.banner.action_button.click()
    new = deck.successor
    assert new is not None and new.watchdog is deck.watchdog and new.dashboard is not deck.dashboard
    assert [e.kind for e in new.dashboard.events.events] == [EventKind.SERVER_CRASHED]
    assert new.watchdog.subject == new.controller.settings.base_url != "http://127.0.0.1:9"
    new.watchdog.feed_signal(EngineExited("another one"))  # only the page on show takes it
    qtbot.waitUntil(lambda: len(new.dashboard.events.events) == 2, timeout=5000)
    assert len(deck.dashboard.events.events) == 1


def test_the_loaded_models_poll_feeds_it_a_model_leaving_memory_is_an_event(qtbot, tmp_path, fake_ollama,
                                                                            deck_factory):
    from app.backends.ollama.client import OllamaClient

    deck = deck_factory(_args(tmp_path, url=fake_ollama.url))
    qtbot.waitUntil(lambda: deck.controller.status.state is ServerState.RUNNING_ATTACHED, timeout=10_000)

    async def load() -> None:
        async with OllamaClient(fake_ollama.url) as client:
            await client.load("qwen3:14b")

    async def unload() -> None:
        async with OllamaClient(fake_ollama.url) as client:
            await client.unload("qwen3:14b")

    deck.loop.run(load(), timeout=10)
    qtbot.waitUntil(lambda: "qwen3:14b" in deck.window.header.models_label.full_text(), timeout=10_000)
    deck.loop.run(unload(), timeout=10)
    qtbot.waitUntil(lambda: any(e.kind is EventKind.MODEL_UNLOADED for e in deck.dashboard.events.events),
                    timeout=15_000)
    event = next(e for e in deck.dashboard.events.events if e.kind is EventKind.MODEL_UNLOADED)
    assert event.subject == "qwen3:14b" and event.evidence[0].figures["size_bytes"] > 0
