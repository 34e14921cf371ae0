"""The header's "Export to Prometheus" switch in the real window: on, the window's own readings can be scraped on
127.0.0.1; off, the port is free again; a port in use turns it off with the reason; it is remembered with the
window; against the real llama-server the window's server samples reach the scrape."""

from __future__ import annotations

import argparse
import json
import socket
import urllib.request
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.core.server.state import ServerState
from app.ui.app.exporter_switch import OFF_TEXT, SWITCH_TEXT
from tests.backends.llama_server.engine_server import free_port, llama_server
from tests.fakes.raw_http import closed_port

WAIT_MS = 20_000


def _args(tmp_path: Path, **kw) -> argparse.Namespace:
    base = dict(config_dir=str(tmp_path / "cfg"), url=f"http://127.0.0.1:{closed_port()}", page="dashboard",
                screenshot=None, backend=None)
    base.update(kw)
    return argparse.Namespace(**base)


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return reply.read().decode()


def port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT left by the scrape is no obstacle
        try:
            probe.bind(("127.0.0.1", port))
            probe.listen()
        except OSError:
            return False
    return True


def test_on_it_can_be_scraped_and_off_the_port_is_free(qtbot, tmp_path, deck_factory) -> None:
    deck = deck_factory(_args(tmp_path))
    switch = deck.exporter
    assert switch.parent() is deck.window.header and switch.button.text() == SWITCH_TEXT
    assert switch.status.full_text() == OFF_TEXT and not switch.button.isChecked()
    port = free_port()
    qtbot.waitUntil(lambda: deck.sampler.latest is not None, timeout=WAIT_MS)
    switch.port.setValue(port)
    qtbot.mouseClick(switch.button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(switch.url), timeout=WAIT_MS)
    assert switch.url == f"http://127.0.0.1:{port}/metrics" and switch.status.full_text() == switch.url
    assert not switch.port.isEnabled()
    text = scrape(switch.url)
    assert "ollama_deck_host_memory_total_bytes" in text and 'ollama_deck_info{version="' in text
    switch.button.click()
    qtbot.waitUntil(lambda: switch.status.full_text() == OFF_TEXT, timeout=WAIT_MS)
    assert not switch.url and switch.port.isEnabled() and port_is_free(port)


def test_a_port_in_use_turns_it_off_and_says_why(qtbot, tmp_path, deck_factory) -> None:
    deck = deck_factory(_args(tmp_path))
    switch = deck.exporter
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        switch.set_on(True, port)
        qtbot.waitUntil(lambda: switch.status.full_text().startswith("not exporting"), timeout=WAIT_MS)
    assert f"Port {port} on 127.0.0.1 is already in use" in switch.status.full_text()
    assert "choose another port" in switch.status.toolTip()
    assert not switch.button.isChecked() and switch.button.isEnabled() and switch.port.isEnabled()


def test_it_is_remembered_with_the_window(qtbot, tmp_path, deck_factory) -> None:
    port = free_port()
    first = deck_factory(_args(tmp_path))
    first.exporter.set_on(True, port)
    qtbot.waitUntil(lambda: bool(first.exporter.url), timeout=WAIT_MS)
    first.close()
    assert port_is_free(port)
    saved = json.loads((tmp_path / "cfg" / "window.json").read_text())
    assert saved["exporter_port"] == port
    second = deck_factory(_args(tmp_path))
    qtbot.waitUntil(lambda: second.exporter.url == f"http://127.0.0.1:{port}/metrics", timeout=WAIT_MS)
    second.exporter.set_on(False)
    qtbot.waitUntil(lambda: second.exporter.status.full_text() == OFF_TEXT, timeout=WAIT_MS)
    second.close()
    assert "exporter_port" not in json.loads((tmp_path / "cfg" / "window.json").read_text())


@pytest.mark.engine
def test_the_windows_server_samples_reach_the_scrape(qtbot, tmp_path, deck_factory, llama_server_binary: Path,
                                                     bundled_model: Path) -> None:
    flags = ("-np", "2", "-c", "1024", "-t", "2", "--metrics")
    with llama_server(llama_server_binary, bundled_model, tmp_path, flags) as engine:
        deck = deck_factory(_args(tmp_path, url=engine.base_url, backend="llama_server"))
        qtbot.waitUntil(lambda: deck.controller.status.state is ServerState.RUNNING_ATTACHED, timeout=WAIT_MS)
        deck.exporter.set_on(True, free_port())
        qtbot.waitUntil(lambda: bool(deck.exporter.url), timeout=WAIT_MS)
        labels = f'{{backend="llama_server",url="{engine.base_url}"}}'
        qtbot.waitUntil(lambda: f"ollama_deck_server_slots_total{labels} 2.0" in scrape(deck.exporter.url),
                        timeout=WAIT_MS)
        assert f"ollama_deck_server_up{labels} 1.0" in scrape(deck.exporter.url)
