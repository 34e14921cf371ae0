"""The window with --backend openai: it attaches to the server at --url (a replay of vLLM's API, with a key),
offers no apply or restart, and keeps the key out of settings.json and the log."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterator

import keyring
import pytest

from app.backends.openai.endpoint import SESSION
from app.cli.openai_access import gui_url
from app.core.server.state import ServerState
from tests.backends.openai import vllm_transcripts as vllm
from tests.backends.openai.conftest import MemoryKeyring
from tests.backends.openai.replay_server import json_reply, replay_server, sse

KEY = "sk-window-93e1"


@pytest.fixture
def memory_keyring() -> Iterator[MemoryKeyring]:
    before = keyring.get_keyring()
    memory = MemoryKeyring()
    keyring.set_keyring(memory)
    SESSION.forget()
    yield memory
    SESSION.forget()
    keyring.set_keyring(before)


def route(method: str, path: str):
    if path == "/v1/models":
        return json_reply(200, vllm.MODELS)
    if path == "/version":
        return json_reply(200, vllm.VERSION)
    if path == "/v1/chat/completions":
        return sse(vllm.REASONING)
    return json_reply(404, {"detail": "Not Found"})


def test_the_window_attaches_offers_no_restart_and_keeps_the_key_out_of_its_files(qtbot, tmp_path, deck_factory,
                                                                                   monkeypatch, caplog, memory_keyring):
    monkeypatch.setenv("DECK_WINDOW_KEY", KEY)
    config = tmp_path / "cfg"
    with replay_server(route) as server, caplog.at_level(logging.DEBUG):
        args = argparse.Namespace(config_dir=str(config), url=server.base_url + "/v1", page="server", screenshot=None,
                                  backend="openai", api_key_env="DECK_WINDOW_KEY", save_api_key=True, ca_bundle=None)
        args.url, notes = gui_url(args)
        assert args.url == server.base_url and any("secret store" in n for n in notes)
        deck = deck_factory(args)
        header = deck.window.header
        qtbot.waitUntil(lambda: header.state_pill.text() == ServerState.RUNNING_ATTACHED.value, timeout=15_000)
        page = deck.server_page
        assert not page.apply_button.isVisibleTo(page) and page.start_button.text() == "Attach"
        assert not page.stop_button.isEnabled()
        assert "cannot restart it with settings" in page.reason_label.text()
        assert deck.controller.status.version == "0.10.1"
        deck.store.save(deck.controller.settings)  # what an apply writes: host and port, never the key
        deck.close()
        seen = list(server.seen)
    assert seen and all(s.headers.get("authorization") == f"Bearer {KEY}" for s in seen)
    assert memory_keyring.passwords == {("ollama-deck", server.base_url): KEY}
    assert KEY not in caplog.text
    written = [p for p in config.rglob("*") if p.is_file()]
    assert any(p.name == "settings.json" for p in written), written
    for path in written:
        assert KEY.encode() not in path.read_bytes(), path


def test_a_key_sent_in_clear_to_another_machine_is_warned_of_in_the_window(qtbot, tmp_path, deck_factory,
                                                                           monkeypatch, memory_keyring):
    monkeypatch.setenv("DECK_WINDOW_KEY", KEY)
    # 192.0.2.1 is TEST-NET-1 (RFC 5737): another machine that nothing here answers for.
    args = argparse.Namespace(config_dir=str(tmp_path / "cfg"), url="http://192.0.2.1:8000/v1", page="dashboard",
                              screenshot=None, backend="openai", api_key_env="DECK_WINDOW_KEY", save_api_key=False,
                              ca_bundle=None)
    args.url, args.access_notes = gui_url(args)
    deck = deck_factory(args)
    banner = deck.window.banner
    assert banner.isVisibleTo(deck.window) and banner.property("level") == "warning"
    assert "sent over plain http:// to 192.0.2.1" in banner.label.text() and KEY not in banner.label.text()
